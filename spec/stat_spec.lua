-- perfev.stat against the kernel and against perf stat 6.1: the default
-- event set, a function, a command (corked: only the command's exec on is
-- counted), a running process, repeats, interval mode, what this machine
-- lacks (<not supported>), and the three output formats, whose layout is
-- checked rule by rule on synthetic results (multiplexing, hardware
-- metrics) that this PMU-less machine cannot produce.
local perfev = require "perfev"
local stat = require "perfev.stat"
local u = require "spec.support.util"

local PAGE = 4096
-- dd reads 64 MiB of zeros into one buffer: about 16384 page faults, the
-- same under perf stat and perfev stat (see spec/cli_spec.lua)
local DD = { "dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=1", "status=none" }

local function by_name(res, name)
  for _, c in ipairs(res.counters) do
    if c.name == name then return c end
  end
  error("no counter " .. name)
end

-- perf stat's own event list for a run, from its CSV (field 3)
local function perf_events(args)
  local out = u.sh("perf stat -x, " .. args .. " -- true 2>&1 >/dev/null")
  local names = {}
  for line in out:gmatch("[^\n]+") do
    local f = {}
    for field in (line .. ","):gmatch("([^,]*),") do f[#f + 1] = field end
    if #f >= 3 then names[#names + 1] = f[3] end
  end
  return names
end

describe("perfev.stat", function()
  local has_perf = u.have("perf")

  it("is perfev.stat, callable", function()
    assert.equal(stat, perfev.stat)
    assert.is_function(perfev.stat.format)
  end)

  describe("default events", function()
    it("are perf stat's default set on this machine, in its order", function()
      if not has_perf then pending("perf is not installed") return end
      local res = assert(perfev.stat { function() end })
      local names = {}
      for i, c in ipairs(res.counters) do names[i] = c.name end
      assert.same(perf_events(""), names)
    end)

    it("shows what this machine lacks as <not supported>, never drops it", function()
      if u.cpu_pmu() then pending("this machine has a cpu PMU: cycles are supported") return end
      local res = assert(perfev.stat { function() end })
      local cycles = by_name(res, "cycles")
      assert.is_false(cycles.supported)
      assert.matches("<not supported>", stat.format(res))
      assert.is_true(by_name(res, "task-clock").supported)
    end)
  end)

  describe("a function", function()
    -- A fresh process: there a 40 MiB allocation gets fresh pages, a fixed
    -- number of page faults. In this one, earlier specs left freed memory
    -- behind: LuaJIT's allocator keeps what it freed, and glibc's mmap
    -- threshold grows as big blocks are freed, so the string may land in
    -- pages already faulted in.
    it("counts the page faults of a fixed allocation #valgrind_differs", function()
      local n = 40 * 256   -- 40 MiB
      local out = u.run_lua(([[
        local perfev = require "perfev"
        local res = assert(perfev.stat { function(len) local s = ("x"):rep(len) return #s end, %d,
                                         events = "page-faults" })
        print("faults " .. res.counters[1].count)
      ]]):format(n * PAGE), nil, "timeout 60")
      local faults = tonumber(out:match("faults (%d+)"))
      assert(faults, out)
      assert.is_true(faults >= n, "page faults: " .. faults)
      -- string.rep builds the string in a buffer, then copies it: two
      -- allocations of n pages
      assert.is_true(faults < n * 3, "page faults: " .. faults)
      -- the other figures, in this process
      local res = assert(perfev.stat { function(len) local s = ("x"):rep(len) return #s end, n * PAGE,
                                       events = "page-faults,task-clock" })
      local pf = by_name(res, "page-faults")
      assert.is_true(pf.count > 0)
      local tc = by_name(res, "task-clock")
      assert.equal("msec", tc.unit)
      assert.near(tc.count * 1e-6, tc.value, 1e-9)
      assert.equal("CPUs utilized", tc.metrics[1].unit)
      assert.equal("K/sec", pf.metrics[1].unit)
      assert.is_number(res.user)
    end)

    it("takes fn with args, and raises the function's error", function()
      local seen
      assert(perfev.stat { fn = function(a, b) seen = a + b end, args = { 2, 3 }, events = "task-clock" })
      assert.equal(5, seen)
      assert.has_error(function()
        perfev.stat { function() error("boom", 0) end, events = "task-clock" }
      end, "boom")
    end)
  end)

  describe("a command", function()
    it("counts the command from its exec on, as perf stat does", function()
      if not has_perf then pending("perf is not installed") return end
      local res = assert(perfev.stat { command = DD, events = "page-faults" })
      local mine = by_name(res, "page-faults").count
      local theirs = tonumber(u.sh("perf stat -x, -e page-faults -- " .. table.concat(DD, " ")
                                   .. " 2>&1 >/dev/null"):match("^(%d+),"))
      -- 64 MiB = 16384 pages, plus dd's start-up: within 1 % of perf's count
      assert.is_true(mine > 16384 and theirs > 16384)
      assert.is_true(math.abs(mine - theirs) <= theirs * 0.01, ("perfev %d, perf %d"):format(mine, theirs))
    end)

    it("follows the processes the command starts, and gives its exit status", function()
      local res = assert(perfev.stat { command = "dd if=/dev/zero of=/dev/null bs=16M count=1 status=none; exit 3",
                                       events = "page-faults" })
      assert.equal(3, res.status)
      assert.is_true(by_name(res, "page-faults").count > 4096)   -- dd's, a child of the shell
      assert.equal("command", res.target)
      assert.is_number(res.user)
      assert.is_number(res.sys)
    end)

    it("counts the command alone with inherit = false", function()
      local cmd = "dd if=/dev/zero of=/dev/null bs=16M count=1 status=none; exit 0"
      local all = assert(perfev.stat { command = cmd, events = "page-faults" })
      local alone = assert(perfev.stat { command = cmd, events = "page-faults", inherit = false })
      -- the shell's own faults only, without dd's 4096 and more
      assert.is_true(by_name(all, "page-faults").count > 4096)
      assert.is_true(by_name(alone, "page-faults").count < 1000)
    end)

    it("reports a signal as 128 + its number", function()
      local res = assert(perfev.stat { command = "kill -9 $$", events = "task-clock" })
      assert.equal(137, res.status)
      assert.equal("signal", res.how)
    end)

    it("says so, with status 127, when the command does not exist", function()
      local res, msg, errno, status = perfev.stat { command = { "perfev-no-such-command" } }
      assert.is_nil(res)
      assert.equal("perfev-no-such-command: command not found", msg)
      assert.is_nil(errno)   -- nil, message, errno: no refusal by the kernel
      assert.equal(127, status)
    end)
  end)

  describe("a pid", function()
    it("counts every thread of a running process for a duration", function()
      local p = io.popen("exec sh -c 'echo $$; while :; do sleep 0.02; done'", "r")
      local pid = tonumber(p:read("l"))
      local res = assert(perfev.stat { pid = pid, duration_ms = 200, events = "task-clock,context-switches" })
      os.execute("kill " .. pid)
      p:close()
      assert.equal("pid", res.target)
      assert.matches("process id '" .. pid .. "'", stat.format(res))
      local cs = by_name(res, "context-switches")
      assert.is_true(cs.counted)
      assert.is_true(cs.count >= 2, "context switches: " .. cs.count)   -- sleeps, and its children's
    end)

    it("says so when the process does not exist", function()
      local res, msg = perfev.stat { pid = 999999999, duration_ms = 100, events = "task-clock" }
      assert.is_nil(res)
      assert.equal("no process with pid 999999999", msg)
    end)
  end)

  describe("system-wide", function()
    it("counts every CPU for a duration, as perf stat -a", function()
      if not u.is_root() then pending("system-wide counting needs root here") return end
      local res = assert(perfev.stat { system_wide = true, duration_ms = 100, events = "task-clock" })
      assert.equal("system", res.target)
      local tc = by_name(res, "task-clock")
      local cpus = tonumber(u.trim(u.sh("getconf _NPROCESSORS_ONLN")))
      -- every CPU's clock runs the whole time, idle or not
      assert.near(cpus, tc.metrics[1].value, 0.5)
      assert.matches("Performance counter stats for 'system wide':", stat.format(res), 1, true)
      assert.has_error(function() perfev.stat { system_wide = true, pid = 1 } end,
                       "perfev.stat: option 'system_wide' cannot be used with 'pid' or a function")
    end)
  end)

  describe("repeat", function()
    it("gives the mean and the relative standard deviation of the mean #valgrind_differs", function()
      local sizes, i = { 34 * 256, 40 * 256, 46 * 256 }, 0
      local res = assert(perfev.stat { function() i = i + 1; local s = ("x"):rep(sizes[i] * PAGE) return #s end,
                                       ["repeat"] = 3, events = "page-faults" })
      assert.equal(3, res.runs)
      local pf = by_name(res, "page-faults")
      local r = pf.runs
      assert.equal(3, #r)
      local mean = (r[1] + r[2] + r[3]) / 3
      assert.near(mean, pf.count, 1e-9)
      local m2 = (r[1] - mean) ^ 2 + (r[2] - mean) ^ 2 + (r[3] - mean) ^ 2
      assert.near(100 * math.sqrt(m2 / 2 / 3) / mean, pf.noise, 1e-9)
      assert.is_true(r[3] > r[1])
      local text = stat.format(res)
      assert.matches("%(3 runs%):", text)
      assert.matches(("( +-%6.2f%% )"):format(pf.noise):gsub("%p", "%%%0"), text)
      assert.matches(" %+%- [%d.]+ seconds time elapsed", text)
    end)
  end)

  describe("interval mode", function()
    it("prints deltas that add up to the run's counts", function()
      local printed = {}
      local res = assert(perfev.stat { command = "dd if=/dev/zero of=/dev/null bs=8M count=1 status=none; sleep 0.3",
                                       interval_ms = 100, events = "page-faults,task-clock",
                                       on_interval = function(iv) printed[#printed + 1] = iv.index end })
      assert.is_true(#res.intervals >= 3, "intervals: " .. #res.intervals)
      assert.equal(#res.intervals, #printed)
      local sum, last = 0, 0
      for _, iv in ipairs(res.intervals) do
        assert.is_true(iv.time > last)
        last = iv.time
        local pf = iv.counters[1]
        if pf.counted then sum = sum + pf.count end
      end
      assert.equal(by_name(res, "page-faults").count, sum)
      local lines = stat.interval(res, res.intervals[1], { format = "csv" })
      assert.matches("^ +%d+%.%d%d%d%d%d%d%d%d%d,", lines)
    end)
  end)

  describe("errors in the options", function()
    it("name the option, at the caller's line", function()
      assert.has_error(function() perfev.stat { function() end, bogus = 1 } end,
                       "perfev.stat: unknown option 'bogus'")
      assert.has_error(function() perfev.stat { command = "true", fn = function() end } end,
                       "perfev.stat: give one of a function ([1] or 'fn'), 'command' and 'pid'")
      assert.has_error(function() perfev.stat { function() end, ["repeat"] = 0 } end,
                       "perfev.stat: option 'repeat' must be a positive integer, got integer 0")
      assert.has_error(function() perfev.stat { function() end, interval_ms = 100 } end,
                       "perfev.stat: option 'interval_ms' is for a command or a pid, not a function")
      local ok, err = pcall(function() perfev.stat { function() end, events = "no-such-event" } end)
      assert.is_false(ok)
      assert.matches("^spec/stat_spec.lua:%d+: perfev.stat: option 'events': unknown event 'no%-such%-event'", err)
    end)
  end)
end)

-- Layout rules of perf 6.1's stat-display.c, on results built by hand.
describe("perfev.stat.format", function()
  local function counter(t)
    t.unit, t.scale = t.unit or "", t.scale or 1
    t.supported = t.supported ~= false
    t.counted = t.counted ~= false
    t.ctx = "00000"
    t.value = t.count * t.scale
    t.enabled = t.enabled or 1000000
    t.running = t.running or t.enabled
    return t
  end

  local function result(list, extra)
    local res = { target = "command", label = "work", runs = 1, elapsed = 0.5, elapsed_sd = 0,
                  user = 0.25, sys = 0.125, counters = list }
    for k, v in pairs(extra or {}) do res[k] = v end
    require("perfev.stat.metrics").add(list, 0.5e9)
    return res
  end

  local function hw()
    return {
      counter { name = "task-clock", kind = "nsecs", unit = "msec", scale = 1e-6, count = 250e6, enabled = 250e6 },
      counter { name = "cycles", kind = "cycles", count = 500e6, enabled = 250e6, running = 125e6 },
      counter { name = "instructions", kind = "instructions", count = 750e6 },
      counter { name = "branches", kind = "branches", count = 100e6 },
      counter { name = "branch-misses", kind = "branch-misses", count = 2e6 },
      counter { name = "stalled-cycles-frontend", kind = "stalled-front", count = 50e6 },
    }
  end

  it("prints perf's text columns, metrics, multiplexing and footer", function()
    local text = stat.format(result(hw()))
    local expect = table.concat {
      "\n Performance counter stats for 'work':\n\n",
      "            250.00 msec task-clock                       #    0.500 CPUs utilized          \n",
      "         500000000      cycles                           #    2.000 GHz                      (50.00%)\n",
      "         750000000      instructions                     #    1.50  insn per cycle         \n",
      "                                                  #    0.07  stalled cycles per insn\n",
      "         100000000      branches                         #  400.000 M/sec                  \n",
      "           2000000      branch-misses                    #    2.00% of all branches        \n",
      "          50000000      stalled-cycles-frontend          #   10.00% frontend cycles idle   \n",
      "\n       0.500000000 seconds time elapsed\n\n",
      "       0.250000000 seconds user\n       0.125000000 seconds sys\n\n\n",
    }
    assert.equal(expect, text)
  end)

  it("prints perf's CSV fields: value, unit, event, run time, percentage, metric, metric unit", function()
    local csv = stat.format(result(hw()), { format = "csv", sep = ";" })
    local lines = {}
    for l in csv:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.equal("250.00;msec;task-clock;250000000;100.00;0.500;CPUs utilized", lines[1])
    assert.equal("500000000;;cycles;125000000;50.00;2.000;GHz", lines[2])
    assert.equal("750000000;;instructions;1000000;100.00;1.50;insn per cycle", lines[3])
    assert.equal(";;;;0.07;stalled cycles per insn", lines[4])
    assert.equal("2000000;;branch-misses;1000000;100.00;2.00;of all branches", lines[6])
  end)

  it("prints perf's JSON keys, one object a line, valid JSON for cjson", function()
    local cjson = require "cjson"
    local json = stat.format(result(hw()), { format = "json" })
    local first = json:match("^[^\n]+")
    assert.equal('{"counter-value" : "250.000000", "unit" : "msec", "event" : "task-clock", '
                 .. '"event-runtime" : 250000000, "pcnt-running" : 100.00, "metric-value" : 0.500000, '
                 .. '"metric-unit" : "CPUs utilized"}', first)
    for line in json:gmatch("[^\n]+") do assert.is_table(cjson.decode(line)) end
  end)

  it("prints <not counted> and <not supported> as perf does", function()
    local list = {
      counter { name = "page-faults", count = 0, counted = false, enabled = 0, running = 0 },
      counter { name = "cycles", count = 0, supported = false, enabled = 0, running = 0 },
    }
    local res = result(list)
    assert.equal("     <not counted>      page-faults" .. (" "):rep(14 + 35) .. "\n",
                 stat.format(res):match("\n(     <not counted>[^\n]*\n)"))
    assert.equal("<not supported>,,cycles,0,100.00,,\n",
                 stat.format(res, { format = "csv" }):match("<not supported>[^\n]*\n"))
  end)

  it("prints the repeat noise in each format, and (null) for an event without a metric", function()
    local res = result({ counter { name = "msr/tsc/", count = 123, noise = 1.5 } },
                       { runs = 3, elapsed_sd = 0.0123, user = nil })
    local text = stat.format(res)
    assert.matches("( +-  1.50% )", text, 1, true)
    assert.matches("           0.5000 +- 0.0123 seconds time elapsed  ( +-  2.46% )\n\n", text, 1, true)
    assert.equal("123,,msr/tsc/,1.50%,1000000,100.00,,\n", stat.format(res, { format = "csv" }))
    assert.matches('"variance" : 1.50, .*"metric%-unit" : "%(null%)"}', stat.format(res, { format = "json" }))
  end)
end)
