-- One home for each record layout: the perf.data writer encodes perf's
-- own records by walking the rows the C reader decodes them with
-- (core.PERFDATA.LAYOUT), and checks the id positions of several events
-- with the decoder's own (core.id_positions).
local core = require "perfev.core"
local usrec = require "perfev.perfdata.usrec"

describe("record layouts", function()
  it("the writer's layouts are the reader's rows", function()
    assert.equal(core.PERFDATA.LAYOUT, usrec.LAYOUT)
    local n = 0
    for name, num in pairs(core.PERFDATA.RECORD) do
      local rows = core.PERFDATA.LAYOUT[name]
      assert.is_table(rows, name)
      assert.is_true(num >= 64, name)
      for _, row in ipairs(rows) do assert.is_string(row[1], name) end
      n = n + 1
    end
    assert.is_true(n >= 23)
    assert.same({ { "u64", "event_id" }, { "cstr", "name", 64 } }, core.PERFDATA.LAYOUT.event_type)
  end)

  it("encodes and decodes the same bytes for every encodable type of the table", function()
    local recs = {
      { type = "event_type", event_id = 7, name = "cycles" },
      { type = "stat", id = 1, cpu = 2, thread = 3, val = 4, ena = 5, run = 6 },
      { type = "time_conv", time_shift = 1, time_mult = 2, time_zero = 3 },
      { type = "header_feature", feat_id = 4, data = "abcd" },
      { type = "auxtrace_info", auxtrace_type = 1, priv = { 9, 8 } },
    }
    for _, r in ipairs(recs) do
      local bytes = usrec.encode(r)
      local f = io.tmpfile()
      f:write(bytes)
      f:seek("set", 0)
      local reader = core.perfdata_reader(f, { pipe = true })
      local got
      for rec in reader:records() do got = rec end
      reader:close()
      f:close()
      for k, v in pairs(r) do assert.same(v, got[k], r.type .. "." .. k) end
    end
  end)

  it("core.id_positions gives the decoder's positions of the id", function()
    local function pos(t) return { core.id_positions(core.attr(t)) } end
    assert.same({ 0, 0 }, pos { sample_type = { "identifier", "ip" }, sample_id_all = true })
    assert.same({ 2, 2 }, pos { sample_type = { "ip", "tid", "id", "cpu", "stream_id" },
                               sample_id_all = true })
    assert.same({ 2, -1 }, pos { sample_type = { "ip", "tid", "id" } })
    assert.same({ -1, -1 }, pos { sample_type = { "ip", "tid" }, sample_id_all = true })
  end)

  it("rec.period is the attr's sample_period when PERIOD is not in sample_type, as perf gives it", function()
    local a = core.attr { sample_type = { "ip" }, sample_period = 12345 }
    local bytes = core.encode({ type = "sample", ip = 0x10 }, a)
    local rec = core.decode(bytes, a)()
    assert.equal(12345, rec.period)
    local b = core.attr { sample_type = { "ip", "period" }, sample_period = 12345 }
    rec = core.decode(core.encode({ type = "sample", ip = 0x10, period = 7 }, b), b)()
    assert.equal(7, rec.period)
  end)

  it("rec.period of a perf record -c N file is what perf script prints", function()
    local P = require "spec.support.perfdata"
    if not P.have_perf() then
      pending("the perf tool is not installed (Debian: linux-perf)")
      return
    end
    local dir = P.tmpdir()
    local path = P.record(dir .. "/c.data", "-e task-clock -c 100000 -- " .. P.busy(20000))
    assert(path, "perf record failed")
    local theirs = P.script(path, "tid,time,period")
    local pd = require "perfev.perfdata"
    local f = assert(pd.open(path))
    local mine = {}
    for rec in f:records { types = { "sample" } } do mine[#mine + 1] = rec end
    f:close()
    P.rmdir(dir)
    assert.is_true(#mine > 0)
    assert.equal(#theirs, #mine)
    for i, s in ipairs(theirs) do assert.equal(s.period, mine[i].period) end
    assert.equal(100000, mine[1].period)
  end)
end)
