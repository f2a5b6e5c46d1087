-- Field selection (the `fields` option of perfev.decode, ring:records and
-- perf.data records; ring:samples and f:samples): a field-selected record
-- equals the same fields of a full decode, for every sample field (one of
-- every record type and sample field built byte by byte, in both byte
-- orders; perf.data files built with spec/support/perfdata_build.lua for
-- sample_types of every shape; a file the perf tool wrote), read in place
-- or walked; records of other types come whole (into) or are skipped
-- (values). Unknown names raise at the caller's line, naming the field.
local perfev = require "perfev"
local core = require "perfev.core"
local compat = require "perfev.compat"
local pd = require "perfev.perfdata"
local E = require "spec.support.every_record"
local PB = require "spec.support.perfdata_build"
local P = require "spec.support.perfdata"

local S = core.SAMPLE

local function decode_all(bytes, attrs, opts)
  local out = {}
  for r in perfev.decode(bytes, attrs, opts) do out[#out + 1] = r end
  return out
end

-- Every key the records of type "sample" of recs have.
local function sample_keys(recs)
  local keys, seen = {}, {}
  for _, r in ipairs(recs) do
    if r.type == "sample" then
      for k in pairs(r) do
        if not seen[k] then seen[k] = true; keys[#keys + 1] = k end
      end
    end
  end
  table.sort(keys)
  return keys
end

local function samples_of(recs)
  local out = {}
  for _, r in ipairs(recs) do if r.type == "sample" then out[#out + 1] = r end end
  return out
end

local function copy(v)
  if type(v) ~= "table" then return v end
  local c = {}
  for k, x in pairs(v) do c[k] = copy(x) end
  return c
end

-- The values of an iterator's steps, each step a packed list; tables are
-- copied, as the iterator refills one callchain table for every sample.
local function steps(it)
  local out = {}
  while true do
    local v = compat.table_pack(it())
    if v[1] == nil then return out end
    for i = 1, v.n do v[i] = copy(v[i]) end
    out[#out + 1] = v
  end
end

-- Checks that selecting `names` from bytes gives the fields of `full`'s
-- samples, as values and into a table.
local function check_selection(bytes, attrs, full, names, opts)
  local want = samples_of(full)
  local o = {}
  for k, v in pairs(opts or {}) do o[k] = v end
  o.fields = names
  local got = steps(perfev.decode(bytes, attrs, o))
  assert.equal(#want, #got)
  for i, w in ipairs(want) do
    for j, k in ipairs(names) do
      assert.same(w[k], got[i][j], ("sample %d, field %s"):format(i, k))
    end
  end
  -- into: samples with type and those fields alone, other records whole
  local t = {}
  o.into = t
  local n = 0
  for rec in perfev.decode(bytes, attrs, o) do
    n = n + 1
    local w = full[n]
    if w.type == "sample" then
      local sub = { type = "sample" }
      for _, k in ipairs(names) do sub[k] = w[k] end
      assert.same(sub, rec, "record " .. n)
    else
      assert.same(w, rec, "record " .. n .. " (" .. tostring(w.type) .. ")")
    end
  end
  assert.equal(#full, n)
end

describe("field selection", function()
  describe("equals the same fields of a full decode", function()
    local attrs = E.attrs()
    for _, order in ipairs { E.NATIVE, E.OTHER } do
      local swap = order ~= E.NATIVE
      local bytes = E.stream(order)
      local opts = { swap = swap }
      local full = decode_all(bytes, attrs, opts)

      it(("every sample field, one at a time (%s byte order)"):format(swap and "other" or "this"), function()
        local keys = sample_keys(full)
        assert.is_true(#keys >= 34, "the stream has every sample field: " .. #keys .. " keys")
        for _, k in ipairs(keys) do check_selection(bytes, attrs, full, { "type", k }, opts) end
      end)

      it(("every sample field at once, and in reverse (%s byte order)"):format(swap and "other" or "this"), function()
        local keys = sample_keys(full)
        local first = { "type" }
        for _, k in ipairs(keys) do if k ~= "type" and #first < 32 then first[#first + 1] = k end end
        check_selection(bytes, attrs, full, first, opts)
        local rev = { "type" }
        for i = #keys, 1, -1 do if keys[i] ~= "type" and #rev < 32 then rev[#rev + 1] = keys[i] end end
        check_selection(bytes, attrs, full, rev, opts)
      end)
    end

    it("values mode skips the records that are not samples; into gives them whole", function()
      local bytes = E.stream(E.NATIVE)
      local full = decode_all(bytes, attrs)
      assert.equal(24, #full)
      assert.equal(2, #steps(perfev.decode(bytes, attrs, { fields = { "type" } })))
    end)

    it("fields read in place (before the callchain) and walked (after it) mix in one selection", function()
      local st = compat.bor(S.IP, S.TID, S.TIME, S.PERIOD, S.CALLCHAIN, S.RAW, S.CPU)
      local attr = perfev.attr { sample_type = st }
      local e = E.NATIVE
      local recs = {}
      for i = 1, 50 do
        local chain = {}
        for k = 1, i % 7 do chain[k] = 0x400000 + k end
        if i % 3 == 0 then table.insert(chain, 1, perfev.CONTEXT.USER) end
        recs[i] = PB.sample(e, st, { ip = 0x401000 + i, pid = 7, tid = 8 + i % 2, time = 1000 + i, cpu = i % 2,
                                     period = 20000, callchain = chain, raw = ("r"):rep(i % 5) })
      end
      local bytes = table.concat(recs)
      local full = decode_all(bytes, attr)
      check_selection(bytes, attr, full, { "ip", "tid", "time", "callchain" })
      check_selection(bytes, attr, full, { "time", "callchain", "callchain_contexts", "raw", "cpu", "period" })
      check_selection(bytes, attr, full, { "raw", "pid", "cpumode", "size", "misc", "exact_ip" })
    end)

    it("the period of a sample without PERIOD is the attr's, as a full decode gives it", function()
      local st = compat.bor(S.IP, S.TID)
      local bytes = PB.sample(E.NATIVE, st, { ip = 0x401000, pid = 1, tid = 2 })
      local with = perfev.attr { sample_type = st, sample_period = 4000 }
      local without = perfev.attr { sample_type = st }
      assert.same({ 0x401000, 4000 }, { perfev.decode(bytes, with, { fields = { "ip", "period" } })() })
      assert.equal(4000, decode_all(bytes, with)[1].period)
      assert.same({ 0x401000 }, { perfev.decode(bytes, without, { fields = { "ip", "period" } })() })
      assert.is_nil(decode_all(bytes, without)[1].period)
    end)

    it("samples of several attrs in one stream: each by its own layout", function()
      local st1 = compat.bor(S.IDENTIFIER, S.IP, S.TID, S.TIME)
      local st2 = compat.bor(S.IDENTIFIER, S.TIME, S.ADDR, S.CALLCHAIN)
      local parts = {}
      for i = 1, 40 do
        if i % 2 == 0 then
          parts[i] = PB.sample(E.NATIVE, st1, { id = 11, ip = 0x1000 + i, pid = 3, tid = 4, time = i })
        else
          parts[i] = PB.sample(E.NATIVE, st2, { id = 22, time = i, addr = 0x9000 + i, callchain = { i, i + 1 } })
        end
      end
      local bytes = table.concat(parts)
      local attrs2 = { [11] = perfev.attr { sample_type = st1 }, [22] = perfev.attr { sample_type = st2 } }
      local full = decode_all(bytes, attrs2)
      check_selection(bytes, attrs2, full, { "id", "time", "ip", "addr", "callchain", "tid" })
    end)
  end)

  describe("a malformed sample", function()
    it("raises as the full decoder does, or gives its values: every truncation", function()
      local st = compat.bor(S.IP, S.TID, S.TIME, S.CALLCHAIN)
      local attr = perfev.attr { sample_type = st }
      local good = PB.sample(E.NATIVE, st, { ip = 1, pid = 2, tid = 3, time = 4, callchain = { 5, 6, 7 } })
      for cut = 8, #good - 1 do
        -- a header that says the record is `cut` bytes long
        local bytes = compat.pack("=I4I2I2", 9, 2, cut) .. good:sub(9, cut)
        local ok_full, err_full = pcall(decode_all, bytes, attr)
        local ok_sel, err_sel = pcall(function()
          return steps(perfev.decode(bytes, attr, { fields = { "ip", "callchain" } }))
        end)
        assert.equal(ok_full, ok_sel, "cut at " .. cut .. ": " .. tostring(err_full) .. " / " .. tostring(err_sel))
        if not ok_full then assert.matches("malformed record at offset 0", err_sel) end
      end
    end)
  end)

  describe("integers read in place (the shortcut a plain sample takes)", function()
    local st = compat.bor(S.IP, S.TID, S.TIME)
    local attr = perfev.attr { sample_type = st, sample_period = 4000 }
    local good = PB.sample(E.NATIVE, st, { ip = 1, pid = 2, tid = 3, time = 4 })
    -- each set reads up to the sample's last byte (time)
    local SETS = { { "ip", "tid", "time" }, { "time", "pid" }, { "tid", "period", "time" } }

    it("after good samples, a truncated one raises as the full decoder does, or gives its values", function()
      for cut = 8, #good - 1 do
        local bytes = good .. good .. good .. compat.pack("=I4I2I2", 9, 2, cut) .. good:sub(9, cut)
        local ok_full, full = pcall(decode_all, bytes, attr)
        -- the attr's period needs no byte of the sample, yet a selection of it
        -- refuses the record the full decoder refuses (issue 20: perfev report
        -- counted a sample that records() refused)
        local ok_p, periods = pcall(function() return steps(perfev.decode(bytes, attr, { fields = { "period" } })) end)
        assert.equal(ok_full, ok_p, ("cut at %d, period: %s / %s"):format(cut, tostring(full), tostring(periods)))
        if ok_full then
          assert.same({ { 4000, n = 1 }, { 4000, n = 1 }, { 4000, n = 1 }, { 4000, n = 1 } }, periods)
        else
          assert.matches("malformed record at offset 96", periods)
        end
        for _, names in ipairs(SETS) do
          local ok_sel, got = pcall(function() return steps(perfev.decode(bytes, attr, { fields = names })) end)
          assert.equal(ok_full, ok_sel, ("cut at %d, %s: %s / %s"):format(cut, table.concat(names, ","),
                                                                        tostring(full), tostring(got)))
          if ok_full then
            check_selection(bytes, attr, full, names)
          else
            assert.matches("malformed record at offset 96", got)
          end
        end
      end
    end)

    it("a record whose header says 0 bytes raises, after samples read in place", function()
      local bytes = good .. good .. compat.pack("=I4I2I2", 9, 2, 0)
      for _, names in ipairs { { "period" }, SETS[1], SETS[2], SETS[3] } do
        local ok, err = pcall(function() return steps(perfev.decode(bytes, attr, { fields = names })) end)
        assert.is_false(ok)
        assert.matches("size is smaller than the 8%-byte header", err)
      end
    end)

    it("other byte order, and records of other types between the samples", function()
      for _, order in ipairs { E.NATIVE, E.NATIVE == "<" and ">" or "<" } do
        local swap = order ~= E.NATIVE
        local s1 = PB.sample(order, st, { ip = 0x7f0000001234, pid = 77, tid = 78, time = 2 ^ 40 })
        local lost = compat.pack(order .. "I4I2I2I8I8", 2, 0, 24, 9, 5)
        local bytes = s1 .. lost .. s1 .. s1 .. lost
        local full = decode_all(bytes, attr, { swap = swap })
        for _, names in ipairs(SETS) do check_selection(bytes, attr, full, names, { swap = swap }) end
      end
    end)
  end)

  describe("LuaJIT: the values of plain samples read through the FFI", function()
    local JIT = rawget(_G, "jit")
    local st = compat.bor(S.IP, S.TID, S.TIME, S.ADDR, S.ID, S.STREAM_ID, S.CPU, S.PERIOD)
    local attr = perfev.attr { sample_type = st }
    local NAMES = { "ip", "pid", "tid", "time", "addr", "id", "stream_id", "cpu", "period" }
    -- the 64-bit rule at its edges: within +-2^53 as a signed integer a
    -- number (a kernel address is a negative one), beyond a uint64_t cdata
    local EDGES = {
      { ip = compat.hex64("ffffffff81000010"), pid = 1, tid = 2, time = compat.hex64("20000000000000"),
        addr = compat.hex64("20000000000001"), id = compat.hex64("8000000000000001"),
        stream_id = compat.hex64("ffe0000000000000"), cpu = compat.hex64("ffffffff"), period = 1 },
      { ip = 0x401000, pid = compat.hex64("ffffffff"), tid = compat.hex64("80000000"), time = 0,
        addr = compat.hex64("ffdfffffffffffff"), id = 7, stream_id = compat.hex64("ffffffffffffffff"),
        cpu = 3, period = compat.hex64("7fffffffffffffff") },
    }
    local function stream()
      local out = {}
      for i = 1, 300 do out[i] = PB.sample(E.NATIVE, st, EDGES[i % 2 + 1]) end
      -- a record of another type between samples, stepped over
      out[#out + 1] = compat.pack("=I4I2I2I8I8", core.RECORD.LOST, 0, 24, 9, 5)
      out[#out + 1] = PB.sample(E.NATIVE, st, EDGES[1])
      return table.concat(out)
    end

    -- true (and the test pending) where the path does not exist
    local function without_ffi()
      if JIT and JIT.status() and pcall(require, "ffi") and core.decode_accelerator then return false end
      pending("LuaJIT with its compiler on and the FFI: make test LUA=luajit")
      return true
    end

    it("is the iterator of a plan of scalars, and gives what the C iterator gives", function()
      if without_ffi() then return end
      local bytes = stream()
      local full = decode_all(bytes, attr)
      local it = perfev.decode(bytes, attr, { fields = NAMES })
      assert.equal("Lua", debug.getinfo(it, "S").what)
      -- enough loops for LuaJIT to compile the iterator into them
      check_selection(bytes, attr, full, NAMES)
      check_selection(bytes, attr, full, { "time", "pid", "ip" })
      local ffi_steps = steps(perfev.decode(bytes, attr, { fields = NAMES }))
      core.decode_accelerator(nil)
      local ok, c_steps = pcall(function() return steps(perfev.decode(bytes, attr, { fields = NAMES })) end)
      core.decode_accelerator(require("perfev.decode_jit").iterator)
      assert(ok, c_steps)
      assert.equal(#c_steps, #ffi_steps)
      for i = 1, #c_steps do
        for j = 1, #NAMES do
          assert.equal(type(c_steps[i][j]), type(ffi_steps[i][j]), ("sample %d, %s"):format(i, NAMES[j]))
          -- tostring: a uint64_t cdata ends in ULL, an int64_t's in LL
          assert.equal(tostring(c_steps[i][j]), tostring(ffi_steps[i][j]), ("sample %d, %s"):format(i, NAMES[j]))
        end
      end
    end)

    it("is not taken where the C iterator must do the work", function()
      if without_ffi() then return end
      local bytes = stream()
      local function what(a, opts) return debug.getinfo(perfev.decode(bytes, a, opts), "S").what end
      assert.equal("C", what(attr, { fields = NAMES, swap = true }))           -- the other byte order
      assert.equal("C", what(attr, { fields = NAMES, into = {} }))             -- a table
      assert.equal("C", what(attr, { fields = NAMES, tally = true }))          -- counted in C
      assert.equal("C", what(perfev.attr { sample_type = compat.bor(st, S.CALLCHAIN) },
                             { fields = { "ip", "callchain" } }))             -- a table in the values
      JIT.off()
      local off = what(attr, { fields = NAMES })                               -- interpreted: C is faster
      JIT.on()
      assert.equal("C", off)
    end)

    it("is given the kinds of its scalars as the core exports them (core.SCALAR)", function()
      local names, seen = {}, {}
      for name, kind in pairs(core.SCALAR) do
        assert.equal("number", type(kind), name)
        assert.is_nil(seen[kind], name)            -- distinct kinds
        seen[kind] = true
        names[#names + 1] = name
      end
      table.sort(names)
      assert.same({ "PERIOD", "S32", "U32", "U64" }, names)
      if without_ffi() then return end
      local given
      core.decode_accelerator(function(_, _, _, _, n, ...)
        given = { n = n, ... }
        return function() end
      end)
      local ok, err = pcall(perfev.decode, stream(), attr, { fields = { "time", "pid", "cpu" } })
      core.decode_accelerator(require("perfev.decode_jit").iterator)
      assert(ok, err)
      -- n, then (offset, kind) a field: time u64 in the sample, pid s32 (a pid_t), cpu u32
      assert.equal(3, given.n)
      assert.same({ core.SCALAR.U64, core.SCALAR.S32, core.SCALAR.U32 }, { given[2], given[4], given[6] })
    end)
  end)

  describe("errors name the field, at the caller's line", function()
    local attr = perfev.attr { sample_type = { "ip", "tid" } }
    local bytes = PB.sample(E.NATIVE, compat.bor(S.IP, S.TID), { ip = 1, pid = 2, tid = 3 })
    local line

    it("an unknown field, with the name it may have meant", function()
      local ok, err = pcall(function()
        line = debug.getinfo(1, "l").currentline + 1
        local it = perfev.decode(bytes, attr, { fields = { "ip", "tidd" } })
        return it   -- not a tail call: LuaJIT's would leave no caller's line
      end)
      assert.is_false(ok)
      assert.matches("select_spec.lua:" .. line .. ": perfev.decode: unknown field 'tidd' %(did you mean 'tid'%?%)",
                     err)
      err = select(2, pcall(perfev.decode, bytes, attr, { fields = { "frobnicate" } }))
      assert.matches("unknown field 'frobnicate'", err)
    end)

    it("a first field the sample does not have: the loop would end, so it raises", function()
      local ok, err = pcall(function()
        for _ in perfev.decode(bytes, attr, { fields = { "addr", "ip" } }) do end
      end)
      assert.is_false(ok)
      assert.matches("no 'addr', the first of the fields", err)
    end)

    it("fields must be a list of 1 to 32 names", function()
      local function fails(o) return select(2, pcall(perfev.decode, bytes, attr, o)) end
      assert.matches("option 'fields' must be a table", fails { fields = "ip" })
      assert.matches("must list 1 to 32", fails { fields = {} })
      assert.matches("fields%[2%] must be a field name", fails { fields = { "ip", 3 } })
    end)
  end)

  describe("perf.data files", function()
    local tmp = os.tmpname()
    teardown(function() os.remove(tmp) end)

    -- A file of samples of sample_type st and side-band records, in byte order e.
    local function file_of(e, st, n)
      local id = 0x77
      local st_id = compat.bor(st, S.IDENTIFIER)
      local data = {}
      data[1] = PB.record(e, core.RECORD.COMM, 0, compat.pack(e .. "I4I4", 5, 6) .. PB.cstr("prog") ..
                          PB.trailer(e, st_id, { pid = 5, tid = 6, time = 1, id = id, cpu = 0 }))
      for i = 1, n do
        data[#data + 1] = PB.sample(e, st_id, { id = id, ip = 0x401000 + i, pid = 5, tid = 6 + i % 3,
                                                time = 1000 - i, addr = 0x7000 + i, stream_id = id, cpu = i % 4,
                                                period = 100 + i, raw = "rawbytes",
                                                callchain = { perfev.CONTEXT.USER, 0x401000 + i, 0x402000 } })
      end
      local attr = PB.attr(e, { type = 1, sample_period = 100, sample_type = st_id,
                                flags = compat.lshift(1, 18) })
      return PB.write(tmp, (PB.file(e, { attrs = { { attr = attr, ids = { id } } }, data = table.concat(data) })))
    end

    local SHAPES = {
      compat.bor(S.IP, S.TID, S.TIME),
      compat.bor(S.IP, S.TID, S.TIME, S.PERIOD, S.CALLCHAIN),
      compat.bor(S.IP, S.TID, S.TIME, S.ADDR, S.ID, S.STREAM_ID, S.CPU, S.PERIOD, S.CALLCHAIN, S.RAW),
      compat.bor(S.TIME, S.CPU, S.RAW),
    }

    for si, st in ipairs(SHAPES) do
      it(("f:samples equals f:records, sample_type shape %d, both byte orders, both orders"):format(si), function()
        for _, e in ipairs { "<", ">" } do
          local f = assert(pd.open(file_of(e, st, 30)))
          for _, order in ipairs { "file", "time" } do
            local full = {}
            for r in f:records { order = order, types = { "sample" } } do full[#full + 1] = r end
            local keys = sample_keys(full)
            keys[#keys + 1] = "offset"
            for _, k in ipairs(keys) do
              local i = 0
              for time, v in f:samples("time", k, { order = order }) do
                i = i + 1
                assert.equal(full[i].time, time)
                if k == "offset" then
                  assert.is_true(v > 0)
                else
                  assert.same(full[i][k], v, ("%s, sample %d, field %s"):format(e, i, k))
                end
              end
              assert.equal(#full, i)
            end
          end
          f:close()
        end
      end)
    end

    it("f:samples raises at the caller's line for an unknown field", function()
      local f = assert(pd.open(file_of("<", SHAPES[1], 2)))
      local line = debug.getinfo(1, "l").currentline + 2
      local ok, err = pcall(function()
        local it = f:samples("ip", "cpuu")
        return it
      end)
      assert.is_false(ok)
      assert.matches("select_spec.lua:" .. line .. ": .*unknown field 'cpuu' %(did you mean 'cpu'%?%)", err)
      f:close()
    end)

    describe("written by perf record", function()
      if not P.have_perf() then
        pending("the perf tool is not installed (Debian: linux-perf)")
        return
      end
      local dir
      local record = P.recorder(function() return dir end)
      setup(function() dir = P.tmpdir() end)
      teardown(function() P.rmdir(dir) end)

      it("every sample field of a cpu-clock -g file, selected, equals the full decode", function()
        local path = assert(record("g.data", "-e cpu-clock -c 100000 -g -- " .. P.busy(20000)))
        local f = assert(pd.open(path))
        local full = {}
        for r in f:records { order = "time", types = { "sample" } } do full[#full + 1] = r end
        assert.is_true(#full > 10)
        local keys = sample_keys(full)
        assert.is_true(#keys >= 9, "keys: " .. table.concat(keys, ", "))
        local i
        for _, k in ipairs(keys) do
          i = 0
          for time, v in f:samples("time", k, { order = "time" }) do
            i = i + 1
            assert.equal(full[i].time, time)
            assert.same(full[i][k], v, ("sample %d, field %s"):format(i, k))
          end
        end
        local all = {}
        for k = 1, math.min(#keys, 32) do all[k] = keys[k] end
        i = 0
        for rec in f:records { order = "time", types = { "sample" }, into = {}, fields = all } do
          i = i + 1
          assert.same(full[i], rec)
        end
        assert.equal(#full, i)
        f:close()
      end)
    end)
  end)

  describe("ring:samples", function()
    it("gives the fields of the samples in the ring, and raises at the caller's line", function()
      local ev, err = perfev.open { type = "software", config = "cpu-clock", sample_period = 100000,
                                    sample_type = { "ip", "tid", "time", "callchain" }, disabled = true,
                                    exclude_kernel = true }
      if not ev then
        pending("cannot open cpu-clock: " .. tostring(err))
        return
      end
      local ring = assert(ev:mmap(16))
      local line = debug.getinfo(1, "l").currentline + 2
      local ok, e2 = pcall(function()
        local it = ring:samples("ip", "timee")
        return it
      end)
      assert.is_false(ok)
      assert.matches("select_spec.lua:" .. line .. ": ring:samples: unknown field 'timee' %(did you mean 'time'%?%)",
                     e2)
      ev:enable()
      local t0 = os.clock()
      local x = 0
      while os.clock() - t0 < 0.05 do x = x + 1 end
      ev:disable()
      local n, last = 0, 0
      local pid = ev:read() and nil
      for tid, time, chain, ip in ring:samples("tid", "time", "callchain", "ip") do
        n = n + 1
        assert.is_true(tid > 0)
        assert.is_true(time >= last)
        last = time
        assert.equal("table", type(chain))
        assert.is_true(#chain >= 1)
        assert.equal(ip, chain[1])
        pid = pid or tid
        assert.equal(pid, tid)
      end
      assert.is_true(n > 5, "samples: " .. n)
      ring:close()
      ev:close()
    end)
  end)
end)
