-- perfev.profile{ native = true }: the kernel's callchain of each sample
-- joined under its Lua frames, named from the ELF symbol tables of the
-- files mapped here and from /proc/kallsyms; checked against readelf (the
-- interpreter's symbols), /proc/kallsyms and what the workloads call.
local perfev = require "perfev"
local data = require "perfev.profile.data"
local shell = require "spec.support.shell"
local fs = require "perfev.fs"

local JIT = rawget(_G, "jit") ~= nil

-- cpu-clock with native = true: on LuaJIT the clocks' engine ('jit')
-- counts the event, it takes no callchain; with the compiler off the hook
-- engine runs there (LuaJIT's interpreter runs hooks)
local function clock_profile(fn)
  local jit = rawget(_G, "jit")
  if jit then jit.off() end
  local p = assert(perfev.profile { event = "cpu-clock", period = 250000, native = true,
                                    engine = jit and "hook" or nil })
  local ok, e = pcall(p.run, p, fn)
  if jit then jit.on() end
  assert(ok, e)
  return p
end

local function spin(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end

-- copies: string.rep and table.concat fill their buffers with memcpy
local function builder()
  local t = {}
  for i = 1, 100 do t[i] = string.rep("ab", 40000) end
  local r = #table.concat(t)
  return r
end

-- the stacks, as lists of frames (root first)
local function stacks(pr)
  local out = {}
  for _, s in ipairs(pr.stacks) do
    local fr = {}
    for i, fid in ipairs(s.frames) do fr[i] = pr.frames[fid] end
    out[#out + 1] = { frames = fr, weight = s.weight }
  end
  return out
end

-- the weight of stacks holding a frame named `under` (a Lua or C function)
-- with, below it, a native frame for which pred(frame) is true
local function weight_under(pr, under, pred)
  local w = 0
  for _, s in ipairs(stacks(pr)) do
    local seen
    for _, f in ipairs(s.frames) do
      if f.name == under then seen = true
      elseif seen and (f.what == "native" or f.what == "kernel") and pred(f) then
        w = w + s.weight
        break
      end
    end
  end
  return w
end

-- the interpreter's file and whether readelf finds a .symtab in it
local function interpreter()
  local exe = shell.trim(shell.sh("readlink /proc/" .. fs.own_pid() .. "/exe"))
  local sections = shell.sh("readelf -S " .. shell.quote(exe) .. " 2>/dev/null")
  return exe, sections:find("%.symtab") ~= nil
end

local function kallsyms_readable()   -- addresses shown (kptr_restrict lets us)
  local f = io.open("/proc/kallsyms")
  if not f then return false end
  local line = f:read("l") or ""
  f:close()
  return not line:match("^0+ ")
end

-- the share of the samples copying in libc under builder, profiled as
-- above in a fresh LuaJIT process (the builtins' copies: under builder)
local function fresh_copies_share()
  local code = [[
local perfev = require "perfev"
jit.off()
local function builder()
  local t = {}
  for i = 1, 100 do t[i] = string.rep("ab", 40000) end
  return #table.concat(t)
end
local p = assert(perfev.profile { event = "cpu-clock", period = 250000, native = true, engine = "hook" })
p:run(function() for _ = 1, 20 do builder() end end)
local pr, w = p:profile(), 0
for _, s in ipairs(pr.stacks) do
  local seen
  for _, id in ipairs(s.frames) do
    local f = pr.frames[id]
    if f.name == "builder" then seen = true
    elseif seen and f.source == "libc.so.6" and f.name:match("^__?mem[mc][oep][vmy]") then w = w + s.weight break end
  end
end
print(("share %.4f"):format(w / pr.weight))
]]
  local out = require("spec.support.util").run_lua(code)
  return assert(tonumber(out:match("share ([%d.]+)")), out)
end

describe("perfev.profile native = true", function()
  it("joins libc's copy routines under string.rep and table.concat, and says the interpreter is stripped "
     .. "#valgrind_differs", function()
    local p = clock_profile(function() for _ = 1, 20 do builder() spin(200000) end end)
    local pr = p:profile()
    -- glibc's memcpy/memmove implementations: __memmove_avx_unaligned_erms & co
    local function memcopy(f) return f.source == "libc.so.6" and f.name:match("^__?mem[mc][oep][vmy]") end
    -- (LuaJIT's string.rep and table.concat are builtins with no frame: under builder)
    local copies = JIT and weight_under(pr, "builder", memcopy)
                   or weight_under(pr, "rep", memcopy) + weight_under(pr, "concat", memcopy)
    print(("\n  native: %.1f%% of the samples copy in libc under rep/concat"):format(100 * copies / pr.weight))
    -- (LuaJIT copies in its own stripped code as much as through libc,
    -- as its string buffers stand: 57% in libc in a fresh process, 7% after
    -- specs that grew its buffers to 40 MiB; 5.4: 78-82%)
    local share = copies / pr.weight
    -- (PERFEV_SPEC_FRESH=1: the fresh process always, to check that path)
    if JIT and (share < 0.03 or os.getenv("PERFEV_SPEC_FRESH")) then
      -- LuaJIT in a suite's process, its buffers grown by the specs before:
      -- 0 % in one CI rehearsal. The same profile in a fresh LuaJIT (57 %)
      share = fresh_copies_share()
      print(("  native: %.1f%% in a fresh LuaJIT"):format(100 * share))
    end
    local least = JIT and 0.03 or 0.2
    assert.is_true(share >= least, ("copies: %.3f"):format(share))
    -- the interpreter: its frames are named from its symbols, or shown as stripped
    local exe, symtab = interpreter()
    local short = exe:match("([^/]+)$")
    local dynsym = shell.sh("readelf --dyn-syms -W " .. shell.quote(exe))
    local stripped = 0
    for _, f in ipairs(pr.frames) do
      if f.what == "native" and f.source == short then
        if f.name == ("[%s (stripped)]"):format(short) then
          stripped = stripped + 1
        else   -- a name: the executable's own symbol table has it (never a nearest guess)
          assert.is_truthy(dynsym:find(" " .. f.name:gsub("@.*", ""):gsub("%p", "%%%0"), 1), f.name)
        end
      end
    end
    if symtab then
      assert.equal(0, stripped)
    else
      -- Debian's lua5.4: the Lua code ran in luaV_execute, which only a
      -- .symtab could name: the frame under spin says so
      assert.is_true(stripped >= 1)
      local w = weight_under(pr, "spin", function(f) return f.name == ("[%s (stripped)]"):format(short) end)
      assert.is_true(w > 0)
    end
    p:close()
  end)

  local MIB40 = 40 * 1048576
  -- 40 MiB strings: above glibc's largest mmap threshold, always fresh pages
  local function toucher()
    local t = {}
    for i = 1, 2 do t[i] = string.rep("x", MIB40) end
    return #t
  end

  it("shows, for page faults, the user code the faults were taken in #valgrind_differs", function()
    if os.getenv("PERFEV_CHECK") == "valgrind" then
      pending("valgrind cannot take a perf event's SIGTRAP (TRAP_PERF): it aborts")
      return
    end
    local p = assert(perfev.profile { event = "page-faults", period = 1, native = true })
    p:run(function() for _ = 1, 2 do toucher() collectgarbage() end end)
    local pr = p:profile()
    local _, total = data.share(pr, "toucher")
    assert.is_true(total >= 0.9, ("toucher: %.3f"):format(total))
    -- the page-faults event's callchain starts at the user instruction
    -- that faulted: string.rep writing its new string with libc's copy
    -- routines (on LuaJIT string.rep is a builtin, no Lua frame: under toucher)
    local under = JIT and "toucher" or "rep"
    local w = weight_under(pr, under, function(f)
      return f.what == "native" and f.source == "libc.so.6" and f.name:match("^__?mem[mcs][oep][vmyt]") ~= nil
    end)
    print(("\n  native: %.1f%% of the faults taken in libc's mem* under %s"):format(100 * w / pr.weight, under))
    assert.is_true(w / pr.weight >= 0.8, ("faults in libc: %.3f"):format(w / pr.weight))
    p:close()
  end)

  it("shows the kernel's page-fault path under the function that touches new memory #valgrind_differs", function()
    if not kallsyms_readable() then
      pending("/proc/kallsyms hides addresses here (kptr_restrict): no kernel names")
      return
    end
    local p = clock_profile(function() for _ = 1, 2 do toucher() collectgarbage() end end)
    local pr = p:profile()
    -- the kernel's fault handler, by the name /proc/kallsyms gives it
    assert.equal("1", shell.trim(shell.sh("grep -cE ' exc_page_fault$' /proc/kallsyms")))
    local faults = weight_under(pr, "toucher", function(f) return f.what == "kernel" and f.name == "exc_page_fault" end)
    print(("\n  native: %.1f%% of toucher's time in the kernel's exc_page_fault"):format(100 * faults / pr.weight))
    assert.is_true(faults / pr.weight >= 0.05, ("faults: %.3f"):format(faults / pr.weight))
    -- its flame graph says it holds native frames, and colours each kind
    -- apart: Lua warm, C and a library's cool (blue), the kernel's green
    local svg = require("perfev.profile.svg").encode(pr)
    assert.truthy(svg:find(">Lua and native functions on cpu-clock</text>", 1, true))
    local kinds = {}
    for title, r, g, b in svg:gmatch('<title>([^<]*)</title><rect [^>]-fill="rgb%((%d+),(%d+),(%d+)%)"') do
      local kind = title:match(" %[kernel%] %(") and "kernel" or title:match(" %[[^%]]+%] %(") and "c"
                   or title:match("%(.-%.lua:%d+%) %(") and "lua"
      if kind then
        r, g, b = tonumber(r), tonumber(g), tonumber(b)
        local hue = b >= 200 and "blue" or (r > g and r > b) and "warm" or (g > r and b < 100) and "green" or "?"
        assert.equal(({ kernel = "green", c = "blue", lua = "warm" })[kind], hue, title)
        kinds[kind] = true
      end
    end
    assert.is_true(kinds.kernel and kinds.c and kinds.lua, "every kind of frame in the graph")
    p:close()
  end)

  it("refuses native = true where no callchain comes with the samples (engine 'jit')", function()
    if not JIT then pending("engine 'jit' runs on LuaJIT: make test LUA=luajit") return end
    assert.has_error(function() perfev.profile { event = "cpu-clock", native = true } end)
  end)

  it("checks the option", function()
    assert.has_error(function() perfev.profile { native = "yes" } end,
      "perfev.profile: option 'native' must be a boolean, got string 'yes'")
  end)
end)
