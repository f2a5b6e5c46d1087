-- Tracepoints (PERF_TYPE_TRACEPOINT): exact syscall counts, set_filter,
-- and the bpf ioctls that only tracepoint-like events take.
local core = require "perfev.core"
local perfev = require "perfev"
local u = require "spec.support.util"

local E, h = u.E, u.h

-- mounts tracefs when it is absent (root)
local ID, WHY = u.tracepoint_id("syscalls", "sys_enter_getppid")

local function open_tp(id)
  return assert(core.open(core.attr { type = "tracepoint", config = id or ID, disabled = true,
                                      read_format = "total_time_enabled|total_time_running" },
                          0, -1))
end

local function counted(ev, n)
  ev:reset()
  ev:enable()
  h.getppid_loop(n)
  ev:disable()
  return (ev:read())
end

describe("tracepoint events", function()
  if not ID then
    pending("syscalls:sys_enter_getppid: " .. WHY)
    return
  end

  it("count syscalls:sys_enter_getppid exactly", function()
    local ev = open_tp()
    for _, n in ipairs { 1, 10, 1234, 100000 } do
      assert.equal(n, counted(ev, n))
    end
    ev:close()
  end)

  it("count nothing before enable and after disable", function()
    local ev = open_tp()
    h.getppid_loop(100)
    assert.is_false((ev:read()))
    assert.equal(50, counted(ev, 50))
    h.getppid_loop(100)
    assert.equal(50, ev:read())
    ev:close()
  end)

  it("sys_exit_getppid counts the same calls", function()
    local exit_id = u.tracepoint_id("syscalls", "sys_exit_getppid")
    assert.is_number(exit_id)
    local enter, exit = open_tp(), open_tp(exit_id)
    enter:enable(); exit:enable()
    h.getppid_loop(777)
    enter:disable(); exit:disable()
    assert.equal(777, enter:read())
    assert.equal(777, exit:read())
    enter:close(); exit:close()
  end)

  it("open through perfev.open with a table spec", function()
    local ev = assert(perfev.open { type = "tracepoint", config = ID, name = "getppid" })
    assert.equal("getppid", ev:name())
    local n = ev:measure(h.getppid_loop, 321)
    assert.equal(321, n)
    ev:close()
  end)

  describe("set_filter", function()
    it("a filter that matches nothing: count 0", function()
      local ev = open_tp()
      assert.is_true(ev:set_filter("common_pid == 0"))
      assert.equal(0, counted(ev, 500))
      ev:close()
    end)

    it("a filter on our own pid matches every call", function()
      local ev = open_tp()
      assert.is_true(ev:set_filter("common_pid == " .. u.pid()))
      assert.equal(500, counted(ev, 500))
      ev:close()
    end)

    it("a filter with a syntax error is EINVAL; the event still counts unfiltered", function()
      local ev = open_tp()
      local ok, msg, err = ev:set_filter("common_pid === ")
      assert.is_nil(ok)
      assert.equal(E.EINVAL, err, msg)
      assert.equal(42, counted(ev, 42))
      ev:close()
    end)

    it("a filter on an unknown field is EINVAL", function()
      local ev = open_tp()
      local ok, msg, err = ev:set_filter("no_such_field == 1")
      assert.is_nil(ok)
      assert.equal(E.EINVAL, err, msg)
      ev:close()
    end)

    it("a second filter on the same event is EEXIST (the kernel sets it once)", function()
      local ev = open_tp()
      assert.is_true(ev:set_filter("common_pid == 0"))
      local ok, msg, err = ev:set_filter("common_pid != 0")
      assert.is_nil(ok)
      assert.equal(E.EEXIST, err, msg)
      assert.equal(0, counted(ev, 100))   -- the first filter stays
      ev:close()
    end)
  end)

  describe("bpf ioctls", function()
    it("query_bpf on a tracepoint without programs: an empty list, 0", function()
      local ev = open_tp()
      local ids, n = ev:query_bpf()
      assert.same({}, ids)
      assert.equal(0, n)
      ids, n = ev:query_bpf(0)
      assert.same({}, ids)
      assert.equal(0, n)
      ev:close()
    end)

    it("set_bpf with a bad fd is EBADF, with a non-bpf fd EINVAL", function()
      local ev = open_tp()
      local ok, msg, err = ev:set_bpf(-1)
      assert.is_nil(ok)
      assert.equal(E.EBADF, err, msg)
      local other = open_tp()
      ok, msg, err = ev:set_bpf(other:fileno())
      assert.is_nil(ok)
      assert.equal(E.EINVAL, err, msg)
      other:close()
      -- nothing attached: still counts
      assert.equal(9, counted(ev, 9))
      ev:close()
    end)
  end)

  it("a tracepoint id that does not exist is refused with a message", function()
    local ev, msg, err = core.open(core.attr { type = "tracepoint", config = 0x7ffffff0 }, 0, -1)
    assert.is_nil(ev)
    assert.is_true(err == E.ENOENT or err == E.EINVAL, msg)
    assert.matches("^perf_event_open: ", msg)
  end)
end)
