-- read(2) decoding for every read_format, scaling, "never ran", and the
-- software counts that must be right.
local core = require "perfev.core"
local u = require "spec.support.util"
local compat = require "perfev.compat"

local h = u.h
local SW, FORMAT = core.SW, core.FORMAT
local TE, TR, ID, GROUP, LOST = FORMAT.TOTAL_TIME_ENABLED, FORMAT.TOTAL_TIME_RUNNING,
                                FORMAT.ID, FORMAT.GROUP, FORMAT.LOST

local function open(config, read_format, group, disabled)
  return assert(core.open(core.attr { type = "software", config = config,
                                      read_format = read_format or 0,
                                      disabled = disabled ~= false }, 0, -1, group))
end

local function fmt_name(f)
  local parts = {}
  for _, p in ipairs { { TE, "enabled" }, { TR, "running" }, { ID, "id" }, { GROUP, "group" },
                       { LOST, "lost" } } do
    if compat.band(f, p[1]) ~= 0 then parts[#parts + 1] = p[2] end
  end
  return #parts > 0 and table.concat(parts, "|") or "0"
end

describe("read", function()
  describe("every read_format", function()
    for f = 0, 31 do
      it("decodes " .. fmt_name(f), function()
        local ev = open(SW.PAGE_FAULTS, f)
        ev:enable()
        h.touch_pages(20)
        ev:disable()
        local raw = ev:read_raw()
        local entry = raw
        if compat.band(f, GROUP) ~= 0 then
          assert.equal(1, raw.nr)
          entry = raw[1]
          assert.is_table(entry)
        else
          assert.is_nil(raw.nr)
        end
        assert.is_true(entry.value >= 20, "value " .. tostring(entry.value))
        if compat.band(f, ID) ~= 0 then assert.equal(ev:id(), entry.id) else assert.is_nil(entry.id) end
        if compat.band(f, LOST) ~= 0 then assert.equal(0, entry.lost) else assert.is_nil(entry.lost) end
        if compat.band(f, TE) ~= 0 then
          assert.is_true(raw.time_enabled > 0)
        else
          assert.is_nil(raw.time_enabled)
        end
        if compat.band(f, TR) ~= 0 then
          assert.is_true(raw.time_running > 0)
          if compat.band(f, TE) ~= 0 then assert.is_true(raw.time_running <= raw.time_enabled) end
        else
          assert.is_nil(raw.time_running)
        end
        -- read(): the count (scaled; equal here: software events never multiplex)
        if compat.band(f, GROUP) ~= 0 then
          local t = ev:read()
          assert.is_table(t)
          assert.equal(entry.value, t[1])
          assert.equal(compat.band(f, ID) ~= 0 and ev:id() or 0, t.ids[1])
          assert.equal(raw.time_enabled, t.time_enabled)
          assert.equal(raw.time_running, t.time_running)
        else
          local n, enabled, running = ev:read()
          assert.equal(entry.value, n)
          assert.equal(raw.time_enabled, enabled)
          assert.equal(raw.time_running, running)
        end
        ev:close()
      end)
    end
  end)

  it("a count that never ran is false (not 0) when running time is read", function()
    local ev = open(SW.TASK_CLOCK, compat.bor(TE, TR))
    local n, enabled, running = ev:read()
    assert.is_false(n)
    assert.equal(0, enabled)
    assert.equal(0, running)
    -- without the running time the kernel's 0 is all there is
    local plain = open(SW.TASK_CLOCK, 0)
    assert.equal(0, plain:read())
    ev:close(); plain:close()
  end)

  it("a group-format read of a leader gives every member, ids matching id()", function()
    local leader = open(SW.PAGE_FAULTS, compat.bor(GROUP, ID, TE, TR))
    local m1 = open(SW.TASK_CLOCK, ID, leader, false)
    local m2 = open(SW.CONTEXT_SWITCHES, ID, leader, false)
    leader:enable()
    h.touch_pages(40)
    h.sleep_ms(2)
    leader:disable()
    local t = leader:read()
    assert.equal(3, #t)
    assert.same({ leader:id(), m1:id(), m2:id() }, t.ids)
    assert.is_true(t[1] >= 40, "page faults " .. t[1])
    assert.is_true(t[2] > 0, "task-clock " .. t[2])
    assert.is_true(t[3] >= 1, "context switches " .. t[3])
    assert.is_true(t.time_enabled > 0 and t.time_running > 0)
    local raw = leader:read_raw()
    assert.equal(3, raw.nr)
    for i, ev in ipairs { leader, m1, m2 } do
      assert.equal(ev:id(), raw[i].id)
      assert.equal(t[i], raw[i].value)
    end
    -- a member reads its own count alone
    assert.equal(t[2], m1:read())
    m2:close(); m1:close(); leader:close()
  end)

  -- Software events always fit on their PMU: neither case arises here.
  pending("a multiplexed count read scaled by the kernel's times: needs a hardware PMU with "
          .. "fewer counters than open events (core.scale is tested below)")
  pending("the 0-byte read of a pinned group in error state: needs a hardware PMU that "
          .. "cannot hold the pinned group")

  describe("core.scale", function()
    it("scales value * enabled / running", function()
      assert.equal(200, core.scale(100, 200, 100))
      assert.equal(150, core.scale(100, 3, 2))
      assert.equal(100, core.scale(100, 7, 7))
      assert.equal(33, core.scale(100, 1, 3))
    end)

    it("leaves a count that never ran alone and does not overflow", function()
      assert.equal(100, core.scale(100, 50, 0))
      -- 2^62 * 4 / 2 = 2^63: a u64 above 2^63 reads as a negative integer
      assert.equal(compat.mininteger, core.scale(compat.lshift(1, 62), 4, 2))
      -- 10^18 * 10^18 / 10^18 needs 128 bits in between
      assert.equal(compat.dec64("1000000000000000000"), core.scale(compat.dec64("1000000000000000000"),
          compat.dec64("1000000000000000000"),
                                                  compat.dec64("1000000000000000000")))
      assert.equal(compat.dec64("3000000000000000000"), core.scale(compat.dec64("1000000000000000000"),
          compat.dec64("3000000000000000000"),
                                                  compat.dec64("1000000000000000000")))
      -- beyond u64: saturates at its maximum (-1 as a Lua integer)
      assert.equal(-1, core.scale(compat.lshift(1, 62), compat.lshift(1, 40), 1))
    end)
  end)

  describe("software counts", function()
    it("page-faults counts at least the N fresh pages touched", function()
      local ev = open(SW.PAGE_FAULTS, compat.bor(TE, TR))
      for _, n in ipairs { 1, 64, 1000 } do
        ev:reset()
        ev:enable()
        h.touch_pages(n)
        ev:disable()
        local count = ev:read()
        assert.is_true(count >= n, ("%d pages touched, %d faults"):format(n, count))
      end
      ev:close()
    end)

    it("context-switches counts at least one across a sleep", function()
      local ev = open(SW.CONTEXT_SWITCHES, compat.bor(TE, TR))
      ev:enable()
      h.sleep_ms(10)
      ev:disable()
      assert.is_true(ev:read() >= 1)
      -- os.execute waits for a child: a blocking wait
      ev:reset()
      ev:enable()
      os.execute("sleep 0.01")
      ev:disable()
      assert.is_true(ev:read() >= 1)
      ev:close()
    end)

    it("task-clock lies within the wall time and near the cpu time", function()
      local ev = open(SW.TASK_CLOCK, compat.bor(TE, TR))
      local c0, w0 = os.clock(), h.now_ns()
      ev:enable()
      u.spin(30e6)
      ev:disable()
      local c1, w1 = os.clock(), h.now_ns()
      local count, enabled = ev:read()
      local wall, cpu = w1 - w0, (c1 - c0) * 1e9
      assert.is_true(count <= wall, ("task-clock %d ns > wall %d ns"):format(count, wall))
      assert.is_true(count <= enabled + 1e6)
      -- the spin ran on a cpu for most of its time, unless the machine is starved
      assert.is_true(count >= 1e6, "task-clock " .. count)
      assert.is_true(math.abs(count - cpu) <= 0.25 * cpu + 2e6,
                     ("task-clock %d ns, process cpu time %.0f ns"):format(count, cpu))
    end)

    it("a sleep adds wall time, not task-clock", function()
      local ev = open(SW.TASK_CLOCK, compat.bor(TE, TR))
      local w0 = h.now_ns()
      ev:enable()
      h.sleep_ms(50)
      ev:disable()
      local wall = h.now_ns() - w0
      local count = ev:read()
      assert.is_true(wall >= 50e6, "wall " .. wall)
      assert.is_true(count < 25e6, "task-clock " .. count .. " across a 50 ms sleep")
      ev:close()
    end)

    it("reset brings a count to 0 (disabled) or near 0 (running)", function()
      local ev = open(SW.TASK_CLOCK, compat.bor(TE, TR))
      ev:enable()
      u.spin(5e6)
      ev:disable()
      assert.is_true(ev:read() >= 1e5)
      ev:reset()
      assert.equal(0, (ev:read()))
      ev:enable()
      u.spin(20e6)
      local before = ev:read()
      ev:reset()
      local after = ev:read()
      ev:disable()
      assert.is_true(after < before / 2, ("before %d, after reset %d"):format(before, after))
      ev:close()
    end)

    it("a disabled event does not count", function()
      local pf = open(SW.PAGE_FAULTS, compat.bor(TE, TR))
      local tc = open(SW.TASK_CLOCK, compat.bor(TE, TR))
      h.touch_pages(100)
      u.spin(2e6)
      assert.is_false((pf:read()))
      assert.is_false((tc:read()))
      pf:enable(); tc:enable()
      h.touch_pages(10)
      pf:disable(); tc:disable()
      local p, t = pf:read(), tc:read()
      h.touch_pages(100)
      u.spin(2e6)
      assert.equal(p, pf:read())
      assert.equal(t, tc:read())
      pf:close(); tc:close()
    end)
  end)
end)
