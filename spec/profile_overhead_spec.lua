-- The bound on perfev.profile's own cost (issue 19 #7; csrc/profiler/budget.c):
-- `perfev profile -F 100000` took 161 s for a 1.4 s script (10 million
-- samples) where the kernel throttles perf record. The profiler measures a
-- sample's cost (its hook or jit.profile callback, a signal, the event's
-- interrupt) against the thread's CPU time and, past max_overhead (25 %,
-- the kernel's perf_cpu_time_max_percent), lowers the rate, says so once
-- through perfev.warn and records it in the profile. And (#15) the events
-- counted at a boundary of user code default to a period, 1, not 999 Hz.
--
-- The high rate runs in a child (a runaway profiler must not take the
-- spec runner with it); what is asserted is the profiler's accounting and
-- the periods the kernel wrote in the samples, not how long anything took.
local perfev = require "perfev"
local open = require "perfev.open"
local fs = require "perfev.fs"
local u = require "spec.support.util"
local shell = require "spec.support.shell"

local MAX = tonumber((fs.read(open.MAX_RATE_FILE) or ""):match("%d+"))
local JIT = rawget(_G, "jit") ~= nil

-- a fixed amount of Lua work, about 0.2 s of CPU on Lua 5.4 here
local WORK = ([[
local function leaf(i) return #tostring(i %% 977) end
local function mid(i) return leaf(i) + 1 end
local function work() local s = 0 for i = 1, %d do s = s + mid(i) end return s end
]]):format(JIT and 20000000 or 1000000)

-- Profiles the work at opts in a child; returns the profile's fields and the warnings.
local function child(opts)
  local code = WORK .. ([[
local perfev = require "perfev"
local warnings = {}
perfev.on_warning(function(m) warnings[#warnings + 1] = m end)
local p = assert(perfev.profile(%s))
p:run(work)
local r = p:profile()
io.write(("throttled=%%.0f asked=%%.0f now=%%.0f unit=%%s cost=%%.0f cpu=%%.0f "
          .. "weight=%%.0f samples=%%.0f warnings=%%d\n")
  :format(r.throttled or -1, r.rate_asked or -1, r.rate_now or -1, tostring(r.rate_unit), r.cost or -1,
          r.cpu or -1, r.weight, r.samples, #warnings))
for _, w in ipairs(warnings) do io.write("warning: ", w, "\n") end
]]):format(opts)
  local out = u.run_lua(code, nil, "timeout -s KILL 120")
  local t = { out = out, warning = out:match("warning: ([^\n]*)") }
  for k, v in out:gmatch("(%a+)=(%S+)") do t[k] = tonumber(v) or v end
  return t
end

describe("perfev.profile bounds its own cost", function()
  if not MAX or MAX < 50000 then
    pending(("perf_event_max_sample_rate is %s here (the kernel lowered it, or there is none): "
             .. "-F 50000 and more cannot be asked"):format(tostring(MAX)))
    return
  end
  local hz = math.min(100000, MAX)

  it("at -F " .. hz .. " it lowers the rate within max_overhead, says so once, records it", function()
    local r = child(("{ event = 'cpu-clock', freq = %d }"):format(hz))
    assert.is_number(r.throttled, r.out)
    assert.truthy(r.throttled >= 1, r.out)
    assert.equal(hz, r.asked, r.out)
    assert.equal("Hz", r.unit, r.out)
    assert.truthy(r.now < hz, r.out)
    -- said once, through perfev.warn, with the rates
    assert.equal(1, r.warnings, r.out)
    assert.truthy(r.warning:find(("lowered from %d Hz to %d Hz"):format(hz, r.now), 1, true), r.out)
    -- the profiler's accounted share: within the bound, give or take the
    -- one 20 ms window that may run over before the rate is lowered
    assert.truthy(r.cpu > 0 and r.cost / r.cpu <= 0.35, r.out)
    -- the samples the kernel took: at the rate lowered to, but for at
    -- most one 20 ms window at the rate asked each time it was lowered
    local cpu_s = r.cpu / 1e9
    assert.truthy(r.samples <= cpu_s * r.now * 1.25 + 0.02 * hz * r.throttled, r.out)
    -- each weighs the period set (a clock's record keeps the period it
    -- was opened with: the kernel's hrtimer events do not update it)
    -- (the samples before the last lowering at a shorter one)
    local per = r.weight / r.samples
    assert.truthy(per > 1e9 / hz * 1.5 and per <= 1e9 / r.now * 1.05, r.out)
  end)

  it("max_overhead = 100: no bound, the rate as asked, no warning", function()
    local r = child("{ event = 'cpu-clock', freq = 500, max_overhead = 100 }")
    assert.equal(0, r.throttled, r.out)
    assert.equal(500, r.now, r.out)
    assert.equal(0, r.warnings, r.out)
  end)

  it("a wrong max_overhead is the caller's error, naming the option", function()
    assert.error_matches(function() perfev.profile { max_overhead = 0 } end, "option 'max_overhead'")
    assert.error_matches(function() perfev.profile { max_overhead = 101 } end, "option 'max_overhead'")
  end)

  it("the note of a raised period reads the core's 64-bit figures (cdata on LuaJIT)", function()
    -- a period raised under load on LuaJIT: %.0f refused the period's cdata
    -- and the profile's text report raised (profile_native, a loaded run)
    local u64 = JIT and require("ffi").new("uint64_t", 1) or 1
    local note = require("perfev.profile.data").throttle_note {
      throttled = 7, rate_unit = "events", rate_asked = u64, rate_now = u64 * 86,
      max_cost = 0.25, cost = 0.16, cpu = 1 }
    assert.equal("sampling cost more than 25% of the thread's CPU time: the period was raised from 1 to 86 "
                 .. "(7 times; the profiler's share of the run: 16%)", note)
  end)
end)

describe("perfev.profile's default rate", function()
  it("cpu-clock: 999 Hz; page-faults, context-switches, a tracepoint's kind: period 1", function()
    local profile = require "perfev.profile"
    assert.same({ 999 }, { profile.default_rate("cpu-clock") })
    assert.same({ 999 }, { profile.default_rate("task-clock") })
    for _, e in ipairs { "page-faults", "minor-faults", "major-faults", "context-switches", "cpu-migrations" } do
      local f, p = profile.default_rate(e)
      assert.is_nil(f, e)
      assert.equal(1, p, e)
    end
  end)

  it("page-faults: every fault a sample, as many as a counting event counts", function()
    -- in a fresh process: this one's allocator may hold the pages already
    -- (what the specs before freed), and then the workload takes no fault
    local out = u.run_lua([[
      local perfev = require "perfev"
      local k = 0
      local function touch()    -- fresh pages: a new 3 MiB string (LuaJIT interns equal ones)
        k = k + 1
        local s = string.rep("x" .. k, 1024 * 1024)
        return #s
      end
      touch()
      -- the faults of the profiled run itself, counted beside it (a run
      -- before it may take more or fewer: Lua 5.3's allocator gave 1,024
      -- then 512)
      local ev = assert(perfev.open("page-faults"))
      ev:enable()
      local p = assert(perfev.profile { event = "page-faults", max_overhead = 100, fn = touch })
      ev:disable()
      local n = ev:read()
      ev:close()
      print(("faults %d samples %d period %s freq %s"):format(n, p:profile().samples, tostring(p.period),
                                                            tostring(p.freq)))
      p:close()
    ]])
    local n, samples, period, freq = out:match("faults (%d+) samples (%d+) period (%S+) freq (%S+)")
    assert.truthy(n, out)
    n, samples = tonumber(n), tonumber(samples)
    assert.equal("1", period)
    assert.equal("nil", freq)
    -- -F 999 gave 34 samples of 3,773 faults: here one sample per fault,
    -- give or take the allocator's pages already there or not
    assert.truthy(n > 500, "faults: " .. n)
    assert.truthy(samples >= 0.8 * n, ("samples %d, faults %d"):format(samples, n))
  end)

  it("`perfev profile --help` gives both defaults", function()
    local out = shell.sh(("%s%s bin/perfev profile --help 2>&1"):format(u.lua_env(), u.lua_interpreter()))
    assert.truthy(out:find("Default: 999 for cpu%-clock"), out)
    assert.truthy(out:find("Default: 1 for%s+page faults"), out)
    assert.truthy(out:find("max%-overhead"), out)
  end)
end)
