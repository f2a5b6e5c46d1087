-- perfev.perfdata against the perf tool: files `perf record` writes here,
-- in a temporary directory, read back by perfev and by `perf script -D`
-- (every record perf delivers, in its order, with its file offset and raw
-- callchain) and `perf script -F`: the same records, the same samples, the
-- same order.
local pd = require "perfev.perfdata"
local u = require "spec.support.util"
local P = require "spec.support.perfdata"
local compat = require "perfev.compat"

local function all(f, opts) return u.collect(f, nil, opts) end
local function samples_of(recs) return u.of_type(recs, "sample") end

-- perfev's records in time order against perf's -D listing: the same
-- records (type and file offset) in the same order, and for samples the
-- same pid, tid, time, ip, period and callchain. pipe: perf counts pipe
-- offsets after the 16-byte header and lists header_attr records not.
local function same_as_perf(f, dump, pipe)
  local period = f:attrs()[1].attr.sample_period
  local mine = {}
  for rec in f:records { order = "time", offsets = true } do
    if not (pipe and rec.type == "header_attr") then mine[#mine + 1] = rec end
  end
  assert.equal(#dump, #mine)
  local nsamples = 0
  for i, d in ipairs(dump) do
    local r = mine[i]
    local rtype = r.type == "header_feature" and "feature" or r.type
    assert.same({ i, d.type, d.offset }, { i, rtype, r.offset - (pipe and 16 or 0) })
    if d.type == "sample" then
      nsamples = nsamples + 1
      assert.same({ i, d.pid, d.tid, d.time, d.ip, d.period },
                  { i, r.pid, r.tid, r.time, r.ip, r.period or period })
      if d.chain then assert.same(P.strip_markers(d.chain), r.callchain) end
    end
  end
  return nsamples
end

describe("perfev.perfdata against perf record", function()
  if not P.have_perf() then
    pending("the perf tool is not installed (Debian: linux-perf)")
    return
  end
  local dir
  local record = P.recorder(function() return dir end)

  setup(function() dir = P.tmpdir() end)
  teardown(function() P.rmdir(dir) end)

  it("reads cpu-clock with -g: every record as perf script -D lists it", function()
    local path = assert(record("cc.data", "-e cpu-clock -c 100000 -g -- " .. P.busy(20000)))
    local f = assert(pd.open(path))
    local n = same_as_perf(f, P.dump(path), false)
    assert.is_true(n > 10)
    f:close()
  end)

  it("gives the same samples as perf script -F tid,time,period,ip (file order, sorted)", function()
    local path = assert(record("cc.data", "-e cpu-clock -c 100000 -g -- " .. P.busy(20000)))
    local script = P.script(path, "tid,time,period,ip")
    local f = assert(pd.open(path))
    local period = f:attrs()[1].attr.sample_period
    local mine = samples_of(all(f))
    assert.equal(#script, #mine)
    table.sort(mine, function(a, b) return a.time < b.time end)
    for i, s in ipairs(script) do
      local m = mine[i]
      assert.same({ s.tid, s.time, s.period, s.ip }, { m.tid, m.time, m.period or period, m.ip })
    end
    f:close()
  end)

  it("reads task-clock without callchains", function()
    local path = assert(record("tc.data", "-e task-clock -c 100000 -- " .. P.busy(20000)))
    local f = assert(pd.open(path))
    assert.is_true(same_as_perf(f, P.dump(path)) > 10)
    for rec in f:records { types = { "sample" } } do assert.is_nil(rec.callchain) end
    f:close()
  end)

  it("reads a software event with --call-graph fp", function()
    local path = assert(record("pf.data", "-e page-faults -c 3 --call-graph fp -- " .. P.busy(2000)))
    local f = assert(pd.open(path))
    assert.is_true(same_as_perf(f, P.dump(path)) > 0)
    assert.equal("page-faults", f:attrs()[1].name)
    f:close()
  end)

  it("reads --call-graph dwarf samples (user registers and stack)", function()
    local path = assert(record("dw.data", "-e cpu-clock -c 500000 --call-graph dwarf -- " .. P.busy(20000)))
    local f = assert(pd.open(path))
    assert.is_true(same_as_perf(f, P.dump(path)) > 0)
    for rec in f:records { types = { "sample" } } do
      assert.is_string(rec.stack_user)
      assert.is_number(rec.regs_user.abi)
    end
    f:close()
  end)

  it("tells several events apart by id, named as perf script names them", function()
    local path = assert(record("multi.data", "-e cpu-clock -e task-clock -e page-faults -c 100000 -- " ..
                                             P.busy(20000)))
    local f = assert(pd.open(path))
    assert.same({ "cpu-clock", "task-clock", "page-faults" },
                { f:attrs()[1].name, f:attrs()[2].name, f:attrs()[3].name })
    same_as_perf(f, P.dump(path))
    local script = P.script(path, "tid,time,event")
    local mine = samples_of(all(f, { order = "time" }))
    assert.equal(#script, #mine)
    local seen = {}
    for i, s in ipairs(script) do
      assert.same({ s.time, s.event }, { mine[i].time, mine[i].event })
      seen[s.event] = true
    end
    assert.is_true(seen["cpu-clock"] and seen["task-clock"])
    f:close()
  end)

  it("reads tracepoint samples with their raw data", function()
    local tp, why = u.tracepoint_id("sched", "sched_switch")
    if not tp then
      pending(why)
      return
    end
    local path = assert(record("tp.data", "-e sched:sched_switch -a -- sleep 0.1"))
    local f = assert(pd.open(path))
    assert.is_true(same_as_perf(f, P.dump(path)) > 0)
    assert.equal("sched:sched_switch", f:attrs()[1].name)
    assert.equal(tp, f:attrs()[1].attr.config)
    for rec in f:records { types = { "sample" } } do
      assert.equal(tp, compat.unpack("=I2", rec.raw))   -- common_type
    end
    assert.is_not_nil(f:features().tracing_data)
    f:close()
  end)

  it("inflates perf record -z (zstd) files", function()
    local path = record("z.data", "-z -e cpu-clock -c 100000 -g -- " .. P.busy(20000))
    if not path then
      pending("perf record -z failed: this perf was built without zstd")
      return
    end
    local f = assert(pd.open(path))
    local ok, err = pcall(function() for _ in f:records() do end end)
    if not ok and tostring(err):match("libzstd") then
      pending(tostring(err))
      return
    end
    assert(ok, err)
    assert.is_table(f:features().compressed)
    assert.equal(1, f:features().compressed.type)   -- zstd
    local dump = P.dump(path)
    local mine = samples_of(all(f, { order = "time" }))
    local theirs = samples_of(dump)
    assert.equal(#theirs, #mine)
    assert.is_true(#mine > 10)
    for i, d in ipairs(theirs) do
      assert.same({ d.tid, d.time, d.ip }, { mine[i].tid, mine[i].time, mine[i].ip })
      assert.same(P.strip_markers(d.chain), mine[i].callchain)
    end
    f:close()
  end)

  describe("pipe mode (perf record -o -)", function()
    local path
    setup(function()
      path = dir .. "/pipe.data"
      u.sh(("perf record -e cpu-clock -c 100000 -g -o - -- %s > '%s' 2>/dev/null"):format(P.busy(20000), path))
    end)

    it("reads a pipe-mode file, attrs and features from its records", function()
      local f = assert(pd.open(path))
      assert.is_true(f:header().pipe)
      assert.equal("cpu-clock", f:attrs()[1].name)
      assert.equal(u.sh("uname -n"):gsub("%s+$", ""), f:features().hostname)
      assert.is_true(same_as_perf(f, P.dump(nil, path), true) > 10)
      f:close()
    end)

    it("reads a stream that cannot seek, once", function()
      local f = assert(pd.open(assert(io.popen("cat '" .. path .. "'"))))
      assert.is_true(same_as_perf(f, P.dump(nil, path), true) > 10)
      assert.has_error(function() f:records() end)
      f:close()
    end)

    it("ends a stream with perf's stderr mixed in (2>&1) as perf does: every record, one warning", function()
      local mixed = dir .. "/pipe-mixed.data"
      u.sh(("perf record -e cpu-clock -c 100000 -o - -- %s 2>&1 | cat > '%s'"):format(P.busy(20000), mixed))
      local tail = assert(u.read_file(mixed)):sub(-120)
      assert.matches("%[ perf record: Captured and wrote .* %]\n$", tail)   -- the text is really there
      local out, err = P.perf("script -F tid,ip -i '" .. mixed .. "'")
      assert.matches("unexpected end of event stream", err)
      local theirs = select(2, out:gsub("\n", ""))
      local f = assert(pd.open(mixed))
      local n = 0
      for _ in f:records { types = { "sample" } } do n = n + 1 end
      assert.equal(theirs, n)
      assert.is_true(n > 10)
      local w = f:header().warnings
      assert.equal(1, #w)
      assert.matches("the stream ends with %d+ bytes that are not a whole record at offset %d+ " ..
                     "%(unexpected end of event stream%)", w[1])
      for _ in f:records() do end    -- read again: still one warning
      assert.equal(1, #f:header().warnings)
      f:close()
    end)

    it("reads standard input with pd.open(\"-\")", function()
      local out = u.run_lua(([[
        local pd = require "perfev.perfdata"
        local f = assert(pd.open("-"))
        local n = 0
        for rec in f:records { types = { "sample" } } do n = n + 1 end
        print(n)
      ]]), "exec < '" .. path .. "'")
      local theirs = samples_of(P.dump(nil, path))
      assert.equal(#theirs, tonumber(out))
    end)
  end)

  it("restarts the file with each records() call", function()
    local path = assert(record("tc.data", "-e task-clock -c 100000 -- " .. P.busy(20000)))
    local f = assert(pd.open(path))
    local it1 = f:records()
    local first = it1()
    local again = all(f)
    assert.same(first, again[1])
    assert.has_error(it1, "perfev.perfdata: " .. path ..
                     ": a later f:records() restarted the file; this iterator is finished")
    f:close()
    assert.has_error(function() f:records() end, "perfev.perfdata: the file is closed")
  end)

  it("decodes perf's id_index, thread_map, cpu_map and event_update as perf -D prints them", function()
    local path = assert(record("cc.data", "-e cpu-clock -c 100000 -g -- " .. P.busy(20000)))
    local text = u.sh("perf script -D -i '" .. path .. "' 2>/dev/null")
    local f = assert(pd.open(path))
    local by = {}
    for rec in f:records() do by[rec.type] = by[rec.type] or rec end
    local ids = {}
    for id, idx, cpu, tid in text:gmatch("%.%.%. id: (%d+)%s+idx: (%d+)%s+cpu: (%d+)%s+tid: (%d+)") do
      ids[#ids + 1] = { id = tonumber(id), idx = tonumber(idx), cpu = tonumber(cpu), tid = tonumber(tid) }
    end
    assert.is_true(#ids > 0)
    assert.same(ids, by.id_index.entries)
    assert.same(f:attrs()[1].ids, (function()
      local t = {} for i, e in ipairs(by.id_index.entries) do t[i] = e.id end return t end)())
    local tnr, ttid = text:match("PERF_RECORD_THREAD_MAP nr: (%d+) thread: (%d+)")
    assert.same({ tonumber(tnr), tonumber(ttid) }, { #by.thread_map.threads, by.thread_map.threads[1].pid })
    local first, last = text:match("PERF_RECORD_CPU_MAP: (%d+)%-(%d+)")
    assert.same({ tonumber(first), tonumber(last) }, { by.cpu_map.cpus[1], by.cpu_map.cpus[#by.cpu_map.cpus] })
    assert.equal(text:match("%.%.%. unit:%s+(%S+)"), by.event_update.unit)
    f:close()
  end)

  it("reads perf stat record files (stat, stat_round, stat_config)", function()
    local path = dir .. "/stat.data"
    local _, ok = u.sh(("perf stat record -o '%s' -e task-clock,page-faults -- %s >/dev/null 2>&1")
                       :format(path, P.busy(2000)))
    assert.is_true(ok)
    local f = assert(pd.open(path))
    local counts, theirs = {}, {}
    for rec in f:records() do counts[rec.type] = (counts[rec.type] or 0) + 1 end
    for _, d in ipairs(P.dump(path)) do theirs[d.type] = (theirs[d.type] or 0) + 1 end
    for _, t in ipairs { "stat", "stat_round", "stat_config" } do
      assert.is_true(theirs[t] > 0)
      assert.equal(theirs[t], counts[t])
    end
    assert.is_not_nil(f:features().stat)
    f:close()
  end)

  it("reads the features perf report --header-only shows", function()
    local path = assert(record("cc.data", "-e cpu-clock -c 100000 -g -- " .. P.busy(20000)))
    local text = u.sh("perf report --header-only -i '" .. path .. "' 2>/dev/null")
    local f = assert(pd.open(path))
    local ft = f:features()
    local function field(k) return ((text:match("\n# " .. k .. "%s*: ([^\n]*)") or ""):gsub("%s+$", "")) end
    assert.equal(field("hostname"), ft.hostname)
    assert.equal(field("os release"), ft.osrelease)
    assert.equal(field("perf version"), ft.version)
    assert.equal(field("arch"), ft.arch)
    assert.equal(tonumber(field("nrcpus online")), ft.nrcpus.online)
    assert.equal(tonumber(field("nrcpus avail")), ft.nrcpus.available)
    assert.equal(field("cpudesc"), ft.cpudesc)
    assert.equal(field("cpuid"), ft.cpuid)
    assert.equal(field("total memory"), ft.total_mem .. " kB")
    assert.equal(field("cmdline"), table.concat(ft.cmdline, " "))
    local s, us = field("time of first sample"):match("(%d+)%.(%d+)")
    assert.equal(tonumber(s) * 1000000 + tonumber(us), compat.idiv(ft.sample_time.first, 1000))
    assert.equal("cpu-clock", ft.event_desc[1].name)
    assert.same(f:attrs()[1].ids, ft.event_desc[1].ids)
    for name, ty in field("pmu mappings"):gmatch("([%w_]+) = (%d+)") do
      assert.equal(tonumber(ty), ft.pmu_mappings[name])
    end
    local h = f:header()
    assert.equal(tonumber(field("data offset")), h.data.offset)
    assert.equal(tonumber(field("data size")), h.data.size)
    f:close()
  end)

  it("reads the build ids perf buildid-list reads", function()
    local path = assert(record("cc.data", "-e cpu-clock -c 100000 -g -- " .. P.busy(20000)))
    local out = u.sh("perf buildid-list -i '" .. path .. "' 2>/dev/null")
    local f = assert(pd.open(path))
    local mine = {}
    for _, b in ipairs(f:features().build_id or {}) do
      mine[(b.build_id:gsub(".", function(c) return ("%02x"):format(c:byte()) end))] = b.filename
    end
    local n = 0
    for id, name in out:gmatch("(%x+) (%S+)") do
      n = n + 1
      assert.equal(name, mine[id])
    end
    assert.is_true(n > 0)
    f:close()
  end)
end)
