-- perfev.perfdata's writer against the perf tool: files perfev writes are
-- read by perf script, perf report and perf report -D (with nothing on
-- stderr), and files the real perf record made, read and written back (in
-- file and pipe mode, both ways), print the same in perf script and read
-- back to the same records.
local perfev = require "perfev"
local pd = require "perfev.perfdata"
local writer = require "perfev.perfdata.writer"
local usrec = require "perfev.perfdata.usrec"
local featwrite = require "perfev.perfdata.featwrite"
local buildid = require "perfev.perfdata.buildid"
local host = require "perfev.perfdata.host"
local u = require "spec.support.util"
local P = require "spec.support.perfdata"
local compat = require "perfev.compat"

local function all(f, opts) return u.collect(f, nil, opts) end
local function samples_of(recs) return u.of_type(recs, "sample") end

local perf = P.perf

-- perf script's raw fields of a file (pipe mode through stdin), with the
-- symbol names perf adds to callchain lines in pipe mode cut off.
local SCRIPT_FIELDS = "ip,tid,time,period,event"
local function script_of(path, pipe)
  local out, err
  if pipe then out, err = perf("script --ns -F " .. SCRIPT_FIELDS .. " -i -", path)
  else out, err = perf(("script --ns -F %s -i '%s'"):format(SCRIPT_FIELDS, path)) end
  return (out:gsub("\n(\t *%x+) [^\n]*", "\n%1")), err
end

local function count_lines(s, pat)
  local n = 0
  for line in s:gmatch("[^\n]+") do if line:match(pat) then n = n + 1 end end
  return n
end

-- perf report -D's stderr (warnings and errors go there).
local function report_d_err(path, pipe)
  if pipe then return select(2, perf("report -D -i -", path)) end
  return select(2, perf(("report -D -i '%s'"):format(path)))
end

-- The records of f without the fields that say where they were, and
-- without those a pipe-mode writer makes itself.
local MADE = { header_attr = true, header_feature = true, tracing_data = true, build_id = true }
local function comparable(f)
  local t = {}
  for rec in f:records() do
    if not MADE[rec.type] then
      rec.offset = nil
      t[#t + 1] = rec
    end
  end
  return t
end

local A = function(t) return (perfev.attr(t)) end

describe("perfev.perfdata writer", function()
  local have_perf = P.have_perf()
  local dir
  setup(function() dir = P.tmpdir() end)
  teardown(function() P.rmdir(dir) end)

  -- a cpu-clock attr like perf record's, user space only (no kernel map
  -- needed), with a comm and samples of a made-up process
  local function synthetic(path, opts, n)
    local a = A { type = "software", config = "cpu-clock", sample_period = 100000,
                  sample_type = { "ip", "tid", "time", "period" }, sample_id_all = true,
                  comm = true, task = true, exclude_kernel = true, exclude_hv = true }
    local w = assert(pd.create(path, { { attr = a, ids = { 1001, 1002 }, name = "cpu-clock" } }, opts))
    local written = {}
    for tid = 4242, 4243 do
      assert(w:write { type = "comm", pid = 4242, tid = tid, comm = "synthetic", time = 1000000 })
    end
    for i = 1, n or 50 do
      local rec = { type = "sample", cpumode = "user", ip = 0x400000 + 16 * i, pid = 4242,
                    tid = 4242 + i % 2, time = 1000000 + 1000 * i, period = 100000 + i }
      assert(w:write(rec))
      written[#written + 1] = rec
    end
    return w, written, a
  end

  it("writes a file perf script and perf report read, with nothing on stderr", function()
    if not have_perf then pending("the perf tool is not installed (Debian: linux-perf)") return end
    local path = dir .. "/synth.data"
    local w, written = synthetic(path)
    local st = assert(w:close())
    assert.equal(50, st.samples)
    assert.equal(52, st.records)
    local out, err = perf(("script --ns -F tid,time,period,ip -i '%s'"):format(path))
    assert.equal("", err)
    local script = P.script(path, "tid,time,period,ip")
    assert.equal(#written, #script)
    for i, s in ipairs(script) do
      local r = written[i]
      assert.same({ r.tid, r.time, r.period, r.ip }, { s.tid, s.time, s.period, s.ip })
    end
    assert.equal(50, count_lines(out, "%x+%s*$"))
    local rep, rerr = perf(("report --stdio --sort comm -i '%s'"):format(path))
    assert.equal("", rerr)
    assert.truthy(rep:find("Samples: 50  of event 'cpu%-clock'"))
    assert.truthy(rep:find("100.00%%%s+synthetic"))
    assert.equal("", report_d_err(path))
  end)

  it("takes a list of plain attrs as it takes one attr or a list of events", function()
    if not have_perf then pending("the perf tool is not installed (Debian: linux-perf)") return end
    local a = A { type = "software", config = "task-clock", sample_period = 100000,
                  sample_type = { "ip", "tid", "time", "period" }, exclude_kernel = true }
    local path = dir .. "/plain-attrs.data"
    local w = assert(pd.create(path, { a }))
    for i = 1, 20 do
      assert(w:write { type = "sample", cpumode = "user", ip = 0x400000 + 16 * i, pid = 77,
                       tid = 77, time = 1000 * i, period = 100000 })
    end
    assert.equal(20, assert(w:close()).samples)
    local out, err = perf(("script --ns -F tid,time,period,ip,event -i '%s'"):format(path))
    assert.equal("", err)
    assert.equal(20, count_lines(out, "task%-clock"))
    local script = P.script(path, "tid,time,period,ip")
    assert.same({ 77, 20000, 100000, 0x400000 + 16 * 20 },
                { script[20].tid, script[20].time, script[20].period, script[20].ip })
    local f = assert(pd.open(path))
    assert.equal("task-clock", f:attrs()[1].name)
    f:close()
  end)

  it("reads back what it wrote, with the header's attrs, ids and features", function()
    local path = dir .. "/synth2.data"
    local w, written, a = synthetic(path)
    assert(w:close())
    local f = assert(pd.open(path))
    local h = f:header()
    assert.same({ 104, 128 + 16 }, { h.size, h.attr_size })   -- perf 6.1 refuses larger attrs
    assert.is_nil(h.warnings[1])
    local attrs = f:attrs()
    assert.equal(1, #attrs)
    assert.same({ 1001, 1002 }, attrs[1].ids)
    assert.equal("cpu-clock", attrs[1].name)
    assert.equal(a.sample_type, attrs[1].attr.sample_type)
    assert.equal(128, attrs[1].attr.size)
    local recs = all(f)
    assert.equal(52, #recs)
    assert.same({ "comm", 4242, 4243, "synthetic" }, { recs[2].type, recs[2].pid, recs[2].tid, recs[2].comm })
    for i, r in ipairs(written) do
      local got = recs[i + 2]
      assert.same({ r.ip, r.pid, r.tid, r.time, r.period, "user" },
                  { got.ip, got.pid, got.tid, got.time, got.period, got.cpumode })
    end
    local feats = f:features()
    local mine = host.features()
    for _, k in ipairs { "hostname", "osrelease", "arch", "cpudesc", "cpuid", "total_mem" } do
      assert.equal(mine[k], feats[k])
    end
    assert.same(mine.nrcpus, feats.nrcpus)
    assert.same(mine.cmdline, feats.cmdline)
    assert.equal(u.sh("uname -n"):gsub("%s+$", ""), feats.hostname)
    assert.equal(u.sh("uname -r"):gsub("%s+$", ""), feats.osrelease)
    assert.same({ first = written[1].time, last = written[#written].time }, feats.sample_time)
    assert.same({ 1001, 1002 }, feats.event_desc[1].ids)
    f:close()
  end)

  it("writes the clockid feature for an attr with use_clockid", function()
    local path = dir .. "/clock.data"
    local a = A { sample_type = { "ip", "time" }, use_clockid = true, clockid = "monotonic" }
    assert(assert(pd.create(path, a)):close())
    local f = assert(pd.open(path))
    assert.same({ res_ns = 1 }, f:features().clockid)
    assert.is_nil(f:features().sample_time)   -- no samples
    f:close()
  end)

  it("gives perf report --header-only this machine's description", function()
    if not have_perf then pending("the perf tool is not installed (Debian: linux-perf)") return end
    local path = dir .. "/synth3.data"
    assert(synthetic(path):close())
    local out, err = perf(("report --header-only -i '%s'"):format(path))
    assert.equal("", err)
    local mine = host.features()
    assert.truthy(out:find("# hostname : " .. mine.hostname, 1, true))
    assert.truthy(out:find("# os release : " .. mine.osrelease, 1, true))
    assert.truthy(out:find("# arch : " .. mine.arch, 1, true))
    assert.truthy(out:find("# nrcpus online : " .. mine.nrcpus.online, 1, true))
    assert.truthy(out:find("# cpudesc : " .. mine.cpudesc, 1, true))
    assert.truthy(out:find("# event : name = cpu-clock, , id = { 1001, 1002 }", 1, true))
    assert.truthy(out:find("# cmdline : " .. table.concat(mine.cmdline, " "), 1, true))
  end)

  it("writes pipe mode to a pipe: perf script reads it from stdin", function()
    if not have_perf then pending("the perf tool is not installed (Debian: linux-perf)") return end
    local out = dir .. "/fromstdin.txt"
    local p = assert(io.popen(("perf script --ns -F tid,time,period,ip -i - > '%s' 2>&1"):format(out), "w"))
    local w, written = synthetic(p)
    assert.is_true(w.pipe)
    assert(w:close())
    p:close()
    local lines = {}
    for line in io.lines(out) do lines[#lines + 1] = line end
    assert.equal(#written, #lines)
    for i, line in ipairs(lines) do
      local tid, s, ns, period, ip = line:match("^%s*(%d+)%s+(%d+)%.(%d+):%s+(%d+)%s+(%x+)")
      local r = written[i]
      assert.same({ r.tid, r.time, r.period, r.ip },
                  { tonumber(tid), tonumber(s) * 1000000000 + tonumber(ns), tonumber(period),
                    tonumber(ip, 16) })
    end
  end)

  it("writes pipe mode to a file with opts.pipe: header_attr, then header_feature records", function()
    local path = dir .. "/synth.pipe"
    local w = synthetic(path, { pipe = true })
    assert(w:close())
    local f = assert(pd.open(path))
    assert.is_true(f:header().pipe)
    local recs = all(f)
    assert.same({ "header_attr", 1001, 1002 }, { recs[1].type, recs[1].ids[1], recs[1].ids[2] })
    local feats, i = {}, 2
    while recs[i].type == "header_feature" do feats[#feats + 1] = recs[i].feature; i = i + 1 end
    for _, k in ipairs { "hostname", "osrelease", "arch", "nrcpus", "cmdline", "event_desc" } do
      assert.truthy(table.concat(feats, " "):find(k, 1, true), k)
    end
    assert.is_nil(table.concat(feats, " "):find("build_id", 1, true))   -- perf reads it from the fd
    assert.equal("comm", recs[i].type)
    assert.equal(50, #samples_of(recs))
    assert.equal("cpu-clock", f:attrs()[1].name)
    if have_perf then
      local script, err = script_of(path, true)
      assert.equal("", err)
      assert.equal(50, count_lines(script, "cpu%-clock"))
      assert.equal("", report_d_err(path, true))
    end
    f:close()
  end)

  it("adds finished_round records to time-ordered records, and stops when they are not", function()
    local saved = writer.ROUND_BYTES
    writer.ROUND_BYTES = 1024
    local path = dir .. "/rounds.data"
    local w = synthetic(path, nil, 200)
    local st = w:stats()
    assert.is_true(st.rounds >= 5)
    local rounds = st.rounds
    assert(w:write { type = "sample", cpumode = "user", ip = 1, pid = 4242, tid = 4242, time = 5, period = 1 })
    for i = 1, 100 do
      assert(w:write { type = "sample", cpumode = "user", ip = i, pid = 4242, tid = 4242,
                       time = 1e9 + i, period = 1 })
    end
    writer.ROUND_BYTES = saved
    assert.equal(rounds, w:stats().rounds)
    assert.equal(1, w:stats().unordered)
    assert(w:close())
    local f = assert(pd.open(path))
    local n = 0
    for _ in f:records { types = { "finished_round" } } do n = n + 1 end
    assert.equal(rounds, n)
    f:close()
    if have_perf then
      -- perf counts the sample older than the rounds before it, as the writer did
      assert.equal("Warning:\n1 out of order events recorded.\n", report_d_err(path))
      assert.equal(301, count_lines((script_of(path)), "cpu%-clock"))
    end
  end)

  it("writes the build ids of the files mmap records name, as perf buildid-list reads them", function()
    local exe = u.sh(("readlink -f /proc/%d/exe"):format(u.pid())):gsub("%s+$", "")
    local id = buildid.of_file(exe)
    if not id then pending(exe .. " has no build id") return end
    local a = A { type = "software", config = "cpu-clock", sample_period = 100000,
                  sample_type = { "ip", "tid", "time" }, sample_id_all = true, mmap2 = true,
                  exclude_kernel = true }
    local path = dir .. "/bid.data"
    local w = assert(pd.create(path, a))
    assert(w:write { type = "mmap2", cpumode = "user", pid = 7, tid = 7, addr = 0x400000, len = 0x1000,
                     pgoff = 0, maj = 0, min = 0, ino = 1, ino_generation = 0, prot = 5, flags = 2,
                     filename = exe, time = 1 })
    -- the build-id form of mmap2 says it itself: the file need not exist
    local other = ("\171"):rep(20)
    assert(w:write { type = "mmap2", cpumode = "user", pid = 7, tid = 7, addr = 0x500000, len = 0x1000,
                     pgoff = 0, build_id = other, prot = 5, flags = 2, filename = "/nonexistent/lib.so",
                     time = 2 })
    assert(w:close())
    local f = assert(pd.open(path))
    local b = f:features().build_id
    assert.same({ { pid = -1, build_id = id, filename = exe, misc = 0x8002 },
                  { pid = -1, build_id = other, filename = "/nonexistent/lib.so", misc = 0x8002 } }, b)
    f:close()
    local readelf = u.sh("readelf -n '" .. exe .. "' 2>/dev/null"):match("Build ID: (%x+)")
    if readelf then assert.equal(readelf, (id:gsub(".", function(c) return ("%02x"):format(c:byte()) end))) end
    if have_perf then
      local out, err = perf(("buildid-list -i '%s'"):format(path))
      assert.equal("", err)
      assert.truthy(out:find(readelf or "", 1, true))
      assert.truthy(out:find(exe, 1, true))
    end
  end)

  describe("user record types", function()
    it("encodes every type the reader decodes back to the same table", function()
      local a = A { sample_type = { "ip" } }
      local recs = {
        { type = "finished_round" }, { type = "finished_init" },
        { type = "event_type", event_id = 7, name = "cycles" },
        { type = "build_id", pid = -1, build_id = "\1\2\3\4\5\6\7\8\9\10\11\12\13\14\15\16\17\18\19\20",
          filename = "/usr/bin/x" },
        { type = "build_id", pid = 12, build_id = "\1\2\3\4", filename = "/short" },
        { type = "id_index", entries = { { id = 1, idx = 0, cpu = 0, tid = -1 },
                                         { id = 2, idx = 1, cpu = 1, tid = -1 } } },
        { type = "id_index", entries = { { id = 1, idx = 0, cpu = 0, tid = -1, machine_pid = 0, vcpu = 0 } } },
        { type = "auxtrace_info", auxtrace_type = 3, priv = { 1, 2, 3 } },
        { type = "auxtrace_error", error_type = 1, code = 2, cpu = 3, pid = 4, tid = 5, fmt = 1, ip = 6,
          time = 7, msg = "oops" },
        { type = "thread_map", threads = { { pid = 10, comm = "a" }, { pid = 11, comm = "bb" } } },
        { type = "cpu_map", cpus = { 0, 1, 2, 3 } },
        { type = "cpu_map", cpus = { -1 } },
        { type = "cpu_map", cpus = { 0, 2, 5 } },
        { type = "cpu_map", cpus = { -1, 4, 5 } },
        { type = "stat_config", config = { aggr_mode = 1, interval = 0, scale = 1 } },
        { type = "stat", id = 9, cpu = 1, thread = 0, val = 100, ena = 200, run = 150 },
        { type = "stat_round", round_type = 1, time = 12345 },
        { type = "event_update", update_type = "unit", id = 3, unit = "msec" },
        { type = "event_update", update_type = "scale", id = 3, scale = 1e-6 },
        { type = "event_update", update_type = "name", id = 3, name = "cpu-clock" },
        { type = "event_update", update_type = "cpus", id = 3, cpus = { 0, 1 } },
        { type = "time_conv", time_shift = 31, time_mult = 100, time_zero = 5 },
        { type = "time_conv", time_shift = 31, time_mult = 100, time_zero = 5, time_cycles = 1,
          time_mask = 2, cap_user_time_zero = 1, cap_user_time_short = 0 },
        { type = "bpf_metadata", data = "12345678" },
        { type = 99, data = "abcdefgh" },
      }
      local path = dir .. "/user.pipe"
      local w = assert(pd.create(path, { { attr = a, ids = { 3 } } }, { pipe = true, host = false }))
      for _, r in ipairs(recs) do assert(w:write(r)) end
      assert(w:close())
      local f = assert(pd.open(path))
      local got = {}
      for rec in f:records() do
        if rec.type ~= "header_attr" and rec.type ~= "header_feature" then got[#got + 1] = rec end
      end
      assert.equal(#recs, #got)
      for i, r in ipairs(recs) do
        local g = got[i]
        g.size, g.misc = nil, nil
        assert.same(r, g)
      end
      f:close()
    end)

    it("names the field a record lacks, and refuses payload records it cannot rebuild", function()
      assert.has_error(function() usrec.encode { type = "stat", id = 1 } end,
                       "perfev.perfdata: stat record: field 'cpu' must be an integer, got nothing")
      assert.has_error(function() usrec.encode { type = "thread_map", threads = 3 } end,
                       "perfev.perfdata: thread_map record: field 'threads' must be a list, got number")
      assert.has_error(function() usrec.encode { type = "finished_round", size = 4 } end,
                       "perfev.perfdata: finished_round record: its fields need 8 bytes, more than its " ..
                       "size field 4: leave 'size' out to have it computed")
      assert.error_matches(function() usrec.encode { type = "auxtrace", data_size = 8 } end,
                           "not kept by the reader")
    end)
  end)

  it("refuses mistakes with an error naming the option or attr", function()
    local a = A { sample_type = { "ip", "tid" } }
    local path = dir .. "/bad.data"
    assert.error_matches(function() pd.create(path, a, { pipes = true }) end, "unknown option 'pipes'")
    assert.error_matches(function() pd.create(path, {}) end, "empty list")
    assert.error_matches(function() pd.create(path, { { attr = a, ids = { 1 } }, { attr = a, ids = { 2 } } }) end,
                         "attrs%[1%].*identifier")
    assert.error_matches(function() pd.create(path, { { attr = a, ids = { 1 } }, { attr = a, ids = { 1 } } }) end,
                         "id 1 is in attrs%[1%] and attrs%[2%]")
    assert.error_matches(function() pd.create(path, a, { features = { nosuch = 1 } }) end,
                         "unknown feature 'nosuch'")
    local fh = assert(io.open(path, "wb"))
    fh:write("x")
    assert.error_matches(function() pd.create(fh, a) end, "the file handle is at offset 1")
    fh:close()
    local w = assert(pd.create(path, a))
    assert.error_matches(function() w:write { type = "sample", pid = 1 } end, "needs field 'ip'")
    assert.error_matches(function() w:write { pid = 1 } end, "no 'type'")
    assert(w:close())
    assert.error_matches(function() w:write { type = "finished_round" } end, "closed")
  end)

  it("returns nil, message, errno when the disk is full", function()
    if not u.exists("/dev/full") then pending("no /dev/full") return end
    local w = assert(pd.create("/dev/full", (A { sample_type = { "ip" } })))
    assert(w:write { type = "comm", pid = 1, tid = 1, comm = "x" })
    local ok, msg, errno = w:close()
    assert.is_nil(ok)
    assert.equal(28, errno)   -- ENOSPC
    assert.truthy(msg:find("/dev/full", 1, true))
  end)

  it("writes a sampler session's events and records", function()
    local s = assert(perfev.sampler { events = { "cpu-clock", "task-clock" }, period = 200000 })
    local path = dir .. "/session.data"
    local w = assert(pd.create(path, s))
    assert(s:enable())
    local x = 0
    for i = 1, 3e6 do x = x + i % 7 end
    s:disable()
    local n = 0
    for rec in s:records() do
      assert(w:write(rec))
      if rec.type == "sample" then n = n + 1 end
    end
    s:close()
    assert(w:close())
    assert.is_true(n > 0, x)
    local f = assert(pd.open(path))
    assert.same({ "cpu-clock", "task-clock" }, { f:attrs()[1].name, f:attrs()[2].name })
    assert.equal(tonumber((u.sh("getconf _NPROCESSORS_ONLN"))), #f:attrs()[1].ids)
    assert.equal(n, #samples_of(all(f)))
    f:close()
    if have_perf then
      local script, err = script_of(path)
      assert.equal("", err)
      assert.equal(n, count_lines(script, "cpu%-clock") + count_lines(script, "task%-clock"))
    end
  end)

  describe("round trips of files perf record made", function()
    if not have_perf then
      pending("the perf tool is not installed (Debian: linux-perf)")
      return
    end
    local files = {}
    local function record(name, args, pipe)
      if files[name] == nil then
        local path = dir .. "/" .. name
        if pipe then
          u.sh(("perf record -o - %s > '%s' 2>/dev/null"):format(args, path))
          files[name] = u.exists(path) and path or false
        else
          files[name] = P.record(path, args) or false
        end
      end
      return files[name] or nil
    end

    -- reads src, writes it to dst (pipe mode or not), checks perf script
    -- prints the same, perf report -D says nothing on stderr, and perfev
    -- reads back the same records.
    local function round_trip(src, src_pipe, dst_pipe)
      local f = assert(pd.open(src))
      local dst = src .. (dst_pipe and ".to-pipe" or ".to-file")
      local w = assert(pd.create(dst, f:attrs(), { features = f, pipe = dst_pipe }))
      for rec in f:records() do assert(w:write(rec)) end
      local st = assert(w:close())
      f:close()
      local theirs, terr = script_of(src, src_pipe)
      local mine, merr = script_of(dst, dst_pipe)
      assert.equal(terr, merr)
      assert.equal(theirs, mine)
      assert.equal(st.samples, count_lines(mine, "^%s*%d+%s+%d+%.%d+:"))
      assert.equal("", report_d_err(dst, dst_pipe))
      local a, b = assert(pd.open(src)), assert(pd.open(dst))
      local ra, rb = comparable(a), comparable(b)
      assert.equal(#ra, #rb)
      for i = 1, #ra do assert.same(ra[i], rb[i]) end
      a:close()
      b:close()
      return dst, st
    end

    it("cpu-clock -g: file to file, the header's features as perf prints them", function()
      local src = assert(record("cc.data", "-e cpu-clock -c 100000 -g -- " .. P.busy(20000)))
      local dst, st = round_trip(src, false, false)
      assert.is_true(st.samples > 10)
      local h1 = perf(("report --header-only -I -i '%s'"):format(src))
      local h2 = perf(("report --header-only -I -i '%s'"):format(dst))
      local function strip(s) return (s:gsub("# captured on[^\n]*\n", "")) end
      assert.equal(strip(h1), strip(h2))
    end)

    it("cpu-clock -g: file to pipe mode, and pipe mode to file and pipe", function()
      local src = assert(record("cc.data", "-e cpu-clock -c 100000 -g -- " .. P.busy(20000)))
      round_trip(src, false, true)
      local psrc = assert(record("cc.pipe", "-e cpu-clock -c 100000 -g -- " .. P.busy(20000), true))
      round_trip(psrc, true, false)
      round_trip(psrc, true, true)
    end)

    it("several events and a tracepoint, with the tracepoint's fields in both modes", function()
      local tp, why = u.tracepoint_id("syscalls", "sys_enter_write")
      if not tp then pending(why) return end
      local src = assert(record("multi.data", "-e cpu-clock -e task-clock -e syscalls:sys_enter_write -g " ..
                                "-- sh -c 'for i in 1 2 3 4 5; do echo $i > /dev/null; done; i=0; " ..
                                "while [ $i -lt 20000 ]; do i=$((i+1)); done'"))
      for _, pipe in ipairs { false, true } do
        local dst = round_trip(src, false, pipe)
        local fields = "comm,tid,time,event,trace"
        local theirs = perf(("script --ns -F %s -i '%s'"):format(fields, src))
        local mine = pipe and perf("script --ns -F " .. fields .. " -i -", dst) or
                     perf(("script --ns -F %s -i '%s'"):format(fields, dst))
        -- in pipe mode perf script adds callchains and pads the comm less
        local function lines(s)
          return (s:gsub("\n\t[^\n]*", ""):gsub("\n%s*\n", "\n"):gsub("\n +", "\n"):gsub("^ +", ""))
        end
        assert.equal(lines(theirs), lines(mine))
        assert.equal(5, count_lines(mine, "sys_enter_write: fd: 0x00000001"))
      end
    end)

    it("encodes perf's own records byte for byte, and its feature sections", function()
      local src = assert(record("cc.data", "-e cpu-clock -c 100000 -g -- " .. P.busy(20000)))
      local f = assert(pd.open(src))
      local fh = assert(io.open(src, "rb"))
      local n = 0
      for rec in f:records { offsets = true } do
        if usrec.is_user(rec) then
          fh:seek("set", rec.offset)
          assert.equal(fh:read(rec.size), usrec.encode(rec), rec.type)
          n = n + 1
        end
      end
      assert.is_true(n >= 4)   -- finished_round, id_index, event_update, thread_map, cpu_map ...
      for _, sec in ipairs(f:header().sections) do
        fh:seek("set", sec.offset)
        local raw = fh:read(sec.size)
        local v = f:features()[sec.name]
        if sec.name == "pmu_mappings" then   -- the reader keeps no order: compare what it means
          local b = featwrite.encode(sec.name, v)
          assert.equal(#raw, #b)
        else
          assert.equal(raw, featwrite.encode(sec.name, v), sec.name)
        end
      end
      fh:close()
      f:close()
    end)
  end)
end)

-- The features perfev.perfdata.features reads by a layout, written by
-- featwrite from that same layout: a value read back is the value written.
describe("perfev.perfdata features described by a layout", function()
  local features = require "perfev.perfdata.features"
  local HOST = compat.pack("=I2", 1) == compat.pack("<I2", 1) and "<" or ">"
  local VALUES = {
    nrcpus = { available = 4, online = 2 },
    numa_topology = { { node = 0, mem_total = compat.lshift(1, 33), mem_free = 12345, cpus = "0-1" },
                      { node = 1, mem_total = compat.lshift(1, 32), mem_free = 0, cpus = "2-3" } },
    group_desc = { { name = "{task-clock,page-faults}", leader_idx = 1, nr_members = 2 } },
    cache = { version = 1, { level = 1, line_size = 64, sets = 64, ways = 8, type = "Data", size = "32K",
                             map = "0-1" },
              { level = 2, line_size = 64, sets = 1024, ways = 16, type = "Unified", size = "1024K",
                map = "0-3" } },
    sample_time = { first = 100, last = -2 },
    mem_topology = { version = 1, block_size = compat.lshift(1, 27),
                     { node = 0, size = compat.lshift(1, 30), bits = 70, bitmap = { -1, 0x3f } } },
    clockid = { res_ns = 1 },
    clock_data = { version = 1, clockid = 1, tod_ns = compat.dec64("1700000000123456789"), clockid_ns = 12345 },
    hybrid_topology = { { pmu_name = "cpu_core", cpus = "0-7" }, { pmu_name = "cpu_atom", cpus = "8-15" } },
  }

  it("every one the writer copies reads back the same; those it never copies have no encoder", function()
    local n = 0
    for name in pairs(features.layouts) do
      if featwrite.NOT_COPIED[name] then
        assert.is_nil(featwrite.encoders[name], name)
        assert.is_false(featwrite.writable(name), name)
      else
        local v = assert(VALUES[name], "no value for the layout of " .. name)
        local bytes = featwrite.encode(name, v)
        assert.same(v, features.parse(name, bytes, HOST, {}), name)
        n = n + 1
      end
    end
    assert.equal(9, n)
    -- a default the writer puts where the value has none
    assert.same({ version = 1 }, features.parse("cache", featwrite.encode("cache", {}), HOST, {}))
    assert.equal(4 + 4 + 8 + 8, #featwrite.encode("clock_data", { clockid = 1, tod_ns = 0, clockid_ns = 0 }))
  end)

  it("a wrong value names the feature and the field", function()
    local function fails(msg, name, v)
      local ok, err = pcall(featwrite.encode, name, v)
      assert.is_false(ok)
      assert.equal("perfev.perfdata: feature '" .. name .. "': " .. msg, err)
    end
    fails("'cache' must be a table, got number", "cache", 5)
    fails("'numa_topology[2].mem_free' must be an integer, got string", "numa_topology",
          { VALUES.numa_topology[1], { node = 1, mem_total = 1, mem_free = "0", cpus = "2-3" } })
    fails("'hybrid_topology[1].cpus' must be a string, got nil", "hybrid_topology", { { pmu_name = "cpu" } })
    fails("'mem_topology[1].bitmap[2]' must be an integer, got number", "mem_topology",
          { block_size = 1, { node = 0, size = 1, bits = 128, bitmap = { 1, 0.5 } } })
    fails("'online' must be an integer, got nothing", "nrcpus", { available = 1 })
  end)

  it("a section cut short names the field it ran out in", function()
    local bytes = featwrite.encode("numa_topology", VALUES.numa_topology)
    local v, msg = features.parse("numa_topology", bytes:sub(1, -2), HOST, {})
    assert.is_nil(v)
    assert.matches("^feature 'numa_topology': cpus needs 64 bytes at offset %d+, 63 left$", msg)
    v, msg = features.parse("mem_topology", featwrite.encode("mem_topology", VALUES.mem_topology):sub(1, -9),
                            HOST, {})
    assert.is_nil(v)
    assert.matches("^feature 'mem_topology': bitmap needs 16 bytes", msg)
  end)
end)
