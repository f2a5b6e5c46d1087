-- The mmap ring buffer against the kernel: software sampling (cpu-clock,
-- task-clock) of a Lua workload in this process, side-band records, poll,
-- wrap-around and loss.
local perfev = require "perfev"
local u = require "spec.support.util"
local tbc = require "spec.support.tbc"
local compat = require "perfev.compat"

local PID = u.pid()

local function sampler(fields, opts)
  local t = { type = "software", config = "cpu-clock", sample_period = 200000,
              sample_type = { "ip", "tid", "time", "cpu", "period" }, disabled = true }
  for k, v in pairs(fields or {}) do t[k] = v end
  return assert(perfev.open(t, opts))
end

local collect, of_type = u.collect, u.of_type

describe("perfev ring", function()
  describe("ev:mmap", function()
    it("maps 8 data pages by default; info() shows the metadata page", function()
      local ev = sampler()
      local ring = assert(ev:mmap())
      local info = ring:info()
      assert.equal(8 * info.data_offset, info.data_size)   -- the data follows one page
      assert.equal(0, info.data_head)
      assert.equal(0, info.data_tail)
      assert.is_false(info.cap_user_rdpmc)   -- no hardware PMU here
      assert.is_number(info.version)
      assert.is_number(info.time_enabled)
      ring:close(); ev:close()
    end)

    it("takes a power of two; anything else is an error naming the rule", function()
      local ev = sampler()
      for _, bad in ipairs { 3, 6, -1, compat.lshift(1, 21) } do
        local ok, err = pcall(ev.mmap, ev, bad)
        assert.is_false(ok)
        assert.matches("power of two", err)
      end
      for _, good in ipairs { 1, 2, 16 } do
        local ring = assert(ev:mmap(good))
        assert.equal(good * ring:info().data_offset, ring:info().data_size)
        ring:close()
      end
      ev:close()
    end)

    it("0 pages maps the metadata page alone: no records", function()
      local ev = sampler()
      local ring = assert(ev:mmap(0))
      ev:enable(); u.burn(20); ev:disable()
      assert.same({}, collect(ring))
      assert.is_true(ring:info().time_enabled > 0)
      ring:close(); ev:close()
    end)

    it("keeps its event alive, and is unmapped by close, __close and __gc", function()
      local ring = assert(sampler():mmap(1))
      collectgarbage(); collectgarbage()
      local ev = ring:event()
      assert.is_false(ev:closed())
      ev:enable(); u.burn(10); ev:disable()
      assert.is_true(#collect(ring) > 0)
      assert.is_true(ring:close())
      assert.is_true(ring:closed())
      assert.is_true(ring:close())   -- twice is fine
      assert.has_error(function() ring:records() end, "perfev.ring: attempt to use a closed ring")
      if tbc.available then
        tbc.run([[
          local ev, assert = ...
          do
            local r2 <close> = assert(ev:mmap(1))
            assert.is_false(r2:closed())
          end
        ]], ev, assert)
      end
      local maps_before = u.read_file("/proc/self/maps")
      local _, n_before = maps_before:gsub("perf_event", "")
      for _ = 1, 20 do assert(ev:mmap(1)) end
      collectgarbage(); collectgarbage()
      local _, n_after = u.read_file("/proc/self/maps"):gsub("perf_event", "")
      assert.equal(n_before, n_after)
      ev:close()
    end)
  end)

  describe("sampling a Lua workload", function()
    for _, clock in ipairs { "cpu-clock", "task-clock" } do
      it(clock .. ": samples of this process, every field this machine supports", function()
        local ev = sampler { config = clock, sample_type = { "identifier", "ip", "tid", "time", "addr",
          "id", "stream_id", "cpu", "period", "read", "callchain", "regs_user", "stack_user",
          "phys_addr", "cgroup", "data_page_size", "code_page_size" },
          sample_regs_user = { "ax", "sp", "ip" }, sample_stack_user = 256,
          read_format = { "total_time_enabled", "total_time_running", "id" } }
        local ring = assert(ev:mmap(64))
        ev:enable(); u.burn(100); ev:disable()
        local samples = of_type(collect(ring), "sample")
        assert.is_true(#samples >= 10, #samples .. " samples")
        local last = 0
        for _, s in ipairs(samples) do
          assert.equal(PID, s.pid)
          assert.equal(PID, s.tid)
          assert.equal(ev:id(), s.id)
          assert.equal(200000, s.period)
          assert.is_true(s.time >= last)
          last = s.time
          assert.is_true(s.ip ~= 0)
          assert.is_true(s.cpu >= 0)
          assert.is_table(s.callchain)
          assert.equal(ev:id(), s.read.id)
          assert.is_true(s.read.time_enabled > 0)
          if s.cpumode == "user" then
            assert.equal(2, s.regs_user.abi)        -- 64-bit
            assert.equal(s.ip, s.regs_user.ip)
            assert.equal(256, #s.stack_user)
            assert.is_true(s.dyn_size <= 256)
          end
          assert.is_true(s.code_page_size >= 4096 or s.code_page_size == 0)
        end
        ring:close(); ev:close()
      end)
    end

    it("reads while the kernel keeps writing, across the end of a 1-page ring: records come back whole", function()
      local ev = sampler { sample_period = 100000, sample_type = { "ip", "tid", "time", "period", "callchain" },
                           wakeup_events = 1 }
      local ring = assert(ev:mmap(1))
      local size = ring:info().data_size
      local pos, wrapped, n = 0, 0, 0
      ev:enable()
      for _ = 1, 60 do
        u.burn(3)
        for rec in ring:records() do
          if rec.type == "sample" then
            n = n + 1
            assert.equal(PID, rec.tid)
            assert.equal(100000, rec.period)
          end
          if pos % size + rec.size > size then wrapped = wrapped + 1 end
          pos = pos + rec.size
        end
      end
      ev:disable()
      assert.equal(ring:info().data_tail, pos)
      assert.is_true(n > 50, n .. " samples")
      assert.is_true(wrapped > 0, "no record wrapped around")
      ring:close(); ev:close()
    end)

    it("a 1-page ring under a high rate reports its losses; what it delivers is intact", function()
      local ev = sampler { sample_period = 100000, sample_type = { "ip", "tid", "time", "period" } }
      local ring = assert(ev:mmap(1))
      ev:enable(); u.burn(100)
      local recs = collect(ring)   -- frees the ring: the kernel reports what it dropped
      u.burn(20); ev:disable()
      collect(ring, recs)
      local lost = of_type(recs, "lost")
      assert.is_true(#lost >= 1, "no lost record")
      local total = 0
      for _, l in ipairs(lost) do total = total + l.lost; assert.equal(ev:id(), l.id) end
      assert.equal(total, ring:lost())
      assert.is_true(total > 100, total .. " lost")
      for _, s in ipairs(of_type(recs, "sample")) do
        assert.equal(PID, s.pid)
        assert.equal(100000, s.period)
      end
      ring:close(); ev:close()
    end)
  end)

  describe("several events", function()
    local ST = { "identifier", "ip", "tid", "period" }

    it("share one ring with ring:add; each record carries its event", function()
      local ev1 = sampler { sample_type = ST, sample_period = 200000 }
      local ev2 = sampler { config = "task-clock", sample_type = ST, sample_period = 300000 }
      local ring = assert(ev1:mmap(16))
      assert.is_true(ring:add(ev2))
      ev1:enable(); ev2:enable(); u.burn(100); ev1:disable(); ev2:disable()
      u.assert_routed(of_type(collect(ring), "sample"), ev1, 200000, ev2, 300000)
      ring:close(); ev1:close(); ev2:close()
    end)

    it("routes by stream_id when sample_type has STREAM_ID and no ID (as go-perf's rings)", function()
      local SST = { "ip", "tid", "time", "stream_id", "period" }
      local ev1 = sampler { sample_type = SST, sample_period = 200000 }
      local ev2 = sampler { config = "task-clock", sample_type = SST, sample_period = 300000 }
      local ring = assert(ev1:mmap(16))
      assert.is_true(ring:add(ev2))
      ev1:enable(); ev2:enable(); u.burn(100); ev1:disable(); ev2:disable()
      local n = {}
      for _, s in ipairs(of_type(collect(ring), "sample")) do
        assert.is_true(s.event == ev1 or s.event == ev2)
        assert.equal(s.event:id(), s.stream_id)      -- the kernel's event->id
        assert.is_nil(s.id)
        assert.equal(s.event == ev1 and 200000 or 300000, s.period)
        n[s.event] = (n[s.event] or 0) + 1
      end
      assert.is_true((n[ev1] or 0) > 5 and (n[ev2] or 0) > 5)
      ring:close(); ev1:close(); ev2:close()
    end)

    it("ring:add refuses routing by stream_id for inherited events (a child's stream_id is its own)", function()
      local SST = { "ip", "tid", "stream_id" }
      local ev1 = sampler { sample_type = SST }
      local ev2 = sampler { sample_type = SST, inherit = true }
      local ring = assert(ev1:mmap(1))
      local ok, err = pcall(ring.add, ring, ev2)
      assert.is_false(ok)
      assert.matches("STREAM_ID without inherit", err)
      ring:close(); ev1:close(); ev2:close()
    end)

    it("ring:add refuses an event whose records could not be told apart", function()
      local ev1 = sampler { sample_type = ST }
      local ev2 = sampler { sample_type = { "ip", "tid" } }
      local ring = assert(ev1:mmap(1))
      local ok, err = pcall(ring.add, ring, ev2)
      assert.is_false(ok)
      assert.matches("IDENTIFIER", err)
      ring:close(); ev1:close(); ev2:close()
    end)

    it("a group leader sampling with PERF_SAMPLE_READ reads its whole group", function()
      local leader = sampler { sample_type = { "identifier", "ip", "read" },
                               read_format = { "group", "id", "total_time_enabled" } }
      local member = assert(perfev.open({ type = "software", config = "page-faults" }, { group = leader }))
      local ring = assert(leader:mmap(16))
      leader:enable(true)
      for _ = 1, 50 do u.h.touch_pages(16); u.burn(2) end
      leader:disable(true)
      local samples = of_type(collect(ring), "sample")
      assert.is_true(#samples > 5)
      local faults = 0
      for _, s in ipairs(samples) do
        assert.equal(2, s.read.nr)
        assert.equal(leader:id(), s.read[1].id)
        assert.equal(member:id(), s.read[2].id)
        assert.is_true(s.read.time_enabled > 0)
        faults = math.max(faults, s.read[2].value)
      end
      assert.is_true(faults > 0)
      ring:close(); member:close(); leader:close()
    end)
  end)

  describe("side-band records of this process", function()
    it("comm (writing /proc/self/comm) and mmap with mmap_data, with sample_id_all", function()
      local ev = sampler({ sample_type = { "tid", "time" }, sample_id_all = true, comm = true,
                           mmap = true, mmap_data = true, mmap2 = true, task = true }, {})
      local ring = assert(ev:mmap(16))
      local old = u.read_file("/proc/self/comm"):gsub("%s+$", "")
      ev:enable()
      local f = assert(io.open("/proc/self/comm", "w"))
      f:write("perfev-test"); f:close()
      -- a data mapping of this process: another event's ring (malloc would
      -- do too, but not under valgrind, whose allocator maps differently)
      local other = sampler()
      local other_ring = assert(other:mmap(2))
      local len = other_ring:info().data_size + other_ring:info().data_offset
      u.burn(5)
      ev:disable()
      f = assert(io.open("/proc/self/comm", "w")); f:write(old); f:close()
      local recs = collect(ring)
      local comm = of_type(recs, "comm")
      assert.equal(1, #comm)
      assert.same({ PID, PID, "perfev-test" }, { comm[1].pid, comm[1].tid, comm[1].comm })
      assert.is_number(comm[1].time)   -- from the sample_id trailer
      local anon = false
      for _, m in ipairs(of_type(recs, "mmap2")) do
        assert.equal(PID, m.pid)
        if m.mmap_data and m.len == len then anon = m.filename end
      end
      assert.matches("perf_event", anon or "no mmap2 record for the new ring")
      other_ring:close(); other:close(); ring:close(); ev:close()
    end)
  end)

  describe("ring:poll", function()
    it("times out without data, and does not block with 0", function()
      local ev = sampler()
      local ring = assert(ev:mmap(1))
      local t0 = os.time()
      assert.same({ false, false }, { ring:poll(0) })
      local c0 = os.clock()
      assert.same({ false, false }, { ring:poll(50) })
      assert.is_true(os.clock() - c0 < 0.04)   -- slept, did not spin
      assert.is_true(os.time() - t0 < 5)
      ring:close(); ev:close()
    end)

    it("wakes up for data (wakeup_events)", function()
      local ev = sampler { wakeup_events = 1 }
      local ring = assert(ev:mmap(1))
      ev:enable(); u.burn(10); ev:disable()
      assert.is_true((ring:poll(1000)))
      assert.is_true(ring:pending() > 0)
      collect(ring)
      assert.equal(0, ring:pending())
      ring:close(); ev:close()
    end)

    it("reports POLLHUP when the monitored process exits", function()
      local p = assert(io.popen("echo $$; exec sleep 0.3", "r"))
      local child = assert(tonumber(p:read("l")))
      local ev = sampler({ config = "task-clock" }, { pid = child })
      local ring = assert(ev:mmap(1))
      local readable, hup
      for _ = 1, 50 do
        readable, hup = ring:poll(100)
        if hup then break end
      end
      p:close()
      assert.is_true(hup)
      assert.is_boolean(readable)
      ring:close(); ev:close()
    end)
  end)
end)
