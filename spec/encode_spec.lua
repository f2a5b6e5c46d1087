-- perfev.encode, the inverse of perfev.decode: tables built here encode to
-- the bytes string.pack builds for them and decode back to the same table
-- (like perf's own sample-parsing test), for every sample_type field and
-- record type; records the kernel wrote (a cpu-clock ring of this process)
-- and files perf wrote (perf record, dumped by perf report -D) come back
-- from encode as they were.
local perfev = require "perfev"
local core = require "perfev.core"
local u = require "spec.support.util"
local compat = require "perfev.compat"

local R, MISC, SAMPLE, FORMAT = core.RECORD, core.MISC, core.SAMPLE, core.FORMAT
local pack = compat.pack
local rb = require "spec.support.records"
local u64, u32, decode_all, decode1 = rb.u64, rb.u32, rb.decode_all, rb.decode1

-- perfev.attr returns the attr and a name: one value, for argument lists
local function attr(t) return (perfev.attr(t)) end

local function u16(...) return pack(("=" .. ("I2"):rep(select("#", ...))), ...) end
local function pad8(s) return s .. ("\0"):rep((8 - #s % 8) % 8) end
-- A record as the kernel lays it out: header, body padded to 8, trailer.
local function record(rtype, misc, body, trailer)
  body = pad8(body) .. (trailer or "")
  return pack("=I4I2I2", rtype, misc or 0, 8 + #body) .. body
end
local function hex(s) return (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end)) end

local function decode1_opts(bytes, attrs, opts)
  local out = {}
  for rec in perfev.decode(bytes, attrs, opts) do out[#out + 1] = rec end
  assert.equal(1, #out)
  return out[1]
end

-- Every key of want is in got with the same value (tables compared
-- deeply, arrays to the same length): what a hand-built table leaves out
-- (size, misc, the segments' `last`) the decoder adds.
local function contains(got, want, path)
  path = path or "rec"
  if type(want) ~= "table" then
    assert.same(want, got, path)
    return
  end
  assert.is_table(got, path)
  if #want > 0 then assert.equal(#want, #got, "#" .. path) end
  for k, v in pairs(want) do contains(got[k], v, path .. "." .. tostring(k)) end
end

-- encode t; the bytes are want (when given); they decode to a table that
-- holds t; that table encodes to the same bytes and decodes to itself.
local function roundtrip(t, a, want)
  local bytes = perfev.encode(t, a)
  if want then assert.equal(hex(want), hex(bytes)) end
  local back = decode1(bytes, a)
  contains(back, t)
  local again = perfev.encode(back, a)
  assert.equal(hex(bytes), hex(again))
  assert.same(back, decode1(again, a))
  return back, bytes
end

local function merge(...)
  local out = {}
  for i = 1, select("#", ...) do
    for k, v in pairs(select(i, ...)) do out[k] = v end
  end
  return out
end

local function errors(pattern, fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "no error")
  assert.matches(pattern, err, 1, true)
end

describe("perfev.encode", function()
  describe("every sample field", function()
    local REGS = compat.bor(compat.lshift(1, 0), compat.lshift(1, 7), compat.lshift(1, 8), compat.lshift(3,
        34))   -- ax, sp, ip, xmm1 (two words)
    local a_of = function(types, extra)
      return attr(merge({ sample_type = types, read_format = { "group", "total_time_running", "lost" },
                                 branch_sample_type = { "any_call", "hw_index" },
                                 sample_regs_user = REGS, sample_regs_intr = REGS }, extra or {}))
    end
    -- name, table, body bytes
    local FIELDS = {
      { "identifier", { id = 901 }, u64(901) },
      { "ip", { ip = compat.hex64("0xffffffff81abcdef") }, u64(compat.hex64("0xffffffff81abcdef")) },
      { "tid", { pid = 4242, tid = 4243 }, u32(4242, 4243) },
      { "time", { time = 987654321012 }, u64(987654321012) },
      { "addr", { addr = 0x7ffc0000 }, u64(0x7ffc0000) },
      { "id", { id = 901 }, u64(901) },
      { "stream_id", { stream_id = 902 }, u64(902) },
      { "cpu", { cpu = 1 }, u32(1, 0) },
      { "period", { period = 250000 }, u64(250000) },
      { "read", { read = { nr = 2, time_running = 77, { value = 10, lost = 1 }, { value = 20, lost = 0 } } },
        u64(2, 77, 10, 1, 20, 0) },
      { "callchain", { callchain = { compat.hex64("0xffffffff81000100"), compat.hex64("0xffffffff81000200"), 0x401000 },
                       callchain_contexts = { { context = "kernel", first = 1 }, { context = "user", first = 3 } } },
        u64(5, core.CONTEXT.KERNEL, compat.hex64("0xffffffff81000100"), compat.hex64("0xffffffff81000200"),
            core.CONTEXT.USER, 0x401000) },
      { "raw", { raw = "\1\0\0\0tracepoint!!\0\0\0\0" }, u32(20) .. "\1\0\0\0tracepoint!!\0\0\0\0" },
      { "branch_stack", { branch_stack = { hw_idx = 3,
          { from = 0x401000, to = 0x402000, mispred = true, cycles = 700, type = 2, spec = 1, priv = 1 },
          { from = 0x402008, to = 0x401010, predicted = true, abort = true, new_type = 5 } } },
        u64(2, 3, 0x401000, 0x402000, compat.bor(1, compat.lshift(700, 4), compat.lshift(2, 20), compat.lshift(1, 24),
            compat.lshift(1, 30)),
            0x402008, 0x401010, compat.bor(2, 8, compat.lshift(5, 26))) },
      { "regs_user", { regs_user = { abi = 2, ax = 1, sp = 2, ip = 3, xmm1 = 4, xmm1h = 5 } }, u64(2, 1, 2, 3, 4, 5) },
      { "stack_user", { stack_user = ("\xcc"):rep(24), dyn_size = 20 }, u64(24) .. ("\xcc"):rep(24) .. u64(20) },
      { "weight", { weight = 1234567 }, u64(1234567) },
      { "data_src", { data_src = 0x68100142 }, u64(0x68100142) },
      { "transaction", { transaction = compat.bor(compat.lshift(7, 32), 0x21) }, u64(compat.bor(compat.lshift(7, 32),
          0x21)) },
      { "regs_intr", { regs_intr = { abi = 2, ax = 9, sp = 8, ip = 7, xmm1 = 6, xmm1h = 5 } }, u64(2, 9, 8, 7, 6, 5) },
      { "phys_addr", { phys_addr = 0x1f000000 }, u64(0x1f000000) },
      { "cgroup", { cgroup = 4321 }, u64(4321) },
      { "data_page_size", { data_page_size = 4096 }, u64(4096) },
      { "code_page_size", { code_page_size = 2 * 1024 * 1024 }, u64(2 * 1024 * 1024) },
      { "aux", { aux = "aux bytes here.." }, u64(16) .. "aux bytes here.." },
    }

    for _, f in ipairs(FIELDS) do
      it(f[1] .. " alone", function()
        local t = merge({ type = "sample", cpumode = "user" }, f[2])
        roundtrip(t, a_of { f[1] }, record(R.SAMPLE, MISC.USER, f[3]))
      end)
    end

    it("every field together, in the kernel's order, with misc flags", function()
      local types, body, t = {}, {}, { type = "sample", cpumode = "kernel", exact_ip = true }
      for _, f in ipairs(FIELDS) do
        types[#types + 1] = f[1]
        body[#body + 1] = f[3]
        for k, v in pairs(f[2]) do t[k] = v end
      end
      local back = roundtrip(t, a_of(types), record(R.SAMPLE, compat.bor(MISC.KERNEL, MISC.EXACT_IP),
          table.concat(body)))
      assert.equal(compat.bor(MISC.KERNEL, MISC.EXACT_IP), back.misc)
    end)

    it("every read_format, single and group", function()
      local n = 0
      for fmt = 0, 31 do
        local group, words, read = compat.band(fmt, FORMAT.GROUP) ~= 0, {}, {}
        local function word(v, t, k) words[#words + 1] = v; t[k] = v end
        if group then word(2, read, "nr") else word(500, read, "value") end
        if compat.band(fmt, FORMAT.TOTAL_TIME_ENABLED) ~= 0 then word(600, read, "time_enabled") end
        if compat.band(fmt, FORMAT.TOTAL_TIME_RUNNING) ~= 0 then word(550, read, "time_running") end
        for i = 1, group and 2 or 1 do
          local e = group and {} or read
          if group then word(100 * i, e, "value") end
          if compat.band(fmt, FORMAT.ID) ~= 0 then word(1000 + i, e, "id") end
          if compat.band(fmt, FORMAT.LOST) ~= 0 then word(i - 1, e, "lost") end
          if group then read[i] = e end
        end
        local a = attr { sample_type = { "read" }, read_format = fmt }
        roundtrip({ type = "sample", read = read }, a, record(R.SAMPLE, 0, u64(compat.table_unpack(words))))
        n = n + 1
      end
      assert.equal(32, n)
    end)

    it("a group read whose nr disagrees with its entries is an error", function()
      local a = attr { sample_type = { "read" }, read_format = { "group" } }
      errors("field 'read.nr' is 3 but 'read' lists 1 values", perfev.encode,
             { type = "sample", read = { nr = 3, { value = 1 } } }, a)
    end)

    it("branch stacks without hw_index, with counters, and a raw flags word", function()
      local entry = { from = 1, to = 2, in_tx = true, cycles = 65535, type = 15, spec = 3, new_type = 15, priv = 7 }
      local flags = compat.bor(4, compat.lshift(65535, 4), compat.lshift(15, 20), compat.lshift(3, 24),
          compat.lshift(15, 26), compat.lshift(7, 30))
      roundtrip({ type = "sample", branch_stack = { entry } },
                attr { sample_type = { "branch_stack" }, branch_sample_type = { "any" } },
                record(R.SAMPLE, 0, u64(1, 1, 2, flags)))
      local counted = merge(entry, { counters = 99 })
      roundtrip({ type = "sample", branch_stack = { counted, { from = 3, to = 4, counters = 7 } } },
                attr { sample_type = { "branch_stack" }, branch_sample_type = compat.bor(core.BRANCH.ANY,
                    compat.lshift(1, 19)) },
                record(R.SAMPLE, 0, u64(2, 1, 2, flags, 3, 4, 0, 99, 7)))
      -- reserved bits 33..63 survive as the raw word, which the decoder
      -- gives as entry.flags when one of them is set
      local bst = attr { sample_type = { "branch_stack" } }
      local b = perfev.encode({ type = "sample", branch_stack = { { from = 1, to = 2,
          flags = compat.bor(compat.lshift(1, 40), 1) } } }, bst)
      assert.equal(hex(record(R.SAMPLE, 0, u64(1, 1, 2, compat.bor(compat.lshift(1, 40), 1)))), hex(b))
      local back = decode1(b, bst).branch_stack[1]
      assert.same({ true, compat.bor(compat.lshift(1, 40), 1) }, { back.mispred, back.flags })
      assert.equal(hex(b), hex(perfev.encode(decode1(b, bst), bst)))
      errors("field 'branch_stack[1].cycles' is 65536, out of range for 16 bits", perfev.encode,
             { type = "sample", branch_stack = { { from = 1, to = 2, cycles = 65536 } } },
             attr { sample_type = { "branch_stack" } })
      errors("sample needs field 'branch_stack.hw_idx' (branch_sample_type has HW_INDEX)", perfev.encode,
             { type = "sample", branch_stack = {} },
             attr { sample_type = { "branch_stack" }, branch_sample_type = { "hw_index" } })
    end)

    it("registers: every mask bit by the decoder's name, abi NONE, an empty mask", function()
      -- all 64 bits: the decoder names them (ax ... r15, r24 ... r31, xmm0, xmm0h ...)
      local words = { 2 }
      for i = 1, 64 do words[i + 1] = i * 3 end
      local a = attr { sample_type = { "regs_user", "regs_intr" }, sample_regs_user = -1,
                              sample_regs_intr = 0xf }
      local bytes = record(R.SAMPLE, 0, u64(compat.table_unpack(words)) .. u64(2, 7, 8, 9, 10))
      local rec = decode1(bytes, a)
      assert.equal(3, rec.regs_user.ax)
      assert.equal(3 * 25, rec.regs_user.r24)
      assert.equal(3 * 34, rec.regs_user.xmm0h)
      assert.equal(hex(bytes), hex(perfev.encode(rec, a)))
      roundtrip({ type = "sample", regs_user = { abi = 0 }, regs_intr = { abi = 1, ax = 1, bx = 2, cx = 3, dx = 4 } },
                a, record(R.SAMPLE, 0, u64(0, 1, 1, 2, 3, 4)))
      roundtrip({ type = "sample", regs_user = { abi = 2 } }, attr { sample_type = { "regs_user" } },
                record(R.SAMPLE, 0, u64(2)))
      errors("sample needs field 'regs_intr.dx' (sample_regs_intr has bit 3)", perfev.encode,
             { type = "sample", regs_user = { abi = 0 }, regs_intr = { abi = 2, ax = 1, bx = 2, cx = 3 } }, a)
    end)

    it("weight_struct: weight, var2_w, var3_w in one word", function()
      roundtrip({ type = "sample", weight = 70000, var2_w = 12, var3_w = 65535 },
                attr { sample_type = { "weight_struct" } },
                record(R.SAMPLE, 0, u32(70000) .. u16(12, 65535)))
      errors("field 'weight' is 4294967296, out of range for 32 bits", perfev.encode,
             { type = "sample", weight = compat.lshift(1, 32), var2_w = 0, var3_w = 0 },
             attr { sample_type = { "weight_struct" } })
    end)

    it("stack_user of size 0 has no dyn_size", function()
      roundtrip({ type = "sample", stack_user = "" }, attr { sample_type = { "stack_user" } },
                record(R.SAMPLE, 0, u64(0)))
    end)

    it("data_src from rec.mem's names when data_src is absent", function()
      local a = attr { sample_type = { "data_src" } }
      local value = compat.bor(compat.lshift(2, 0), compat.lshift(compat.bor(2, 8), 5), compat.lshift(2, 19),
          compat.lshift(1, 24), compat.lshift(compat.bor(2, 16), 26), compat.lshift(1, 33), compat.lshift(2, 43))
      local rec = decode1(record(R.SAMPLE, 0, u64(value)), a)
      assert.same({ op = "load", lvl = "hit|l1", snoop = "none", lock = "na", dtlb = "hit|l2",
                    lvl_num = "l1", hops = "1" }, rec.mem)
      rec.data_src = nil
      assert.equal(hex(u64(value)), hex(perfev.encode(rec, a):sub(9)))
      assert.equal(hex(u64(compat.bor(4, compat.lshift(1, 24), compat.lshift(0x1f, 26)))),
                   hex(perfev.encode({ type = "sample", mem = { op = "store", lock = 1, dtlb = "na|hit|miss|l1|l2" } },
                                     a):sub(9)))
      errors("field 'mem.lvl': 'hit|l9' is not a set of names of MEM_LVL", perfev.encode,
             { type = "sample", mem = { lvl = "hit|l9" } }, a)
      errors("field 'mem.lvl_num': 'l1|l2' is not a value of MEM_LVLNUM", perfev.encode,
             { type = "sample", mem = { lvl_num = "l1|l2" } }, a)
      errors("sample needs field 'data_src' (sample_type has DATA_SRC)", perfev.encode, { type = "sample" }, a)
    end)

    it("callchains: markers back where the segments open, empty segments included", function()
      local a = attr { sample_type = { "callchain" } }
      local C = core.CONTEXT
      -- two markers in a row, a marker at the end, and one the decoder cannot name
      local bytes = record(R.SAMPLE, 0, u64(7, C.KERNEL, C.USER, 0x401000, -4000, C.GUEST, 0x402000, C.HV))
      local rec = decode1(bytes, a)
      assert.same({ 0x401000, 0x402000 }, rec.callchain)
      assert.same({ { context = "kernel", first = 1, last = 0 }, { context = "user", first = 1, last = 1 },
                    { context = -4000, first = 2, last = 1 }, { context = "guest", first = 2, last = 2 },
                    { context = "hv", first = 3, last = 2 } }, rec.callchain_contexts)
      assert.equal(hex(bytes), hex(perfev.encode(rec, a)))
      roundtrip({ type = "sample", callchain = { 1, 2 } }, a, record(R.SAMPLE, 0, u64(2, 1, 2)))
      errors("field 'callchain[2]' is a PERF_CONTEXT_* marker value", perfev.encode,
             { type = "sample", callchain = { 1, C.USER } }, a)
      errors("field 'callchain_contexts[2].first' is out of order", perfev.encode,
             { type = "sample", callchain = { 1, 2 },
               callchain_contexts = { { context = "user", first = 2 }, { context = "kernel", first = 1 } } }, a)
      errors("field 'callchain_contexts[1].context': 'usr' is not a PERF_CONTEXT_* name", perfev.encode,
             { type = "sample", callchain = { 1 }, callchain_contexts = { { context = "usr", first = 1 } } }, a)
      errors("field 'callchain_contexts[1].context' is 12, not a PERF_CONTEXT_* marker", perfev.encode,
             { type = "sample", callchain = { 1 }, callchain_contexts = { { context = 12, first = 1 } } }, a)
    end)

    it("raw and aux without rec.size are padded as the kernel pads them", function()
      local a = attr { sample_type = { "raw", "aux" } }
      local b = perfev.encode({ type = "sample", raw = "abc", aux = "xyz" }, a)
      assert.equal(hex(record(R.SAMPLE, 0, u32(4) .. "abc\0" .. u64(8) .. "xyz" .. ("\0"):rep(5))), hex(b))
      local rec = decode1(b, a)
      assert.same({ "abc\0", "xyz\0\0\0\0\0" }, { rec.raw, rec.aux })
    end)
  end)

  describe("the other byte order (option swap, the decoder's swap)", function()
    it("integers swapped, bytes as they are, branch bitfields from the top bit", function()
      local a = attr { sample_type = { "ip", "tid", "raw", "branch_stack", "weight_struct" } }
      local t = { type = "sample", cpumode = "user", ip = 0x401000, pid = 1, tid = 2, raw = "abcd",
                  branch_stack = { { from = 0x10, to = 0x20, mispred = true, cycles = 5, priv = 2 } },
                  weight = 7, var2_w = 8, var3_w = 9 }
      local body = pack(">I8I4I4I4", 0x401000, 1, 2, 4) .. "abcd"
        .. pack(">I8I8I8I8", 1, 0x10, 0x20, compat.bor(compat.lshift(1, 63), compat.lshift(5, 44), compat.lshift(2,
            31))) .. pack(">I8", compat.bor(7, compat.lshift(8, 32), compat.lshift(9, 48)))
      local want = pack(">I4I2I2", R.SAMPLE, MISC.USER, 8 + #body) .. body
      local bytes = perfev.encode(t, a, { swap = true })
      assert.equal(hex(want), hex(bytes))
      local back = decode1_opts(bytes, a, { swap = true })
      contains(back, t)
      assert.equal(hex(bytes), hex(perfev.encode(back, a, { swap = true })))
      local rec = perfev.encode({ type = "comm", pid = 1, tid = 2, comm = "ab" }, a, { swap = true })
      assert.equal(hex(pack(">I4I2I2I4I4", R.COMM, 0, 24, 1, 2) .. "ab\0\0\0\0\0\0"), hex(rec))
      errors("unknown option 'swop' (the options are swap)", perfev.encode, t, a, { swop = true })
      errors("option 'swap' must be a boolean, got number", perfev.encode, t, a, { swap = 1 })
    end)
  end)

  describe("every record type", function()
    -- sample_type with every trailer field
    local side = attr { sample_type = { "tid", "time", "id", "stream_id", "cpu", "identifier" },
                               sample_id_all = true, read_format = { "group", "id", "total_time_enabled" } }
    local plain = attr { read_format = { "group", "id", "total_time_enabled" } }
    local TR = { pid = 101, tid = 102, time = 103, id = 104, stream_id = 105, cpu = 3 }
    local function trailer(t)
      return u32(t.pid, t.tid) .. u64(t.time, t.id, t.stream_id) .. u32(t.cpu, 0) .. u64(t.id)
    end
    local function cstr(s) return pad8(s .. "\0") end
    -- type, table, misc, body bytes
    local TYPES = {
      { R.MMAP, { type = "mmap", cpumode = "user", mmap_data = true, pid = 7, tid = 8, addr = 0x400000, len = 4096,
                  pgoff = 0x1000, filename = "/usr/bin/lua5.4" }, compat.bor(MISC.USER, MISC.MMAP_DATA),
        u32(7, 8) .. u64(0x400000, 4096, 0x1000) .. cstr("/usr/bin/lua5.4") },
      { R.LOST, { type = "lost", id = 104, lost = 17 }, 0, u64(104, 17) },
      { R.COMM, { type = "comm", comm_exec = true, pid = 5, tid = 6, comm = "lua5.4" }, MISC.COMM_EXEC,
        u32(5, 6) .. cstr("lua5.4") },
      { R.EXIT, { type = "exit", pid = 1, ppid = 2, tid = 3, ptid = 4, time = 99 }, 0, u32(1, 2, 3, 4) .. u64(99) },
      { R.THROTTLE, { type = "throttle", time = 50, id = 104, stream_id = 105 }, 0, u64(50, 104, 105) },
      { R.UNTHROTTLE, { type = "unthrottle", time = 51, id = 104, stream_id = 105 }, 0, u64(51, 104, 105) },
      { R.FORK, { type = "fork", fork_exec = true, pid = 10, ppid = 9, tid = 10, ptid = 9, time = 98 },
        MISC.FORK_EXEC, u32(10, 9, 10, 9) .. u64(98) },
      { R.READ, { type = "read", pid = 9, tid = 10,
                  values = { nr = 2, time_enabled = 555, { value = 1, id = 104 }, { value = 2, id = 106 } } },
        0, u32(9, 10) .. u64(2, 555, 1, 104, 2, 106) },
      { R.MMAP2, { type = "mmap2", pid = 7, tid = 8, addr = 0x1000, len = 0x2000, pgoff = 0x3000, maj = 8, min = 1,
                   ino = 424242, ino_generation = 3, prot = 5, flags = 2, filename = "/usr/lib/libc.so.6" },
        0, u32(7, 8) .. u64(0x1000, 0x2000, 0x3000) .. u32(8, 1) .. u64(424242, 3) .. u32(5, 2)
           .. cstr("/usr/lib/libc.so.6") },
      { R.MMAP2, { type = "mmap2", cpumode = "kernel", pid = 7, tid = 8, addr = 0x1000, len = 0x2000, pgoff = 0,
                   build_id = ("\xab"):rep(19), prot = 5, flags = 2, filename = "/x" },
        compat.bor(MISC.KERNEL, MISC.MMAP_BUILD_ID), u32(7, 8) .. u64(0x1000, 0x2000, 0) .. pack("=I1I1I2", 19, 0, 0)
           .. ("\xab"):rep(19) .. "\0" .. u32(5, 2) .. cstr("/x") },
      { R.AUX, { type = "aux", aux_offset = 4096, aux_size = 512, truncated = true, partial = true }, 0,
        u64(4096, 512, compat.bor(1, 4)) },
      { R.ITRACE_START, { type = "itrace_start", pid = 11, tid = 12 }, 0, u32(11, 12) },
      { R.LOST_SAMPLES, { type = "lost_samples", lost = 33 }, 0, u64(33) },
      { R.SWITCH, { type = "switch", switch_out = true, switch_out_preempt = true },
        compat.bor(MISC.SWITCH_OUT, MISC.SWITCH_OUT_PREEMPT), "" },
      { R.SWITCH_CPU_WIDE, { type = "switch_cpu_wide", switch_out = true, next_prev_pid = 20, next_prev_tid = 21 },
        MISC.SWITCH_OUT, u32(20, 21) },
      { R.NAMESPACES, { type = "namespaces", pid = 1, tid = 2,
                        namespaces = { { dev = 10, inode = 11 }, { dev = 20, inode = 21 } } },
        0, u32(1, 2) .. u64(2, 10, 11, 20, 21) },
      { R.KSYMBOL, { type = "ksymbol", addr = compat.hex64("0xffffffffc0001000"), len = 256, ksym_type = 1, flags = 1,
                     name = "bpf_prog_6deef7357e7b4530" },
        0, u64(compat.hex64("0xffffffffc0001000")) .. u32(256) .. u16(1, 1) .. cstr("bpf_prog_6deef7357e7b4530") },
      { R.BPF_EVENT, { type = "bpf_event", bpf_type = 1, flags = 0, prog_id = 77, tag = "\1\2\3\4\5\6\7\8" },
        0, u16(1, 0) .. u32(77) .. "\1\2\3\4\5\6\7\8" },
      { R.CGROUP, { type = "cgroup", cgroup_id = 9, path = "/user.slice/user-0.slice" },
        0, u64(9) .. cstr("/user.slice/user-0.slice") },
      { R.TEXT_POKE, { type = "text_poke", addr = compat.hex64("0xffffffff81000000"), old_bytes = "\x90\x90",
                       new_bytes = "\xe8\1\2\3\4" },
        0, u64(compat.hex64("0xffffffff81000000")) .. u16(2, 5) .. "\x90\x90\xe8\1\2\3\4" },
      { R.AUX_OUTPUT_HW_ID, { type = "aux_output_hw_id", hw_id = 6 }, 0, u64(6) },
      { R.CALLCHAIN_DEFERRED, { type = "callchain_deferred", cookie = 42, callchain = { 0x401000, 0x402000 },
                                callchain_contexts = { { context = "user", first = 1 } } },
        0, u64(42, 3, core.CONTEXT.USER, 0x401000, 0x402000) },
    }

    for _, ty in ipairs(TYPES) do
      local name = ty[2].type .. (ty[2].build_id and " (build id)" or "")
      it(name .. ", with and without the sample_id trailer", function()
        roundtrip(ty[2], plain, record(ty[1], ty[3], ty[4]))
        -- the trailer's pid, tid, time, id, stream_id: the body's where it has them
        local t = merge(TR, ty[2])
        roundtrip(t, side, record(ty[1], ty[3], ty[4], trailer(t)))
      end)
    end

    it("covers every type the decoder knows", function()
      local seen = {}
      for _, ty in ipairs(TYPES) do seen[ty[1]] = true end
      for name, n in pairs(R) do
        if n ~= R.SAMPLE then
          assert.is_true(seen[n] ~= nil, name)
        end
      end
    end)

    it("rec.sample_id gives the trailer fields a body field hides", function()
      local t = merge(TR, { type = "fork", pid = 10, ppid = 9, tid = 10, ptid = 9, time = 98,
                            sample_id = merge(TR, { pid = 9, tid = 9, time = 97 }) })
      local b = perfev.encode(t, side)
      assert.equal(hex(record(R.FORK, 0, u32(10, 9, 10, 9) .. u64(98), trailer(t.sample_id))), hex(b))
    end)

    it("the decoder's rec.sample_id brings back a fork's parent and a lost record's trailer id", function()
      local fork = record(R.FORK, 0, u32(10, 9, 10, 9) .. u64(98), trailer(merge(TR, { pid = 9, tid = 9, time = 97 })))
      local rec = decode1(fork, side)
      assert.same({ 10, 10, 98, 9, 9, 97 }, { rec.pid, rec.tid, rec.time,
                                              rec.sample_id.pid, rec.sample_id.tid, rec.sample_id.time })
      assert.equal(hex(fork), hex(perfev.encode(rec, side)))
      -- a sample_id without some trailer field takes it from the record
      local t = merge(TR, { type = "fork", pid = 10, ppid = 9, tid = 10, ptid = 9, time = 98,
                            sample_id = { pid = 9, tid = 9, time = 97 } })
      assert.equal(hex(fork), hex(perfev.encode(t, side)))
    end)

    it("pid and tid: -1 (as the decoder gives it) and 4294967295 are the same u32", function()
      local want = record(R.FORK, 0, u32(0xffffffff, 1, 0xffffffff, 1) .. u64(5))
      local b = perfev.encode({ type = "fork", pid = -1, ppid = 1, tid = -1, ptid = 1, time = 5 }, plain)
      assert.equal(hex(want), hex(b))
      assert.equal(hex(want), hex(perfev.encode({ type = "fork", pid = 0xffffffff, ppid = 1, tid = 0xffffffff,
                                                  ptid = 1, time = 5 }, plain)))
      local rec = decode1(b, plain)
      assert.same({ -1, -1 }, { rec.pid, rec.tid })
      roundtrip({ type = "switch_cpu_wide", next_prev_pid = -1, next_prev_tid = -1 }, plain,
                record(R.SWITCH_CPU_WIDE, 0, u32(0xffffffff, 0xffffffff)))
    end)

    it("a type the decoder does not know: its number and bytes", function()
      roundtrip({ type = 200, data = "abcdefghij" }, side, pack("=I4I2I2", 200, 0, 18) .. "abcdefghij")
      roundtrip({ type = 68, misc = 3, data = "" }, side, pack("=I4I2I2", 68, 3, 8))
      errors("record of type 201 needs field 'data'", perfev.encode, { type = 201 }, side)
    end)

    it("misc: an explicit number wins over cpumode and flags", function()
      local b = perfev.encode({ type = "comm", misc = 0x8003, cpumode = "user", comm_exec = false,
                                pid = 1, tid = 1, comm = "x" }, plain)
      assert.equal(0x8003, decode1(b, plain).misc)
      assert.equal("hypervisor", decode1(perfev.encode({ type = "lost_samples", cpumode = "hypervisor", lost = 0 },
                                                       plain), plain).cpumode)
      errors("field 'cpumode': 'userspace' is not a cpumode", perfev.encode,
             { type = "lost_samples", cpumode = "userspace", lost = 0 }, plain)
      errors("field 'comm_exec' must be a boolean, got number", perfev.encode,
             { type = "comm", comm_exec = 1, pid = 1, tid = 1, comm = "x" }, plain)
    end)
  end)

  describe("rec.size: the exact layout a decoded record had", function()
    local a = attr { sample_type = { "raw", "branch_stack" }, sample_id_all = true }
    it("a string that fills its record without a NUL comes back without one", function()
      local bytes = pack("=I4I2I2", R.COMM, 0, 24) .. u32(1, 2) .. "abcdefgh"
      local rec = decode1(bytes, a)
      assert.equal("abcdefgh", rec.comm)
      assert.equal(hex(bytes), hex(perfev.encode(rec, a)))
      -- without size, laid out as the kernel does: NUL and padding
      rec.size = nil
      assert.equal(hex(record(R.COMM, 0, u32(1, 2) .. "abcdefgh\0")), hex(perfev.encode(rec, a)))
    end)
    it("an unaligned raw, and bytes past the last field", function()
      local bytes = pack("=I4I2I2", R.SAMPLE, 0, 8 + 7 + 8 + 9) .. u32(3) .. "abc" .. u64(0) .. ("\0"):rep(9)
      local rec = decode1(bytes, a)
      assert.same({ "abc", 32 }, { rec.raw, rec.size })
      assert.equal(hex(bytes), hex(perfev.encode(rec, a)))
    end)
    it("a size too small for the fields is an error saying so", function()
      errors("size 16 is smaller than the 24 bytes the fields need", perfev.encode,
             { type = "comm", size = 16, pid = 1, tid = 2, comm = "abcdefgh" }, a)
      errors("size 4 is smaller than the 8 bytes of the header", perfev.encode, { type = "comm", size = 4 }, a)
    end)
  end)

  describe("errors name the field", function()
    local a = attr { sample_type = { "ip", "tid", "time", "read" }, read_format = { "id" },
                            sample_id_all = true }
    local good = { type = "sample", ip = 1, pid = 2, tid = 3, time = 4, read = { value = 5, id = 6 } }
    it("a missing field, and why it is needed", function()
      errors("perfev.encode: sample needs field 'ip' (sample_type has IP)", perfev.encode, { type = "sample" }, a)
      errors("perfev.encode: sample needs field 'read.id' (read_format has ID)", perfev.encode,
             merge(good, { read = { value = 5 } }), a)
      errors("perfev.encode: comm needs field 'time' (sample_id_all and sample_type has TIME)", perfev.encode,
             { type = "comm", pid = 1, tid = 2, comm = "x" }, a)
      errors("perfev.encode: mmap2 needs field 'build_id' (misc has MMAP_BUILD_ID)", perfev.encode,
             { type = "mmap2", misc = MISC.MMAP_BUILD_ID, pid = 1, tid = 1, addr = 0, len = 0, pgoff = 0 }, a)
      errors("perfev.encode: record needs field 'type'", perfev.encode, { ip = 1 }, a)
    end)
    it("a wrong type or a value out of range", function()
      errors("field 'ip' must be an integer, got string", perfev.encode, merge(good, { ip = "0x10" }), a)
      errors("field 'ip' must be an integer, got a float", perfev.encode, merge(good, { ip = 1.5 }), a)
      errors("field 'pid' is -2147483649, out of range for a pid_t or a u32", perfev.encode,
             merge(good, { pid = -2147483649 }), a)
      errors("field 'pid' is 4294967296, out of range for a pid_t or a u32", perfev.encode,
             merge(good, { pid = 4294967296 }), a)
      errors("field 'prot' is -1, out of range for 32 bits", perfev.encode,
             { type = "mmap2", pid = 1, tid = 1, addr = 0, len = 0, pgoff = 0, maj = 0, min = 0, ino = 0,
               ino_generation = 0, prot = -1, flags = 0, filename = "x", time = 1 }, a)
      errors("field 'read' must be a table, got number", perfev.encode, merge(good, { read = 5 }), a)
      errors("field 'comm' must be a string, got table", perfev.encode,
             { type = "comm", pid = 1, tid = 2, comm = {}, time = 1 }, a)
      errors("field 'comm' holds a NUL byte at offset 2", perfev.encode,
             { type = "comm", pid = 1, tid = 2, comm = "ab\0c", time = 1 }, a)
      errors("field 'tag' must be 8 bytes, got 3", perfev.encode,
             { type = "bpf_event", bpf_type = 1, flags = 0, prog_id = 1, tag = "abc", time = 1, pid = 1, tid = 1 }, a)
      errors("field 'build_id' is 21 bytes, over 20", perfev.encode,
             { type = "mmap2", build_id = ("x"):rep(21), pid = 1, tid = 1, addr = 0, len = 0, pgoff = 0 }, a)
      errors("unknown record type 'smaple'", perfev.encode, { type = "smaple" }, a)
      errors("argument 2 must be an attr", perfev.encode, good, 42)
      errors("perfev.attr: unknown field", perfev.encode, good, { smaple_type = 1 })
    end)
    it("a record over 65535 bytes", function()
      errors("the sample record needs more than 65535 bytes (header.size is 16 bits)", perfev.encode,
             { type = "sample", raw = ("x"):rep(70000) }, attr { sample_type = { "raw" } })
    end)
  end)

  describe("attrs, streams, lists", function()
    local a1 = attr { sample_type = { "identifier", "ip" }, sample_id_all = true }
    local a2 = attr { sample_type = { "identifier", "ip", "period" }, sample_id_all = true }
    it("takes a table of attr fields, and { [id] = attr } picking by id like the decoder", function()
      local rec = { type = "sample", ip = 0x10, period = 7 }
      assert.equal(hex(record(R.SAMPLE, 0, u64(0x10, 7))),
                   hex(perfev.encode(rec, { sample_type = compat.bor(SAMPLE.IP, SAMPLE.PERIOD) })))
      local map = { [1] = a1, [2] = a2 }
      local stream = perfev.encode({ { type = "sample", id = 1, ip = 0x10 },
                                     { type = "sample", id = 2, ip = 0x20, period = 999 },
                                     { type = "lost", id = 2, lost = 4 } }, map)
      assert.equal(hex(record(R.SAMPLE, 0, u64(1, 0x10)) .. record(R.SAMPLE, 0, u64(2, 0x20, 999))
                       .. record(R.LOST, 0, u64(2, 4, 2))), hex(stream))
      local recs = decode_all(stream, map)
      assert.same({ 1, 2, "lost" }, { recs[1].id, recs[2].id, recs[3].type })
      assert.equal(hex(stream), hex(perfev.encode(recs, map)))
      errors("no attr for id 3", perfev.encode, { type = "sample", id = 3, ip = 0 }, map)
      errors("sample needs field 'id' to pick its attr among several", perfev.encode,
             { type = "sample", ip = 0 }, map)
      -- the trailer's id, when a body id (lost's) differs from it
      assert.equal(hex(record(R.LOST, 0, u64(7, 4, 1))),
                   hex(perfev.encode({ type = "lost", id = 7, lost = 4, sample_id = { id = 1 } }, map)))
    end)
    it("a side-band record of a stream: the attr its trailer's id picks, back from rec.sample_id", function()
      -- a2's trailer is longer (pid, tid, time before the identifier): the
      -- wrong attr would give other bytes
      local b1 = attr { sample_type = { "identifier", "ip" }, sample_id_all = true }
      local b2 = attr { sample_type = { "identifier", "ip", "tid", "time" }, sample_id_all = true }
      local map = { [1] = b1, [2] = b2 }
      local stream = record(R.LOST, 0, u64(7, 4), u32(50, 51) .. u64(600, 2))
                     .. record(R.THROTTLE, 0, u64(700, 1, 0), u64(1))
                     .. record(R.COMM, 0, u32(5, 6) .. "x\0", u32(50, 51) .. u64(601, 2))
      local recs = decode_all(stream, map)
      assert.same({ 7, 2, 50, 600 }, { recs[1].id, recs[1].sample_id.id, recs[1].pid, recs[1].time })
      assert.same({ 700, 1, 1 }, { recs[2].time, recs[2].id, recs[2].sample_id.id })
      assert.same({ 5, 6, 50, 51, 601 }, { recs[3].pid, recs[3].tid, recs[3].sample_id.pid,
                                           recs[3].sample_id.tid, recs[3].time })
      assert.equal(hex(stream), hex(perfev.encode(recs, map)))
    end)
    it("an event gives its attr and id", function()
      local ev = assert(perfev.open { type = "software", config = "cpu-clock", sample_period = 100000,
                                     sample_type = { "identifier", "ip" } })
      local b = perfev.encode({ type = "sample", id = ev:id(), ip = 5 }, { ev })
      assert.equal(hex(record(R.SAMPLE, 0, u64(ev:id(), 5))), hex(b))
      assert.equal(hex(b), hex(perfev.encode({ type = "sample", id = ev:id(), ip = 5 }, ev)))
      ev:close()
    end)
  end)

  describe("records the kernel wrote", function()
    it("a cpu-clock ring of this process: decode(encode(rec)) == rec for every record", function()
      local ev = assert(perfev.open { type = "software", config = "cpu-clock", sample_period = 100000,
        sample_type = { "identifier", "ip", "tid", "time", "addr", "id", "stream_id", "cpu", "period",
                        "read", "callchain", "regs_user", "stack_user", "phys_addr", "cgroup",
                        "data_page_size", "code_page_size" },
        read_format = { "total_time_enabled", "total_time_running", "id", "lost" },
        sample_regs_user = { "ax", "sp", "ip" }, sample_stack_user = 64, sample_id_all = true,
        comm = true, comm_exec = true, mmap = true, mmap2 = true, mmap_data = true, task = true,
        context_switch = true, namespaces = true, cgroup = true })
      -- about 400 bytes a sample: 30 ms at 10 kHz fits 256 pages with room
      -- for the side-band records, which a full ring would lose
      local ring = assert(ev:mmap(256))
      finally(function() ring:close() end)
      ev:enable()
      u.burn(30)
      os.execute("true")   -- fork and exit records
      ev:disable()
      local by_type, n = {}, 0
      for rec in ring:records() do
        local b = perfev.encode(rec, ev)
        assert.equal(rec.size, #b)
        assert.same(rec, decode1(b, ev))
        assert.equal(hex(b), hex(perfev.encode(decode1(b, ev), ev)))
        by_type[rec.type] = (by_type[rec.type] or 0) + 1
        n = n + 1
      end
      ev:close()
      assert.is_true((by_type.sample or 0) >= 5, "samples: " .. tostring(by_type.sample))
      assert.is_true((by_type.switch or 0) >= 1, "switch records")
      assert.is_true(n > by_type.sample, "side-band records")
    end)

    -- perf report -D prints every record of a perf.data file with its raw
    -- bytes; perf evlist -v the attr they were recorded with.
    local function perf_records(data)
      local out, cur = {}, nil
      -- every line, the empty ones too (gmatch("[^\n]*") also gives an empty
      -- match after each line on LuaJIT and Lua 5.3)
      for line in (u.sh("perf report -D -i " .. data .. " 2>/dev/null") .. "\n"):gmatch("([^\n]*)\n") do
        if line:match("^0x%x+@") then
          cur = {}
          out[#out + 1] = cur
        elseif cur and line:match("^%.  %x%x%x%x:  ") then
          for byte in line:sub(10, 57):gmatch("%x%x") do cur[#cur + 1] = string.char(tonumber(byte, 16)) end
        elseif line == "" then
          cur = nil
        end
      end
      for i, bytes in ipairs(out) do out[i] = table.concat(bytes) end
      return out
    end
    local function perf_attr(data)
      local line = u.sh("perf evlist -v -i " .. data .. " 2>/dev/null"):match("[^\n]+")
      local t = {}
      for _, k in ipairs { "sample_type", "read_format", "branch_sample_type" } do
        local v = line:match(k .. ": ([%u_|]+)")
        if v then t[k] = v:lower() end
      end
      for _, k in ipairs { "sample_regs_user", "sample_regs_intr" } do
        local v = line:match(k .. ": (0x%x+)")
        if v then t[k] = tonumber(v) end
      end
      t.sample_id_all = line:match("sample_id_all: 1") ~= nil
      return attr(t)
    end
    -- struct sample_id at the end of a side-band record, read from the
    -- file by string.unpack: what the decoder's rec.sample_id must hold
    local TRAILER = { { "TID", "I4I4", "pid", "tid" }, { "TIME", "I8", "time" }, { "ID", "I8", "id" },
                      { "STREAM_ID", "I8", "stream_id" }, { "CPU", "I4I4", "cpu", false },
                      { "IDENTIFIER", "I8", "id" } }
    local function file_trailer(bytes, a)
      local fmt, names = "=", {}
      for _, row in ipairs(TRAILER) do
        if compat.band(a.sample_type, SAMPLE[row[1]]) ~= 0 then
          fmt = fmt .. row[2]
          for i = 3, #row do names[#names + 1] = row[i] end
        end
      end
      local values, t = { compat.unpack(fmt, bytes, #bytes - compat.packsize(fmt) + 1) }, {}
      for i, name in ipairs(names) do if name then t[name] = values[i] end end
      return t
    end

    local RUNS = {
      { "cpu-clock -g, context switches", "-e cpu-clock -c 100000 -g --switch-events" },
      { "task-clock, dwarf callchains (regs_user, stack_user), addr, cpu, page sizes",
        "-e task-clock -c 200000 --call-graph dwarf,512 -d --sample-cpu --phys-data --data-page-size "
        .. "--code-page-size --user-regs=ax,sp,ip" },
    }
    for _, run in ipairs(RUNS) do
      it("perf record (" .. run[1] .. "): encode gives back the file's bytes #perf_heavy", function()
        local _, have_perf = u.sh("command -v perf >/dev/null 2>&1")
        if not have_perf or not u.is_root() then
          pending("needs the perf tool and root (perf record of a child process)")
          return
        end
        local data = os.tmpname()
        local _, ok = u.sh(("perf record %s -o %s -- sh -c 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done' "
                            .. ">/dev/null 2>&1"):format(run[2], data))
        assert.is_true(ok, "perf record failed")
        local a = perf_attr(data)
        local recs = perf_records(data)
        os.remove(data)
        local kinds, nsample, nsid = {}, 0, 0
        for _, bytes in ipairs(recs) do
          local rec = decode1(bytes, a)
          -- where a body field hides a trailer field (comm's pid, a fork's
          -- parent), rec.sample_id is the whole trailer as the file has it
          if rec.sample_id then
            assert.same(file_trailer(bytes, a), rec.sample_id)
            nsid = nsid + 1
          end
          local b = perfev.encode(rec, a)
          assert.equal(hex(bytes), hex(b))
          assert.same(rec, decode1(b, a))
          kinds[rec.type] = true
          if rec.type == "sample" then nsample = nsample + 1 end
        end
        assert.is_true(nsample >= 3, nsample .. " samples")
        assert.is_true(nsid >= 1, "records with rec.sample_id")
        assert.is_true(kinds.comm and kinds.mmap and true or false, "comm and mmap records")
        assert.is_true(kinds[68] or kinds[69] or false, "perf's own record types (finished_round, id_index)")
      end)
    end
  end)
end)
