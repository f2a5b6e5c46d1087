-- Iteration by purpose (lua/perfev/iterate.lua): on a byte string
-- (perfev.decode), a perf.data file and a real ring alike, :records()
-- gives tables, :samples(...) / :values(...) the fields' values, and
-- :tally(...) the samples counted by their values, with the records of
-- other types handed to on_record in their place. Each is checked against
-- full decodes of the same records; the option forms they replace
-- (records{ fields } without into, records{ tally = true }) still give the
-- same and say once that they are deprecated.
local perfev = require "perfev"
local core = require "perfev.core"
local compat = require "perfev.compat"
local pd = require "perfev.perfdata"
local PB = require "spec.support.perfdata_build"
local E = require "spec.support.every_record"

local S = core.SAMPLE
local unpack = table.unpack or rawget(_G, "unpack")

-- every step of an iterator, each as a list of its values
local function steps(it)
  local out = {}
  while true do
    local v = compat.table_pack(it())
    if v[1] == nil then return out end
    for i = 1, v.n do if type(v[i]) == "table" then v[i] = v[i].type or v[i] end end
    out[#out + 1] = v
  end
end

-- the warnings said while fn runs (perfev.on_warning's handler)
local function warnings(fn)
  local said = {}
  local prev = perfev.on_warning(function(m) said[#said + 1] = m end)
  local ok, err = pcall(fn)
  perfev.on_warning(prev)
  assert(ok, err)
  return said
end

describe("iteration by purpose", function()
  local st = compat.bor(S.IP, S.TID, S.PERIOD)
  local attr = perfev.attr { sample_type = st, sample_id_all = true }
  local e = E.NATIVE
  local function stream()
    local parts = {}
    for i = 1, 40 do
      if i % 10 == 0 then
        parts[#parts + 1] = PB.record(e, core.RECORD.COMM, 0, compat.pack(e .. "I4I4", 5, 6) .. PB.cstr("prog") ..
                                      PB.trailer(e, st, { pid = 5, tid = 6 }))
      else
        parts[#parts + 1] = PB.sample(e, st, { ip = 0x401000 + i % 3, pid = 5, tid = 6, period = 10 + i })
      end
    end
    return table.concat(parts)
  end
  local bytes = stream()

  -- what a tally must give, from full decodes: the sets of (ip, tid) of
  -- the samples between two comm records, in first-seen order, then "comm"
  local function expected(whole)
    local out, open, by = {}, {}, {}
    local function flush()
      for _, s in ipairs(open) do out[#out + 1] = s end
      open, by = {}, {}
    end
    for r in perfev.decode.records(bytes, attr) do
      if r.type == "sample" then
        local k = r.ip .. "|" .. r.tid
        if not by[k] then
          by[k] = { 0, 0, r.ip, r.tid, n = 4 }
          open[#open + 1] = by[k]
        end
        by[k][1], by[k][2] = by[k][1] + 1, by[k][2] + r.period
      elseif not whole then
        flush()
        out[#out + 1] = { r.type, n = 1 }
      end
    end
    flush()
    return out
  end

  describe("perfev.decode", function()
    it("is callable as before, and records() is the same", function()
      local a, b = steps(perfev.decode(bytes, attr)), steps(perfev.decode.records(bytes, attr))
      assert.equal(40, #a)
      assert.same(a, b)
    end)

    it("samples(...) and values(...) give the fields of each sample, as full decodes", function()
      local want = {}
      for r in perfev.decode.records(bytes, attr) do
        if r.type == "sample" then want[#want + 1] = { r.ip, r.tid, n = 2 } end
      end
      assert.equal(36, #want)
      assert.same(want, steps(perfev.decode.samples(bytes, attr, "ip", "tid")))
      assert.same(want, steps(perfev.decode.values(bytes, attr, "ip", "tid", { swap = false })))
    end)

    it("tally(...) counts the samples; the other records go to on_record in their place", function()
      local got, seen = {}, {}
      for n, w, ip, tid in perfev.decode.tally(bytes, attr, "ip", "tid", {
          on_record = function(rec) got[#got + 1] = { rec.type, n = 1 } seen[#seen + 1] = rec.comm end }) do
        got[#got + 1] = { n, w, ip, tid, n = 4 }
      end
      assert.same(expected(), got)
      assert.same({ "prog", "prog", "prog", "prog" }, seen)
      -- without on_record: the tallies alone
      local only = {}
      for _, s in ipairs(expected()) do if s.n == 4 then only[#only + 1] = s end end
      assert.same(only, steps(perfev.decode.tally(bytes, attr, "ip", "tid")))
    end)

    it("the old option forms give the same and say they are deprecated, once per line", function()
      local said = warnings(function()
        for _ = 1, 2 do
          assert.same(steps(perfev.decode.samples(bytes, attr, "ip")),
                      steps(perfev.decode(bytes, attr, { fields = { "ip" } })))
        end
        local old = steps(perfev.decode(bytes, attr, { fields = { "ip", "tid" }, tally = true }))
        assert.same(expected(), old)
        -- fields with into: tables, not deprecated
        for _ in perfev.decode(bytes, attr, { fields = { "ip" }, into = {} }) do end
      end)
      assert.equal(2, #said, table.concat(said, "\n"))
      assert.matches("^deprecated: perfev.decode{ fields = ... } %(values%) is now :samples%(field, ...%) %(at "
                     .. "spec/iterate_spec.lua:%d+%)$", said[1])
      assert.matches("^deprecated: perfev.decode{ fields = ..., tally = true } is now :tally%(field, ...%)", said[2])
    end)

    it("raises at the caller's line for no field, a bad option, an unknown field", function()
      local function raised(fn, msg)
        local line = debug.getinfo(2, "l").currentline
        local ok, err = pcall(fn)
        assert.is_false(ok)
        assert.equal("spec/iterate_spec.lua:" .. line .. ": " .. msg, err)
      end
      raised(function() perfev.decode.samples(bytes, attr) end,
             "perfev.decode.samples: name the fields (e.g. perfev.decode.samples(\"ip\", \"tid\"))")
      raised(function() perfev.decode.tally(bytes, attr, "ip", { on_recrod = print }) end,
             "perfev.decode.tally: unknown option 'on_recrod' (did you mean 'on_record'?)")
      raised(function() perfev.decode.samples(bytes, attr, "tidd") end,
             "perfev.decode: unknown field 'tidd' (did you mean 'tid'?)")
    end)
  end)

  describe("a perf.data file", function()
    local tmp
    before_each(function()
      tmp = os.tmpname()
      PB.write(tmp, (PB.file(e, { attrs = { { attr = PB.attr(e, { type = 1, sample_type = st,
                                                                    sample_id_all = true }), ids = {} } },
                                  data = bytes })))
    end)
    after_each(function() os.remove(tmp) end)

    it("samples, values and tally give what the byte string gives", function()
      local f = assert(pd.open(tmp))
      assert.same(steps(perfev.decode.samples(bytes, attr, "ip", "tid")), steps(f:samples("ip", "tid")))
      assert.same(steps(perfev.decode.samples(bytes, attr, "tid")), steps(f:values("tid", { order = "time" })))
      local got = {}
      for n, w, ip, tid in f:tally("ip", "tid", { types = { "comm" },
                                                  on_record = function(r) got[#got + 1] = { r.type, n = 1 } end }) do
        got[#got + 1] = { n, w, ip, tid, n = 4 }
      end
      assert.same(expected(), got)
      -- without on_record, a file's tally reads its samples alone: one set
      -- each over the whole file
      assert.same(expected(true), steps(f:tally("ip", "tid")))
      f:close()
    end)

    it("records{ fields, tally } still works and is deprecated", function()
      local f = assert(pd.open(tmp))
      local said = warnings(function()
        assert.same(expected(), steps(f:records { fields = { "ip", "tid" }, tally = true }))
      end)
      assert.equal(1, #said)
      assert.matches("f:records{ fields = ..., tally = true } is now :tally", said[1], 1, true)
      assert.has_error(function() f:tally("ip", { ordre = "time" }) end)
      f:close()
    end)
  end)

  describe("a ring", function()
    it("records, samples/values and tally over the samples of a real ring", function()
      local ev, err = perfev.open { type = "software", config = "cpu-clock", sample_period = 100000,
                                    sample_type = { "ip", "tid", "period" }, disabled = true }
      if not ev then pending("cannot open cpu-clock: " .. tostring(err)) return end
      local ring = assert(ev:mmap(16))
      -- the Lua methods are in the class's one method table, as the core exports it
      assert.equal(core.ring_methods, getmetatable(ring).__index)
      assert.equal("function", type(core.ring_methods.tally))
      local function burn()
        ev:enable()
        local t0, x = os.clock(), 0
        while os.clock() - t0 < 0.03 do x = x + 1 end
        ev:disable()
      end
      burn()
      local n, weight = 0, 0
      for c, w, tid in ring:tally("tid") do
        n, weight = n + c, weight + w
        assert.is_true(tid > 0)
      end
      assert.is_true(n > 5, "samples: " .. n)
      assert.equal(n * 100000, weight)
      burn()
      local m = 0
      for tid, period in ring:values("tid", "period") do
        m = m + 1
        assert.is_true(tid > 0)
        assert.equal(100000, period)
      end
      assert.is_true(m > 5, "samples: " .. m)
      local said = warnings(function()
        burn()
        for _ in ring:records { fields = { "tid" }, tally = true } do end
      end)
      assert.equal(1, #said)
      assert.matches("ring:records{ fields = ..., tally = true } is now :tally", said[1], 1, true)
      assert.has_error(function() ring:tally() end)
      ring:close()
      ev:close()
      assert.is_nil(unpack({}))
    end)
  end)
end)
