-- Tracepoints as perf 6.1 builds them (issue 10 #2, #3): the ftrace events
-- that have no id file take their id from the format file, and a sampled
-- tracepoint has perf record's sample_type and sample_period. perf is the
-- oracle: `perf stat -vv` / `perf record -vv` print the attrs it opens.
local core = require "perfev.core"
local perfev = require "perfev"
local parse = require "perfev.parse"
local tracepoint = require "perfev.tracepoint"
local fs = require "perfev.fs"
local shell = require "spec.support.shell"
local u = require "spec.support.util"

local sh, h = shell.sh, u.h
local SAMPLE = core.SAMPLE

local PERF = shell.trim(shell.sh("command -v perf 2>/dev/null"))
local ID, WHY = u.tracepoint_id("syscalls", "sys_enter_getppid")   -- mounts tracefs when it is absent (root)
local ROOT = tracepoint.root()

-- perf_attrs(cmd) -> list of { field = value } of each attr block perf -vv printed
local function perf_attrs(cmd)
  local out, list, cur = sh(cmd .. " 2>&1"), {}, nil
  for line in out:gmatch("[^\n]+") do
    if line:match("^perf_event_attr:") then
      cur = {}
      list[#list + 1] = cur
    elseif cur and line:match("^%-%-%-") then
      cur = nil
    elseif cur then
      local k, v = line:match("^  (.-)%s%s+(%S+)$")
      if k then cur[k] = v end
    end
  end
  return list, out
end

-- mask(names) -> the sample_type mask of perf's "IP|TID|..." spelling
local function mask(names)
  local m = 0
  for n in names:gmatch("[^|]+") do m = m + assert(SAMPLE[n], n) end
  return m
end

-- the tracefs event directories that have an id file, or only a format file
local function ftrace_dirs()
  local with_id, format_only = {}, {}
  for _, d in ipairs(fs.dir(ROOT .. "/events/ftrace") or {}) do
    local base = ROOT .. "/events/ftrace/" .. d
    if fs.exists(base .. "/id") then with_id[#with_id + 1] = d
    elseif fs.exists(base .. "/format") then format_only[#format_only + 1] = d end
  end
  return with_id, format_only
end

describe("tracepoints as perf builds them", function()
  if not ID then
    pending("tracefs: " .. WHY)
    return
  end

  describe("ftrace events without an id file (#3)", function()
    local _, format_only = ftrace_dirs()
    if #format_only == 0 then
      pending("no ftrace event without an id file under " .. ROOT .. "/events/ftrace on this kernel")
      return
    end

    it("take the id of their format file's ID: line, as the id tracefs reports", function()
      for _, name in ipairs(format_only) do
        local id = assert(tracepoint.id("ftrace", name))
        local format = assert(fs.read(ROOT .. "/events/ftrace/" .. name .. "/format"))
        assert.equal(tonumber(format:match("\nID: (%d+)")), id)
        assert.equal(id, parse.parse("ftrace:" .. name).config)
      end
    end)

    it("are matched by globs, as perf matches them (ftrace:* has the configs perf stat -vv prints)", function()
      if PERF == "" then
        pending("perf is not installed (package linux-perf)")
        return
      end
      local perf = {}
      for _, a in ipairs(perf_attrs(PERF .. " stat -vv -e 'ftrace:*' true")) do
        if a.type == "2" then perf[tonumber(a.config)] = true end
      end
      local want = {}
      for c in pairs(perf) do want[#want + 1] = c end
      table.sort(want)
      local got = {}
      for _, ev in ipairs(parse.list("ftrace:*")) do got[#got + 1] = ev.config end
      table.sort(got)
      assert.is_true(#got > #format_only)
      assert.same(want, got)
    end)

    it("are counted in *:* (every event directory with an id or a format file)", function()
      local n = 0
      for _, sys in ipairs(tracepoint.subsystems()) do
        for _, d in ipairs(fs.dir(ROOT .. "/events/" .. sys) or {}) do
          local base = ROOT .. "/events/" .. sys .. "/" .. d
          if fs.exists(base .. "/id") or fs.exists(base .. "/format") then n = n + 1 end
        end
      end
      assert.equal(n, #parse.list("*:*"))
    end)
  end)

  describe("sampled (#2)", function()
    it("perfev.parse gives perf's PERF_TP_SAMPLE_TYPE and sample_period 1", function()
      local ev = parse.parse("sched:sched_switch")
      assert.equal(SAMPLE.RAW + SAMPLE.TIME + SAMPLE.CPU + SAMPLE.PERIOD, ev.sample_type)
      assert.equal(1, ev.sample_period)
      local cg = parse.parse("sched:sched_switch/call-graph=fp/")
      assert.equal(SAMPLE.RAW + SAMPLE.TIME + SAMPLE.CPU + SAMPLE.PERIOD + SAMPLE.CALLCHAIN, cg.sample_type)
    end)

    it("perfev.record writes the attr perf record -vv opens (sample_type, sample_period)", function()
      if PERF == "" then
        pending("perf is not installed (package linux-perf)")
        return
      end
      local tmp = os.tmpname()
      local attrs, out = perf_attrs(("%s record -vv -e sched:sched_switch -o %s true"):format(PERF, tmp))
      local want
      for _, a in ipairs(attrs) do
        if a.type == "2" then want = want or a end
      end
      assert(want, "perf record printed no tracepoint attr:\n" .. out)
      assert(perfev.record { output = tmp, event = "sched:sched_switch",
                             fn = function() h.getppid_loop(10) end })
      local f = assert(perfev.perfdata.open(tmp))
      local a = f:attrs()[1].attr
      f:close()
      os.remove(tmp)
      assert.equal(mask(want.sample_type), a.sample_type)
      assert.equal(tonumber(want["{ sample_period, sample_freq }"]), a.sample_period)
      assert.is_true(a.freq == 0 or a.freq == false)
    end)

    it("a period or freq the caller gives still wins, as perf record -c / -F", function()
      local s = assert(perfev.sampler { event = "sched:sched_switch", period = 7 })
      assert.equal(7, s.events[1]:attr().sample_period)
      s:close()
    end)

    it("counting is unchanged: perfev.open counts every hit of the string's tracepoint", function()
      local ev = assert(perfev.open("syscalls:sys_enter_getppid"))
      for _, n in ipairs { 1, 10, 1234 } do
        ev:reset()
        ev:enable()
        h.getppid_loop(n)
        ev:disable()
        assert.equal(n, (ev:read()))
      end
      ev:close()
    end)
  end)
end)
