-- perf.data files built here byte by byte (spec/support/perfdata_build.lua):
-- a big-endian file decodes as its little-endian twin, perf's own record
-- types decode field by field, payloads are skipped, and time order follows
-- perf's finished_round rule on rounds built to test it.
local core = require "perfev.core"
local pd = require "perfev.perfdata"
local B = require "spec.support.perfdata_build"
local shell = require "spec.support.shell"
local compat = require "perfev.compat"

local pack = compat.pack
local S, R = core.SAMPLE, core.RECORD
local U = core.PERFDATA.RECORD

local tmp = os.tmpname()

local function open_bytes(bytes)
  B.write(tmp, bytes)
  return pd.open(tmp)
end

local function all(f, opts)
  local t = {}
  for rec in f:records(opts) do t[#t + 1] = rec end
  return t
end

-- flag word bits (perf_event_attr's bitfields, in order)
local FLAG = { disabled = 0, comm = 9, exclude_kernel = 5, precise_ip = 15, sample_id_all = 18,
               mmap2 = 23, use_clockid = 25, sigtrap = 37 }
local SAMPLE_TYPE = compat.bor(S.IDENTIFIER, S.IP, S.TID, S.TIME, S.CPU, S.PERIOD, S.CALLCHAIN)
local FLAGS = compat.bor(compat.lshift(1, FLAG.disabled), compat.lshift(1, FLAG.comm), compat.lshift(1,
    FLAG.exclude_kernel), compat.lshift(2, FLAG.precise_ip), compat.lshift(1, FLAG.sample_id_all), compat.lshift(1,
        FLAG.mmap2), compat.lshift(1, FLAG.use_clockid), compat.lshift(1, FLAG.sigtrap))
local ID = 0x1234

local function attr_bytes(e)
  return B.attr(e, { type = 1, config = 0, sample_period = 100003, sample_type = SAMPLE_TYPE,
                     flags = FLAGS, clockid = 1, sample_max_stack = 127, sig_data = 0xfeed,
                     wakeup_events = 7, aux_action = 2 })
end

-- sample_id trailer for SAMPLE_TYPE: tid, time, cpu, identifier
local function trailer(e, pid, tid, time, cpu)
  return B.trailer(e, SAMPLE_TYPE, { pid = pid, tid = tid, time = time, cpu = cpu, id = ID })
end

local function sample(e, time, ip, chain)
  return B.sample(e, SAMPLE_TYPE, { id = ID, ip = ip, pid = 10, tid = 11, time = time, cpu = 1,
                                    period = 100003, callchain = chain })
end

local function build(e)
  local data = B.record(e, R.COMM, 0x2000, pack(e .. "I4I4", 10, 11) .. B.cstr("lua5.4") ..
                                           trailer(e, 10, 11, 500, 1))
            .. sample(e, 1000, 0x401000, { -512, 0x401000, 0x402000 })
            .. sample(e, 900, 0x401100, { -512, 0x401100 })
            .. B.record(e, U.finished_round, 0, "")
            .. B.record(e, U.thread_map, 0, pack(e .. "i8i8", 1, 10) .. ("lua5.4"):rep(1) .. ("\0"):rep(10))
  local feats = {
    { 3, B.hstr(e, "bigbox") },
    { 7, pack(e .. "I4I4", 8, 4) },
    { 21, pack(e .. "i8i8", 900, 1000) },
  }
  return B.file(e, { attrs = { { attr = attr_bytes(e), ids = { ID } } }, data = data,
                     features = feats })
end

describe("perfev.perfdata on files built by hand", function()
  teardown(function() os.remove(tmp) end)

  describe("byte order", function()
    local little, big
    setup(function()
      little = all(assert(open_bytes(build("<"))))
      big = all(assert(open_bytes(build(">"))))
    end)

    it("reads the magic of either order and says which", function()
      local f = assert(open_bytes(build(">")))
      local h = f:header()
      assert.equal("big", h.endian)
      assert.equal(compat.pack("=I2", 1):byte() == 1, h.swap)
      assert.equal(104, h.size)
      assert.equal(152, h.attr_size)
      f:close()
    end)

    it("decodes the attr's fields, bitfields included, in both orders", function()
      for _, e in ipairs { "<", ">" } do
        local f = assert(open_bytes(build(e)))
        local a = f:attrs()[1]
        assert.same({ ID }, a.ids)
        local at = a.attr
        assert.equal(SAMPLE_TYPE, at.sample_type)
        assert.equal(100003, at.sample_period)
        assert.equal(1, at.disabled)
        assert.equal(1, at.comm)
        assert.equal(1, at.exclude_kernel)
        assert.equal(2, at.precise_ip)
        assert.equal(1, at.sample_id_all)
        assert.equal(1, at.mmap2)
        assert.equal(1, at.use_clockid)
        assert.equal(1, at.sigtrap)
        assert.equal(0, at.inherit)
        assert.equal(0, at.exclude_user)
        assert.equal(1, at.clockid)
        assert.equal(127, at.sample_max_stack)
        assert.equal(7, at.wakeup_events)
        assert.equal(0xfeed, at.sig_data)
        assert.equal(1, at.aux_pause)
        assert.equal(0, at.aux_start_paused)
        assert.equal("cpu-clock", a.name)
        f:close()
      end
    end)

    it("decodes every record the same way from a big-endian file", function()
      assert.equal(5, #little)
      assert.same(little, big)
    end)

    it("decodes samples, side-band trailers and perf's records field by field", function()
      local comm, s1, s2, round, tm = compat.table_unpack(big)
      assert.same({ "comm", 10, 11, "lua5.4", true, 500, 1, ID },
                  { comm.type, comm.pid, comm.tid, comm.comm, comm.comm_exec, comm.time, comm.cpu, comm.id })
      assert.same({ "sample", ID, 0x401000, 10, 11, 1000, 1, 100003, "cpu-clock", "user" },
                  { s1.type, s1.id, s1.ip, s1.pid, s1.tid, s1.time, s1.cpu, s1.period, s1.event, s1.cpumode })
      assert.same({ 0x401000, 0x402000 }, s1.callchain)
      assert.same({ { context = "user", first = 1, last = 2 } }, s1.callchain_contexts)
      assert.equal(900, s2.time)
      assert.equal("finished_round", round.type)
      assert.same({ { pid = 10, comm = "lua5.4" } }, tm.threads)
    end)

    it("reads the features of a big-endian file", function()
      local f = assert(open_bytes(build(">")))
      local ft = f:features()
      assert.equal("bigbox", ft.hostname)
      assert.same({ available = 8, online = 4 }, ft.nrcpus)
      assert.same({ first = 900, last = 1000 }, ft.sample_time)
      f:close()
    end)

    it("reads a big-endian pipe-mode stream", function()
      local e = ">"
      local attr_rec = B.record(e, U.header_attr, 0, attr_bytes(e) .. pack(e .. "i8", ID))
      local feat = B.record(e, U.header_feature, 0, pack(e .. "i8", 3) .. B.hstr(e, "pipebox"))
      local bytes = B.pipe(e, attr_rec .. feat .. sample(e, 1000, 0x401000, { -512, 0x401000 }))
      local f = assert(open_bytes(bytes))
      assert.is_true(f:header().pipe)
      assert.equal("pipebox", f:features().hostname)
      local recs = all(f)
      assert.same({ "header_attr", "header_feature", "sample" }, { recs[1].type, recs[2].type, recs[3].type })
      assert.equal(SAMPLE_TYPE, recs[1].attr.sample_type)
      assert.same({ ID }, recs[1].ids)
      assert.equal(0x401000, recs[3].ip)
      assert.equal("cpu-clock", recs[3].event)
      f:close()
    end)
  end)

  describe("time order", function()
    -- three rounds; a record may come a round late but never two
    local function rounds_file()
      local e = "<"
      local function s(t) return sample(e, t, 0x400000 + t, { -512, 0x400000 + t }) end
      local fr = B.record(e, U.finished_round, 0, "")
      local data = s(30) .. s(10) .. s(20) .. fr .. s(25) .. s(40) .. s(50) .. fr .. s(45) .. s(60) .. s(35)
      return B.file(e, { attrs = { { attr = attr_bytes(e), ids = { ID } } }, data = data })
    end

    it("gives records in file order by default", function()
      local f = assert(open_bytes(rounds_file()))
      local t = {}
      for rec in f:records() do t[#t + 1] = rec.time or rec.type end
      assert.same({ 30, 10, 20, "finished_round", 25, 40, 50, "finished_round", 45, 60, 35 }, t)
      f:close()
    end)

    it("releases at each finished_round what is older than the previous round's newest", function()
      local f = assert(open_bytes(rounds_file()))
      local t = {}
      for rec in f:records { order = "time" } do t[#t + 1] = rec.time or rec.type end
      -- round 1 releases nothing (no previous round); round 2 releases up to
      -- 30 (round 1's newest); the end releases the rest, sorted
      assert.same({ "finished_round", "finished_round", 10, 20, 25, 30, 35, 40, 45, 50, 60 }, t)
      f:close()
    end)

    it("filters by record type in both orders", function()
      local f = assert(open_bytes(rounds_file()))
      local n = 0
      for rec in f:records { types = { "finished_round" } } do
        assert.equal("finished_round", rec.type)
        n = n + 1
      end
      assert.equal(2, n)
      local times = {}
      for rec in f:records { order = "time", types = { "sample" } } do times[#times + 1] = rec.time end
      assert.same({ 10, 20, 25, 30, 35, 40, 45, 50, 60 }, times)
      f:close()
    end)

    it("releases the older half when the queue outgrows max_queue", function()
      B.write(tmp, rounds_file())
      local f = assert(pd.open(tmp, { max_queue = 200 }))
      local t = {}
      for rec in f:records { order = "time", types = { "sample" } } do t[#t + 1] = rec.time end
      assert.equal(9, #t)
      assert.are_not.same({ 10, 20, 25, 30, 35, 40, 45, 50, 60 }, t)   -- no round waited for
      f:close()
    end)
  end)

  describe("perf's own record types", function()
    local e = "<"
    local function file_of(records)
      return B.file(e, { attrs = { { attr = attr_bytes(e), ids = { ID } } }, data = records })
    end
    local function one(body_type, body, misc)
      local f = assert(open_bytes(file_of(B.record(e, body_type, misc, body))))
      local recs = all(f)
      f:close()
      assert.equal(1, #recs)
      return recs[1]
    end

    it("stat, stat_round and stat_config", function()
      local r = one(U.stat, pack(e .. "i8I4I4i8i8i8", 77, 1, 2, 1000, 2000, 1500))
      assert.same({ "stat", 77, 1, 2, 1000, 2000, 1500 }, { r.type, r.id, r.cpu, r.thread, r.val, r.ena, r.run })
      r = one(U.stat_round, pack(e .. "i8i8", 1, 123456))
      assert.same({ "stat_round", 1, 123456 }, { r.type, r.round_type, r.time })
      r = one(U.stat_config, pack(e .. "i8i8i8i8i8i8i8i8i8", 4, 0, 1, 1, 1000, 2, 1, 9, 5))
      assert.same({ aggr_mode = 1, interval = 1000, scale = 1, [9] = 5 }, r.config)
    end)

    it("time_conv, old and new", function()
      local r = one(U.time_conv, pack(e .. "i8i8i8", 10, 20, 30))
      assert.same({ 10, 20, 30 }, { r.time_shift, r.time_mult, r.time_zero })
      assert.is_nil(r.time_cycles)
      r = one(U.time_conv, pack(e .. "i8i8i8i8i8BB", 10, 20, 30, 40, 50, 1, 1) .. ("\0"):rep(6))
      assert.same({ 40, 50, 1, 1 }, { r.time_cycles, r.time_mask, r.cap_user_time_zero, r.cap_user_time_short })
    end)

    it("id_index, cpu_map in its three forms, event_update", function()
      local r = one(U.id_index, pack(e .. "i8i8i8i8i8", 1, ID, 0, 3, 99))
      assert.same({ { id = ID, idx = 0, cpu = 3, tid = 99 } }, r.entries)
      r = one(U.cpu_map, pack(e .. "I2I2I2I2I2", 0, 3, 0, 2, 0xffff))
      assert.same({ 0, 2, -1 }, r.cpus)
      r = one(U.cpu_map, pack(e .. "I2I2I2I4", 1, 1, 4, 0x15))
      assert.same({ 0, 2, 4 }, r.cpus)
      r = one(U.cpu_map, pack(e .. "I2I2I2", 1, 1, 8) .. "\0\0\0\0" .. pack(e .. "i8", compat.bor(compat.lshift(1,
          40), 2)))
      assert.same({ 1, 40 }, r.cpus)
      r = one(U.cpu_map, pack(e .. "I2BBI2I2", 2, 1, 0, 3, 5))
      assert.same({ -1, 3, 4, 5 }, r.cpus)
      r = one(U.event_update, pack(e .. "i8i8", 1, ID) .. pack(e .. "d", 0.25))
      assert.same({ "scale", ID, 0.25 }, { r.update_type, r.id, r.scale })
      r = one(U.event_update, pack(e .. "i8i8", 0, ID) .. B.cstr("msec"))
      assert.same({ "unit", "msec" }, { r.update_type, r.unit })
    end)

    it("an event_update naming an event names its samples", function()
      local data = B.record(e, U.event_update, 0, pack(e .. "i8i8", 2, ID) .. B.cstr("my-clock"))
                   .. sample(e, 5, 0x401000, {})
      local f = assert(open_bytes(file_of(data)))
      local recs = all(f)
      assert.equal("my-clock", recs[2].event)
      assert.equal("my-clock", f:attrs()[1].name)
      f:close()
    end)

    it("build_id, event_type, auxtrace_info, auxtrace_error, header_feature", function()
      local r = one(U.build_id, pack(e .. "i4", -1) .. ("\171"):rep(16) .. ("\0"):rep(4) ..
                    string.char(16, 0, 0, 0) .. B.cstr("/usr/bin/true"), 0x8000)
      assert.same({ -1, ("\171"):rep(16), "/usr/bin/true" }, { r.pid, r.build_id, r.filename })
      r = one(U.event_type, pack(e .. "i8", 5) .. "sched:x" .. ("\0"):rep(57))
      assert.same({ 5, "sched:x" }, { r.event_id, r.name })
      r = one(U.auxtrace_info, pack(e .. "I4I4i8i8", 8, 0, 1, 2))
      assert.same({ 8, { 1, 2 } }, { r.auxtrace_type, r.priv })
      r = one(U.auxtrace_error, pack(e .. "I4I4I4I4I4I4i8i8", 1, 2, 3, 4, 5, 1, 0x10, 777) .. B.cstr("bad trace") ..
              ("\0"):rep(48))
      assert.same({ 1, 2, 3, 4, 5, 1, 0x10, 777, "bad trace" },
                  { r.error_type, r.code, r.cpu, r.pid, r.tid, r.fmt, r.ip, r.time, r.msg })
      r = one(U.header_feature, pack(e .. "i8", 3) .. B.hstr(e, "h"))
      assert.same({ 3, "hostname" }, { r.feat_id, r.feature })
    end)

    it("skips the payload after tracing_data and auxtrace records", function()
      local payload = ("\255"):rep(40)
      local data = B.record(e, U.tracing_data, 0, pack(e .. "I4", #payload)) .. payload
                   .. B.record(e, U.auxtrace, 0, pack(e .. "i8i8i8I4I4I4I4", #payload, 0, 0, 0, 1, 0, 0)) .. payload
                   .. sample(e, 5, 0x401000, {})
      local f = assert(open_bytes(file_of(data)))
      local recs = all(f)
      assert.same({ "tracing_data", "auxtrace", "sample" }, { recs[1].type, recs[2].type, recs[3].type })
      assert.equal(#payload, recs[2].data_size)
      assert.equal(0x401000, recs[3].ip)
      f:close()
    end)

    it("reads perf 3.x's pipe streams, whose event_type records are cut to the name's length", function()
      -- perf 3.4 wrote event_type as 8 + 8 + the NUL-terminated name padded
      -- to 8 (24 bytes for "cycles"), and a 72-byte attr (PERF_ATTR_SIZE_VER1)
      local st = compat.bor(S.IP, S.TID, S.TIME, S.PERIOD)
      local attr = B.attr("<", { type = 0, config = 0, sample_period = 100000, sample_type = st, flags = 1 })
      attr = attr:sub(1, 4) .. pack("<I4", 72) .. attr:sub(9, 72)
      local recs = { B.record("<", U.header_attr, 0, attr .. pack("<i8", 7)),
                     pack("<I4I2I2i8", U.event_type, 0, 24, 7) .. "cycles\0\0" }
      for i = 1, 40 do
        recs[#recs + 1] = B.record("<", R.SAMPLE, 2, pack("<i8I4I4i8i8", 0x401000 + i, 42, 43, 1000 * i, 100000))
      end
      B.write(tmp, B.pipe("<", table.concat(recs)))
      local f = assert(pd.open(tmp))
      local got = all(f)
      f:close()
      assert.same({ "header_attr", "event_type" }, { got[1].type, got[2].type })
      assert.same({ 24, 7, "cycles" }, { got[2].size, got[2].event_id, got[2].name })
      assert.equal(42, #got)
      local last = got[42]
      assert.same({ 0x401028, 42, 43, 40000, 100000 }, { last.ip, last.pid, last.tid, last.time, last.period })
      -- perf 6.1 reads the same file: as many samples
      local out, ok = shell.sh("perf script -i " .. tmp .. " -F tid,ip 2>/dev/null | wc -l")
      if ok then assert.equal("40", shell.trim(out)) end
      -- a record cut inside its event_id is still an error naming the field
      recs[2] = pack("<I4I2I2I4", U.event_type, 0, 12, 7)
      B.write(tmp, B.pipe("<", table.concat(recs)))
      local g, err = pd.open(tmp)
      if g then
        local okr, e2 = pcall(all, g)
        g:close()
        assert.is_false(okr)
        err = e2
      end
      assert.matches("event_type record at offset 104: event_id needs 8 bytes", err)
    end)

    it("reads perf 3.8's pipe streams, whose event_type names fill the record without their NUL", function()
      -- perf 3.8 sized event_type as 8 + 8 + strlen(name) rounded up to 8:
      -- a name of 16 characters ("context-switches") fills its 32-byte
      -- record with no NUL, and perf's reader took the name the record has.
      -- Its attrs were 96 bytes (PERF_ATTR_SIZE_VER3), sample_id_all on, so
      -- that comm and mmap carry the trailer; samples routed by ID.
      local st = compat.bor(S.IP, S.TID, S.TIME, S.ID, S.CPU, S.PERIOD)
      local flags = compat.bor(1, 2, compat.lshift(1, 8), compat.lshift(1, 9), compat.lshift(1, 10),
                               compat.lshift(1, 12), compat.lshift(1, 18))   -- disabled inherit mmap comm freq
                                                                             -- enable_on_exec sample_id_all
      local function attr(config)
        local a = B.attr("<", { type = 1, config = config, sample_period = 4000, sample_type = st, flags = flags })
        return a:sub(1, 4) .. pack("<I4", 96) .. a:sub(9, 96)
      end
      local ids = { [3] = 101, [4] = 102 }   -- context-switches, cpu-migrations
      local function id_trailer(time, id) return pack("<I4I4i8i8I4I4", 42, 43, time, id, 1, 0) end
      local recs = {
        B.record("<", U.header_attr, 0, attr(3) .. pack("<i8", ids[3])),
        B.record("<", U.header_attr, 0, attr(4) .. pack("<i8", ids[4])),
        pack("<I4I2I2i8", U.event_type, 0, 32, 3) .. "context-switches",
        pack("<I4I2I2i8", U.event_type, 0, 32, 4) .. "cpu-migrations\0\0",
        B.record("<", R.COMM, 0x2000, pack("<I4I4", 42, 43) .. B.cstr("busy") .. id_trailer(500, ids[3])),
        B.record("<", R.MMAP, 2, pack("<I4I4i8i8i8", 42, 43, 0x400000, 0x1000, 0) .. B.cstr("/usr/bin/busy")
                                  .. id_trailer(600, ids[3])),
      }
      local n = 0
      for round = 1, 3 do
        for i = 1, 4 do
          n = n + 1
          local id = i % 2 == 1 and ids[3] or ids[4]
          recs[#recs + 1] = B.sample("<", st, { ip = 0x400100 + n, pid = 42, tid = 43, time = 1000 * n, id = id,
                                                cpu = 1, period = round })
        end
        recs[#recs + 1] = B.record("<", U.finished_round, 0, "")
      end
      B.write(tmp, B.pipe("<", table.concat(recs)))
      local f = assert(pd.open(tmp))
      local got = all(f)
      f:close()
      local types = {}
      for i, r in ipairs(got) do types[i] = r.type end
      assert.same({ "header_attr", "header_attr", "event_type", "event_type", "comm", "mmap",
                    "sample", "sample", "sample", "sample", "finished_round",
                    "sample", "sample", "sample", "sample", "finished_round",
                    "sample", "sample", "sample", "sample", "finished_round" }, types)
      assert.same({ 32, 3, "context-switches" }, { got[3].size, got[3].event_id, got[3].name })
      assert.same({ 32, 4, "cpu-migrations" }, { got[4].size, got[4].event_id, got[4].name })
      assert.same({ 42, 43, "busy", 500, ids[3], 1 }, { got[5].pid, got[5].tid, got[5].comm, got[5].time,
                                                        got[5].id, got[5].cpu })
      assert.same({ 42, 0x400000, 0x1000, "/usr/bin/busy", 600 }, { got[6].pid, got[6].addr, got[6].len,
                                                                     got[6].filename, got[6].time })
      n = 0
      for i = 7, #got do
        local r = got[i]
        if r.type == "sample" then
          n = n + 1
          local id = n % 2 == 1 and ids[3] or ids[4]
          assert.same({ 0x400100 + n, 42, 43, 1000 * n, id, 1, compat.idiv(n + 3, 4),
                        id == ids[3] and "context-switches" or "cpu-migrations" },
                      { r.ip, r.pid, r.tid, r.time, r.id, r.cpu, r.period, r.event })
        end
      end
      assert.equal(12, n)
      -- perf 6.1 reads the same stream: as many samples
      local out, ok = shell.sh("perf script -i " .. tmp .. " -F tid,ip 2>/dev/null | wc -l")
      if ok then assert.equal("12", shell.trim(out)) end
    end)

    it("gives an unknown type its number and bytes", function()
      local r = one(200, "abcdefgh")
      assert.same({ 200, "abcdefgh" }, { r.type, r.data })
    end)
  end)

  it("streams a large file in bounded memory, in both orders #slow", function()
    if os.getenv("PERFEV_CHECK") then
      pending("peak RSS measures the checker's own memory under PERFEV_CHECK=" .. os.getenv("PERFEV_CHECK"))
      return
    end
    local u = require "spec.support.util"
    local e = "<"
    local dir = io.open("/dev/shm/.perfev-probe", "w") and "/dev/shm" or "/tmp"
    os.remove("/dev/shm/.perfev-probe")
    local path = ("%s/perfev-big-%d.data"):format(dir, os.time())
    local chain = {}
    for i = 1, 60 do chain[i] = 0x400000 + i end
    local block = {}
    for i = 1, 1000 do block[i] = sample(e, i, 0x401000, chain) end
    block = table.concat(block) .. B.record(e, U.finished_round, 0, "")
    local f = assert(io.open(path, "wb"))
    f:write(B.pipe(e, B.record(e, U.header_attr, 0, attr_bytes(e) .. pack(e .. "i8", ID))))
    local blocks = compat.idiv(compat.lshift(128, 20), #block)
    for _ = 1, blocks do f:write(block) end
    f:close()
    -- a child process, whose peak RSS (VmHWM) is this reading's alone
    local out = u.run_lua(([[
      local pd = require "perfev.perfdata"
      local f = assert(pd.open(%q))
      local n = 0
      for _, order in ipairs { "file", "time" } do
        for rec in f:records { order = order } do n = n + 1 end
      end
      print(n, io.open("/proc/self/status"):read("a"):match("VmHWM:%%s*(%%d+) kB"))
    ]]):format(path))
    os.remove(path)
    local n, hwm = out:match("^(%d+)%s+(%d+)")
    assert.equal(2 * (1 + blocks * 1001), tonumber(n), out)
    assert.is_true(blocks * #block > compat.lshift(120, 20))
    assert.is_true(tonumber(hwm) < 48 * 1024, "peak RSS " .. tostring(hwm) .. " kB")
  end)

  describe("core.attr_from_bytes", function()
    it("gives back the attr its bytes came from", function()
      local a = core.attr { type = "software", config = 1, sample_period = 4000, disabled = true,
                            precise_ip = 3, sample_id_all = true, sigtrap = true, aux_resume = true,
                            clockid = "monotonic_raw", sample_type = { "ip", "time" } }
      assert.is_true(core.attr_from_bytes(a:bytes()) == a)
    end)

    it("reads the bitfields of a big-endian attr at their mirrored bits", function()
      local le = B.attr("<", { flags = FLAGS, sample_type = 7, aux_action = 5 })
      local be = B.attr(">", { flags = FLAGS, sample_type = 7, aux_action = 5 })
      assert.are_not.equal(le, be)
      assert.is_true(core.attr_from_bytes(le) == core.attr_from_bytes(be, true))
      assert.is_false(core.attr_from_bytes(le) == core.attr_from_bytes(be))
    end)

    it("refuses fewer than 8 bytes", function()
      assert.has_error(function() core.attr_from_bytes("1234") end,
                       "perfev.attr_from_bytes: 4 bytes is shorter than an attr's type and size")
    end)
  end)
end)
