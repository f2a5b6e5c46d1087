-- perfev.clock_ns and perfev.rusage against the kernel: sample times taken
-- with use_clockid lie between two clock_ns reads of the same clock, and
-- getrusage's CPU time follows task-clock.
local perfev = require "perfev"
local u = require "spec.support.util"

describe("perfev.clock_ns", function()
  for _, clock in ipairs { "monotonic", "monotonic_raw", "boottime", "realtime" } do
    it(clock .. ": sample times stamped with that clockid lie between two reads", function()
      local ev = assert(perfev.open { type = "software", config = "cpu-clock",
                                      sample_period = 100000, sample_type = { "time" },
                                      use_clockid = true, clockid = clock })
      local ring = assert(ev:mmap(16))
      local t0 = perfev.clock_ns(clock)
      ev:enable()
      u.burn(20)
      ev:disable()
      local t1 = perfev.clock_ns(clock)
      local n = 0
      for rec in ring:records() do
        if rec.type == "sample" then
          n = n + 1
          assert.is_true(rec.time >= t0 and rec.time <= t1,
                         ("%s: sample at %d outside [%d, %d]"):format(clock, rec.time, t0, t1))
        end
      end
      assert.is_true(n >= 5, "samples: " .. n)
      ring:close()
      ev:close()
    end)
  end

  it("takes a clock by name or number, monotonic by default; bad names raise", function()
    local a = perfev.clock_ns()
    local b = perfev.clock_ns(perfev.CLOCK.MONOTONIC)
    local c = perfev.clock_ns("MONOTONIC")
    assert.is_true(a <= b and b <= c)
    assert.has_error(function() perfev.clock_ns("sundial") end)
    local none, msg, errno = perfev.clock_ns(12345)
    assert.is_nil(none)
    assert.matches("^clock_gettime: ", msg)
    assert.equal(u.E.EINVAL, errno)
  end)
end)

describe("perfev.rusage", function()
  it("user + system CPU time follows this process's task-clock", function()
    local ev = assert(perfev.open("task-clock"))
    local u0, s0 = perfev.rusage()
    ev:enable()
    u.burn(60)
    ev:disable()
    local u1, s1 = perfev.rusage("self")
    local cpu, task = (u1 - u0) + (s1 - s0), ev:read()
    -- getrusage rounds to microseconds around task-clock's exact count
    assert.is_true(math.abs(cpu - task) <= 2000000, ("rusage %d ns, task-clock %d ns"):format(cpu, task))
    assert.equal(0, u1 % 1000)
    ev:close()
  end)

  it("children and thread, and a bad selector raises", function()
    local cu, cs = perfev.rusage("children")
    assert.is_true(cu >= 0 and cs >= 0)
    local tu = perfev.rusage("thread")
    assert.is_true(tu > 0)
    assert.has_error(function() perfev.rusage("neighbours") end)
  end)
end)
