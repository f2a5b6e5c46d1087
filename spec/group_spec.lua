-- perfev.group: members read together by one read(2) of their leader.
local perfev = require "perfev"
local core = require "perfev.core"
local u = require "spec.support.util"
local compat = require "perfev.compat"

local E, h = u.E, u.h
local FORMAT = core.FORMAT

local NAMES = { "task-clock", "page-faults", "context-switches" }

local function work()
  h.touch_pages(64)
  h.sleep_ms(2)
  u.spin(2e6)
end

describe("perfev.group", function()
  it("one read gives every member, by name and by position", function()
    local g = assert(perfev.group(NAMES))
    local r = g:measure(work)
    assert.is_true(r["task-clock"] >= 1e6, "task-clock " .. tostring(r["task-clock"]))
    assert.is_true(r["page-faults"] >= 64, "page-faults " .. tostring(r["page-faults"]))
    assert.is_true(r["context-switches"] >= 1)
    for i, name in ipairs(NAMES) do assert.equal(r[i], r[name], name) end
    assert.is_true(r.time_enabled > 0)
    assert.is_true(r.time_running > 0 and r.time_running <= r.time_enabled)
    -- software events never multiplex: the raw values are the counts
    for i = 1, #NAMES do assert.equal(r[i], r.raw[i]) end
    g:close()
  end)

  it("is one read(2) of the leader; member ids match ev:id()", function()
    local g = assert(perfev.group(NAMES))
    g:measure(work)
    local leader = g:leader()
    local raw = leader:read_raw()
    assert.equal(#NAMES, raw.nr)
    local t = leader:read()
    for i, ev in ipairs(g:events()) do
      assert.is_true(ev:id() > 0)
      assert.equal(ev:id(), raw[i].id)
      assert.equal(ev:id(), t.ids[i])
    end
    -- and g:read agrees with that single read
    local r = g:read()
    for i = 1, #NAMES do assert.equal(raw[i].value, r.raw[i]) end
    g:close()
  end)

  it("the leader opens disabled: nothing counts before g:enable()", function()
    local g = assert(perfev.group(NAMES))
    work()
    local r = g:read()
    for i = 1, #NAMES do assert.is_false(r[i], NAMES[i]) end
    assert.equal(0, r.time_running)
    g:enable()
    h.touch_pages(16)
    g:disable()
    r = g:read()
    assert.is_true(r["page-faults"] >= 16)
    -- disabled: the counts stay
    local before = r["page-faults"]
    h.touch_pages(16)
    assert.equal(before, g:read()["page-faults"])
    g:reset()
    r = g:read()
    for i = 1, #NAMES do assert.equal(0, r.raw[i], NAMES[i]) end
    g:close()
  end)

  it("g:read(r) refills the same table and allocates nothing", function()
    local g = assert(perfev.group(NAMES))
    g:enable()
    local r = g:read()
    assert.is_true(rawequal(r, g:read(r)))
    -- one loop warmed up, then measured: on LuaJIT the heap also holds the
    -- traces the JIT compiles, which a loop first run while measured would
    -- count (about 2 KiB, whatever the number of reads). A full collection
    -- shrinks the thread's stack and frees its spare call frames (Lua 5.4),
    -- which the first calls after it allocate again (how much depends on the
    -- runner's depth): a few more refills after it, before the measure.
    local function refill(n) for _ = 1, n do g:read(r) end end
    refill(1000)
    collectgarbage()
    collectgarbage()
    collectgarbage("stop")
    refill(100)
    local before = collectgarbage("count")
    refill(10000)
    local grown = collectgarbage("count") - before
    collectgarbage("restart")
    g:disable()
    assert.equal(0, grown, ("%.3f KiB allocated by 10000 refills"):format(grown))
    assert.is_true(r["task-clock"] > 0)
    g:close()
  end)

  it("g:read(r) into a caller's own table makes names work on it", function()
    local g = assert(perfev.group(NAMES))
    g:measure(work)
    local mine = {}
    assert.is_true(rawequal(mine, g:read(mine)))
    assert.is_true(mine["page-faults"] >= 64)
    assert.equal(mine[2], mine["page-faults"])
    g:close()
  end)

  it("event(), events(), names(), leader()", function()
    local g = assert(perfev.group(NAMES))
    assert.same(NAMES, g:names())
    local evs = g:events()
    assert.equal(#NAMES, #evs)
    assert.is_true(rawequal(evs[1], g:leader()))
    assert.is_true(rawequal(evs[2], g:event(2)))
    assert.is_true(rawequal(evs[2], g:event("page-faults")))
    assert.is_nil(g:event("nosuch"))
    assert.is_true(rawequal(evs[2], g:event("faults")))          -- an alias of page-faults
    assert.is_true(rawequal(evs[2], g:event("software/config=2/")))
    assert.is_nil(g:event("cpu-migrations"))                      -- a valid name, not a member
    assert.equal("page-faults", evs[2]:name())
    assert.equal(core.SW.PAGE_FAULTS, evs[2]:attr().config)
    g:close()
  end)

  it("measure(fn, ...) passes arguments and re-raises errors, leaving the group off", function()
    local g = assert(perfev.group(NAMES))
    local got
    local r = g:measure(function(a, b) got = a + b; h.touch_pages(8) end, 2, 3)
    assert.equal(5, got)
    assert.is_true(r["page-faults"] >= 8)
    local ok, err = pcall(g.measure, g, function() error("boom", 0) end)
    assert.is_false(ok)
    assert.equal("boom", err)
    local after = g:read()["page-faults"]
    h.touch_pages(16)
    assert.equal(after, g:read()["page-faults"])
    g:close()
  end)

  it("close() closes every member; a closed group raises on read", function()
    local g = assert(perfev.group(NAMES))
    local evs = g:events()
    g:close()
    for _, ev in ipairs(evs) do assert.is_true(ev:closed()) end
    assert.has_error(function() g:read() end)
  end)

  it("a member the kernel refuses: nil, message naming the member, errno; no fd left", function()
    collectgarbage()   -- earlier tests' groups, left to the GC, close first
    collectgarbage()
    local before = u.fd_count()
    local g, msg, err = perfev.group { "task-clock", "page-faults", "cycles" }
    if u.cpu_pmu() then
      assert.is_not_nil(g)
      g:close()
    else
      assert.is_nil(g)
      assert.equal(E.ENOENT, err)
      assert.matches("(group member 3, 'cpu-cycles')", msg, 1, true)
      assert.matches("no hardware PMU", msg, 1, true)
    end
    collectgarbage()
    collectgarbage()
    assert.equal(before, u.fd_count())
  end)

  it("takes tables and attrs as members, with options", function()
    local g = assert(perfev.group({ { type = "software", config = core.SW.PAGE_FAULTS, name = "pf" },
                                    core.attr { type = "software", config = core.SW.TASK_CLOCK } },
                                  { pid = 0, cpu = -1 }))
    local r = g:measure(h.touch_pages, 32)
    assert.is_true(r.pf >= 32)
    assert.is_true(r["task-clock"] > 0)
    g:close()
  end)

  it("the core group reader needs a leader read with group|id", function()
    local ev = assert(core.open(core.attr { type = "software", config = 1, disabled = true },
                                0, -1))
    assert.has_error(function() core.group_reader({ ev }, { "x" }) end,
                     "perfev.group: the leader must have read_format group|id")
    ev:close()
  end)

  it("a leader reading time_running without time_enabled reports unscaled counts", function()
    local leader = assert(core.open(core.attr { type = "software", config = core.SW.PAGE_FAULTS,
      disabled = true, read_format = { "group", "id", "total_time_running" } }, 0, -1))
    local member = assert(core.open(core.attr { type = "software", config = 1,
      read_format = { "id" } }, 0, -1, leader))
    local g = core.group_reader({ leader, member }, { "faults", "clock" })
    leader:enable(true)
    h.touch_pages(64)
    leader:disable(true)
    local r = g:read()
    assert.is_true(r.faults >= 64)
    assert.is_true(r.clock > 0)
    assert.equal(r, r.raw)
    member:close(); leader:close()
  end)

  describe("one class for kernel groups and groups with tool events", function()
    local function each_kind(fn)
      fn(assert(perfev.group { "task-clock", "page-faults", "context-switches" }), "kernel")
      fn(assert(perfev.group { "task-clock", "page-faults", "duration_time" }), "with a tool event")
    end

    it("perfev.open(spec, { group = g }) joins the group's leader, whatever the group", function()
      each_kind(function(g, kind)
        local ev = assert(perfev.open("cs", { group = g }), kind)
        assert.equal(g:leader():id(), ev:id() > 0 and g:leader():id())
        g:enable()
        h.sleep_ms(1)
        g:disable()
        local kernel = kind == "kernel" and 3 or 2
        assert.equal(kernel + 1, g:leader():read_raw().nr, kind)   -- the leader reads the new member too
        ev:close()
        g:close()
      end)
    end)

    it("g:event finds a member by any spelling, g:members/g:events give copies", function()
      each_kind(function(g, kind)
        assert.is_true(rawequal(g:events()[2], g:event("faults")), kind)
        assert.is_true(rawequal(g:events()[1], g:event("task-clock")), kind)
        local m = g:members()
        assert.is_false(rawequal(m, g:members()), kind)
        assert.equal(2, m.byname["page-faults"], kind)
        m[1], m[2] = nil, nil
        assert.is_not_nil(g:events()[1], kind)
        g:close()
      end)
      local g = assert(perfev.group { "task-clock", "duration_time" })
      assert.equal("duration_time", g:event("duration_time"):name())
      g:close()
    end)

    it("__tostring for groups and their results", function()
      each_kind(function(g, kind)
        assert.matches("^perfev%.group%(task%-clock, page%-faults, ", tostring(g), nil, kind)
        local r = g:measure(h.touch_pages, 4)
        local s = tostring(r)
        assert.matches("^perfev%.group%.result%(task%-clock = %d+, page%-faults = %d+, ", s, nil, kind)
        assert.matches("time_enabled = %d+, time_running = %d+%)$", s, nil, kind)
        g:close()
        assert.matches(", closed%)$", tostring(g), nil, kind)
      end)
    end)

    it("methods called with '.' or on a closed group raise at the caller's line", function()
      local g = assert(perfev.group(NAMES))
      for _, m in ipairs { "read", "enable", "disable", "reset", "event", "events", "members", "names",
                           "leader", "measure", "close" } do
        local ok, err = pcall(g[m], 42)
        assert.is_false(ok, m)
        assert.matches("^spec/group_spec%.lua:%d+: perfev%.group: bad self for " .. m, err)
      end
      g:close()
      local ok, err = pcall(function() return g:read() end)
      assert.is_false(ok)
      assert.matches("^spec/group_spec%.lua:%d+: perfev%.group: attempt to use a closed group", err)
    end)

    it("a bad member names its position, with the closest event name", function()
      local ok, err = pcall(perfev.group, { "task-clock", "page-faults", "task-clok" })
      assert.is_false(ok)
      assert.matches("^spec/group_spec%.lua:%d+: perfev%.group: member 3 %(string 'task%-clok'%): "
                     .. "perfev%.parse: unknown event 'task%-clok' %(did you mean 'task%-clock'%?%)", err)
    end)
  end)

  describe("read_format as perf sets it", function()
    it("counting: every member, leader included, total_time_enabled|total_time_running|id|group "
       .. "(perf stat -vv)", function()
      local g = assert(perfev.group(NAMES))
      local want = FORMAT.TOTAL_TIME_ENABLED + FORMAT.TOTAL_TIME_RUNNING + FORMAT.ID + FORMAT.GROUP
      for i, ev in ipairs(g:events()) do assert.equal(want, ev:attr().read_format, NAMES[i]) end
      g:close()
    end)

    it("an :S group (perf record -vv): id|group|lost everywhere, read|id sampled, only the leader "
       .. "samples; each sample carries every member's count", function()
      local g = assert(perfev.group("{cpu-clock/period=200000/,page-faults}:S"))
      local leader, member = g:events()[1], g:events()[2]
      local la, ma = leader:attr(), member:attr()
      assert.equal(FORMAT.ID + FORMAT.GROUP + FORMAT.LOST, la.read_format)
      assert.equal(FORMAT.ID + FORMAT.GROUP + FORMAT.LOST, ma.read_format)
      assert.equal(core.SAMPLE.READ, compat.band(la.sample_type, core.SAMPLE.READ))
      assert.equal(core.SAMPLE.ID, compat.band(la.sample_type, core.SAMPLE.ID))
      assert.equal(la.sample_type, ma.sample_type)
      assert.same({ 200000, 0 }, { la.sample_period, ma.sample_period })
      assert.same({ 0, 0 }, { la.inherit, ma.inherit })
      local ring = assert(leader:mmap(8))
      g:enable()
      for _ = 1, 20 do
        h.touch_pages(16)
        u.spin(1e6)
      end
      g:disable()
      local n, last_faults = 0, -1
      for rec in ring:records() do
        if rec.type == "sample" then
          n = n + 1
          assert.equal(leader:id(), rec.id)           -- only the leader samples
          assert.equal(2, rec.read.nr)
          assert.same({ leader:id(), member:id() }, { rec.read[1].id, rec.read[2].id })
          assert.is_true(rec.read[1].value > 0)
          assert.is_true(rec.read[2].value >= last_faults)   -- page-faults so far, never going back
          assert.equal(0, rec.read[2].lost)
          last_faults = rec.read[2].value
        end
      end
      assert.is_true(n > 0, "no sample")
      assert.is_true(last_faults >= 16, "page-faults in the last sample: " .. last_faults)
      -- and the group reads the same counts
      local r = g:read()
      assert.is_true(r[2] >= last_faults)
      assert.equal(r[2], r["page-faults:S"])
      ring:close()
      g:close()
    end)
  end)

  describe("the reader owns its members (issue 10 item 13: use-after-free under ASan)", function()
    local function drop_and_collect(list)
      for i = #list, 1, -1 do list[i] = nil end
      collectgarbage()
      collectgarbage()
    end

    it("g:members() emptied and collected: g:read still reads the members", function()
      local g = assert(perfev.group { "task-clock", "page-faults" })
      drop_and_collect(g:members())
      drop_and_collect(g:events())
      g:enable()
      h.touch_pages(16)
      g:disable()
      local r = g:read()
      assert.is_true(r["page-faults"] >= 16)
      assert.is_false(g:leader():closed())
      g:close()
    end)

    it("core.group_reader: members() is a copy; the reader keeps the leader alive", function()
      local leader = assert(core.open(core.attr { type = "software", config = core.SW.PAGE_FAULTS,
        disabled = true, read_format = { "group", "id" } }, 0, -1))
      local member = assert(core.open(core.attr { type = "software", config = core.SW.TASK_CLOCK,
        read_format = { "group", "id" } }, 0, -1, leader))
      local reader = core.group_reader({ leader, member }, { "faults", "clock" })
      leader, member = nil, nil            -- luacheck: ignore
      drop_and_collect(reader:members())
      local m = reader:members()
      assert.equal(2, #m)
      assert.is_false(m[1]:closed())
      m[1]:enable(true)
      h.touch_pages(16)
      m[1]:disable(true)
      m = nil                              -- luacheck: ignore
      collectgarbage()
      collectgarbage()
      local r = reader:read()
      assert.is_true(r.faults >= 16)
      assert.matches("^perfev%.group_reader%(2 members%)$", tostring(reader))
      reader:close()
      assert.matches("closed", tostring(reader))
    end)
  end)
end)
