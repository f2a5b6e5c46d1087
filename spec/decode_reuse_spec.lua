-- Decoding every record into one table: perfev.decode(bytes, attr, { into = t })
-- and ring:records{ into = t }. Each record, decoded into t, must equal the
-- same record decoded into a table of its own (no key of an earlier record
-- left behind, no array entry too many), over streams built here that mix
-- record types and shapes; nested tables are refilled in place; and a stream
-- of samples grows the Lua heap by nothing.
local perfev = require "perfev"
local core = require "perfev.core"
local u = require "spec.support.util"
local compat = require "perfev.compat"

local R, MISC, CTX = core.RECORD, core.MISC, core.CONTEXT
local pack = compat.pack
local rb = require "spec.support.records"
local record, u64, u32, cstr, decode_all = rb.record, rb.u64, rb.u32, rb.cstr, rb.decode_all

local function copy(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = copy(x) end
  return out
end

-- Decodes bytes into t and checks every record against its own-table decode.
local function same_as_fresh(bytes, attrs, t)
  t = t or {}
  local fresh, n = decode_all(bytes, attrs), 0
  for rec in perfev.decode(bytes, attrs, { into = t }) do
    n = n + 1
    assert.is_true(rawequal(rec, t), "record " .. n .. " is not the into table")
    assert.same(fresh[n], copy(rec), "record " .. n .. " (" .. tostring(fresh[n].type) .. ")")
  end
  assert.equal(#fresh, n)
  return n
end

-- A sample of ip, tid, time, period and a callchain of these words.
local CHAIN_ATTR = { sample_type = { "ip", "tid", "time", "period", "callchain" },
                     sample_id_all = true }
local function chain_sample(i, words, misc)
  return record(R.SAMPLE, misc or MISC.USER,
    u64(0x401000 + i) .. u32(100, 100 + i % 3) .. u64(1000 + i, 20000, #words) .. u64(compat.table_unpack(words)))
end
-- The sample_id_all trailer of CHAIN_ATTR: tid and time.
local function trailer(i) return u32(100, 101) .. u64(5000 + i) end

describe("decoding into one table", function()
  describe("equals decoding into a table per record", function()
    it("samples with callchains of every length and context, between side-band records", function()
      local a = perfev.attr(CHAIN_ATTR)
      local chains = {
        { CTX.KERNEL, compat.hex64("0xffffffff81000010"), compat.hex64("0xffffffff81000020"), CTX.USER, 0x401000,
            0x401100, 0x401200 },
        { 0x401000 },                                            -- no markers: no callchain_contexts
        { CTX.USER, 0x401000, 0x401100 },
        {},                                                      -- empty
        { CTX.KERNEL, compat.hex64("0xffffffff81000010"), CTX.USER },            -- a segment without frames
        { CTX.KERNEL, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
          CTX.USER, 21, 22 },
        { compat.hex64("0xfffffffffffffe00") },                                  -- a marker no name knows
      }
      local parts = {}
      for i = 1, 60 do
        parts[#parts + 1] = chain_sample(i, chains[i % #chains + 1], i % 5 == 0 and MISC.KERNEL or MISC.USER)
        if i % 7 == 0 then
          parts[#parts + 1] = record(R.MMAP2, MISC.USER, u32(7, 8) .. u64(0x1000, 0x2000, 0)
            .. u32(8, 1) .. u64(4242, 3) .. u32(5, 2) .. cstr("/lib/x.so") .. trailer(i))
        end
        if i % 11 == 0 then
          parts[#parts + 1] = record(R.MMAP2, MISC.MMAP_BUILD_ID, u32(7, 8) .. u64(0x1000, 0x2000, 0)
            .. pack("=I1I1I2", 20, 0, 0) .. ("\xab"):rep(20) .. u32(5, 2) .. cstr("/y") .. trailer(i))
        end
        if i % 13 == 0 then
          parts[#parts + 1] = record(R.COMM, MISC.COMM_EXEC, u32(5, 6) .. cstr("lua") .. trailer(i))
        end
        if i % 17 == 0 then parts[#parts + 1] = record(R.LOST, 0, u64(1, i) .. trailer(i)) end
        if i % 19 == 0 then parts[#parts + 1] = record(200, 0, "unknown!") end
        if i % 23 == 0 then
          parts[#parts + 1] = record(R.SWITCH, compat.bor(MISC.SWITCH_OUT, MISC.SWITCH_OUT_PREEMPT), trailer(i))
        end
        if i % 29 == 0 then parts[#parts + 1] = record(R.AUX, 0, u64(0, 64, i % 2 == 0 and 1 or 5) .. trailer(i)) end
        if i % 31 == 0 then
          parts[#parts + 1] = record(R.NAMESPACES, 0, u32(1, 2) .. u64(i % 2 + 1, 1, 2, 3, 4) .. trailer(i))
        end
      end
      assert.equal(60 + 8 + 5 + 4 + 3 + 3 + 2 + 2 + 1, same_as_fresh(table.concat(parts), a))
    end)

    it("nested arrays of tables that grow and shrink: group reads, branch stacks, regs, data_src", function()
      local a = perfev.attr { sample_type = { "ip", "read", "branch_stack", "regs_user", "data_src" },
                              read_format = { "group", "id" }, branch_sample_type = { "any", "hw_index" },
                              sample_regs_user = compat.bor(compat.lshift(1, 0), compat.lshift(1, 8)) }
      local parts = {}
      for i = 1, 40 do
        local nr, nb = i % 4, (i * 3) % 5
        local read = { nr }
        for k = 1, nr do read[#read + 1] = 10 * k + i; read[#read + 1] = 100 + k end
        local br = { nb, i }
        for k = 1, nb do br[#br + 1] = k; br[#br + 1] = k + 1; br[#br + 1] = compat.bor(k % 2, compat.lshift(k, 4)) end
        local abi = i % 3 == 0 and 0 or 2
        local regs = abi == 0 and u64(0) or u64(2, i, i + 1)
        local src = i % 2 == 0 and (compat.bor(compat.lshift(2, 0), compat.lshift(compat.bor(2, 8),
            5))) or (compat.lshift(1, 24))
        parts[#parts + 1] = record(R.SAMPLE, 0, u64(i) .. u64(compat.table_unpack(read))
          .. u64(compat.table_unpack(br)) .. regs .. u64(src))
      end
      same_as_fresh(table.concat(parts), a)
    end)

    it("a stream of two events whose nested tables differ in shape", function()
      local a1 = perfev.attr { sample_type = { "identifier", "read", "branch_stack" },
                               read_format = { "group", "id" }, branch_sample_type = { "any" } }
      local a2 = perfev.attr { sample_type = { "identifier", "read", "branch_stack" },
                               read_format = { "group", "id", "lost" },
                               branch_sample_type = compat.bor(core.BRANCH.ANY, core.BRANCH.HW_INDEX, compat.lshift(1,
                                   19)) }
      local parts = {}
      for i = 1, 30 do
        if i % 3 ~= 0 then
          parts[#parts + 1] = record(R.SAMPLE, 0, u64(1) .. u64(2, 5, 1, 6, 2) .. u64(1, 0x10, 0x20, 1))
        else
          parts[#parts + 1] = record(R.SAMPLE, 0, u64(2) .. u64(2, 5, 1, 0, 6, 2, 1)
            .. u64(2, 7, 0x10, 0x20, 1, 0x30, 0x40, 2, 42, 43))
        end
      end
      same_as_fresh(table.concat(parts), { [1] = a1, [2] = a2 })
    end)

    it("rec.sample_id comes and goes, in the trailer shapes of two events; entry.flags too", function()
      local a1 = perfev.attr { sample_type = { "identifier", "branch_stack" }, sample_id_all = true }
      local a2 = perfev.attr { sample_type = { "identifier", "tid", "time" }, sample_id_all = true }
      local parts = {}
      for i = 1, 23 do   -- ends with a sample: t keeps no sample_id
        local k = i % 6
        if k == 0 then       -- a fork of event 2: sample_id with pid, tid, time, id
          parts[#parts + 1] = record(R.FORK, 0, u32(i, 1, i, 1) .. u64(i) .. u32(1, 1) .. u64(i + 1, 2))
        elseif k == 1 then   -- lost of event 1: sample_id = { id = 1 }
          parts[#parts + 1] = record(R.LOST, 0, u64(9, i) .. u64(1))
        elseif k == 2 then   -- switch: nothing collides, no sample_id
          parts[#parts + 1] = record(R.SWITCH, 0, u64(1))
        elseif k == 3 then   -- a branch entry with a reserved bit: entry.flags
          parts[#parts + 1] = record(R.SAMPLE, 0, u64(1, 1, 0x10, 0x20, compat.bor(compat.lshift(1, 50), 1)))
        else                 -- without: no entry.flags
          parts[#parts + 1] = record(R.SAMPLE, 0, u64(1, 1, 0x10, 0x20, i))
        end
      end
      local t = {}
      same_as_fresh(table.concat(parts), { [1] = a1, [2] = a2 }, t)
      assert.is_nil(t.sample_id)
    end)
  end)

  it("refills the nested tables in place and removes what a shorter one does not have", function()
    local a = perfev.attr(CHAIN_ATTR)
    local bytes = chain_sample(1, { CTX.KERNEL, 1, 2, CTX.USER, 3, 4, 5 })
      .. chain_sample(2, { CTX.USER, 7 })
      .. record(R.COMM, 0, u32(5, 6) .. cstr("x") .. trailer(3))
      .. chain_sample(4, { CTX.KERNEL, 8, 9, CTX.USER, 10 })
    local t = {}
    local it = perfev.decode(bytes, a, { into = t })
    local r = it()
    local chain, segs = r.callchain, r.callchain_contexts
    assert.same({ 1, 2, 3, 4, 5 }, chain)
    assert.equal(2, #segs)
    local seg2 = segs[2]
    r = it()
    assert.is_true(rawequal(chain, r.callchain))
    assert.is_true(rawequal(segs, r.callchain_contexts))
    assert.same({ 7 }, r.callchain)
    assert.same({ { context = "user", first = 1, last = 1 } }, r.callchain_contexts)
    r = it()   -- comm: no callchain
    assert.same({ "comm", "x" }, { r.type, r.comm })
    assert.is_nil(r.callchain)
    assert.is_nil(r.callchain_contexts)
    assert.is_nil(r.ip)
    assert.is_nil(r.period)
    r = it()   -- the tables set aside come back, the trimmed segment too
    assert.is_true(rawequal(chain, r.callchain))
    assert.is_true(rawequal(segs, r.callchain_contexts))
    assert.is_true(rawequal(seg2, r.callchain_contexts[2]))
    assert.same({ 8, 9, 10 }, r.callchain)
    assert.is_nil(it())
  end)

  it("empties the table when an iteration starts, and after a record that failed half way", function()
    local a = perfev.attr(CHAIN_ATTR)
    local t = { junk = 1, ip = "stale", [1] = "x" }
    local good = chain_sample(1, { CTX.USER, 1 })
    for rec in perfev.decode(good, a, { into = t }) do
      assert.same(decode_all(good, a)[1], copy(rec))
    end
    -- a callchain that overflows its record: the decoder raises with t half filled
    local bad = record(R.SAMPLE, 0, u64(0x10) .. u32(1, 2) .. u64(3, 4, 100))
    local it = perfev.decode(bad .. good, a, { into = t })
    assert.has_error(it)
    t.user_key = true
    it = perfev.decode(good, a, { into = t })
    assert.same(decode_all(good, a)[1], copy(it()))
  end)

  it("options are checked: unknown names, and types, are errors naming them", function()
    local a = perfev.attr(CHAIN_ATTR)
    local ok, err = pcall(perfev.decode, "", a, { into = {}, intoo = 1 })
    assert.is_false(ok)
    assert.matches("unknown option 'intoo'", err, 1, true)
    ok, err = pcall(perfev.decode, "", a, { into = 5 })
    assert.is_false(ok)
    assert.matches("option 'into' must be a table", err, 1, true)
    ok, err = pcall(perfev.decode, "", a, { swap = "yes" })
    assert.is_false(ok)
    assert.matches("option 'swap' must be a boolean", err, 1, true)
    ok, err = pcall(perfev.decode, "", a, {}, nil)
    assert.is_true(ok, err)
    ok, err = pcall(perfev.decode, "", a, 7)
    assert.is_false(ok)
    assert.matches("options must be a table", err, 1, true)
  end)

  it("a stream of 100k samples (ip, tid, time, period, callchain) grows the Lua heap by nothing #slow", function()
    local a = perfev.attr(CHAIN_ATTR)
    local parts = {}
    for i = 1, 100000 do
      local words = { CTX.KERNEL, compat.hex64("0xffffffff81000000") + i % 64, CTX.USER }
      for k = 1, i % 9 do words[#words + 1] = 0x401000 + k end
      parts[i] = chain_sample(i, words, i % 2 == 0 and MISC.KERNEL or MISC.USER)
    end
    local bytes = table.concat(parts)
    parts = nil   -- luacheck: ignore 311
    local function growth(opts)
      collectgarbage()
      collectgarbage()
      collectgarbage("stop")
      local before, n = collectgarbage("count"), 0
      for rec in perfev.decode(bytes, a, opts) do n = n + #rec.callchain end
      local kib = collectgarbage("count") - before
      collectgarbage("restart")
      assert.is_true(n > 0)
      return kib
    end
    local fresh = growth(nil)
    local reused = growth({ into = {} })
    -- a table per record: hundreds of bytes each; one table: its tables and the iterator, once
    assert.is_true(fresh > 100000 * 200 / 1024, ("a table per record grew %.0f KiB"):format(fresh))
    assert.is_true(reused < 8, ("{ into = t } grew %.1f KiB over 100k samples"):format(reused))
  end)

  describe("ring:records{ into = t }", function()
    local function burn(ms)
      local stop, x = os.clock() + ms / 1000, 0
      while os.clock() < stop do for i = 1, 1000 do x = x + i % 7 end end
      return x
    end

    -- Maps a fresh copy of the spec helper library: an mmap2 record.
    local function map_a_library()
      local src = package.searchpath("bphelper", package.cpath)
      local bytes = src and u.read_file(src)
      assert.is_string(bytes, "bphelper.so not found")
      local tmp = os.tmpname()
      local dst = tmp .. ".so"
      local f = io.open(dst, "wb")
      f:write(bytes)
      f:close()
      assert.is_truthy(package.loadlib(dst, "*"))
      os.remove(dst)
      os.remove(tmp)
    end

    it("yields t for every record of a kernel stream; no sample keeps a key of a side-band record", function()
      local ev = assert(perfev.open { type = "software", config = "cpu-clock", sample_period = 500000,
        sample_type = { "ip", "tid", "time", "period", "callchain" }, sample_id_all = true,
        mmap = true, mmap2 = true, comm = true, task = true, disabled = true })
      local ring = assert(ev:mmap(64))
      local pid = u.pid()
      local t, seen = {}, {}
      local function drain()
        for rec in ring:records { into = t } do
          assert.is_true(rawequal(rec, t))
          seen[rec.type] = (seen[rec.type] or 0) + 1
          if rec.type == "sample" then
            assert.equal(pid, rec.tid)
            assert.equal(500000, rec.period)
            assert.is_nil(rec.filename)
            assert.is_nil(rec.addr)
            assert.is_nil(rec.len)
            local frames = 0
            for _ in pairs(rec.callchain) do frames = frames + 1 end
            assert.equal(#rec.callchain, frames)   -- no entry past the end
          else
            assert.is_nil(rec.ip)
            assert.is_nil(rec.callchain)
            assert.is_nil(rec.callchain_contexts)
            assert.is_nil(rec.period)
          end
        end
      end
      for i = 1, 30 do   -- sampling stops while the ring drains: a slow checker samples less
        ev:enable()
        burn(5)
        if i % 10 == 0 then map_a_library() end
        ev:disable()
        drain()
      end
      assert.is_true((seen.sample or 0) >= 10, "samples: " .. tostring(seen.sample))
      assert.is_true((seen.mmap2 or 0) + (seen.mmap or 0) >= 1, "no mmap record")
      local ok, err = pcall(ring.records, ring, { swap = true })
      assert.is_false(ok)
      assert.matches("unknown option 'swap'", err, 1, true)
      ring:close(); ev:close()
    end)
  end)
end)
