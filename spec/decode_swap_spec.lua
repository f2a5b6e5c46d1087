-- perfev.decode(bytes, attr, { swap = true }): records written by a machine
-- of the other byte order (a perf.data file from one) decode to the same
-- tables as the same records written in this machine's order. Every record
-- type and sample field is built here twice with string.pack, once in each
-- byte order; bitfields are laid out as each order's compiler lays them.
local perfev = require "perfev"
local compat = require "perfev.compat"

local E = require "spec.support.every_record"

local NATIVE, OTHER, stream = E.NATIVE, E.OTHER, E.stream
local A1, A2 = E.A1, E.A2

local function decode_all(bytes, attrs, opts)
  local out = {}
  for r in perfev.decode(bytes, attrs, opts) do out[#out + 1] = r end
  return out
end

describe("perfev.decode with swap", function()
  local attrs = { [1] = perfev.attr(A1), [2] = perfev.attr(A2) }
  local native, other = stream(NATIVE), stream(OTHER)

  it("builds two different byte strings of the same length", function()
    assert.equal(#native, #other)
    assert.are_not.equal(native, other)
  end)

  it("decodes every record type and sample field of the other byte order as this order's", function()
    local want = decode_all(native, attrs)
    local got = decode_all(other, attrs, { swap = true })
    assert.equal(24, #want)
    assert.equal(#want, #got)
    for i = 1, #want do assert.same(want[i], got[i], "record " .. i .. " (" .. tostring(want[i].type) .. ")") end
  end)

  it("the values are the ones written, not two equal mistakes", function()
    local s1, s2 = compat.table_unpack(decode_all(other, attrs, { swap = true }), 1, 2)
    assert.same({ "sample", 1, 0x401000, 10, 11, 123456789, 100000, 2, "user" },
                { s1.type, s1.id, s1.ip, s1.pid, s1.tid, s1.time, s1.period, s1.cpu, s1.cpumode })
    assert.is_true(s1.exact_ip)
    assert.same({ compat.hex64("0xffffffff81000010"), 0x401000, 0x401100 }, s1.callchain)
    assert.same({ { context = "kernel", first = 1, last = 1 }, { context = "user", first = 2, last = 3 } },
                s1.callchain_contexts)
    assert.same({ nr = 2, time_enabled = 500, { value = 7, id = 1, lost = 0 }, { value = 8, id = 2, lost = 3 } },
                s1.read)
    assert.same({ hw_idx = 9,
      { from = 0x10, to = 0x20, mispred = true, predicted = false, in_tx = false, abort = false,
        cycles = 100, type = 3, spec = 0, new_type = 0, priv = 5 },
      { from = 0x30, to = 0x40, mispred = false, predicted = true, in_tx = true, abort = true,
        cycles = 0, type = 0, spec = 2, new_type = 9, priv = 0 } }, s1.branch_stack)
    assert.same({ abi = 2, ax = 0x1111, ip = 0x2222 }, s1.regs_user)
    assert.same({ "stackstackstack!", 12 }, { s1.stack_user, s1.dyn_size })
    assert.same({ 70000, 12, 34 }, { s1.weight, s1.var2_w, s1.var3_w })
    assert.same({ op = "load", lvl = "hit|l1", lock = "na", lvl_num = "l1" }, s1.mem)
    assert.same({ 0x100000003, 0x1234000, 55, 4096, 2097152, "AUXDATA!" },
                { s1.transaction, s1.phys_addr, s1.cgroup, s1.data_page_size, s1.code_page_size, s1.aux })
    assert.same({ 2, "ffffffff81234567", 300, 0xabc, "kernel" },
                { s2.id, ("%x"):format(s2.ip), s2.weight, s2.regs_intr.ip, s2.cpumode })
  end)

  it("leaves strings and byte blobs in the writer's order: raw, build ids, tags, text_poke bytes", function()
    local recs = decode_all(other, attrs, { swap = true })
    assert.equal("RAW\1\2\3\4\5\6\7\8\9", recs[1].raw)
    local by_type = {}
    for _, r in ipairs(recs) do by_type[r.type] = by_type[r.type] or r end
    assert.equal(("\1\2\3\4\5"):rep(4), recs[11].build_id)
    assert.equal("TAGTAG!!", by_type.bpf_event.tag)
    assert.same({ "\x90\x90", "\xe8\1\2\3\4" }, { by_type.text_poke.old_bytes, by_type.text_poke.new_bytes })
    assert.same({ 424242, 8, 1, 3 }, { by_type.mmap2.ino, by_type.mmap2.maj, by_type.mmap2.min,
                                       by_type.mmap2.ino_generation })
    assert.equal("/usr/lib/libc.so.6", by_type.mmap2.filename)
    assert.equal("abcdefgh", recs[24].data)
    assert.equal(200, recs[24].type)
  end)

  it("without swap, the other order's records do not decode", function()
    local ok = pcall(decode_all, other, attrs)
    assert.is_false(ok)
  end)

  it("never reads out of bounds: every truncation and byte flip of swapped input errors or decodes", function()
    local t = {}
    local function run(s)
      local ok, err = pcall(decode_all, s, attrs, { swap = true, into = t })
      assert(ok or err:match("malformed record"), err)
    end
    for cut = 0, #other - 1, 3 do run(other:sub(1, cut)) end
    local rnd = 4321
    local function rand(n) rnd = (rnd * 1103515245 + 12345) % 2147483648; return rnd % n end
    for _ = 1, 2000 do
      local i = rand(#other) + 1
      run(other:sub(1, i - 1) .. string.char(rand(256)) .. other:sub(i + 1))
    end
  end)

  it("swap = false is this machine's order, and combines with into", function()
    assert.same(decode_all(native, attrs), decode_all(native, attrs, { swap = false }))
    local want, t, n = decode_all(native, attrs), {}, 0
    for r in perfev.decode(other, attrs, { swap = true, into = t }) do
      n = n + 1
      assert.is_true(rawequal(r, t))
      assert.equal(want[n].type, r.type)
      assert.equal(want[n].time, r.time)
      assert.equal(want[n].size, r.size)
    end
    assert.equal(#want, n)
  end)
end)
