-- perfev.decode over synthetic records built here with string.pack, for
-- every record type and every sample field (including those this machine
-- cannot produce: branch stacks, weight_struct, data_src, regs_intr).
local perfev = require "perfev"
local core = require "perfev.core"
local compat = require "perfev.compat"

local R, SAMPLE, MISC = core.RECORD, core.SAMPLE, core.MISC
local pack = compat.pack
local rb = require "spec.support.records"
local record, u64, u32, cstr, decode_all, decode1 = rb.record, rb.u64, rb.u32, rb.cstr, rb.decode_all, rb.decode1

local function attr(t) return perfev.attr(t) end

-- The sample_id trailer for sample_type TID|TIME|ID|STREAM_ID|CPU|IDENTIFIER.
local TRAILER_TYPE = { "tid", "time", "id", "stream_id", "cpu", "identifier" }
local TRAILER = u32(101, 102) .. u64(103, 104, 105) .. u32(3, 0) .. u64(104)

local function check_trailer(rec, body_wins)
  body_wins = body_wins or {}
  if not body_wins.pid then assert.equal(101, rec.pid) end
  if not body_wins.tid then assert.equal(102, rec.tid) end
  if not body_wins.time then assert.equal(103, rec.time) end
  if not body_wins.id then assert.equal(104, rec.id) end
  if not body_wins.stream_id then assert.equal(105, rec.stream_id) end
  assert.equal(3, rec.cpu)
end

describe("perfev.decode", function()
  local side = attr { sample_type = TRAILER_TYPE, sample_id_all = true,
                      read_format = { "total_time_enabled", "id" } }

  describe("every record type, with the sample_id trailer", function()
    it("mmap", function()
      local r = decode1(record(R.MMAP, compat.bor(MISC.USER, MISC.MMAP_DATA),
        u32(7, 8) .. u64(0x400000, 4096, 0) .. cstr("/bin/true") .. TRAILER), side)
      assert.equal("mmap", r.type)
      assert.same({ 7, 8, 0x400000, 4096, 0, "/bin/true" },
                  { r.pid, r.tid, r.addr, r.len, r.pgoff, r.filename })
      assert.equal("user", r.cpumode)
      assert.is_true(r.mmap_data)
      check_trailer(r, { pid = true, tid = true })
    end)

    it("lost", function()
      local r = decode1(record(R.LOST, 0, u64(104, 17) .. TRAILER), side)
      assert.same({ "lost", 104, 17 }, { r.type, r.id, r.lost })
      check_trailer(r)
    end)

    it("comm, with comm_exec", function()
      local r = decode1(record(R.COMM, MISC.COMM_EXEC, u32(5, 6) .. cstr("lua5.4") .. TRAILER), side)
      assert.same({ "comm", 5, 6, "lua5.4", true }, { r.type, r.pid, r.tid, r.comm, r.comm_exec })
      check_trailer(r, { pid = true, tid = true })
    end)

    it("exit and fork", function()
      for _, t in ipairs { { R.EXIT, "exit" }, { R.FORK, "fork" } } do
        local r = decode1(record(t[1], 0, u32(1, 2, 3, 4) .. u64(99) .. TRAILER), side)
        assert.same({ t[2], 1, 2, 3, 4, 99 }, { r.type, r.pid, r.ppid, r.tid, r.ptid, r.time })
        check_trailer(r, { pid = true, tid = true, time = true })
      end
    end)

    it("throttle and unthrottle", function()
      for _, t in ipairs { { R.THROTTLE, "throttle" }, { R.UNTHROTTLE, "unthrottle" } } do
        local r = decode1(record(t[1], 0, u64(50, 104, 105) .. TRAILER), side)
        assert.same({ t[2], 50, 104, 105 }, { r.type, r.time, r.id, r.stream_id })
        check_trailer(r, { time = true })
      end
    end)

    it("read, by the attr's read_format", function()
      local r = decode1(record(R.READ, 0, u32(9, 10) .. u64(1234, 555, 104) .. TRAILER), side)
      assert.equal("read", r.type)
      assert.same({ value = 1234, time_enabled = 555, id = 104 }, r.values)
      check_trailer(r, { pid = true, tid = true })
    end)

    it("mmap2, with device and inode", function()
      local r = decode1(record(R.MMAP2, MISC.USER,
        u32(7, 8) .. u64(0x1000, 0x2000, 0x3000) .. u32(8, 1) .. u64(424242, 3)
        .. u32(5, 2) .. cstr("/usr/lib/libc.so.6") .. TRAILER), side)
      assert.same({ "mmap2", 0x1000, 0x2000, 0x3000, 8, 1, 424242, 3, 5, 2, "/usr/lib/libc.so.6" },
                  { r.type, r.addr, r.len, r.pgoff, r.maj, r.min, r.ino, r.ino_generation,
                    r.prot, r.flags, r.filename })
      assert.is_nil(r.build_id)
      check_trailer(r, { pid = true, tid = true })
    end)

    it("mmap2, with a build id", function()
      local id = ("\xab"):rep(20)
      local r = decode1(record(R.MMAP2, MISC.MMAP_BUILD_ID,
        u32(7, 8) .. u64(0x1000, 0x2000, 0) .. pack("=I1I1I2", 20, 0, 0) .. id
        .. u32(5, 2) .. cstr("/x") .. TRAILER), side)
      assert.equal(id, r.build_id)
      assert.is_true(r.mmap_build_id)
      assert.is_nil(r.ino)
      assert.equal("/x", r.filename)
    end)

    it("aux, with its flags", function()
      local r = decode1(record(R.AUX, 0, u64(4096, 512, compat.bor(1, 4)) .. TRAILER), side)
      assert.same({ "aux", 4096, 512, 5, true, true }, { r.type, r.aux_offset, r.aux_size,
                   r.flags, r.truncated, r.partial })
      assert.is_nil(r.overwrite)
      check_trailer(r)
    end)

    it("itrace_start", function()
      local r = decode1(record(R.ITRACE_START, 0, u32(11, 12) .. TRAILER), side)
      assert.same({ "itrace_start", 11, 12 }, { r.type, r.pid, r.tid })
    end)

    it("lost_samples", function()
      local r = decode1(record(R.LOST_SAMPLES, 0, u64(33) .. TRAILER), side)
      assert.same({ "lost_samples", 33 }, { r.type, r.lost })
      check_trailer(r)
    end)

    it("switch and switch_cpu_wide, with switch_out and preempt", function()
      local r = decode1(record(R.SWITCH, compat.bor(MISC.SWITCH_OUT, MISC.SWITCH_OUT_PREEMPT), TRAILER), side)
      assert.same({ "switch", true, true }, { r.type, r.switch_out, r.switch_out_preempt })
      check_trailer(r)
      r = decode1(record(R.SWITCH_CPU_WIDE, 0, u32(20, 21) .. TRAILER), side)
      assert.same({ "switch_cpu_wide", 20, 21 }, { r.type, r.next_prev_pid, r.next_prev_tid })
      assert.is_nil(r.switch_out)
      check_trailer(r)
    end)

    it("namespaces", function()
      local r = decode1(record(R.NAMESPACES, 0, u32(1, 2) .. u64(2, 10, 11, 20, 21) .. TRAILER), side)
      assert.equal("namespaces", r.type)
      assert.same({ { dev = 10, inode = 11, name = "net" }, { dev = 20, inode = 21, name = "uts" } },
                  r.namespaces)
    end)

    it("ksymbol", function()
      local r = decode1(record(R.KSYMBOL, 0, u64(compat.hex64("0xffffffffc0000000")) .. u32(256)
        .. pack("=I2I2", 1, 0) .. cstr("bpf_prog_x") .. TRAILER), side)
      assert.same({ "ksymbol", 256, 1, 0, "bpf_prog_x" }, { r.type, r.len, r.ksym_type, r.flags, r.name })
      assert.equal("ffffffffc0000000", ("%x"):format(r.addr))
      check_trailer(r)
    end)

    it("bpf_event (type and id as bpf_type and prog_id)", function()
      local r = decode1(record(R.BPF_EVENT, 0, pack("=I2I2I4", 1, 0, 77) .. "TAGTAG!!" .. TRAILER), side)
      assert.same({ "bpf_event", 1, 0, 77, "TAGTAG!!" }, { r.type, r.bpf_type, r.flags, r.prog_id, r.tag })
      check_trailer(r)
    end)

    it("cgroup (its id as cgroup_id)", function()
      local r = decode1(record(R.CGROUP, 0, u64(9) .. cstr("/user.slice") .. TRAILER), side)
      assert.same({ "cgroup", 9, "/user.slice" }, { r.type, r.cgroup_id, r.path })
      check_trailer(r)
    end)

    it("text_poke", function()
      local r = decode1(record(R.TEXT_POKE, 0, u64(compat.hex64("0xffffffff81000000")) .. pack("=I2I2", 2, 5)
        .. "\x90\x90" .. "\xe8\1\2\3\4" .. ("\0"):rep(5) .. TRAILER), side)
      assert.same({ "text_poke", "\x90\x90", "\xe8\1\2\3\4" }, { r.type, r.old_bytes, r.new_bytes })
      check_trailer(r)
    end)

    it("aux_output_hw_id", function()
      local r = decode1(record(R.AUX_OUTPUT_HW_ID, 0, u64(6) .. TRAILER), side)
      assert.same({ "aux_output_hw_id", 6 }, { r.type, r.hw_id })
      check_trailer(r)
    end)

    it("callchain_deferred", function()
      local r = decode1(record(R.CALLCHAIN_DEFERRED, 0, u64(42, 3, core.CONTEXT.USER, 0x401000, 0x402000)
        .. TRAILER), side)
      assert.same({ "callchain_deferred", 42 }, { r.type, r.cookie })
      assert.same({ 0x401000, 0x402000 }, r.callchain)
      assert.same({ { context = "user", first = 1, last = 2 } }, r.callchain_contexts)
    end)

    it("an unknown type iterates with its number and bytes", function()
      local recs = decode_all(record(200, 0, "abcdefgh") .. record(R.LOST_SAMPLES, 0, u64(1) .. TRAILER), side)
      assert.equal(200, recs[1].type)
      assert.equal("abcdefgh", recs[1].data)
      assert.equal("lost_samples", recs[2].type)
    end)

    it("without sample_id_all, no trailer is read", function()
      local r = decode1(record(R.COMM, 0, u32(5, 6) .. cstr("x")), attr { sample_type = TRAILER_TYPE })
      assert.same({ 5, 6, "x" }, { r.pid, r.tid, r.comm })
      assert.is_nil(r.time)
    end)

    it("misc: cpumode and the flags of each record type", function()
      for mode, name in pairs { [0] = "unknown", "kernel", "user", "hypervisor", "guest_kernel",
                                "guest_user" } do
        assert.equal(name, decode1(record(R.LOST_SAMPLES, mode, u64(0) .. TRAILER), side).cpumode)
      end
      -- bit 13 is comm_exec in comm, mmap_data in mmap: never both
      local r = decode1(record(R.COMM, MISC.COMM_EXEC, u32(5, 6) .. cstr("x") .. TRAILER), side)
      assert.is_nil(r.mmap_data)
      assert.equal(MISC.COMM_EXEC, r.misc)
    end)
  end)

  describe("samples", function()
    -- Every sample field: its sample_type name, bytes, and what it decodes to.
    local regs_mask = compat.bor(compat.lshift(1, 0), compat.lshift(1, 8), compat.lshift(3,
        32))   -- ax, ip, xmm0 (two words)
    local FIELDS = {
      { "identifier", u64(77), { id = 77 } },
      { "ip", u64(0x401000), { ip = 0x401000 } },
      { "tid", u32(10, 11), { pid = 10, tid = 11 } },
      { "time", u64(123456789), { time = 123456789 } },
      { "addr", u64(0xdead000), { addr = 0xdead000 } },
      { "id", u64(77), { id = 77 } },
      { "stream_id", u64(78), { stream_id = 78 } },
      { "cpu", u32(2, 0), { cpu = 2 } },
      { "period", u64(100000), { period = 100000 } },
      { "read", u64(3, 500, 7, 1000, 8), { read = { nr = 3, time_enabled = 500,
          { value = 7, id = 1000 }, { value = 8, id = 1001 }, { value = 9, id = 1002 } } },
        extra = u64(1001, 9, 1002) },
      { "callchain", u64(5, core.CONTEXT.KERNEL, compat.hex64("0xffffffff81000010"), core.CONTEXT.USER, 0x401000,
          0x401100),
        { callchain = { compat.hex64("0xffffffff81000010"), 0x401000, 0x401100 },
          callchain_contexts = { { context = "kernel", first = 1, last = 1 },
                                 { context = "user", first = 2, last = 3 } } } },
      { "raw", u32(4) .. "RAW!", { raw = "RAW!" } },
      { "branch_stack", u64(2, 9) .. u64(0x10, 0x20, compat.bor(1, compat.lshift(100, 4), compat.lshift(3,
          20))) .. u64(0x30, 0x40, compat.bor(2, 4, 8)),
        { branch_stack = { hw_idx = 9,
          { from = 0x10, to = 0x20, mispred = true, predicted = false, in_tx = false, abort = false,
            cycles = 100, type = 3, spec = 0, new_type = 0, priv = 0 },
          { from = 0x30, to = 0x40, mispred = false, predicted = true, in_tx = true, abort = true,
            cycles = 0, type = 0, spec = 0, new_type = 0, priv = 0 } } } },
      { "regs_user", u64(2, 1, 2, 3, 4), { regs_user = { abi = 2, ax = 1, ip = 2, xmm0 = 3, xmm0h = 4 } } },
      { "stack_user", u64(16) .. ("s"):rep(16) .. u64(12), { stack_user = ("s"):rep(16), dyn_size = 12 } },
      { "weight", u64(300), { weight = 300 } },
      { "data_src", u64(compat.bor(compat.lshift(2, 0), compat.lshift(compat.bor(2, 8), 5), compat.lshift(2, 19),
          compat.lshift(1, 24), compat.lshift(compat.bor(2, 8), 26), compat.lshift(1, 33))),
        { data_src = compat.bor(compat.lshift(2, 0), compat.lshift(compat.bor(2, 8), 5), compat.lshift(2, 19),
            compat.lshift(1, 24), compat.lshift(compat.bor(2, 8), 26), compat.lshift(1, 33)),
          mem = { op = "load", lvl = "hit|l1", snoop = "none", lock = "na", dtlb = "hit|l1",
                  lvl_num = "l1" } } },
      { "transaction", u64(0x100000003), { transaction = 0x100000003 } },
      { "regs_intr", u64(2, 5, 6, 7, 8), { regs_intr = { abi = 2, ax = 5, ip = 6, xmm0 = 7, xmm0h = 8 } } },
      { "phys_addr", u64(0x1234000), { phys_addr = 0x1234000 } },
      { "cgroup", u64(55), { cgroup = 55 } },
      { "data_page_size", u64(4096), { data_page_size = 4096 } },
      { "code_page_size", u64(2097152), { code_page_size = 2097152 } },
      { "aux", u64(8) .. "AUXDATA!", { aux = "AUXDATA!" } },
    }
    local function sample_attr(types)
      return attr { sample_type = types, read_format = { "group", "total_time_enabled", "id" },
                    branch_sample_type = { "any", "hw_index" },
                    sample_regs_user = regs_mask, sample_regs_intr = regs_mask }
    end
    local function check(rec, want)
      for k, v in pairs(want) do assert.same(v, rec[k], k) end
    end

    for _, f in ipairs(FIELDS) do
      it(f[1] .. " alone", function()
        local r = decode1(record(R.SAMPLE, MISC.USER, f[2] .. (f.extra or "")), sample_attr { f[1] })
        assert.equal("sample", r.type)
        check(r, f[3])
      end)
    end

    it("every field together, in the kernel's order", function()
      local types, body, want = {}, {}, {}
      for _, f in ipairs(FIELDS) do
        types[#types + 1] = f[1]
        body[#body + 1] = f[2] .. (f.extra or "")
        for k, v in pairs(f[3]) do want[k] = v end
      end
      local r = decode1(record(R.SAMPLE, compat.bor(MISC.KERNEL, MISC.EXACT_IP), table.concat(body)),
          sample_attr(types))
      check(r, want)
      assert.equal("kernel", r.cpumode)
      assert.is_true(r.exact_ip)
    end)

    it("weight_struct: var1_dw as weight, var2_w, var3_w", function()
      local r = decode1(record(R.SAMPLE, 0, pack("=I4I2I2", 70000, 12, 34)), sample_attr { "weight_struct" })
      assert.same({ 70000, 12, 34 }, { r.weight, r.var2_w, r.var3_w })
    end)

    it("read of a single event, with lost", function()
      local a = attr { sample_type = { "read" }, read_format = { "total_time_running", "id", "lost" } }
      local r = decode1(record(R.SAMPLE, 0, u64(5, 6, 7, 8)), a)
      assert.same({ value = 5, time_running = 6, id = 7, lost = 8 }, r.read)
    end)

    it("stack_user of size 0 has no dyn_size", function()
      local r = decode1(record(R.SAMPLE, 0, u64(0)), sample_attr { "stack_user" })
      assert.equal("", r.stack_user)
      assert.is_nil(r.dyn_size)
    end)

    it("regs with abi NONE carry no registers", function()
      local r = decode1(record(R.SAMPLE, 0, u64(0)), sample_attr { "regs_user" })
      assert.same({ abi = 0 }, r.regs_user)
    end)

    it("branch counters (branch_sample_type counters) follow the entries", function()
      local a = attr { sample_type = { "branch_stack" }, branch_sample_type = compat.bor(core.BRANCH.ANY,
          compat.lshift(1, 19)) }
      local r = decode1(record(R.SAMPLE, 0, u64(1, 0x10, 0x20, 0, 42)), a)
      assert.equal(42, r.branch_stack[1].counters)
      assert.is_nil(r.branch_stack.hw_idx)
    end)

    it("a u64 above 2^63 reads as a negative integer that prints right", function()
      local r = decode1(record(R.SAMPLE, 0, u64(compat.hex64("0xffffffff81234567"))), sample_attr { "ip" })
      assert.equal("ffffffff81234567", ("%x"):format(r.ip))
    end)

    it("accepts a table of attr fields", function()
      local r = decode1(record(R.SAMPLE, 0, u64(0x401000)), { sample_type = SAMPLE.IP })
      assert.equal(0x401000, r.ip)
    end)
  end)

  describe("a stream of several events", function()
    local a1 = attr { sample_type = { "identifier", "ip" }, sample_id_all = true }
    local a2 = attr { sample_type = { "identifier", "ip", "period" }, sample_id_all = true }

    it("routes each record to its attr by id", function()
      local bytes = record(R.SAMPLE, 0, u64(1, 0x10)) .. record(R.SAMPLE, 0, u64(2, 0x20, 999))
        .. record(R.LOST, 0, u64(2, 4) .. u64(2))
      local recs = decode_all(bytes, { [1] = a1, [2] = a2 })
      assert.same({ 1, 0x10 }, { recs[1].id, recs[1].ip })
      assert.is_nil(recs[1].period)
      assert.same({ 2, 0x20, 999 }, { recs[2].id, recs[2].ip, recs[2].period })
      assert.same({ "lost", 2, 4 }, { recs[3].type, recs[3].id, recs[3].lost })
    end)

    it("an id no attr has is an error naming it", function()
      local ok, err = pcall(decode_all, record(R.SAMPLE, 0, u64(3, 0x10)), { [1] = a1, [2] = a2 })
      assert.is_false(ok)
      assert.matches("no attr for id 3", err)
    end)

    it("attrs that put the id in different places are refused", function()
      local b = attr { sample_type = { "ip", "id" } }
      assert.has_error(function() perfev.decode("", { [1] = a1, [2] = b }) end)
      local c = attr { sample_type = { "ip" } }
      local ok, err = pcall(perfev.decode, "", { [1] = c, [2] = c })
      assert.is_false(ok)
      assert.matches("IDENTIFIER", err)
    end)
  end)

  describe("malformed input", function()
    local a = attr { sample_type = { "ip", "callchain", "raw", "branch_stack", "read" },
                     read_format = { "group" } }
    local function fails(bytes, pattern, at)
      local ok, err = pcall(decode_all, bytes, a)
      assert.is_false(ok, "decoded")
      assert.matches("malformed record at offset " .. (at or 0), err, 1, true)
      if pattern then assert.matches(pattern, err) end
    end
    -- ip, read (a group of 0), callchain, raw, branch_stack: the kernel's order
    local good = record(R.SAMPLE, 0, u64(0x10, 0, 0) .. u32(4, 0) .. u64(0))

    it("the valid record of these tests decodes", function()
      assert.equal(0x10, decode1(good, a).ip)
    end)
    it("a size smaller than the header", function()
      fails(good .. pack("=I4I2I2", 9, 0, 4), "smaller than the 8%-byte header", #good)
    end)
    it("a size past the end", function()
      fails(good .. pack("=I4I2I2", 9, 0, 64) .. u64(1), "past the end", #good)
    end)
    it("a buffer that ends inside a header", function()
      fails(good .. "abc", "inside a record header", #good)
    end)
    it("a callchain count that overflows the record", function()
      fails(record(R.SAMPLE, 0, u64(0x10, 0, compat.lshift(1, 61))), "callchain nr")
      fails(record(R.SAMPLE, 0, u64(0x10, 0, -1)), "callchain nr")
    end)
    it("a raw size past the record", function()
      fails(record(R.SAMPLE, 0, u64(0x10, 0, 0) .. u32(100) .. "abcd"), "raw data")
    end)
    it("a branch count that overflows", function()
      fails(record(R.SAMPLE, 0, u64(0x10, 0, 0) .. u32(4, 0) .. u64(compat.lshift(1, 60))), "branch_stack nr")
    end)
    it("a group read count that overflows", function()
      fails(record(R.SAMPLE, 0, u64(0x10, -1)), "read nr")
    end)
    it("a record too short for its fields", function()
      fails(record(R.SAMPLE, 0, ""), "ip needs 8 bytes")
      fails(record(R.MMAP, 0, u32(1, 2)), "addr needs 8 bytes")
    end)
    it("a trailer larger than the record", function()
      local ok, err = pcall(decode_all, record(R.LOST, 0, u64(1, 2)), side)
      assert.is_false(ok)
      assert.matches("sample_id trailer needs 48 bytes", err)
    end)
    it("namespaces and build ids that do not fit", function()
      local ok, err = pcall(decode_all, record(R.NAMESPACES, 0, u32(1, 2) .. u64(1000)), attr {})
      assert.is_false(ok)
      assert.matches("nr_namespaces count", err)
      ok, err = pcall(decode_all, record(R.MMAP2, MISC.MMAP_BUILD_ID,
        u32(1, 2) .. u64(0, 0, 0) .. pack("=I1", 21) .. ("\0"):rep(23) .. u32(0, 0) .. cstr("x")), attr {})
      assert.is_false(ok)
      assert.matches("build_id_size 21", err)
    end)

    it("never reads out of bounds: every truncation and byte flip errors or decodes", function()
      local all = attr { sample_type = { "identifier", "ip", "tid", "time", "callchain", "raw",
                                         "branch_stack", "regs_user", "stack_user", "read", "aux" },
                         read_format = { "group", "id", "lost" }, sample_regs_user = 0xff,
                         branch_sample_type = { "any", "hw_index" }, sample_id_all = true }
      local bytes = record(R.SAMPLE, 0, u64(1, 2) .. u32(3, 4) .. u64(5) .. u64(1, 11, 12, 13)
        .. u64(2, 6, 7) .. u32(4) .. "raw!" .. u64(1, 0, 8, 9, 10) .. u64(2, 1, 2, 3, 4, 5, 6, 7, 8)
        .. u64(8) .. "stackabc" .. u64(4) .. u64(3) .. "aux\0\0\0\0\0")
        .. record(R.MMAP2, 0, u32(1, 2) .. u64(3, 4, 5) .. u32(6, 7) .. u64(8, 9) .. u32(1, 2)
        .. cstr("/lib") .. u32(3, 4) .. u64(5, 1))
      local recs = decode_all(bytes, all)
      assert.equal(2, #recs)
      assert.same({ 1, 2, 3, 4, 5, 11, "raw!", "stackabc", 4, "aux" }, { recs[1].id, recs[1].ip,
        recs[1].pid, recs[1].tid, recs[1].time, recs[1].read[1].value, recs[1].raw,
        recs[1].stack_user, recs[1].dyn_size, recs[1].aux })
      assert.same({ "mmap2", "/lib", 5 }, { recs[2].type, recs[2].filename, recs[2].time })
      local rnd = 12345
      local function rand(n) rnd = (rnd * 1103515245 + 12345) % 2147483648; return rnd % n end
      for cut = 0, #bytes - 1 do
        local ok, err = pcall(decode_all, bytes:sub(1, cut), all)
        assert(ok or err:match("malformed record"), err)
      end
      for _ = 1, 3000 do
        local i = rand(#bytes) + 1
        local s = bytes:sub(1, i - 1) .. string.char(rand(256)) .. bytes:sub(i + 1)
        local ok, err = pcall(decode_all, s, all)
        assert(ok or err:match("malformed record"), err)
      end
    end)
  end)

  describe("what the decoder keeps that a plain merge would lose", function()
    local function trailer_of(t)   -- TRAILER_TYPE's layout
      return u32(t.pid, t.tid) .. u64(t.time, t.id, t.stream_id) .. u32(t.cpu, 0) .. u64(t.id)
    end
    local TR = { pid = 101, tid = 102, time = 103, id = 104, stream_id = 105, cpu = 3 }

    it("rec.sample_id: the whole trailer, when a body field hides one of its fields", function()
      -- a fork: the body has the child, the trailer the parent
      local parent = { pid = 9, tid = 9, time = 97, id = 104, stream_id = 105, cpu = 3 }
      local r = decode1(record(R.FORK, 0, u32(10, 9, 10, 9) .. u64(98) .. trailer_of(parent)), side)
      assert.same({ 10, 10, 98 }, { r.pid, r.tid, r.time })
      assert.same(parent, r.sample_id)
      assert.same({ 104, 105, 3 }, { r.id, r.stream_id, r.cpu })   -- and merged, as before
      -- a lost record: the body's id, and the trailer's
      r = decode1(record(R.LOST, 0, u64(7, 17) .. TRAILER), side)
      assert.same({ 7, 17, 104 }, { r.id, r.lost, r.sample_id.id })
      assert.same(TR, r.sample_id)
      -- throttle: time, id and stream_id are the body's
      r = decode1(record(R.THROTTLE, 0, u64(50, 60, 70) .. TRAILER), side)
      assert.same({ 50, 60, 70 }, { r.time, r.id, r.stream_id })
      assert.same(TR, r.sample_id)
    end)

    it("no rec.sample_id when nothing collides: the trailer is merged into the record", function()
      for _, bytes in ipairs { record(R.AUX, 0, u64(4096, 512, 0) .. TRAILER),
                               record(R.LOST_SAMPLES, 0, u64(33) .. TRAILER),
                               record(R.SWITCH, 0, TRAILER) } do
        local r = decode1(bytes, side)
        assert.is_nil(r.sample_id, r.type)
        check_trailer(r)
      end
      -- comm without TID in sample_type: its pid/tid hide nothing
      local a = attr { sample_type = { "time", "identifier" }, sample_id_all = true }
      local r = decode1(record(R.COMM, 0, u32(5, 6) .. cstr("x") .. u64(77, 8)), a)
      assert.is_nil(r.sample_id)
      assert.same({ 5, 6, 77, 8 }, { r.pid, r.tid, r.time, r.id })
    end)

    it("branch entries: entry.flags, the raw word, only when a bit no field names is set", function()
      local a = attr { sample_type = { "branch_stack" } }
      local plain_flags = compat.bor(1, compat.lshift(100, 4), compat.lshift(3, 20), compat.lshift(5, 30))
      local r = decode1(record(R.SAMPLE, 0, u64(2, 0x10, 0x20, plain_flags, 0x30, 0x40, compat.bor(plain_flags,
          compat.lshift(1, 33), compat.lshift(1, 63)))), a)
      local b1, b2 = r.branch_stack[1], r.branch_stack[2]
      assert.is_nil(b1.flags)
      assert.same({ true, 100, 3, 5 }, { b1.mispred, b1.cycles, b1.type, b1.priv })
      assert.equal(compat.bor(plain_flags, compat.lshift(1, 33), compat.lshift(1, 63)), b2.flags)
      assert.same({ true, 100, 3, 5 }, { b2.mispred, b2.cycles, b2.type, b2.priv })
    end)

    it("pids and tids are pid_t: 0xffffffff reads as -1", function()
      local m1 = 0xffffffff
      local r = decode1(record(R.FORK, 0, u32(m1, m1, m1, m1) .. u64(1)), {})
      assert.same({ -1, -1, -1, -1 }, { r.pid, r.ppid, r.tid, r.ptid })
      r = decode1(record(R.SWITCH_CPU_WIDE, 0, u32(m1, m1)), {})
      assert.same({ -1, -1 }, { r.next_prev_pid, r.next_prev_tid })
      r = decode1(record(R.MMAP, 0, u32(m1, 0) .. u64(compat.hex64("0xffffffff81000000"), 4096, 0)
                         .. cstr("[kernel.kallsyms]_text")), {})
      assert.same({ -1, 0 }, { r.pid, r.tid })
      r = decode1(record(R.SAMPLE, 0, u32(m1, m1)), attr { sample_type = { "tid" } })
      assert.same({ -1, -1 }, { r.pid, r.tid })
      r = decode1(record(R.SWITCH, 0, u32(m1, 0x7fffffff)), attr { sample_type = { "tid" }, sample_id_all = true })
      assert.same({ -1, 0x7fffffff }, { r.pid, r.tid })
      -- other u32 fields stay unsigned
      r = decode1(record(R.SAMPLE, 0, u32(m1, 0)), attr { sample_type = { "cpu" } })
      assert.equal(m1, r.cpu)
    end)

    it("a sample with both identifier and id: rec.id is the ID word (the later one)", function()
      local r = decode1(record(R.SAMPLE, 0, u64(1, 0x400000, 2)), attr { sample_type = { "identifier", "ip", "id" } })
      assert.same({ 2, 0x400000 }, { r.id, r.ip })
    end)

    it("the kernel map perf synthesizes has pid -1, as perf script -D prints it", function()
      local P = require "spec.support.perfdata"
      if not P.have_perf() then
        pending("the perf tool is not installed (Debian: linux-perf)")
        return
      end
      local pd = require "perfev.perfdata"
      local dir = P.tmpdir()
      local path, out = P.record(dir .. "/k.data", "-e cpu-clock -c 100000 -- " .. P.busy(2000))
      if not path then
        P.rmdir(dir)
        error("perf record: " .. tostring(out))
      end
      -- "0 0x158 [0x50]: PERF_RECORD_MMAP -1/0: [...]": offset, pid, tid
      local perf = {}
      for line in P.perf(("script -D -i '%s'"):format(path)):gmatch("[^\n]+") do
        local off, pid, tid = line:match("^%-?%d+ 0x(%x+) %[0x%x+%]: PERF_RECORD_[MC][MO][AM][PM]2? (%-?%d+)/(%-?%d+):")
        if off then perf[tonumber(off, 16)] = { tonumber(pid), tonumber(tid) } end
      end
      local f = assert(pd.open(path))
      local n, kernel = 0, 0
      for rec in f:records { offsets = true } do
        local want = perf[rec.offset]
        if want and (rec.type == "mmap" or rec.type == "mmap2" or rec.type == "comm") then
          n = n + 1
          assert.same(want, { rec.pid, rec.tid }, rec.type .. " at " .. rec.offset)
          if rec.pid == -1 then kernel = kernel + 1 end
        end
      end
      f:close()
      P.rmdir(dir)
      assert.is_true(n >= 2, n .. " mmap and comm records")
      assert.is_true(kernel >= 1, "a kernel mmap with pid -1")
    end)
  end)
end)
