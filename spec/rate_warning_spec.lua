-- Sampling rates above the kernel's perf_event_max_sample_rate (issue 10
-- #12): perfev.open (the one open path: perfev.open, the sampler,
-- perfev.record) lowers a frequency to the limit and warns as perf record
-- does, warns of a cpu-clock/task-clock period shorter than 1e9/max_rate
-- ns, and sends both through perfev.on_warning. The events here are
-- opened disabled and never enabled: nothing samples at those rates.
local perfev = require "perfev"
local open = require "perfev.open"
local fs = require "perfev.fs"
local shell = require "spec.support.shell"

local MAX = tonumber((fs.read(open.MAX_RATE_FILE) or ""):match("%d+"))
local PERF = shell.trim(shell.sh("command -v perf 2>/dev/null"))

-- capture(fn) -> the warnings fn emitted
local function capture(fn)
  local got = {}
  local previous = perfev.on_warning(function(m) got[#got + 1] = m end)
  local ok, err = pcall(fn)
  perfev.on_warning(previous)
  assert(ok, err)
  return got
end

describe("sampling rates above perf_event_max_sample_rate", function()
  if not MAX then
    pending("no " .. open.MAX_RATE_FILE .. " on this kernel")
    return
  end

  it("a frequency above the limit opens at the limit, with perf record's warning #perf_heavy", function()
    local ev
    local got = capture(function()
      ev = assert(perfev.open { type = "software", config = "cpu-clock", freq = true, sample_freq = 2 * MAX })
    end)
    assert.equal(MAX, ev:attr().sample_freq)
    assert.equal("max_sample_rate", ev:data().fallback)
    ev:close()
    assert.equal(1, #got)
    local ours = ("maximum frequency rate (%.0f Hz) exceeded, throttling from %.0f Hz to %.0f Hz.")
                 :format(MAX, 2 * MAX, MAX)
    assert.truthy(got[1]:find(ours, 1, true), got[1])
    if PERF ~= "" then   -- the same sentence as perf record's
      -- perf reads the limit when it runs, and the kernel lowers it at run
      -- time (a PMU interrupt that took too long): perf's sentence is
      -- compared with ours for the limit perf read, and a change is said
      local tmp = os.tmpname()
      local out = shell.sh(("%s record -F %.0f -e cpu-clock -o %s true 2>&1"):format(PERF, 2 * MAX, tmp))
      os.remove(tmp)
      local seen = tonumber(out:lower():match("maximum frequency rate %((%d+) hz%)"))
      assert.truthy(seen, out)
      if seen ~= MAX then
        print(("\n  perf record read a limit of %d Hz, %d when the spec began (the kernel lowered it)")
              :format(seen, MAX))
      end
      local for_perf = ("maximum frequency rate (%.0f Hz) exceeded, throttling from %.0f Hz to %.0f Hz.")
                       :format(seen, 2 * MAX, seen)
      assert.truthy(out:lower():find(for_perf:lower(), 1, true), out)
    end
  end)

  it("a cpu-clock or task-clock period shorter than 1e9/max_rate ns warns; the event opens as asked", function()
    local short = math.floor(1e9 / MAX) - 1
    for _, clock in ipairs { "cpu-clock", "task-clock" } do
      local ev
      local got = capture(function() ev = assert(perfev.open(("%s/period=%d/"):format(clock, short))) end)
      assert.equal(short, ev:attr().sample_period)
      ev:close()
      assert.equal(1, #got)
      assert.truthy(got[1]:find(("a %s period of %d ns"):format(clock, short), 1, true), got[1])
    end
  end)

  it("no warning at the limit, for counting, for other events, or for a tracepoint's period 1", function()
    local got = capture(function()
      for _, s in ipairs { ("cpu-clock/period=%.0f/"):format(math.ceil(1e9 / MAX)), "cpu-clock",
                           "page-faults/period=1/", "cpu-clock/freq=" .. MAX .. "/" } do
        assert(perfev.open(s)):close()
      end
    end)
    assert.same({}, got)
  end)

  it("the sampler and perfev.record warn through the same channel, once per event", function()
    local got = capture(function()
      local s = assert(perfev.sampler { period = 1000 })
      s:close()
    end)
    assert.equal(1, #got)
    local tmp = os.tmpname()
    got = capture(function()
      assert(perfev.record { output = tmp, freq = 2 * MAX, fn = function() end })
    end)
    os.remove(tmp)
    assert.equal(1, #got)
    assert.truthy(got[1]:find("throttling from", 1, true))
  end)

  it("on_warning: false silences, a handler gets each message, the previous handler comes back", function()
    local previous = perfev.on_warning(false)
    assert(perfev.open("cpu-clock/period=1000/")):close()
    assert.is_false(perfev.on_warning(previous))
    assert.error_matches(function() perfev.on_warning(3) end, "expected a function, false or nil, got")
  end)
end)
