-- Hardware breakpoints (PERF_TYPE_BREAKPOINT) on a variable of the spec
-- helper: counts are exact, one per access.
local core = require "perfev.core"
local u = require "spec.support.util"

local E, h = u.E, u.h
local X86 = u.arch():match("^x86") or u.arch():match("^i.86") or u.arch() == "amd64"

-- Every watch a test opens is closed after it, also when the test fails:
-- the debug registers are shared by the whole machine.
local opened = {}
local function watch(bp_type, addr, extra)
  local t = { type = "breakpoint", bp_type = bp_type, bp_addr = addr or h.addr(), bp_len = 8,
              disabled = true, read_format = "total_time_enabled|total_time_running" }
  for k, v in pairs(extra or {}) do t[k] = v end
  local ev, msg, err = core.open(core.attr(t), 0, -1)
  if ev then opened[#opened + 1] = ev end
  return ev, msg, err
end

-- Counting needs breakpoints that fire; the refusals need only the open.
local fires, why = u.breakpoints()
local opens = fires or not why:match("^a write breakpoint does not open")

local function counted(ev, fn, ...)
  ev:reset()
  ev:enable()
  fn(...)
  ev:disable()
  return (ev:read())
end

describe("breakpoint events", function()
  after_each(function()
    for i = #opened, 1, -1 do opened[i]:close(); opened[i] = nil end
  end)

  if not fires then
    pending("counting with breakpoints: " .. why)
  end
  if not opens then return end

  -- tests that count accesses run only where breakpoints fire
  local counts = fires and it or function() end

  counts("a write watch counts exactly the writes", function()
    local ev = assert(watch("w"))
    for _, n in ipairs { 0, 1, 7, 1000, 20000 } do
      assert.equal(n, counted(ev, h.write, n))
    end
    -- reads are not writes
    assert.equal(0, counted(ev, h.read, 500))
    assert.equal(250, counted(ev, function() h.read(100); h.write(250); h.read(100) end))
    ev:close()
  end)

  counts("a read-write watch counts every access", function()
    local ev = assert(watch("rw"))
    assert.equal(1500, counted(ev, function() h.write(1000); h.read(500) end))
    assert.equal(1, counted(ev, h.value))
    ev:close()
  end)

  if X86 then
    it("a read-only watch is EINVAL on x86 (its debug registers have no such mode)", function()
      local ev, msg, err = watch("r")
      assert.is_nil(ev)
      assert.equal(E.EINVAL, err, msg)
    end)
  else
    counts("a read-only watch counts exactly the reads", function()
      local ev = assert(watch("r"))
      assert.equal(500, counted(ev, function() h.write(1000); h.read(500) end))
      ev:close()
    end)
  end

  counts("two watches on one address count independently", function()
    local w, rw = assert(watch("w")), assert(watch("rw"))
    w:enable(); rw:enable()
    h.write(300); h.read(200)
    w:disable(); rw:disable()
    assert.equal(300, w:read())
    assert.equal(500, rw:read())
    w:close(); rw:close()
  end)

  counts("a watch on another address does not see these writes", function()
    local ev = assert(watch("w", h.addr2()))
    assert.equal(0, counted(ev, h.write, 100))
    assert.equal(100, counted(ev, h.write2, 100))
    ev:close()
  end)

  describe("modify", function()
    counts("moves a breakpoint to another address; counts follow it", function()
      local ev = assert(watch("w"))
      assert.equal(10, counted(ev, h.write, 10))
      local moved = ev:attr()
      moved.bp_addr = h.addr2()
      assert.is_true(ev:modify(moved))
      assert.equal(h.addr2(), ev:attr().bp_addr)
      assert.equal(0, counted(ev, h.write, 50))
      assert.equal(50, counted(ev, h.write2, 50))
      -- and back
      moved.bp_addr = h.addr()
      assert.is_true(ev:modify(moved))
      assert.equal(20, counted(ev, h.write, 20))
      assert.equal(0, counted(ev, h.write2, 20))
      ev:close()
    end)

    counts("changes the access type", function()
      local ev = assert(watch("w"))
      local a = ev:attr()
      a.bp_type = "rw"
      assert.is_true(ev:modify(a))
      assert.equal(30, counted(ev, function() h.write(10); h.read(20) end))
      ev:close()
    end)

    counts("refuses to change anything but the breakpoint fields (EINVAL)", function()
      local ev = assert(watch("w"))
      local a = ev:attr()
      a.exclude_user = true
      local ok, msg, err = ev:modify(a)
      assert.is_nil(ok)
      assert.equal(E.EINVAL, err, msg)
      -- the event still watches the old address
      assert.equal(5, counted(ev, h.write, 5))
      ev:close()
    end)
  end)

  it("a misaligned or oversized watch is refused", function()
    local ev, msg, err = watch("w", h.addr() + 1)   -- 8 bytes must be 8-aligned
    assert.is_nil(ev)
    assert.equal(E.EINVAL, err, msg)
    ev, msg, err = watch("w", h.addr(), { bp_len = 16 })
    assert.is_nil(ev)
    assert.is_true(err == E.EINVAL or err == E.EOPNOTSUPP, msg)
  end)

  counts("exclude_user hides user-space accesses", function()
    local ev = assert(watch("w", nil, { exclude_user = true }))
    assert.equal(0, counted(ev, h.write, 100))
    ev:close()
  end)
end)
