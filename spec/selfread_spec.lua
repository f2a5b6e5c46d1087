-- ring:read(): counts through the metadata page. The arithmetic of the
-- seqlock loop (rdpmc sign extension, offset, TSC extrapolation, time_zero,
-- cap_user_time_short) runs over synthetic pages through
-- core._selfread_compute and is checked against the man page's formulas
-- computed here in Lua; the read(2) fallback runs against the kernel.
local perfev = require "perfev"
local core = require "perfev.core"
local u = require "spec.support.util"
local compat = require "perfev.compat"

local compute = core._selfread_compute

-- The man page's formulas, in Lua: integers wrap modulo 2^64 and >> is
-- logical, as u64 arithmetic in C (compat's add/mul: exact on LuaJIT, where
-- rem * mult is beyond 2^53).
local function cyc_to_ns(cyc, mult, shift)
  local quot = compat.rshift(cyc, shift)
  local rem = compat.band(cyc, (compat.lshift(1, shift)) - 1)
  return compat.add(compat.mul(quot, mult), compat.rshift(compat.mul(rem, mult), shift))
end

local function sign_extend(v, width)
  v = compat.band(v, (compat.lshift(1, width)) - 1)
  if compat.band(v, compat.lshift(1, width - 1)) ~= 0 then v = v - (compat.lshift(1, width)) end
  return v
end

local function scale(count, enabled, running)
  local quot, rem = compat.idiv(count, running), count % running
  return compat.add(compat.mul(quot, enabled), compat.idiv(compat.mul(rem, enabled), running))
end

describe("ring:read, the self-read through the metadata page", function()
  describe("the arithmetic, on synthetic pages", function()
    it("cap_user_rdpmc and index: offset plus the counter sign-extended by pmc_width", function()
      -- 48-bit counter with its high bit set: a negative delta from offset
      local pmc = compat.bor(compat.lshift(1, 47), 12345)
      local r = compute({ cap_user_rdpmc = true, index = 3, pmc_width = 48, offset = compat.lshift(1, 50),
                          time_enabled = 500, time_running = 500 }, pmc, 0)
      assert.is_true(r.user)
      assert.equal(sign_extend(pmc, 48), r.pmc)
      assert.equal(12345 - (compat.lshift(1, 47)), r.pmc)
      assert.equal((compat.lshift(1, 50)) + 12345 - (compat.lshift(1, 47)), r.count)
      -- bits above the width are not part of the counter
      local r2 = compute({ cap_user_rdpmc = true, index = 1, pmc_width = 48, offset = 7 },
                         compat.bor(compat.lshift(0xffff, 48), 5), 0)
      assert.equal(12, r2.count)
      -- a positive value below the high bit is added as it is
      local r3 = compute({ cap_user_rdpmc = true, index = 1, pmc_width = 40, offset = -100 },
                         1000, 0)
      assert.equal(900, r3.count)
      -- width 64: no extension
      local r4 = compute({ cap_user_rdpmc = true, index = 1, pmc_width = 64, offset = 1 }, -2, 0)
      assert.equal(-1, r4.count)
    end)

    it("without cap_user_rdpmc, or with index 0, the counter is not read: read(2) is needed", function()
      for _, page in ipairs {
        { cap_user_rdpmc = false, index = 1, pmc_width = 48, offset = 77 },
        { cap_user_rdpmc = true, index = 0, pmc_width = 48, offset = 77 },
      } do
        local r = compute(page, 999, 0)
        assert.is_false(r.user)
        assert.equal(0, r.pmc)
        assert.equal(77, r.count)
      end
    end)

    it("cap_user_time, enabled ~= running: the TSC delta by quotient and remainder", function()
      local page = { cap_user_time = true, cap_user_rdpmc = true, index = 2, pmc_width = 48,
                     offset = 1000000, time_enabled = 3000000, time_running = 1000000,
                     time_shift = 31, time_mult = 1789569706, time_offset = -123456789012 }
      local cyc = 987654321098765
      local r = compute(page, 500000, cyc)
      local delta = page.time_offset + cyc_to_ns(cyc, page.time_mult, page.time_shift)
      assert.is_true(r.extrapolated)
      assert.equal(delta, r.delta)
      assert.equal(cyc, r.cyc)
      assert.equal(page.time_enabled + delta, r.enabled)
      assert.equal(page.time_running + delta, r.running)   -- on a counter: running too
      assert.equal(1500000, r.count)
      -- the man page's scaling, with a time_offset that makes delta 1 ms
      page.time_offset = 1000000 - cyc_to_ns(cyc, page.time_mult, page.time_shift)
      r = compute(page, 500000, cyc)
      assert.same({ 1000000, 4000000, 2000000 }, { r.delta, r.enabled, r.running })
      assert.equal(scale(1500000, 4000000, 2000000), r.scaled)
      assert.equal(3000000, r.scaled)
      -- the quotient/remainder form is cyc * mult / 2^shift without the
      -- 64-bit overflow of the product (here cyc * mult is near 2^81)
      local approx = cyc * (page.time_mult / 2 ^ 31)
      local ns = r.delta - page.time_offset
      assert.is_true(math.abs(ns - approx) / approx < 1e-12, ns .. " vs " .. approx)
    end)

    it("index 0: enabled advances, running does not (the event is off its counter)", function()
      local page = { cap_user_time = true, index = 0, offset = 600, time_enabled = 2000,
                     time_running = 1000, time_shift = 10, time_mult = compat.lshift(1, 10), time_offset = -50 }
      local r = compute(page, 0, 300)
      assert.equal(250, r.delta)   -- 300 cycles of 1 ns, less 50
      assert.equal(2250, r.enabled)
      assert.equal(1000, r.running)
      assert.equal(600, r.count)
      assert.equal(scale(600, 2250, 1000), r.scaled)
      assert.equal(1350, r.scaled)
    end)

    it("enabled == running, or no cap_user_time: no TSC read, no extrapolation", function()
      for _, page in ipairs {
        { cap_user_time = true, time_enabled = 10, time_running = 10, time_mult = 3, time_shift = 1 },
        { cap_user_time = false, time_enabled = 20, time_running = 10, time_mult = 3, time_shift = 1 },
      } do
        local r = compute(page, 0, compat.lshift(1, 40))
        assert.is_false(r.extrapolated)
        assert.equal(0, r.delta)
        assert.equal(page.time_enabled, r.enabled)
        assert.equal(page.time_running, r.running)
      end
    end)

    it("cap_user_time_short: a narrow TSC that wrapped is corrected from time_cycles", function()
      -- a 32-bit counter last seen at 0xfffffff0 by the kernel, now read as 0x10
      local page = { cap_user_time = true, cap_user_time_short = true, time_cycles = 0xfffffff0,
                     time_mask = 0xffffffff, time_enabled = 5, time_running = 1,
                     time_shift = 0, time_mult = 1, time_offset = -0xfffffff0 }
      local r = compute(page, 0, 0x10)
      assert.equal(0x100000010, r.cyc)   -- time_cycles + ((cyc - time_cycles) & mask)
      assert.equal(0x20, r.delta)        -- 32 cycles since the kernel's update
      assert.equal(5 + 0x20, r.enabled)
      -- without the bit the same fields give the uncorrected value
      page.cap_user_time_short = false
      assert.equal(0x10, compute(page, 0, 0x10).cyc)
    end)

    it("cap_user_time_zero: TSC to perf time and back, by the man page's two forms", function()
      local page = { cap_user_time_zero = true, time_zero = 1234567890123, time_shift = 24,
                     time_mult = 9915235, time_offset = 0 }
      local cyc = 5000000000000
      local r = compute(page, 0, cyc)
      local t = page.time_zero + cyc_to_ns(cyc, page.time_mult, page.time_shift)
      assert.equal(t, r.time)
      -- back: quot = time / mult, rem = time % mult,
      -- cyc = (quot << shift) + (rem << shift) / mult
      page.timestamp = t
      local back = compute(page, 0, cyc).cyc_of_timestamp
      local d = t - page.time_zero
      local quot, rem = compat.idiv(d, page.time_mult), d % page.time_mult
      assert.equal((compat.lshift(quot, page.time_shift)) + compat.idiv(compat.lshift(rem, page.time_shift),
          page.time_mult), back)
      -- the round trip loses less than one ns worth of cycles
      assert.is_true(math.abs(back - cyc) <= compat.idiv(compat.lshift(1, page.time_shift), page.time_mult) + 1)
    end)

    it("the seqlock: a pass during which lock moved is retried", function()
      local page = { lock = 4, cap_user_rdpmc = true, index = 1, pmc_width = 48, offset = 10 }
      assert.equal(1, compute(page, 5, 0).passes)
      for _, bumps in ipairs { 1, 3, 7 } do
        local r = compute(page, 5, 0, bumps)
        assert.equal(bumps + 1, r.passes)
        assert.equal(15, r.count)
      end
    end)

    it("an unknown page field is an error naming it", function()
      assert.has_error(function() compute({ time_mul = 1 }, 0, 0) end,
                       "_selfread_compute: unknown page field 'time_mul'")
      assert.has_error(function() compute({ offset = "x" }, 0, 0) end,
                       "_selfread_compute: field 'offset' must be an integer")
    end)
  end)

  describe("against the kernel (no hardware PMU here: read(2) fallback)", function()
    it("a task-clock ring of 0 data pages reads what ev:read() reads, between two reads", function()
      local ev = assert(perfev.open("task-clock"))
      local ring = assert(ev:mmap(0))
      local info = ring:info()
      assert.is_false(info.cap_user_rdpmc)
      assert.equal(0, info.index)
      ev:enable()
      for _ = 1, 20 do
        u.spin(100000)
        local a, ae, ar = ev:read()
        local b, be, br = ring:read()
        local c, ce, cr = ev:read()
        assert.is_true(a <= b and b <= c, ("%d <= %d <= %d"):format(a, b, c))
        assert.is_true(ae <= be and be <= ce)
        assert.is_true(ar <= br and br <= cr)
      end
      ev:disable()
      -- stopped: every read agrees
      assert.same({ ev:read() }, { ring:read() })
      ring:close(); ev:close()
    end)

    it("returns what ev:read() returns for every read_format: one value, or a group table", function()
      local ev = assert(perfev.open(perfev.attr { type = "software", config = "page-faults" }))
      local ring = assert(ev:mmap(0))
      u.h.touch_pages(8)
      assert.equal(1, select("#", ring:read()))
      assert.is_true(ring:read() >= 8)
      ring:close(); ev:close()
      local g = assert(perfev.group { "task-clock", "page-faults" })
      local leader = g:event(1)
      local gring = assert(leader:mmap(0))
      g:enable(); u.h.touch_pages(4); g:disable()
      local t = gring:read()
      assert.is_table(t)
      assert.same(leader:read(), t)
      gring:close(); g:close()
    end)

    it("a closed event: read raises (its fd is gone)", function()
      local ev = assert(perfev.open("task-clock"))
      local ring = assert(ev:mmap(0))
      ev:close()
      assert.has_error(function() ring:read() end, "perfev.ring: its event is closed")
      ring:close()
    end)

    it("rdpmc against a hardware counter", function()
      local ev, err = perfev.open("instructions:u")
      if not ev then
        pending("needs a hardware PMU (this machine: " .. tostring(err) .. ")")
        return
      end
      local ring = assert(ev:mmap(0))
      if not ring:info().cap_user_rdpmc then
        ring:close(); ev:close()
        pending("the kernel does not allow rdpmc here (/sys/devices/cpu/rdpmc)")
        return
      end
      ev:enable()
      local a = ev:read()
      local b = ring:read()
      local c = ev:read()
      ev:disable()
      assert.is_true(a <= b and b <= c)
      ring:close(); ev:close()
    end)
  end)
end)
