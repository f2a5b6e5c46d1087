-- One vocabulary for the public API (issue 21, item 4): every constructor
-- a callable module whose other functions are reachable; 'fn' the
-- function to run everywhere; every duration in milliseconds with a name
-- that says so; one type of 'cpus'; refusals as nil, message, errno; the
-- names of the release before still work, with a deprecation warning
-- (perfev.warn.deprecated: perfev.on_warning's handler, else Lua's warn()
-- on 5.4, else stderr), and a misspelt name gets "did you mean".
local perfev = require "perfev"

-- fn's results, and the warnings said while it ran
local function with_warnings(fn)
  local said = {}
  local prev = perfev.on_warning(function(m) said[#said + 1] = m end)
  local res = { pcall(fn) }
  perfev.on_warning(prev)
  assert(res[1], res[2])
  return said, res[2], res[3], res[4], res[5]
end

-- the error fn raises, asserted to be at this file's line
local function raised(fn)
  local line = debug.getinfo(2, "l").currentline
  local ok, err = pcall(fn)
  assert.is_false(ok)
  local where, msg = tostring(err):match("^(spec/vocab_spec.lua:%d+): (.*)$")
  assert.equal("spec/vocab_spec.lua:" .. line, where, err)
  return msg
end

local function burn(ms)
  local t0 = os.clock()
  local x = 0
  while os.clock() - t0 < ms / 1000 do x = x + 1 end
  return x
end

describe("the API's vocabulary", function()
  it("every constructor is a callable module with its other functions reachable", function()
    for _, k in ipairs { "open", "group", "sampler", "record", "profile", "attach", "frames", "report",
                         "stat", "decode", "perfdata", "perfmap" } do
      local m = perfev[k]
      assert.equal("table", type(m), k)
      local mt = getmetatable(m)
      assert.equal("function", type(mt and mt.__call), k)
    end
    assert.equal("table", type(perfev.profile.formats))
    assert.equal("function", type(perfev.profile.format_of))
    assert.equal("svg", perfev.profile.format_of("out.svg"))
    assert.equal("function", type(perfev.group.is_group))
    assert.equal("function", type(perfev.record.call_graph))
    assert.equal("function", type(perfev.frames.new))
    assert.equal("function", type(perfev.attach.signal))
    assert.equal("function", type(perfev.perfdata.create))
    -- and each builds what it built before
    local ev = assert(perfev.open("task-clock"))
    assert.is_true(ev:measure(burn, 2) > 0)
    ev:close()
    local g = assert(perfev.group { "task-clock", "page-faults" })
    assert.is_true(perfev.group.is_group(g))
    g:close()
    local p = assert(perfev.profile { fn = burn, args = { 30 }, period = 1000000 })
    assert.is_true(p:profile().samples > 0)
    p:close()
  end)

  describe("perfev.stat", function()
    it("takes fn, as perfev.profile and perfev.record; 'run' still works and says it is deprecated", function()
      local seen
      local said, res = with_warnings(function()
        return perfev.stat { fn = function(a, b) seen = a + b end, args = { 2, 3 }, events = "task-clock" }
      end)
      assert.equal(5, seen)
      assert.equal("function", res.target)
      assert.same({}, said)
      said, res = with_warnings(function()
        return perfev.stat { run = function(a) seen = a end, args = { 7 }, events = "task-clock" }
      end)
      assert.equal(7, seen)
      assert.equal("function", res.target)
      assert.equal(1, #said)
      assert.matches("^deprecated: perfev.stat: option 'run' is now 'fn'; 'run' goes in the next release "
                     .. "%(at spec/vocab_spec.lua:%d+%)$", said[1])
      assert.equal("perfev.stat: give 'fn' or its deprecated name 'run', not both",
                   raised(function() perfev.stat { fn = print, run = print } end))
    end)

    it("takes durations in ms: duration_ms and interval_ms; duration (s) and interval still work", function()
      local child = io.popen("sleep 5 & echo $!")
      local pid = tonumber(child:read("l"))
      finally(function() os.execute("kill " .. pid .. " 2>/dev/null") child:close() end)
      local said, res = with_warnings(function()
        return perfev.stat { pid = pid, duration_ms = 150, interval_ms = 50, events = "task-clock" }
      end)
      assert.same({}, said)
      assert.truthy(res, "stat")
      assert.is_true(res.elapsed >= 0.14 and res.elapsed < 1.5, "elapsed: " .. res.elapsed)
      assert.is_true(#res.intervals >= 2, "intervals: " .. #res.intervals)
      assert.equal(50, res.interval_ms)
      -- the old names: duration in seconds, interval in ms
      said, res = with_warnings(function()
        return perfev.stat { pid = pid, duration = 0.15, interval = 50, events = "task-clock" }
      end)
      assert.is_true(res.elapsed >= 0.14 and res.elapsed < 1.5, "elapsed: " .. res.elapsed)
      assert.is_true(#res.intervals >= 2, "intervals: " .. #res.intervals)
      table.sort(said)
      assert.equal(2, #said)
      assert.matches("option 'duration' is now 'duration_ms' (in ms, not s)", said[1], 1, true)
      assert.matches("option 'interval' is now 'interval_ms'", said[2], 1, true)
    end)

    it("says 'did you mean' for a misspelt option, at the caller's line", function()
      assert.equal("perfev.stat: unknown option 'interval_m' (did you mean 'interval_ms'?)",
                   raised(function() perfev.stat { command = "true", interval_m = 100 } end))
      assert.equal("perfev.stat: unknown option 'duraton_ms' (did you mean 'duration_ms'?)",
                   raised(function() perfev.stat { pid = 1, duraton_ms = 100 } end))
      assert.equal("perfev.stat: option 'pid' must be an integer, got number 1.5",
                   raised(function() perfev.stat { pid = 1.5 } end))
    end)

    it("refuses as nil, message, errno (then the exit status perf stat gives)", function()
      local res, msg, errno, status = perfev.stat { pid = 999999999, duration_ms = 100, events = "task-clock" }
      assert.is_nil(res)
      assert.equal("no process with pid 999999999", msg)
      assert.equal(perfev.ERRNO.ESRCH, errno)
      assert.equal(1, status)
    end)

    it("takes cpus as a list or a cpulist string, as perfev.sampler and perfev.record do", function()
      local a = assert(perfev.stat { cpus = "0", duration_ms = 50, events = "task-clock" })
      local b = assert(perfev.stat { cpus = { 0 }, duration_ms = 50, events = "task-clock" })
      assert.equal("cpus", a.target)
      assert.equal("cpus", b.target)
      assert.matches("option 'cpus'", raised(function() perfev.stat { cpus = "x", duration_ms = 50 } end))
    end)
  end)

  describe("perfev.attach", function()
    it("takes duration_ms; duration (s) still works, converted, and says it is deprecated", function()
      local said = with_warnings(function()
        assert.equal("perfev.attach: option 'duration_ms' must be a number of milliseconds above 0, got -1000",
                     raised(function() perfev.attach { pid = 999999999, duration = -1 } end))
      end)
      assert.equal(1, #said)
      assert.matches("perfev.attach: option 'duration' is now 'duration_ms' (in ms, not s)", said[1], 1, true)
      assert.equal("perfev.attach: unknown option 'duraton_ms' (did you mean 'duration_ms'?)",
                   raised(function() perfev.attach { pid = 999999999, duraton_ms = 5 } end))
      local p, msg, errno = perfev.attach { pid = 999999999, duration_ms = 100 }
      assert.is_nil(p)
      assert.matches("no process", msg)
      assert.equal(perfev.ERRNO.ESRCH, errno)
    end)
  end)

  describe("cpus", function()
    it("is one type: a list of CPU numbers or a cpulist string, in the sampler too", function()
      local s, err = perfev.sampler { cpus = "0", period = 1000000 }
      if not s then pending("cannot sample: " .. tostring(err)) return end
      assert.same({ 0 }, s.cpus)
      s:close()
      s = assert(perfev.sampler { cpus = { 0 }, period = 1000000 })
      assert.same({ 0 }, s.cpus)
      s:close()
      assert.equal("perfev.sampler: option 'cpus': bad item 'x' in 'x' (e.g. { 0, 1 } or \"0-3,5\")",
                   raised(function() perfev.sampler { cpus = "x" } end))
      assert.equal("perfev.record: option 'cpus' must be a CPU list (a list of CPU numbers or a string such as "
                   .. "\"0-3,5\"), got integer 0", raised(function() perfev.record { fn = print, cpus = 0 } end))
    end)
  end)

  describe("the warning channel of deprecations", function()
    it("is Lua's warn() on 5.4 when no handler is set, once per call site", function()
      local lua_warn = rawget(_G, "warn")
      if type(lua_warn) ~= "function" then pending("no warn() on " .. _VERSION .. ": stderr instead") return end
      local got = {}
      _G.warn = function(...) got[#got + 1] = table.concat({ ... }) end
      finally(function() _G.warn = lua_warn end)
      for _ = 1, 3 do perfev.stat { run = function() end, events = "task-clock" } end
      assert.equal(1, #got)
      assert.matches("^perfev: deprecated: perfev.stat: option 'run' is now 'fn'", got[1])
    end)
  end)
end)
