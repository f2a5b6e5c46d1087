-- perfev.group: members read together by one read(2) of their leader.
local perfev = require "perfev"
local core = require "perfev.core"
local u = require "spec.support.util"

local E, h = u.E, u.h

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
    for _ = 1, 1000 do g:read(r) end   -- warm up
    collectgarbage()
    collectgarbage()
    collectgarbage("stop")
    local before = collectgarbage("count")
    for _ = 1, 10000 do g:read(r) end
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
end)
