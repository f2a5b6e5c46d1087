-- Overwrite rings and ring:snapshot(): write_backward sampling against the
-- kernel (a small ring that wraps many times while Lua runs), and the walk
-- over synthetic backward rings built here (records across the end of the
-- area, a record partly overwritten, ring never written).
local perfev = require "perfev"
local core = require "perfev.core"
local u = require "spec.support.util"
local compat = require "perfev.compat"

local PID = u.pid()
local pack = compat.pack

-- A cpu-clock sampler writing backward, with times on CLOCK_MONOTONIC so
-- that they compare with h.now_ns().
local function backward_sampler(fields, opts)
  local t = { type = "software", config = "cpu-clock", sample_period = 100000,
              sample_type = { "ip", "tid", "time", "period" }, write_backward = true,
              use_clockid = true, clockid = "monotonic", disabled = true }
  for k, v in pairs(fields or {}) do t[k] = v end
  return assert(perfev.open(t, opts))
end

local function sizes(recs)
  local total, largest = 0, 0
  for _, r in ipairs(recs) do
    total = total + r.size
    largest = math.max(largest, r.size)
  end
  return total, largest
end

describe("perfev overwrite rings", function()
  describe("write_backward sampling (the kernel)", function()
    it("snapshot: a full ring's worth of whole records, newest first, all after the overwrite began", function()
      local ev = backward_sampler()
      local ring = assert(ev:mmap(1))
      local size = ring:info().data_size
      assert.is_true(ring:info().overwrite)
      assert.is_true(ring:info().write_backward)
      ev:enable()
      u.burn(30)
      local mark = u.h.now_ns()
      u.burn(60)   -- ~600 samples of 40 bytes: the 4 KiB ring wraps several times after mark
      local snap = assert(ring:snapshot())   -- pauses, copies, resumes: still enabled
      local head = ring:info().data_head
      assert.is_true(-head > 4 * size, "the ring wrapped " .. (-head / size) .. " times")
      assert.is_true(#snap > 10, #snap .. " records")
      local total, largest = sizes(snap)
      -- bounded by the ring, and full: the walk stops only at a record
      -- that is not whole, which is smaller than the largest there is
      assert.is_true(total <= size, total .. " bytes")
      assert.is_true(total > size - largest, total .. " bytes of " .. size)
      local last = math.huge
      for i, r in ipairs(snap) do
        assert.equal("sample", r.type)
        assert.equal(40, r.size)   -- header + ip, pid/tid, time, period
        assert.equal(PID, r.pid)
        assert.equal(PID, r.tid)
        assert.equal(100000, r.period)
        assert.is_true(r.ip ~= 0)
        assert.is_true(r.time < last, "record " .. i .. " is not older than the one before")
        last = r.time
        -- the ring holds ~10 ms of samples: everything older was overwritten
        assert.is_true(r.time > mark, "record " .. i .. " predates the overwrite")
      end
      assert.is_true(snap[1].time <= u.h.now_ns())

      -- resumed: the kernel keeps writing after a snapshot
      u.burn(20)
      ev:disable()
      local later = assert(ring:snapshot())
      assert.is_true(later[1].time > snap[1].time)
      ring:close(); ev:close()
    end)

    it("a snapshot consumes nothing: two snapshots of a stopped event are the same", function()
      local ev = backward_sampler()
      local ring = assert(ev:mmap(2))
      ev:enable(); u.burn(50); ev:disable()
      local a = assert(ring:snapshot())
      local b = assert(ring:snapshot { pause = false })
      assert.is_true(#a > 0)
      assert.equal(#a, #b)
      for i = 1, #a do assert.equal(a[i].time, b[i].time) end
      assert.equal(0, ring:lost())
      ring:close(); ev:close()
    end)

    it("samples dropped while output is paused come back as a lost record, counted once", function()
      local ev = backward_sampler { sample_type = { "identifier", "ip", "tid", "time", "period" } }
      local ring = assert(ev:mmap(16))
      ev:enable(); u.burn(5)
      assert.is_true(ev:pause_output(true))
      u.burn(30)   -- ~300 samples dropped
      assert.is_true(ev:pause_output(false))
      u.burn(5); ev:disable()
      local lost = {}
      for _, r in ipairs(assert(ring:snapshot())) do
        if r.type == "lost" then lost[#lost + 1] = r end
      end
      assert.equal(1, #lost)
      assert.equal(ev:id(), lost[1].id)
      assert.is_true(lost[1].lost > 100, lost[1].lost .. " lost")
      -- ring:lost() counts what records() consumes; snapshots consume nothing
      assert.equal(#assert(ring:snapshot()), #assert(ring:snapshot()))
      assert.equal(0, ring:lost())
      ring:close(); ev:close()
    end)

    it("before the ring wraps: every record since enable, oldest last", function()
      local ev = backward_sampler()
      local ring = assert(ev:mmap(16))   -- 64 KiB: ~1600 samples, far more than 20 ms gives
      local t0 = u.h.now_ns()
      ev:enable(); u.burn(20); ev:disable()
      local written = -ring:info().data_head
      assert.is_true(written > 0 and written < ring:info().data_size)
      assert.equal(written, ring:pending())
      local snap = assert(ring:snapshot())
      assert.equal(written, (sizes(snap)))   -- exactly what the kernel wrote, stopped at zeroes
      assert.is_true(snap[#snap].time > t0)
      ring:close(); ev:close()
    end)

    it("an empty backward ring gives an empty snapshot", function()
      local ev = backward_sampler()
      local ring = assert(ev:mmap(1))
      assert.same({}, ring:snapshot())
      assert.equal(0, ring:pending())
      ring:close(); ev:close()
    end)

    it("two backward events share one ring (ring:add): each record carries its event", function()
      local ST = { "identifier", "ip", "tid", "time", "period" }
      local ev1 = backward_sampler { sample_type = ST, sample_period = 200000 }
      local ev2 = backward_sampler { config = "task-clock", sample_type = ST, sample_period = 300000 }
      local ring = assert(ev1:mmap(16))
      assert.is_true(ring:add(ev2))
      ev1:enable(); ev2:enable(); u.burn(60); ev1:disable(); ev2:disable()
      u.assert_routed(assert(ring:snapshot()), ev1, 200000, ev2, 300000)
      ring:close(); ev1:close(); ev2:close()
    end)

    it("a forward overwrite ring is mapped, but snapshot() refuses it, naming write_backward", function()
      local ev = backward_sampler { write_backward = false }
      local ring = assert(ev:mmap(1, { overwrite = true }))
      ev:enable(); u.burn(60); ev:disable()
      local info = ring:info()
      assert.is_true(info.overwrite)
      assert.is_false(info.write_backward)
      -- the kernel wrote on without waiting for data_tail
      assert.is_true(info.data_head > 2 * info.data_size)
      assert.equal(0, info.data_tail)
      assert.equal(info.data_size, ring:pending())
      assert.has_error(function() ring:snapshot() end,
        "ring:snapshot: a forward overwrite ring loses its record boundaries once it wraps: "
        .. "open the event with write_backward = true")
      ring:close(); ev:close()
    end)
  end)

  describe("mistakes", function()
    it("records() on an overwrite ring, snapshot() on a read-write ring", function()
      local ev = backward_sampler()
      local ring = assert(ev:mmap(1))
      assert.has_error(function() ring:records() end,
        "perfev.ring: an overwrite ring (mmap overwrite, or write_backward) is read with "
        .. "ring:snapshot(), not records()")
      ring:close(); ev:close()
      local fwd = backward_sampler { write_backward = false }
      local rw = assert(fwd:mmap(1))
      assert.has_error(function() rw:snapshot() end,
        "ring:snapshot: this ring is read-write, read by records(); snapshot() reads an "
        .. "overwrite ring of a write_backward event")
      rw:close(); fwd:close()
    end)

    it("options: overwrite = false on a write_backward event, unknown options, wrong types", function()
      local ev = backward_sampler()
      local ok, err = pcall(ev.mmap, ev, 1, { overwrite = false })
      assert.is_false(ok)
      assert.matches("write_backward event's ring is an overwrite ring", err)
      ok, err = pcall(ev.mmap, ev, 1, { overwrites = true })
      assert.is_false(ok)
      assert.matches("unknown option 'overwrites'", err)
      ok, err = pcall(ev.mmap, ev, 1, { overwrite = 1 })
      assert.is_false(ok)
      assert.matches("'overwrite' must be a boolean", err)
      local ring = assert(ev:mmap(1, { overwrite = true }))
      ok, err = pcall(ring.snapshot, ring, { paused = true })
      assert.is_false(ok)
      assert.matches("unknown option 'paused'", err)
      ok, err = pcall(ring.snapshot, ring, { pause = "yes" })
      assert.is_false(ok)
      assert.matches("'pause' must be a boolean", err)
      ring:close(); ev:close()
    end)

    it("a closed event cannot be paused: snapshot raises; with pause = false it reads", function()
      local ev = backward_sampler()
      local ring = assert(ev:mmap(1))
      ev:enable(); u.burn(10); ev:disable()
      ev:close()
      assert.has_error(function() ring:snapshot() end, "perfev.ring: its event is closed")
      assert.is_true(#ring:snapshot { pause = false } > 0)
      ring:close()
      assert.has_error(function() ring:snapshot() end, "perfev.ring: attempt to use a closed ring")
    end)
  end)

  describe("the walk over synthetic backward rings", function()
    local attr = perfev.attr { sample_type = { "ip", "time" } }
    -- a sample of this attr: 24 bytes
    local function sample(ip, time)
      return pack("=I4I2I2I8I8", core.RECORD.SAMPLE, 0, 24, ip, time)
    end
    local function walk(area, head)
      local out = {}
      for i, r in ipairs(core._snapshot_walk(area, head, attr)) do out[i] = { r.ip, r.time } end
      return out
    end

    it("reads from data_head upward and stops at ring never written", function()
      -- 128 bytes; the kernel wrote 3 records downward from 0: head = -72
      local area = ("\0"):rep(56) .. sample(3, 30) .. sample(2, 20) .. sample(1, 10)
      assert.same({ { 3, 30 }, { 2, 20 }, { 1, 10 } }, walk(area, -72))
    end)

    it("a record across the end of the area comes back whole", function()
      -- head at 112: the newest record's last 8 bytes are at the start
      local rec = sample(9, 90)
      local area = rec:sub(17) .. sample(8, 80) .. ("\0"):rep(128 - 8 - 24 - 16) .. rec:sub(1, 16)
      assert.equal(128, #area)
      assert.same({ { 9, 90 }, { 8, 80 } }, walk(area, 112 - 128 * 5))
    end)

    it("stops before the oldest record when its end was overwritten by the newest", function()
      -- 64 bytes, head at 0: records at 0 and 24, then a record at 48 whose
      -- 24 bytes would run 8 bytes into the newest
      local area = sample(5, 50) .. sample(4, 40) .. sample(3, 30):sub(1, 16)
      assert.equal(64, #area)
      assert.same({ { 5, 50 }, { 4, 40 } }, walk(area, -64 * 3))
    end)

    it("a ring's worth exactly: every record, none twice", function()
      local area = sample(1, 4) .. sample(2, 3) .. sample(3, 2) .. sample(4, 1) .. ("\0"):rep(32)
      area = area:sub(1, 96) .. pack("=I4I2I2I8", 99, 0, 32, 0) .. ("\0"):rep(16)   -- 128 bytes
      local recs = core._snapshot_walk(area, -128, attr)
      assert.equal(5, #recs)
      for i = 1, 4 do assert.same({ i, 5 - i }, { recs[i].ip, recs[i].time }) end
      assert.equal(99, recs[5].type)   -- an unknown type, whole: still a record
      assert.equal(32, recs[5].size)
    end)

    it("a header of size below 8 ends the walk; the area must be a power of two", function()
      local area = sample(1, 1) .. pack("=I4I2I2", 9, 0, 4) .. ("\0"):rep(32)
      assert.same({ { 1, 1 } }, walk(area, 0))
      assert.has_error(function() core._snapshot_walk(("\0"):rep(48), 0, attr) end)
    end)
  end)
end)
