-- perfev.alloc: bytes and blocks allocated, and in use at the end, by Lua
-- stack, against what the workloads allocate and keep (the strings' own
-- lengths), and read back by go tool pprof.
local perfev = require "perfev"
local data = require "perfev.profile.data"

local function capture(cmd)
  local f = assert(io.popen(cmd))
  local out = f:read("*a")
  f:close()
  return out
end

-- Each string is made by one concatenation (one block: no buffer box, as
-- string.rep makes on Lua 5.4) of a constant and a counter, so that every
-- one is new (LuaJIT interns every string: the same content would be the
-- same block).
local A, B = ("a"):rep(1000), ("b"):rep(3000)
local count = 0
local kept = {}

-- (one slot each, not a growing list: the list's growth would go to
-- whichever function adds the element at a power of 2, always `one`)
local last = {}

local function one(n)
  for _ = 1, n do
    count = count + 1
    local s = A .. count
    last[1] = s
  end
  return last[1]
end

local function three(n)
  for _ = 1, n do
    count = count + 1
    local s = B .. count
    last[2] = s
  end
  return last[2]
end

-- one and three keep nothing here: the strings are garbage
local function drop_one(n)
  local s
  for _ = 1, n do
    count = count + 1
    s = A .. count
  end
  return s
end

-- 12,000 bytes a string kept (one concatenation: one block): the list that
-- holds them and the runtime's own blocks are under 1 % of it
local function keep_three(n)
  for _ = 1, n do
    count = count + 1
    kept[#kept + 1] = B .. count .. B .. B .. B
  end
end

-- coroutine.resume as it is before any profiler replaced it: a coroutine
-- resumed through it is not seen as running (as by C code's lua_resume)
local raw_resume = coroutine.resume

local function total(p, name)
  local _, t = data.share(p, name)
  return t
end

local function kept_bytes()
  local b = 0
  for _, s in ipairs(kept) do b = b + #s end
  return b
end

describe("perfev.alloc", function()
  after_each(function() kept = {} end)

  it("attributes 1:3 bytes in two functions as 25 % and 75 %", function()
    local a = perfev.alloc { period = 4096 }
    a:run(function()
      for _ = 1, 2500 do one(2) three(2) end
    end)
    local p = a:profile("alloc_space")
    local s1, s3 = total(p, "one"), total(p, "three")
    print(("\n  alloc_space: one %.1f %%, three %.1f %% (%d samples)"):format(100 * s1, 100 * s3, p.samples))
    assert.is_true(math.abs(s1 - 0.25) <= 0.05, "one: " .. s1)
    assert.is_true(math.abs(s3 - 0.75) <= 0.05, "three: " .. s3)
    -- the estimate of the whole against the allocator's exact count (of
    -- the run: stop's collection is outside the function profiled)
    local t = a:totals()
    local est = p.weight + p.outside
    assert.is_true(math.abs(est / t.alloc_bytes - 1) <= 0.05,
                   ("estimated %.0f, counted %.0f"):format(est, t.alloc_bytes))
  end)

  it("gives in use what the workload keeps", function()
    -- (a 12,000-byte block is sampled with probability 0.99999 at period
    -- 1024: the estimate's spread is well under 1 %)
    for _, period in ipairs { 1024, 1 } do
      local a = perfev.alloc { period = period }
      a:run(function()
        for _ = 1, 1000 do drop_one(3) keep_three(1) end
      end)
      local p = a:profile("inuse_space")
      local want = kept_bytes()
      print(("\n  period %d: in use %.0f for %.0f kept (%.2f), three %.1f %%"):format(
        period, p.weight, want, p.weight / want, 100 * total(p, "keep_three")))
      assert.is_true(math.abs(p.weight / want - 1) <= 0.05, ("in use %.0f, kept %.0f"):format(p.weight, want))
      assert.is_true(total(p, "keep_three") >= 0.95)
      -- (on LuaJIT, what its compiler allocated for drop_one's traces is
      -- in use under it, with a leaf [JIT compiler]: 0.04 to 1.1 % of the
      -- 12 MB at period 1)
      assert.is_true(total(p, "drop_one") < 0.03, "drop_one in use: " .. total(p, "drop_one"))
      -- what drop_one allocated is there, freed
      local al = a:profile("alloc_space")
      local d = total(al, "drop_one")          -- 3 x 1,000 bytes to 12,000
      assert.is_true(math.abs(d - 0.2) <= 0.05, "drop_one's share of the bytes allocated: " .. d)
      kept = {}
    end
  end)

  it("writes folded, SVG and text of one sample type", function()
    local a = perfev.alloc { period = 4096, sample = "inuse_space" }
    a:run(function()
      for _ = 1, 300 do drop_one(1) keep_three(1) end
    end)
    local folded = a:format("folded")
    assert.truthy(folded:find("keep_three", 1, true))
    -- in use: drop_one keeps nothing (on LuaJIT, its traces' memory may be
    -- there, under [JIT compiler])
    assert.is_true(total(a:profile("inuse_space"), "drop_one") < 0.01)
    assert.truthy(a:format("folded", "alloc_space"):find("drop_one", 1, true))
    local text = a:report("alloc_space")
    assert.truthy(text:find("event 'alloc_space' (period 4096)", 1, true))
    assert.truthy(text:find("drop_one", 1, true))
    local svg = a:format("svg")
    assert.truthy(svg:find("^<%?xml") or svg:find("<svg", 1, true))
    assert.truthy(svg:find("keep_three", 1, true))
  end)

  it("writes pprof that go tool pprof reads with each sample index", function()
    if capture("command -v go") == "" then
      pending("go is not installed (Debian's golang-go): go tool pprof cannot read the profile")
      return
    end
    local a = perfev.alloc { period = 1024 }
    a:run(function()
      for _ = 1, 1500 do one(1) three(1) drop_one(1) keep_three(1) end
      last = {}
    end)
    local want = kept_bytes()
    local path = os.tmpname() .. ".pb.gz"
    assert(a:write(path))
    local function top(index)
      local out = capture(("HOME=/tmp go tool pprof -sample_index=%s -unit=B -top %s 2>&1"):format(index, path))
      local flat, sum = {}, 0
      for line in out:gmatch("[^\n]+") do
        local f, name = line:match("^%s*(%d+)B%s+[%d.]+%%%s+[%d.]+%%%s+%d+B%s+[%d.]+%%%s+(%S+)%s*$")
        if not f then
          f, name = line:match("^%s*(%d+)%s+[%d.]+%%%s+[%d.]+%%%s+%d+%s+[%d.]+%%%s+(%S+)%s*$")
        end
        if f then
          flat[name] = tonumber(f)
          sum = sum + tonumber(f)
        end
      end
      return flat, sum, out
    end
    local flat, sum, out = top("alloc_space")
    assert.truthy(out:find("Type: alloc_space", 1, true), out)
    assert.is_true(sum > 0, out)
    local s1 = (flat.one or 0) / sum
    -- one : three : drop_one : keep_three = 1 : 3 : 1 : 12
    assert.is_true(math.abs(s1 - 1 / 17) <= 0.05, out)
    flat, sum, out = top("inuse_space")
    assert.truthy(out:find("Type: inuse_space", 1, true), out)
    assert.is_true(math.abs(sum / want - 1) <= 0.05, ("in use %d, kept %d\n%s"):format(sum, want, out))
    assert.is_nil(flat.drop_one, out)
    flat, sum, out = top("alloc_objects")
    assert.truthy(out:find("Type: alloc_objects", 1, true), out)
    -- as many blocks in one as in three (a string and its counter's digits
    -- a call; the digits, ~30 bytes, are sampled 1 in 35 at this period:
    -- ~40 samples each, a spread of ~20 % on the ratio)
    assert.is_true(sum > 0 and flat.one ~= nil and flat.three ~= nil, out)
    assert.is_true(flat.one / flat.three > 0.5 and flat.one / flat.three < 2, out)
    flat, sum, out = top("inuse_objects")
    assert.truthy(out:find("Type: inuse_objects", 1, true), out)
    assert.is_true(sum > 0 and flat.keep_three ~= nil and flat.three == nil, out)
    os.remove(path)
  end)

  it("counts a frame's allocations and GC cycles for perfev.frames, allocation-free", function()
    local c = perfev.alloc.counter()
    local t = c:read()
    local b0, n0, g0 = t.alloc_bytes, t.alloc_count, t.gc_cycles
    local before = count
    keep_three(100)                         -- 100 strings of 3,000 bytes and their list
    c:read(t)
    local made = kept_bytes()
    assert.is_true(count - before == 100)
    assert.is_true(t.alloc_bytes - b0 >= made and t.alloc_bytes - b0 <= made * 1.05,
                   ("counted %.0f for %.0f in strings"):format(t.alloc_bytes - b0, made))
    assert.is_true(t.alloc_count - n0 >= 100)
    local g1 = t.gc_cycles
    collectgarbage()
    collectgarbage()
    c:read(t)
    assert.is_true(t.gc_cycles - g1 >= 2, ("%d cycles after two full collections"):format(t.gc_cycles - g1))
    assert.is_true(t.gc_cycles >= g0)
    -- a read refills t: nothing allocated (on LuaJIT the compiler's traces
    -- are allocations of their own: off here, as spec/frames_spec.lua does)
    local jit = rawget(_G, "jit")
    if jit then jit.off() end
    local least = math.huge
    for _ = 1, 3 do
      local m0 = collectgarbage("count")
      for _ = 1, 10000 do c:read(t) end
      least = math.min(least, collectgarbage("count") - m0)
    end
    if jit then jit.on() end
    assert.equal(0, least)
    c:close()
  end)

  it("gives a hook of the user's back, to coroutines made while a sample was pending too", function()
    local calls = 0
    local function user_hook() calls = calls + 1 end
    local co_hook = coroutine.create(function() end)
    debug.sethook(user_hook, "", 1000)
    local cos = {}
    local a = perfev.alloc { period = 1 }      -- every block: the hook is armed at each
    a:run(function()
      for i = 1, 20 do
        count = count + 1
        local s = A .. count                 -- sampled: a stack is pending
        cos[i] = coroutine.create(function() local n = 0 for j = 1, 1000 do n = n + j end return n, s end)
      end
      -- half through the profiler's resume, half behind its back
      for i = 1, 20 do assert((i % 2 == 0 and coroutine.resume or raw_resume)(cos[i])) end
    end)
    local h, mask, n = debug.gethook()
    debug.sethook()
    assert.equal(user_hook, h)
    assert.equal("", mask)
    assert.equal(1000, n)
    assert.is_true(calls > 0)
    -- no coroutine kept perfev's hook (a C hook: "external hook")
    for i = 1, 20 do assert.are_not.equal("external hook", (debug.gethook(cos[i]))) end
    assert.is_nil(debug.gethook(co_hook))
  end)

  it("nests coroutines as deep while profiling as without it", function()
    if rawget(_G, "jit") then
      pending("LuaJIT: its engine (jit.profile) replaces no coroutine function")
      return
    end
    local function nest(n)
      if n == 0 then return 0 end
      return coroutine.wrap(function() return 1 + nest(n - 1) end)()
    end
    -- the C calls Lua allows nested (LUAI_MAXCCALLS) bound it: each level
    -- resumes once, plus what the wrappers add
    local function deepest()
      local d = 0
      while d < 1000 and pcall(nest, d + 1) do d = d + 1 end
      return d
    end
    local plain = select(2, xpcall(deepest, debug.traceback))
    local a = perfev.alloc {}
    local profiled = a:run(deepest)
    print(("\n  nested coroutine.wrap: %d, %d while profiling"):format(plain, profiled))
    assert.is_true(plain > 100, "deepest: " .. plain)
    assert.is_true(profiled >= plain - 2, ("%d while profiling, %d without"):format(profiled, plain))
  end)

  it("raises at the caller's line on a wrong option or sample type", function()
    local ok, err = pcall(perfev.alloc, { periode = 10 })
    assert.is_false(ok)
    assert.truthy(err:find("periode", 1, true), err)
    ok, err = pcall(perfev.alloc, { sample = "inuse_bytes" })
    assert.is_false(ok)
    assert.truthy(err:find("inuse_bytes", 1, true), err)
    ok, err = pcall(perfev.alloc, { period = 0 })
    assert.is_false(ok)
    assert.truthy(err:find("period", 1, true), err)
  end)
end)
