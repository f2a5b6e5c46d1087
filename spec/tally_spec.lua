-- Tallies (the `tally` option of perfev.decode, ring:records and perf.data
-- records): samples counted by the values of the selected fields equal a
-- count, sample by sample, of the same fields of a full decode; each
-- distinct set comes once, in the order of its first sample, before the
-- next other record (which comes whole, after the tallies of every sample
-- before it) and at the end; weight is the sum of the periods; a
-- callchain (and its contexts) can be part of the key. Checked on
-- streams built byte by byte (several attrs, both byte orders), a
-- perf.data file the perf tool wrote, and a real ring.
local perfev = require "perfev"
local core = require "perfev.core"
local compat = require "perfev.compat"
local pd = require "perfev.perfdata"
local PB = require "spec.support.perfdata_build"
local P = require "spec.support.perfdata"
local E = require "spec.support.every_record"

local S = core.SAMPLE

-- A text key of a value: a callchain or its contexts by their contents.
local function text(v)
  if v == nil then return "nil" end
  if type(v) ~= "table" then return compat.tostring(v) end
  local p = {}
  for i, x in ipairs(v) do
    p[i] = type(x) == "table" and (tostring(x.context) .. ":" .. x.first .. "-" .. x.last) or compat.tostring(x)
  end
  return "{" .. table.concat(p, ",") .. "}"
end

-- A text key of t[1..n] (nil values included).
local function key(t, n)
  local p = {}
  for i = 1, n do p[i] = text(t[i]) end
  return table.concat(p, "|")
end

-- What a tally of `names` over the records `it` gives, computed sample by
-- sample from full records: the distinct sets in the order of their first
-- sample (with count and period sum), and between them the other records'
-- types, as one list of steps.
local function expected(recs, names)
  local steps, open, byk = {}, {}, {}
  local function flush()
    for _, s in ipairs(open) do steps[#steps + 1] = s end
    open, byk = {}, {}
  end
  for _, r in ipairs(recs) do
    if r.type == "sample" then
      local vals = {}
      for j, n in ipairs(names) do vals[j] = r[n] end
      local k = key({ r.event or r.id or "", key(vals, #names) }, 2)
      local s = byk[k]
      if not s then
        s = { count = 0, weight = r.period and 0 or nil, vals = vals }
        byk[k] = s
        open[#open + 1] = s
      end
      s.count = s.count + 1
      if r.period then s.weight = s.weight + r.period end
    else
      flush()
      steps[#steps + 1] = { type = r.type }
    end
  end
  flush()
  return steps
end

-- The steps of a tally iteration, in the same shape.
local function tallied(it, nf)
  local steps = {}
  while true do
    local v = compat.table_pack(it())
    if v[1] == nil then return steps end
    if type(v[1]) == "table" then
      steps[#steps + 1] = { type = v[1].type }
    else
      local vals = {}
      for j = 1, nf do vals[j] = v[2 + j] end
      steps[#steps + 1] = { count = v[1], weight = v[2], vals = vals }
    end
  end
end

local function same_steps(want, got)
  assert.equal(#want, #got)
  for i, w in ipairs(want) do
    local g = got[i]
    if w.type then
      assert.equal(w.type, g.type, "step " .. i)
    else
      assert.equal(w.count, g.count, "step " .. i)
      assert.equal(w.weight, g.weight, "step " .. i)
      assert.same(w.vals, g.vals, "step " .. i)
    end
  end
end

describe("tallies", function()
  -- samples of two attrs (one without PERIOD: its weight is the attr's
  -- period), few distinct values, side-band records between them
  local st1 = compat.bor(S.IDENTIFIER, S.IP, S.TID, S.CPU, S.PERIOD)
  local st2 = compat.bor(S.IDENTIFIER, S.IP, S.TID, S.CALLCHAIN)
  local attrs = { [11] = perfev.attr { sample_type = st1, sample_id_all = true },
                  [22] = perfev.attr { sample_type = st2, sample_period = 5000, sample_id_all = true } }
  local function stream(e)
    local parts = {}
    for i = 1, 300 do
      if i % 50 == 0 then
        parts[#parts + 1] = PB.record(e, core.RECORD.COMM, 0, compat.pack(e .. "I4I4", 5, 6) .. PB.cstr("prog") ..
                                      PB.trailer(e, st1, { id = 11, pid = 5, tid = 6, cpu = 0 }))
      elseif i % 3 == 0 then
        parts[#parts + 1] = PB.sample(e, st2, { id = 22, ip = 0x402000 + i % 4, pid = 5, tid = 6,
                                                callchain = { 0x402000 + i % 4, 0x403000 + i } })
      else
        parts[#parts + 1] = PB.sample(e, st1, { id = 11, ip = 0x401000 + i % 5, pid = 5, tid = 6 + i % 2,
                                                cpu = i % 2, period = 100 + i })
      end
    end
    return table.concat(parts)
  end

  for _, e in ipairs { "<", ">" } do
    it(("perfev.decode: equal to a count of full decodes, sample by sample (%s byte order)")
       :format(e == "<" and "little" or "big"), function()
      local bytes = stream(e)
      local opts = { swap = e ~= E.NATIVE }
      local full = {}
      for r in perfev.decode(bytes, attrs, opts) do full[#full + 1] = r end
      for _, names in ipairs { { "ip", "tid" }, { "id", "cpu", "cpumode", "pid" }, { "tid" },
                               { "ip", "callchain", "callchain_contexts" },
                               { "callchain_contexts", "tid", "callchain" }, { "callchain" } } do
        local o = { swap = opts.swap, fields = names, tally = true }
        local want = expected(full, names)
        same_steps(want, tallied(perfev.decode(bytes, attrs, o), #names))
        local n = 0
        for _, s in ipairs(want) do if s.count then n = n + 1 end end
        assert.is_true(n < 300 / 2, "distinct sets: " .. n)
      end
    end)
  end

  it("the weight is nil where the samples have no period", function()
    local st = compat.bor(S.IP, S.TID)
    local bytes = PB.sample("<", st, { ip = 0x401000, pid = 1, tid = 2 }) ..
                  PB.sample("<", st, { ip = 0x401000, pid = 1, tid = 2 })
    local swap = E.NATIVE ~= "<"
    local it = perfev.decode(bytes, perfev.attr { sample_type = st }, { swap = swap, fields = { "ip" }, tally = true })
    assert.same({ 2, nil, 0x401000 }, { it() })
    assert.is_nil(it())
  end)

  it("raises for a field that cannot be a key, and without fields", function()
    local st = compat.bor(S.IP, S.CALLCHAIN, S.RAW)
    local bytes = PB.sample("<", st, { ip = 1, callchain = { 1, 2 }, raw = "abcd" })
    local swap = E.NATIVE ~= "<"
    local attr = perfev.attr { sample_type = st }
    local it = perfev.decode(bytes, attr, { swap = swap, fields = { "ip", "callchain", "raw" }, tally = true })
    local why = "cannot be a tally's key (keys are values at a fixed place of this event's samples, "
                .. "the callchain, and callchain_contexts beside callchain)"
    assert.has_error(function() it() end, "perfev.decode: option 'tally': field 'raw' " .. why)
    it = perfev.decode(bytes, attr, { swap = swap, fields = { "ip", "callchain_contexts" }, tally = true })
    assert.has_error(function() it() end, "perfev.decode: option 'tally': field 'callchain_contexts' " .. why)
    assert.has_error(function() perfev.decode(bytes, attr, { swap = swap, tally = true }) end,
      "perfev.decode: option 'tally' needs option 'fields' (the values samples are counted by)")
    -- perf.data files check their options in Lua: at the caller's line
    local tmp = os.tmpname()
    finally(function() os.remove(tmp) end)
    PB.write(tmp, (PB.file("<", { attrs = { { attr = PB.attr("<", { type = 1, sample_type = st }), ids = {} } },
                                  data = "" })))
    local f = assert(pd.open(tmp))
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() return f:records { tally = 1 } end)
    assert.is_false(ok)
    assert.matches("tally_spec.lua:" .. line .. ": perfev.perfdata: records%(%): option 'tally' must be a boolean", err)
    f:close()
  end)

  it("a perf.data file perf recorded with -g: equal to a count of every sample, in time order", function()
    if not P.have_perf() then pending("the perf tool is not installed") return end
    local dir = P.tmpdir()
    finally(function() P.rmdir(dir) end)
    local path = assert(P.record(dir .. "/tally.data", "-g -e cpu-clock -c 200000 -- " ..
                                 "sh -c 'for i in 1 2 3; do ls -R /usr/share/doc > /dev/null; done'"))
    local f = assert(pd.open(path))
    local names = { "event", "pid", "tid", "cpu", "ip", "cpumode", "callchain", "callchain_contexts" }
    local types = { "sample", "mmap2", "comm", "fork", "exit" }
    local full = {}
    for r in f:records { order = "time", types = types } do full[#full + 1] = r end
    local got = tallied(f:records { order = "time", types = types, fields = names, tally = true }, #names)
    local want = expected(full, names)
    same_steps(want, got)
    local samples, sets = 0, 0
    for _, s in ipairs(got) do if s.count then samples, sets = samples + s.count, sets + 1 end end
    assert.is_true(samples > 100 and sets < samples, ("%d samples in %d sets"):format(samples, sets))
    f:close()
  end)

  it("ring:records: the samples of a real ring, counted by tid and cpumode", function()
    local ev, err = perfev.open { type = "software", config = "cpu-clock", sample_period = 100000,
                                  sample_type = { "ip", "tid", "period" }, disabled = true }
    if not ev then pending("cannot open cpu-clock: " .. tostring(err)) return end
    local ring = assert(ev:mmap(16))
    ev:enable()
    local t0 = os.clock()
    local x = 0
    while os.clock() - t0 < 0.05 do x = x + 1 end
    ev:disable()
    local steps = tallied(ring:records { fields = { "tid", "cpumode" }, tally = true }, 2)
    local n, weight = 0, 0
    for _, s in ipairs(steps) do
      if s.count then
        n = n + s.count
        weight = weight + s.weight
        assert.is_true(s.vals[1] > 0)
        assert.truthy(s.vals[2] == "user" or s.vals[2] == "kernel", tostring(s.vals[2]))
      end
    end
    assert.is_true(n > 5, "samples: " .. n)
    assert.equal(n * 100000, weight)
    ring:close()
    ev:close()
  end)
end)
