-- core.open: what the kernel refuses comes back as nil, message, errno with
-- a message that says what to do; programmer's mistakes raise.
local core = require "perfev.core"
local perfev = require "perfev"
local u = require "spec.support.util"
local compat = require "perfev.compat"

local E, h = u.E, u.h
local SW, TYPE = core.SW, core.TYPE

local function sw(config, extra)
  local t = { type = "software", config = config or SW.TASK_CLOCK, disabled = true }
  for k, v in pairs(extra or {}) do t[k] = v end
  return core.attr(t)
end

-- Asserts an open failure and returns its message.
local function refused(errno, ev, msg, err)
  assert.is_nil(ev, "the open succeeded")
  assert.is_string(msg)
  assert.matches("^perf_event_open: ", msg)
  assert.equal(errno, err, msg)
  return msg
end

describe("core.open", function()
  it("opens a software event for this process on any cpu", function()
    local ev = assert(core.open(sw(), 0, -1))
    assert.matches("anon_inode:%[?perf_event%]?", u.fd_target(ev:fileno()))
    ev:close()
  end)

  it("always sets close-on-exec", function()
    local ev = assert(core.open(sw(), 0, -1))
    local info = assert(u.read_file("/proc/self/fdinfo/" .. ev:fileno()))
    local flags = tonumber(info:match("flags:%s*(%d+)"), 8)
    assert.is_true(compat.band(flags, (tonumber("2000000", 8))) ~= 0, "O_CLOEXEC not set: " .. info)
    ev:close()
  end)

  describe("hardware events", function()
    local pmu = u.cpu_pmu()
    local hw = {
      { "cycles", TYPE.HARDWARE, core.HW.CPU_CYCLES },
      { "instructions", TYPE.HARDWARE, core.HW.INSTRUCTIONS },
      { "L1-dcache-loads", TYPE.HW_CACHE, 0 },
      { "raw 0x3c", TYPE.RAW, 0x3c },
    }
    if not pmu then
      for _, row in ipairs(hw) do
        it("return ENOENT and say there is no hardware PMU: " .. row[1], function()
          local msg = refused(E.ENOENT, core.open(core.attr { type = row[2], config = row[3] }, 0, -1))
          assert.matches("no hardware PMU on this machine", msg, 1, true)
          assert.matches("software events", msg, 1, true)
        end)
      end
      it("perfev.open('cycles') gives the same nil, message, errno", function()
        local ev, msg, err = perfev.open("cycles")
        assert.is_nil(ev)
        assert.equal(E.ENOENT, err)
        assert.matches("no hardware PMU on this machine", msg, 1, true)
      end)
      pending("counting instructions: no hardware PMU on this machine "
              .. "(no /sys/bus/event_source/devices/cpu)")
    else
      pending("the no-PMU error path: this machine has a hardware PMU (" .. pmu .. ")")
      it("counts instructions of a loop (hardware PMU present)", function()
        local ev = assert(perfev.open("instructions"))
        local n = ev:measure(function() local x = 0 for i = 1, 1e6 do x = x + i end return x end)
        assert.is_true(n > 1e6, "instructions " .. tostring(n))
      end)
    end
  end)

  describe("pid and cpu", function()
    it("pid -1 with cpu -1 is EINVAL, and the message explains why", function()
      local msg = refused(E.EINVAL, core.open(sw(), -1, -1))
      assert.matches("pid == -1 with cpu == -1 is invalid", msg, 1, true)
      assert.matches("open one event per cpu", msg, 1, true)
    end)

    it("a pid that does not exist is ESRCH, naming the pid", function()
      local pid_max = tonumber(u.read_file("/proc/sys/kernel/pid_max"))
      local msg = refused(E.ESRCH, core.open(sw(), pid_max + 1, -1))
      assert.matches("no process or thread with pid " .. (pid_max + 1), msg, 1, true)
    end)

    it("a cpu that does not exist is EINVAL or ENODEV, naming the cpu", function()
      for _, cpu in ipairs { 4096, -2 } do
        local ev, msg, err = core.open(sw(), 0, cpu)
        assert.is_nil(ev)
        assert.is_true(err == E.EINVAL or err == E.ENODEV, msg)
        assert.matches("cpu " .. cpu, msg, 1, true)
      end
    end)

    it("cpu 0 for this process, and every process on cpu 0 (root)", function()
      local ev = assert(core.open(sw(), 0, 0))
      ev:close()
      if u.is_root() then
        local all = assert(core.open(sw(SW.CPU_CLOCK), -1, 0))
        all:enable()
        u.spin(2e6)
        all:disable()
        assert.is_true(all:read() > 0)
        all:close()
      end
    end)

    if u.is_root() then
      it("another process by its pid (root)", function()
        local ppid = h.getppid_loop(1)
        local ev = assert(core.open(sw(), ppid, -1))
        ev:close()
      end)
    else
      pending("opening another process's event: needs root")
    end
  end)

  describe("group and flags", function()
    it("a closed group leader raises; a bad group fd is EBADF", function()
      local leader = assert(core.open(sw(), 0, -1))
      leader:close()
      assert.has_error(function() core.open(sw(), 0, -1, leader) end,
                       "perfev.event: attempt to use a closed event")
      local msg = refused(E.EBADF, core.open(sw(), 0, -1, 9999))
      assert.matches("group leader", msg, 1, true)
    end)

    it("flags by name: fd_no_group ignores the group", function()
      local leader = assert(core.open(sw(), 0, -1))   -- disabled: its group cannot count
      local free = assert(core.open(sw(SW.TASK_CLOCK, { disabled = false }), 0, -1, leader,
                                    { "fd_no_group" }))
      local member = assert(core.open(sw(SW.TASK_CLOCK, { disabled = false }), 0, -1, leader))
      u.spin(2e6)
      assert.is_true(free:read() > 0)
      assert.equal(0, member:read())
      free:close(); member:close(); leader:close()
    end)

    it("flags by number, and unknown flag names raise", function()
      local ev = assert(core.open(sw(), 0, -1, nil, core.FLAG.FD_CLOEXEC))
      ev:close()
      assert.has_error(function() core.open(sw(), 0, -1, nil, { "fd_nosuch" }) end,
        "perfev.open: unknown flag 'fd_nosuch' (fd_no_group, fd_output, pid_cgroup)")
    end)

    it("a cgroup path needs the pid_cgroup flag; a missing one is ENOENT", function()
      assert.has_error(function() core.open(sw(), "/sys/fs/cgroup", 0) end,
                       "perfev.open: pid is a path but the pid_cgroup flag is not set")
      local ev, msg, err = core.open(sw(), "/nonexistent/cgroup", 0, nil, { "pid_cgroup" })
      assert.is_nil(ev)
      assert.equal(E.ENOENT, err)
      assert.matches("cgroup directory", msg, 1, true)
    end)

    -- a cgroup2 directory, the perf_event cgroup of perf -G
    local cgroup2
    for line in (u.read_file("/proc/mounts") or ""):gmatch("[^\n]+") do
      local dir, fstype = line:match("^%S+ (%S+) (%S+)")
      if fstype == "cgroup2" and not cgroup2 then cgroup2 = dir end
    end
    if cgroup2 and u.is_root() then
      it("pid_cgroup with a cgroup2 directory and a cpu opens, and closes its dir fd", function()
        local before = u.fd_count()
        for _ = 1, 50 do
          local ev = assert(core.open(sw(), cgroup2, 0, nil, { "pid_cgroup" }))
          ev:close()
        end
        assert.equal(before, u.fd_count())
      end)
    else
      pending("pid_cgroup: no cgroup2 mount, or not root")
    end
  end)

  describe("attr size (E2BIG is handled inside)", function()
    it("opens at every ABI size, never returning E2BIG for a size the kernel knows", function()
      for name, size in pairs(core.ATTR_SIZE) do
        local ev, msg, err = core.open(sw(SW.TASK_CLOCK, { size = size }), 0, -1)
        assert.is_not_nil(ev, name .. ": " .. tostring(msg))
        assert.are_not.equal(E.E2BIG, err)
        ev:close()
      end
      local ev = assert(core.open(sw(SW.TASK_CLOCK, { size = 0 }), 0, -1))   -- read as VER0
      ev:close()
    end)

    it("opens an attr using the last fields (sig_data, config3) without E2BIG", function()
      local ev, msg, err = core.open(sw(SW.TASK_CLOCK, { config3 = 1, sig_data = 7,
                                                          sample_max_stack = 1 }), 0, -1)
      assert.is_not_nil(ev, msg)
      assert.are_not.equal(E.E2BIG, err)
      ev:close()
    end)

    it("a size the attr cannot have (1..63, above 136) raises, naming the field", function()
      for _, size in ipairs { 1, 32, 63, 137, 200, 4096 } do
        assert.has_error(function() core.open(sw(SW.TASK_CLOCK, { size = size }), 0, -1) end,
          ("perfev.open: attr field 'size' is %d: it must be 0 (read as 64) or 64..136")
            :format(size))
      end
    end)

    -- The kernel copies `size` bytes: what lies beyond would not be seen,
    -- so perfev refuses a field set there. An invalid clockid shows the
    -- kernel does read it at full size.
    it("a field set beyond `size` raises, naming the field, instead of being ignored", function()
      local full = sw(SW.TASK_CLOCK, { use_clockid = true, clockid = 12345 })
      refused(E.EINVAL, core.open(full, 0, -1))
      local short = full:clone()
      short.size = core.ATTR_SIZE.VER0
      assert.has_error(function() core.open(short, 0, -1) end,
        "perfev.open: attr field 'clockid' is set, but 'size' is 64: the kernel reads only the "
        .. "first 64 bytes and would ignore it (leave 'size' alone: perfev sets it)")
      short.size = 0   -- read as VER0 by the kernel
      assert.has_error(function() core.open(short, 0, -1) end,
        "perfev.open: attr field 'clockid' is set, but 'size' is 0: the kernel reads only the "
        .. "first 64 bytes and would ignore it (leave 'size' alone: perfev sets it)")
      short.clockid, short.use_clockid = 0, false
      short.size = core.ATTR_SIZE.VER1
      short.sample_regs_user = 1   -- offset 96, beyond VER1's 72 bytes
      assert.has_error(function() core.open(short, 0, -1) end,
        "perfev.open: attr field 'sample_regs_user' is set, but 'size' is 72: the kernel reads "
        .. "only the first 72 bytes and would ignore it (leave 'size' alone: perfev sets it)")
      short.sample_regs_user = 0
      local ev = assert(core.open(short, 0, -1))
      ev:close()
    end)
  end)

  describe("permissions", function()
    local paranoid = tonumber(u.read_file("/proc/sys/kernel/perf_event_paranoid") or "")
    if not (paranoid and paranoid >= 2) then
      pending("EACCES as an unprivileged user: kernel.perf_event_paranoid is "
              .. tostring(paranoid) .. ", below 2")
      return
    end
    local out, why = u.run_as_nobody([[
      local core = require "perfev.core"
      local ev, msg, err = core.open(core.attr { type = 1, config = 1 }, 0, -1)
      print(tostring(ev) .. "\t" .. tostring(err) .. "\t" .. tostring(msg))
      ev, msg, err = core.open(core.attr { type = 1, config = 1, exclude_kernel = true }, 0, -1)
      print(tostring(ev ~= nil) .. "\t" .. tostring(err))
      ev, msg, err = core.open(core.attr { type = 1, config = 1, exclude_kernel = true }, 1, -1)
      print(tostring(ev) .. "\t" .. tostring(err) .. "\t" .. tostring(msg))
    ]])
    if not out then
      pending("EACCES as an unprivileged user: " .. why)
      return
    end
    it("kernel counting as an unprivileged user is EACCES, quoting perf_event_paranoid", function()
      local first = out:match("^([^\n]*)")
      local ev, err, msg = first:match("^(.-)\t(.-)\t(.*)$")
      assert.equal("nil", ev, out)
      assert.equal(tostring(E.EACCES), err, out)
      assert.matches("kernel.perf_event_paranoid is " .. paranoid, msg, 1, true)
      assert.matches("CAP_PERFMON", msg, 1, true)
      assert.matches("exclude_kernel", msg, 1, true)
    end)

    it("user-space counting of its own process works for that user", function()
      assert.matches("\ntrue\tnil\n", out, 1, true)
    end)

    it("another user's process is EACCES with the same advice", function()
      local third = select(3, out:match("^([^\n]*)\n([^\n]*)\n([^\n]*)"))
      assert.is_string(third, out)
      local ev, err, msg = third:match("^(.-)\t(.-)\t(.*)$")
      assert.equal("nil", ev, out)
      assert.is_true(err == tostring(E.EACCES) or err == tostring(E.EPERM), out)
      assert.matches("CAP_PERFMON", msg, 1, true)
    end)
  end)
end)
