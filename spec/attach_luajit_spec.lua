-- The attach reader of LuaJIT 2.1 (perfev.attach.luajit) on running luajit
-- processes started before it looks: OpenResty's luajit2 (/usr/bin/luajit
-- here) and, where it was unpacked, Debian's luajit package, with the
-- compiler on and off. The stacks it reads are checked against what
-- debug.getinfo gives inside the target (the target writes it to a file).
local shell = require "spec.support.shell"
local luajit = require "perfev.attach.luajit"
local attach = require "perfev.attach"
local calibrate = require "spec.support.calibrate"

-- Debian's own luajit conflicts with luajit2: `apt-get download luajit
-- libluajit-5.1-2` and `dpkg -x` both into this directory (usr/bin/luajit).
-- `make debian-luajit` unpacks it into build/debian-luajit.
local function debian_root()
  local built = shell.trim(shell.sh("pwd")) .. "/build/debian-luajit"
  if shell.exists(built .. "/usr/bin/luajit") then return built end
  return "/tmp/perfev-ljdeb/root"
end
local DEBIAN_ROOT = os.getenv("PERFEV_DEBIAN_LUAJIT") or debian_root()
-- A luajit built with 32-bit GC references (no Debian package is): e.g.
-- luajit2's source built with `make XCFLAGS=-DLUAJIT_DISABLE_GC64`.
local LUAJIT_GC32 = os.getenv("PERFEV_LUAJIT_GC32")

local SAMPLES = 600

-- The driver: the engine, perfev.attach with this reader (cpu-clock at 499
-- Hz, the thread's CPU time, until n samples were read), each thread
-- stopped at its sample and read while stopped.
-- -> { runtime =, states =, stacks = { frames... }, dropped = { reason = n } }
--    or nil, why (the probe refused)
local function sample(pid, n)
  local res = { stacks = {}, dropped = {} }
  local seen = 0
  -- a fixed period: each sample stands for the same CPU time (at a
  -- frequency the kernel moves the period as it goes, and 1:3 by sample
  -- count drifted to 34 % under load)
  local p, why = attach.attach { pid = pid, reader = luajit, event = "cpu-clock", period = 2000000,
                                 duration_ms = 120000,
                                 on_sample = function(_, frames, reason, kind)
                                   seen = seen + 1
                                   if frames then
                                     res.stacks[#res.stacks + 1] = frames
                                   elseif kind ~= "outside" then
                                     res.dropped[reason or "?"] = (res.dropped[reason or "?"] or 0) + 1
                                   end
                                   return seen >= n
                                 end }
  if not p then return nil, why end
  res.runtime, res.states = p.attach.runtime, p.attach.states
  return res
end

-- ---- targets ----

local WORK = [[
local function f1(n)
  local s = 0
  for i = 1, n do
    s = s + i % 7
  end
  return s
end
local function f3(n)
  local s = 0
  for i = 1, n do
    s = s + i % 7
  end
  return s
end
-- MS: f1's iterations per millisecond of CPU time. Each call of the
-- workloads lasts many 2 ms sampling periods, so that the fixed period
-- cannot lock onto one phase of a short loop (f1(20000) took 20 us with
-- the compiler on, and 1:3 came out 21-36 % from one run to the next).
CALIBRATE
local MS = per_ms(f1)
DEFS
local function info(name, f)
  local d = debug.getinfo(f, "SL")
  local lines = {}
  for l in pairs(d.activelines) do lines[#lines + 1] = l end
  return table.concat({ name, d.short_src, d.linedefined, table.concat(lines, ",") }, "\t")
end
local out = assert(io.open(arg[1] .. ".tmp", "w"))
out:write(info("f1", f1), "\n", info("f3", f3), "\n")
out:write(table.concat({ "main", debug.getinfo(1, "S").short_src, 0, "" }, "\t"), "\n")
out:close()
os.rename(arg[1] .. ".tmp", arg[1])
LOOP
]]

-- the workload with its definitions and its loop (plain replacement: the
-- code holds %)
local function work(defs, loop)
  local s = WORK:gsub("CALIBRATE", function() return calibrate.SOURCE end)
  s = s:gsub("DEFS", function() return defs end)
  return (s:gsub("LOOP", function() return loop end))
end

-- (a round: 40 ms in f1, 120 ms in f3, 80 sampling periods)
local ONE_TO_THREE = work("", "while true do f1(40 * MS) f3(120 * MS) end")

-- a producer in a coroutine (create/resume) and one in a wrap, the consumer
-- in the main chunk: f1 produces, f3 consumes
local COROUTINES = work([[
local producer = coroutine.create(function()
  while true do coroutine.yield(f1(20 * MS)) end
end)
local gen = coroutine.wrap(function()
  while true do coroutine.yield(f1(20 * MS)) end
end)]], [[
while true do
  local _, v = coroutine.resume(producer)
  f3(v % 3 + 30 * MS)
  f3(gen() % 3 + 30 * MS)
end]])

-- a second state made through the FFI, running `inner` when the main
-- state's loop calls it (lua_pcall from the main state's Lua code); it
-- writes its own debug.getinfo of inner
local TWO_STATES = work([[
local ffi = require "ffi"
ffi.cdef [=[
typedef struct lua_State lua_State;
lua_State *luaL_newstate(void);
void luaL_openlibs(lua_State *L);
int luaL_loadstring(lua_State *L, const char *s);
int lua_pcall(lua_State *L, int nargs, int nresults, int errfunc);
void lua_getfield(lua_State *L, int idx, const char *k);
void lua_pushnumber(lua_State *L, double n);
void lua_pushstring(lua_State *L, const char *s);
]=]
local C = ffi.C
local L2 = C.luaL_newstate()
C.luaL_openlibs(L2)
assert(C.luaL_loadstring(L2, "function inner(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end\n"
  .. "local d = debug.getinfo(inner, 'S') local f = io.open(..., 'w')\n"
  .. "f:write(d.short_src, '\\t', d.linedefined, '\\n') f:close()") == 0)
C.lua_pushstring(L2, arg[1] .. ".inner")
assert(C.lua_pcall(L2, 1, 0, 0) == 0)]], [[
while true do
  f1(20000)
  C.lua_getfield(L2, -10002, "inner")
  C.lua_pushnumber(L2, 60000)
  C.lua_pcall(L2, 1, 0, 0)
end]])

-- f1 allocates: the collector runs often, from f1's allocations
local GARBAGE = work([[
f1 = function(n)
  local t
  for i = 1, n do
    t = { i, i + 1, tostring(i) }
  end
  return t
end]], "while true do f1(10000) end")

-- f1's loop calls g, which the root trace inlines; g's branch taken one
-- time in three makes side traces that start in g
local SIDE_TRACES = work([[
local function g(i)
  if i % 3 == 0 then return i * 2 else return i + 1 end
end
f1 = function(n)
  local s = 0
  for i = 1, n do s = s + g(i) end
  return s
end]], "while true do f1(100000) end")

local dir
local started = {}

-- starts the command line cmd in the background; -> its pid
local function spawn(cmd)
  local pidf = ("%s/pid%d"):format(dir, #started + 1)
  shell.sh(("(%s >/dev/null 2>&1 & echo $! > %s)"):format(cmd, pidf))
  local pid = tonumber(shell.read_file(pidf))
  assert(pid, "target not started: " .. cmd)
  started[#started + 1] = pid
  return pid
end

-- starts `cmd script infofile` in the background; -> pid, the functions'
-- debug.getinfo as the target wrote it
local function start(cmd, script)
  local n = #started + 1
  local path, infof = ("%s/work%d.lua"):format(dir, n), ("%s/info%d"):format(dir, n)
  local f = assert(io.open(path, "w"))
  f:write(script)
  f:close()
  local pid = spawn(("%s %s %s"):format(cmd, path, infof))
  local info
  for _ = 1, 500 do
    info = shell.read_file(infof)
    if info then break end
    shell.sh("sleep 0.01")
  end
  assert(info, "the target did not write its debug.getinfo: " .. cmd)
  local funcs = {}
  for line in info:gmatch("[^\n]+") do
    local name, src, linedefined, lines = line:match("^(%S+)\t(.-)\t(%-?%d+)\t(.*)$")
    local active = {}
    for l in lines:gmatch("%d+") do active[tonumber(l)] = true end
    funcs[name] = { source = src, linedefined = tonumber(linedefined), lines = active }
  end
  shell.sh("sleep 0.3")      -- the compiler's traces, where it is on
  return pid, funcs
end

local function stop(pid)
  shell.sh("kill -9 " .. pid .. " 2>/dev/null")
end

-- the function (f1/f3) a frame is in, checked against debug.getinfo
local function which(funcs, fr)
  for _, name in ipairs { "f1", "f3" } do
    local f = funcs[name]
    if fr.what == "Lua" and fr.source == f.source and fr.linedefined == f.linedefined then
      -- its active lines, or its first line at its entry (the function header,
      -- whose line debug.getinfo gives as linedefined)
      assert.is_true(f.lines[fr.line] == true or fr.line == f.linedefined,
        ("%s: line %s is not one of its lines"):format(name, tostring(fr.line)))
      return name
    end
  end
  return nil
end

local function describe_drops(dropped)
  local t, n = {}, 0
  for why, c in pairs(dropped) do
    t[#t + 1] = c .. " x " .. why
    n = n + c
  end
  return n, table.concat(t, "; ")
end

local function blocker()
  if not shell.have("luajit") then return "no luajit on PATH" end
  local f = io.open("/proc/sys/kernel/yama/ptrace_scope")
  local scope = f and tonumber(f:read("*l"))
  if f then f:close() end
  if scope and scope > 0 and shell.trim(shell.sh("id -u")) ~= "0" then
    return "ptrace_scope " .. scope .. " and not root: cannot attach to a sibling"
  end
  return nil
end

describe("perfev.attach.luajit", function()
  local why = blocker()
  if why then
    pending(why)
    return
  end

  setup(function() dir = shell.tmpdir() end)
  teardown(function()
    for _, pid in ipairs(started) do stop(pid) end
    shell.rmdir(dir)
  end)

  local runtimes = {
    { label = "OpenResty luajit2", cmd = "luajit", flavour = "OpenResty", mode = "GC64" },
  }
  local debian = DEBIAN_ROOT .. "/usr/bin/luajit"
  if shell.exists(debian) then
    runtimes[#runtimes + 1] = { label = "Debian luajit", flavour = nil, mode = "GC64",
      cmd = ("env LD_LIBRARY_PATH=%s/usr/lib/x86_64-linux-gnu %s"):format(DEBIAN_ROOT, debian) }
  else
    print(("attach_luajit_spec: Debian's luajit not checked: %s absent (apt-get download luajit "
      .. "libluajit-5.1-2; dpkg -x each into %s, or set PERFEV_DEBIAN_LUAJIT)"):format(debian, DEBIAN_ROOT))
  end

  if LUAJIT_GC32 and shell.exists(LUAJIT_GC32) then
    runtimes[#runtimes + 1] = { label = "luajit2 with 32-bit GC refs", cmd = LUAJIT_GC32,
                                flavour = "OpenResty", mode = "32%-bit GC refs" }
  else
    print("attach_luajit_spec: no luajit with 32-bit GC references checked (set PERFEV_LUAJIT_GC32 "
      .. "to one built with XCFLAGS=-DLUAJIT_DISABLE_GC64)")
  end

  for _, rt in ipairs(runtimes) do
    for _, mode in ipairs { "", "-joff" } do
      local label = rt.label .. (mode == "" and " (compiler on)" or " (-joff)")
      it(label .. ": two functions costing 1:3 give 25 % / 75 %, names and lines as debug.getinfo", function()
        local pid, funcs = start(rt.cmd .. " " .. mode, ONE_TO_THREE)
        local res, err = sample(pid, SAMPLES)
        stop(pid)
        assert(res, err)
        assert.matches("^LuaJIT 2%.1[^ ]* %(" .. rt.mode, res.runtime)
        if rt.flavour then assert.matches(rt.flavour, res.runtime) else
          assert.not_matches("OpenResty", res.runtime) end
        assert.equal(1, #res.states)
        local ndrop, drops = describe_drops(res.dropped)
        assert.is_true(ndrop <= SAMPLES * 0.05, "dropped: " .. drops)
        local count, traces, alone = { f1 = 0, f3 = 0 }, 0, 0
        for _, frames in ipairs(res.stacks) do
          -- root first: the main chunk at the bottom (under luajit's own C
          -- entry), or (doc/attach.md) a [JIT compiler] or [GC] frame alone
          -- when the stack under it did not check out
          local main
          for _, fr in ipairs(frames) do
            if fr.what == "main" then main = fr break end
          end
          if not main and #frames == 1 and frames[1].what == "C" and frames[1].name:match("^%[") then
            alone = alone + 1
            assert.is_true(alone <= SAMPLES * 0.01, "stacks of a state frame alone: " .. alone)
          else
            assert.is_truthy(main, "no main chunk frame")
            assert.equal(funcs.main.source, main.source)
            local leaf
            for i = #frames, 1, -1 do
              if frames[i].what == "Lua" then leaf = frames[i] break end
            end
            local name = leaf and which(funcs, leaf)
            if name then count[name] = count[name] + 1 end
            local top = frames[#frames]
            if top.what == "C" and top.name and top.name:match("^%[trace %d+%]$") then
              traces = traces + 1
            end
          end
        end
        local total = count.f1 + count.f3
        assert.is_true(total >= SAMPLES * 0.9, ("only %d of %d samples in f1/f3"):format(total, SAMPLES))
        local share = count.f1 / total
        print(("attach_luajit_spec: %s: f1 %.1f %% f3 %.1f %% of %d samples, %d in traces, %d dropped%s")
          :format(label, 100 * share, 100 * (1 - share), total, traces, ndrop,
                  ndrop > 0 and " (" .. drops .. ")" or ""))
        assert.is_true(math.abs(share - 0.25) <= 0.05, ("f1 has %.1f %%"):format(100 * share))
        if mode == "-joff" then assert.equal(0, traces) else assert.is_true(traces > 0) end
      end)
    end
  end

  for _, mode in ipairs { "", "-joff" } do
    it("coroutines" .. (mode == "" and "" or " (-joff)")
       .. ": a producer's frames lie under its resumer's resume [C] and the main chunk", function()
      local pid, funcs = start("luajit " .. mode, COROUTINES)
      local res, err = sample(pid, 300)
      stop(pid)
      assert(res, err)
      local ndrop, drops = describe_drops(res.dropped)
      assert.is_true(ndrop <= 15, "dropped: " .. drops)
      local resumed, wrapped, consumer = 0, 0, 0
      for _, frames in ipairs(res.stacks) do
        local leaf_i
        for i = #frames, 1, -1 do
          if frames[i].what == "Lua" then leaf_i = i break end
        end
        local name = leaf_i and which(funcs, frames[leaf_i])
        if name == "f1" then
          -- f1 <- the coroutine's function <- resume [C] / wrap's C function <- main chunk
          local co, c, main = frames[leaf_i - 1], frames[leaf_i - 2], frames[leaf_i - 3]
          assert.equal("Lua", co.what)
          assert.equal(funcs.f1.source, co.source)
          assert.equal("C", c.what)
          assert.equal("main", main.what)
          if c.name == "resume" then resumed = resumed + 1 else wrapped = wrapped + 1 end
        elseif name == "f3" then
          assert.equal("main", frames[leaf_i - 1].what)
          consumer = consumer + 1
        end
      end
      print(("attach_luajit_spec: coroutines%s: %d under resume, %d under wrap, %d consumer, %d dropped")
        :format(mode, resumed, wrapped, consumer, ndrop))
      assert.is_true(resumed >= 20 and wrapped >= 20 and consumer >= 100)
    end)
  end

  it("two states in one process: each listed, a sample read from the one running (innermost)", function()
    local pid, funcs = start("luajit", TWO_STATES)
    local info = shell.read_file(dir .. "/info" .. #started .. ".inner")
    local inner_src, inner_line = info:match("^(.-)\t(%d+)\n$")
    local res, err = sample(pid, 200)
    stop(pid)
    assert(res, err)
    assert.equal(2, #res.states)
    assert.same({ "state 1", "state 2" }, { res.states[1].label, res.states[2].label })
    local main, inner = 0, 0
    for _, frames in ipairs(res.stacks) do
      local leaf
      for i = #frames, 1, -1 do
        if frames[i].what == "Lua" then leaf = frames[i] break end
      end
      if leaf and which(funcs, leaf) == "f1" then
        main = main + 1
      elseif leaf and leaf.source == inner_src and leaf.linedefined == tonumber(inner_line) then
        -- the second state's own stack: inner at the root (its caller is
        -- the first state's C call, which is not joined to it)
        assert.equal(leaf, frames[1])
        inner = inner + 1
      end
    end
    print(("attach_luajit_spec: two states: %d samples in the main state's f1, %d in the second's inner")
      :format(main, inner))
    assert.is_true(main >= 20 and inner >= 60 and main + inner >= 190)
  end)

  -- a chunk loaded again and again where the previous one was collected
  -- (its prototype mostly at the same address): chunk_a (its code on line
  -- 1) run by run_a, chunk_b (line 2) by run_b, in turn; the reader keeps
  -- prototypes by address from one sample to the next
  local RELOAD = [[
local SRC_A = "local n = ... local s = 0 for i = 1, n do s = s + i % 7 end return s"
local SRC_B = "\nlocal n = ... local s = 0 for i = 1, n do s = s + i % 7 end return s"
local function run_a(f, n) local r = f(n) return r end
local function run_b(f, n) local r = f(n) return r end
local out = io.open(arg[1], "w") out:write("ready\n") out:close()
local round = 0
while true do
  round = round + 1
  local a = round % 2 == 1
  local pad = {}   -- (allocations of a varying size first: the chunks' addresses vary)
  for i = 1, round % 7 do pad[i] = {} end
  local f = loadstring(a and SRC_A or SRC_B, a and "=chunk_a" or "=chunk_b")
  if a then run_a(f, 2000000) else run_b(f, 2000000) end
  f = nil
  collectgarbage()
end
]]
  -- (with the compiler on: the interpreter alone, -joff, puts the two chunks
  -- at two addresses of their own here)
  it("a chunk loaded where a collected one was never gets its name or lines", function()
    local f = assert(io.open(dir .. "/reload.lua", "w"))
    f:write(RELOAD)
    f:close()
    local pid = spawn(("luajit %s/reload.lua %s/reload.info"):format(dir, dir))
    for _ = 1, 500 do
      if shell.read_file(dir .. "/reload.info") then break end
      shell.sh("sleep 0.01")
    end
    local universe
    local reader = { name = luajit.name, probe = function(t)
      local st, refused = luajit.probe(t)
      universe = st
      return st, refused
    end }
    local n, checked, wrong = 0, 0, {}
    local p = assert(attach.attach {
      pid = pid, event = "cpu-clock", period = 1000000, duration_ms = 120000, reader = reader,
      on_sample = function(_, frames)
        n = n + 1
        for i = 2, frames and #frames or 0 do
          local fr, caller = frames[i], frames[i - 1]
          if fr.source == "chunk_a" or fr.source == "chunk_b" then
            -- run_a is defined on the script's line 3, run_b on line 4
            local want = caller.linedefined == 3 and { "chunk_a", 1 } or { "chunk_b", 2 }
            if fr.source ~= want[1] or fr.line ~= want[2] or fr.what ~= "main" then
              wrong[#wrong + 1] = ("%s:%d under the caller defined at %d"):format(fr.source, fr.line,
                                                                                caller.linedefined)
            end
            checked = checked + 1
          end
        end
        return n >= 1000
      end })
    stop(pid)
    assert.are.same({}, wrong)
    assert.is_true(checked >= 800, ("%d of %d samples in the chunks"):format(checked, n))
    assert.is_true(p.attach.dropped <= 50, ("%d dropped"):format(p.attach.dropped))
    -- the case was met: a prototype the reader kept found replaced at its address
    local reused = 0
    for _, r in ipairs(universe.readers) do reused = reused + (r.reused or 0) end
    assert.is_true(reused > 0, "no prototype address reused")
  end)

  it("short_src as LuaJIT writes it, for every kind of chunk name", function()
    local names = {
      "@short.lua", "@" .. ("d/"):rep(40) .. "long.lua", "=stdin", "=" .. ("x"):rep(80),
      "return 1", "local a = 1\nreturn a", ("y"):rep(70), "[builtin]", "",
    }
    local prog = { "local n = {" }
    for _, n in ipairs(names) do prog[#prog + 1] = ("%q,"):format(n) end
    prog[#prog + 1] = "} for _, c in ipairs(n) do local f = assert(loadstring('return 1', c))"
    prog[#prog + 1] = " io.write(debug.getinfo(f, 'S').short_src, '\\0') end"
    local path = dir .. "/short.lua"
    local f = assert(io.open(path, "w"))
    f:write(table.concat(prog, "\n"))
    f:close()
    local out = shell.sh("luajit " .. path)
    local i = 0
    for want in out:gmatch("(.-)%z") do
      i = i + 1
      assert.equal(want, luajit.shortname(names[i], 0))
    end
    assert.equal(#names, i)
  end)

  for _, mode in ipairs { "", "-joff" } do
    it("the collector" .. (mode == "" and "" or " (-joff)") .. ": a [GC] frame on the allocating function", function()
      local pid, funcs = start("luajit " .. mode, GARBAGE)
      local res, err = sample(pid, 200)
      stop(pid)
      assert(res, err)
      local gc, f1 = 0, 0
      for _, frames in ipairs(res.stacks) do
        local top = frames[#frames]
        local leaf
        for i = #frames, 1, -1 do
          if frames[i].what == "Lua" then leaf = frames[i] break end
        end
        if leaf and which(funcs, leaf) == "f1" then
          f1 = f1 + 1
          if top.name == "[GC]" then
            -- on f1, or on the C function f1 called (tostring, interpreted)
            local below = frames[#frames - 1]
            if below.what == "C" then
              assert.equal("tostring", below.name)
              below = frames[#frames - 2]
            end
            assert.equal(leaf, below)
            gc = gc + 1
          end
        end
      end
      local ndrop, drops = describe_drops(res.dropped)
      print(("attach_luajit_spec: collector%s: %d of %d samples in f1, %d of them in [GC], %d dropped%s")
        :format(mode, f1, #res.stacks, gc, ndrop, ndrop > 0 and " (" .. drops .. ")" or ""))
      assert.is_true(ndrop <= 10, "dropped: " .. drops)
      assert.is_true(f1 >= 180 and gc >= 10)
    end)
  end

  it("side traces starting in an inlined function are shown at their root trace's start", function()
    local pid, funcs = start("luajit", SIDE_TRACES)
    local res, err = sample(pid, 200)
    stop(pid)
    assert(res, err)
    local ndrop, drops = describe_drops(res.dropped)
    local traces, f1 = {}, 0
    for _, frames in ipairs(res.stacks) do
      local top, below = frames[#frames], frames[#frames - 1]
      local n = top.name and tonumber(top.name:match("^%[trace (%d+)%]$"))
      if n and which(funcs, below) == "f1" then
        traces[n] = (traces[n] or 0) + 1
        f1 = f1 + 1
      end
    end
    local seen = {}
    for n, c in pairs(traces) do seen[#seen + 1] = ("trace %d: %d"):format(n, c) end
    table.sort(seen)
    print(("attach_luajit_spec: side traces: %d of 200 samples in f1's traces (%s), %d dropped%s")
      :format(f1, table.concat(seen, ", "), ndrop, ndrop > 0 and " (" .. drops .. ")" or ""))
    assert.is_true(ndrop <= 10, "dropped: " .. drops)
    assert.is_true(f1 >= 180)
    assert.is_true(#seen >= 2, "no side trace ran")
  end)

  it("refuses a process without LuaJIT, saying what it tried", function()
    local pid = spawn("sleep 60")
    local res, err = sample(pid, 1)
    stop(pid)
    assert.is_nil(res)
    assert.matches("no LuaJIT in the process", err)
    assert.matches("sleep", err)
  end)

  it("refuses PUC Lua 5.4 (not LuaJIT)", function()
    if not shell.have("lua5.4") then
      pending("no lua5.4")
      return
    end
    local pid = start("lua5.4", ONE_TO_THREE)
    local res, err = sample(pid, 1)
    stop(pid)
    assert.is_nil(res)
    assert.matches("no LuaJIT in the process", err)
  end)
end)
