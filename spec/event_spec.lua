-- The event userdata and every ioctl on it, against the kernel.
local core = require "perfev.core"
local u = require "spec.support.util"
local tbc = require "spec.support.tbc"
local compat = require "perfev.compat"

local E, h = u.E, u.h
local SW, FORMAT = core.SW, core.FORMAT
local TIMES = compat.bor(FORMAT.TOTAL_TIME_ENABLED, FORMAT.TOTAL_TIME_RUNNING)

local function open(fields, group)
  local t = { type = "software", config = SW.TASK_CLOCK, disabled = true }
  for k, v in pairs(fields or {}) do t[k] = v end
  return assert(core.open(core.attr(t), 0, -1, group))
end

-- A sampling task-clock event: one overflow every `period` ns of cpu time.
local function sampler(period, extra)
  local t = { sample_period = period or 100000, sample_type = "ip|tid",
              read_format = compat.bor(TIMES, FORMAT.LOST) }
  for k, v in pairs(extra or {}) do t[k] = v end
  return open(t)
end

local function failed(errno, ok, msg, err)
  assert.is_nil(ok, "the ioctl succeeded")
  assert.is_string(msg)
  assert.equal(errno, err, msg)
  return msg
end

describe("perfev.core event", function()
  describe("enable, disable, reset", function()
    it("a disabled event does not count; enable/disable start and stop it", function()
      local ev = open { config = SW.PAGE_FAULTS }
      h.touch_pages(32)
      assert.equal(0, ev:read())
      assert.is_true(ev:enable())
      h.touch_pages(32)
      assert.is_true(ev:disable())
      local n = ev:read()
      assert.is_true(n >= 32, "page faults " .. n)
      h.touch_pages(32)
      assert.equal(n, ev:read())
      assert.is_true(ev:reset())
      assert.equal(0, ev:read())
      ev:close()
    end)

    it("the group flag applies enable, disable and reset to every member", function()
      local leader = open { config = SW.PAGE_FAULTS }
      local member = open({ config = SW.PAGE_FAULTS }, leader)
      -- without the flag only the leader is enabled; the member stays off
      leader:enable()
      h.touch_pages(16)
      leader:disable()
      assert.is_true(leader:read() >= 16)
      assert.equal(0, member:read())
      -- with it, both count
      leader:reset()
      leader:enable(true)
      h.touch_pages(16)
      leader:disable(true)
      local a, b = leader:read(), member:read()
      assert.is_true(a >= 16 and b >= 16, ("leader %d, member %d"):format(a, b))
      -- disabled as a group: neither counts any more
      h.touch_pages(16)
      assert.equal(a, leader:read())
      assert.equal(b, member:read())
      -- reset without the flag: the leader only; with it: all
      leader:reset()
      assert.equal(0, leader:read())
      assert.equal(b, member:read())
      leader:reset(true)
      assert.equal(0, member:read())
      member:close(); leader:close()
    end)

    it("reset of a running event restarts its count near 0", function()
      local ev = open { config = SW.PAGE_FAULTS }
      ev:enable()
      h.touch_pages(1000)
      local before = ev:read()
      ev:reset()
      local after = ev:read()
      ev:disable()
      assert.is_true(before >= 1000, "before " .. before)
      assert.is_true(after < 100, "after reset " .. after)
      ev:close()
    end)
  end)

  describe("refresh and period", function()
    it("refresh(n) counts until n overflows, then the event disables itself", function()
      local period = 100000
      local ev = sampler(period)
      assert.is_true(ev:refresh(2))
      local stopped, ok = u.spin_until_stopped(ev)
      assert.is_true(ok, "the event kept counting after its refresh ran out")
      assert.is_true(stopped >= 2 * period, "count " .. stopped)
      u.spin(5e6)
      assert.equal(stopped, ev:read())
      -- refresh again re-arms it for one more overflow (which may come
      -- before a whole period: the kernel keeps what was left of the last)
      assert.is_true(ev:refresh(1))
      local again
      again, ok = u.spin_until_stopped(ev)
      assert.is_true(ok, "the event kept counting after its second refresh ran out")
      assert.is_true(again > stopped, ("after a second refresh: %d, before: %d"):format(again, stopped))
      ev:close()
    end)

    it("refresh on a counting (non-sampling) event is EINVAL", function()
      local ev = open()
      failed(E.EINVAL, ev:refresh(1))
      ev:close()
    end)

    it("period(n) changes the sampling period (seen through refresh)", function()
      local ev = sampler(100000)
      local new = 5000000
      assert.is_true(ev:period(new))
      assert.is_true(ev:refresh(1))
      local n, ok = u.spin_until_stopped(ev)
      assert.is_true(ok, "the event did not stop")
      -- stopped at the first overflow of the new period, not of the old one
      assert.is_true(n >= new, "count " .. n .. " below the new period")
      ev:close()
    end)

    it("period(0) and period on a counting event are EINVAL", function()
      local ev = sampler()
      failed(E.EINVAL, ev:period(0))
      ev:close()
      ev = open()
      failed(E.EINVAL, ev:period(1000))
      ev:close()
    end)
  end)

  describe("set_output and pause_output", function()
    local PAGES = 8
    local maps = {}
    local function map(ev)
      local addr, err = h.ring_map(ev:fileno(), PAGES)
      assert.is_not_nil(addr, "mmap failed, errno " .. tostring(err))
      maps[#maps + 1] = addr
      return addr
    end
    after_each(function()
      for i = #maps, 1, -1 do
        h.ring_unmap(maps[i], PAGES)
        maps[i] = nil
      end
    end)

    it("set_output(nil) detaches the output (the kernel takes fd -1)", function()
      local ev = sampler()
      assert.is_true(ev:set_output(nil))
      assert.is_true(ev:set_output())
      ev:close()
    end)

    it("set_output to an event without a ring buffer is EINVAL", function()
      local a, b = sampler(), sampler()
      failed(E.EINVAL, a:set_output(b))
      failed(E.EINVAL, a:set_output(a))
      a:close(); b:close()
    end)

    it("set_output to a mapped event sends the samples to its ring buffer", function()
      local target, source = sampler(), sampler()
      local ring = map(target)
      assert.equal(0, h.ring_head(ring))
      assert.is_true(source:set_output(target))
      source:enable()
      u.spin(10e6)
      source:disable()
      -- target never ran: every byte in its ring is source's
      assert.is_false((target:read()))
      local head = h.ring_head(ring)
      assert.is_true(head > 0, "no sample reached the target's ring")
      assert.equal(0, head % 8)
      -- and a mapped event cannot redirect its own output
      failed(E.EINVAL, target:set_output(source))
      assert.is_true(source:set_output(nil))
      source:enable()
      u.spin(5e6)
      source:disable()
      assert.equal(head, h.ring_head(ring), "samples still reach the target after detaching")
      source:close(); target:close()
    end)

    it("pause_output on an event without a ring buffer is EINVAL", function()
      local ev = sampler()
      failed(E.EINVAL, ev:pause_output(true))
      ev:close()
    end)

    it("pause_output(true) drops samples (counted as lost), false resumes", function()
      local ev = sampler(200000)
      local ring = map(ev)
      assert.is_true(ev:pause_output(true))
      ev:enable()
      u.spin(10e6)
      ev:disable()
      assert.equal(0, h.ring_head(ring), "samples written while paused")
      local lost = ev:read_raw().lost
      assert.is_true(lost > 0, "paused samples not counted as lost")
      assert.is_true(ev:pause_output(false))
      ev:enable()
      u.spin(5e6)
      ev:disable()
      assert.is_true(h.ring_head(ring) > 0, "no samples after resuming")
      ev:close()
    end)
  end)

  describe("id, fileno, attr", function()
    it("id() is the kernel's id: non-zero, unique, and what read gives with FORMAT.ID", function()
      local a, b = open { read_format = FORMAT.ID }, open { read_format = FORMAT.ID }
      assert.is_true(a:id() > 0)
      assert.are_not.equal(a:id(), b:id())
      assert.equal(a:id(), a:read_raw().id)
      assert.equal(b:id(), b:read_raw().id)
      assert.equal(a:id(), a:id())
      a:close(); b:close()
    end)

    it("fileno() is the perf event's file descriptor", function()
      local ev = open()
      local fd = ev:fileno()
      assert.is_true(compat.math_type(fd) == "integer" and fd > 2)
      assert.matches("perf_event", u.fd_target(fd))
      ev:close()
      assert.not_matches("perf_event", u.fd_target(fd))
    end)

    it("attr() is a copy of the attr the event was opened with", function()
      local a = core.attr { type = "software", config = SW.PAGE_FAULTS, disabled = true,
                            read_format = TIMES, exclude_hv = true }
      local ev = assert(core.open(a, 0, -1))
      local got = ev:attr()
      assert.equal(a, got)
      got.config = SW.TASK_CLOCK
      assert.equal(SW.PAGE_FAULTS, ev:attr().config)
      ev:close()
    end)
  end)

  describe("bpf ioctls, set_filter and modify outside their event types", function()
    it("set_bpf with a bad fd is EBADF, with a non-bpf fd EINVAL", function()
      local ev = open()
      failed(E.EBADF, ev:set_bpf(-1))
      failed(E.EBADF, ev:set_bpf(9999))
      local other = open()   -- a perf event fd is not a bpf program
      failed(E.EINVAL, ev:set_bpf(other:fileno()))
      other:close()
      ev:close()
    end)

    it("query_bpf on a software event is EINVAL", function()
      local ev = open()
      failed(E.EINVAL, ev:query_bpf())
      assert.has_error(function() ev:query_bpf(-1) end)
      ev:close()
    end)

    it("set_filter on a software event is EINVAL", function()
      local ev = open()
      failed(E.EINVAL, ev:set_filter("common_pid != 0"))
      ev:close()
    end)

    it("modify on a software event fails with nil, message, errno", function()
      local ev = sampler()
      local ok, msg, err = ev:modify(ev:attr())
      assert.is_nil(ok)
      assert.is_true(err == E.EINVAL or err == E.EOPNOTSUPP, msg)
      assert.matches("breakpoint", msg, 1, true)
      ev:close()
    end)
  end)

  describe("close", function()
    it("closes once; every method of a closed event raises", function()
      local ev = open()
      assert.is_false(ev:closed())
      assert.is_true(ev:close())
      assert.is_true(ev:closed())
      assert.is_true(ev:close())   -- again: nothing to do
      for _, m in ipairs { "enable", "disable", "reset", "read", "read_raw", "id", "fileno",
                           "attr", "query_bpf" } do
        assert.has_error(function() ev[m](ev) end, "perfev.event: attempt to use a closed event")
      end
      assert.has_error(function() ev:refresh(1) end, "perfev.event: attempt to use a closed event")
      assert.has_error(function() ev:period(1) end, "perfev.event: attempt to use a closed event")
      assert.has_error(function() ev:set_filter("x") end,
                       "perfev.event: attempt to use a closed event")
      assert.has_error(function() ev:set_bpf(-1) end, "perfev.event: attempt to use a closed event")
      assert.has_error(function() ev:pause_output(true) end,
                       "perfev.event: attempt to use a closed event")
      assert.has_error(function() ev:modify(core.attr()) end,
                       "perfev.event: attempt to use a closed event")
      assert.has_error(function() ev:set_output(nil) end,
                       "perfev.event: attempt to use a closed event")
      local other = open()
      assert.has_error(function() other:set_output(ev) end,
                       "perfev.event: attempt to use a closed event")
      other:close()
    end)

    it("__tostring shows the event, its fd and id, or that it is closed", function()
      local ev = open { config = SW.PAGE_FAULTS }
      local s = tostring(ev)
      assert.matches("^perfev%.event%(", s)
      assert.matches("type 1, config 0x2, fd " .. ev:fileno() .. ", id " .. ev:id(), s, 1, true)
      ev:close()
      assert.matches("closed", tostring(ev), 1, true)
    end)

    it("__close closes at the end of the scope", function()
      if not tbc.available then pending(tbc.reason) return end
      local fd = tbc.run([[
        local open, u, assert = ...
        local fd
        do
          local ev <close> = open()
          fd = ev:fileno()
          assert.matches("perf_event", u.fd_target(fd))
        end
        return fd
      ]], open, u, assert)
      assert.not_matches("perf_event", u.fd_target(fd))
    end)

    it("has every ioctl as a method", function()
      local ev = open()
      for _, m in ipairs { "enable", "disable", "reset", "refresh", "period", "set_output",
                           "set_filter", "id", "set_bpf", "pause_output", "query_bpf",
                           "modify", "fileno", "close" } do
        assert.is_function(ev[m], m)
      end
      ev:close()
    end)
  end)
end)
