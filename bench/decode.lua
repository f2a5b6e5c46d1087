-- bench/decode.lua: records per second the record decoder gives Lua, over
-- the data sections of two files `perf record` wrote here, against a plain
-- C loop over the same bytes (bench/helper/rawdecode.c) measured in the
-- same run, and against `perf script` on the same file:
--   - callchains: `perf record -e cpu-clock -c 100000 -P -g` of a C program
--     with frame pointers (ip, tid, time, period, callchain), 100k+ samples;
--   - no callchains: `perf record -e cpu-clock -c 20000` (ip, tid, time;
--     the period is the attr's), ~440k samples.
-- Each perfev run reads ip, tid and time of every sample and sums them; the
-- sum must equal the C loop's. The runs: a table per record, { into = t },
-- the fields selected (perfev.decode.samples(..., "ip", "tid", "time"): values, no
-- table), and the same with the callchain. The ratios are the claim;
-- absolute rates vary from machine to machine. Times are CPU times (perf
-- script's: the child process's user + system time), medians of ROUNDS.
--   make bench
--   PERFEV_BENCH_DATA=perf.data   decode this file instead of capturing them
--   PERFEV_BENCH_ROUNDS=5         rounds (the median is printed)
--   PERFEV_BENCH_SAMPLES=440000   samples in the file without callchains
local perfev = require "perfev"
local raw = require "rawdecode"
local B = require "bench.support"
local compat = require "perfev.compat"

local ROUNDS = tonumber(os.getenv("PERFEV_BENCH_ROUNDS")) or 5
local FLAT_SAMPLES = tonumber(os.getenv("PERFEV_BENCH_SAMPLES")) or 440000
local SAMPLE = perfev.SAMPLE
local clock = raw.cpu_ns
local median, have = B.median, B.have

-- Without perf: samples built here (host byte order), callchains of a
-- user marker and 6 frames.
local function synthetic(n)
  local st = compat.bor(SAMPLE.IP, SAMPLE.TID, SAMPLE.TIME, SAMPLE.PERIOD, SAMPLE.CALLCHAIN)
  local out = {}
  for i = 1, n do
    out[i] = compat.pack("=I4I2I2 I8 I4I4 I8 I8 I8 I8I8I8I8I8I8I8", 9, 2, 8 * 13,
      0x401000 + i % 4096, 1000, 1000 + i % 3, 1000000 + 20000 * i, 20000,
      7, perfev.CONTEXT.USER, 0x401000, 0x401100, 0x401200, 0x401300, 0x401400, 0x401500)
  end
  return table.concat(out), perfev.attr { sample_type = st }, st
end

-- ---- the loops: each returns records, the sum of ip + tid + time, ns ----
-- A loop is given the function that makes its iterator (perfev's, or the
-- floor's below), called inside the timed part.

local function table_loop(make)
  collectgarbage()
  local sum, n = 0, 0
  local t0 = clock()
  for rec in make() do
    n = n + 1
    if rec.type == "sample" then sum = sum + rec.ip + rec.tid + rec.time end
  end
  return n, sum, clock() - t0
end

local function values_loop(make)
  collectgarbage()
  local sum, n = 0, 0
  local t0 = clock()
  for ip, tid, time in make() do
    n = n + 1
    sum = sum + ip + tid + time
  end
  return n, sum, clock() - t0
end

local function tables(data, attr, opts)
  return table_loop(function() return perfev.decode(data, attr, opts) end)
end

local function selected(data, attr)
  return values_loop(function() return perfev.decode.samples(data, attr, "ip", "tid", "time") end)
end

-- The floors (bench/helper/rawdecode.c): the same iterations through the
-- Lua C API with no decoding, no checks: values, a table per sample, one
-- table refilled. What perfev costs above them is its own.
local function floor_values(data, st)
  return values_loop(function() return raw.values(data, st) end)
end

local function floor_tables(data, st, into)
  return table_loop(function() return raw.tables(data, st, into) end)
end

local function selected_chain(data, attr)
  collectgarbage()
  local sum, n = 0, 0
  local t0 = clock()
  for ip, tid, time, chain in perfev.decode.samples(data, attr, "ip", "tid", "time", "callchain") do
    n = n + 1
    sum = sum + ip + tid + time
    if chain then sum = sum + #chain end
  end
  return n, sum, clock() - t0
end

-- Whether a loop's sum is the C loop's (which wraps at 2^64). On LuaJIT a
-- sum of addresses and times is a double past 2^53, which does not wrap
-- (or a uint64_t cdata once a kernel address, above 2^53, joins it), so
-- there the sums must agree modulo 2^64 to 9 digits (the specs check
-- every value exactly: spec/select_spec.lua).
local LUAJIT = compat.runtime:match("LuaJIT") ~= nil
local function same_sum(got, want)
  if not LUAJIT then return got == want end
  local g, w = tonumber(got) % 2 ^ 64, tonumber(want) % 2 ^ 64
  return math.abs(g - w) <= 1e-9 * 2 ^ 64   -- rounding: ~16k a sample past 2^63
end

-- Goals are printed as "goal: figure (met | NOT met)".
local goals = {}
local function goal(text, figure, met)
  goals[#goals + 1] = ("  %-66s %-28s %s"):format(text, figure, met and "met" or "NOT met")
end

local function bench(title, path, data, attr, st)
  local records, samples, csum = raw.walk(data, st)
  local frames = 0
  for _, chain in perfev.decode.samples(data, attr, "ip", "callchain") do
    frames = frames + (chain and #chain or 0)
  end
  print(("%s: %d records (%d samples, %.1f frames a callchain), %.1f MB; median of %d rounds")
        :format(title, records, samples, frames / math.max(samples, 1), #data / 1e6, ROUNDS))

  local reuse, floor_into = { into = {} }, {}
  local runs = {
    { "perfev.decode, a table per record", function() return tables(data, attr) end, records },
    { "perfev.decode, { into = t } reused", function() return tables(data, attr, reuse) end, records },
    { "perfev.decode, fields ip, tid, time (values)", function() return selected(data, attr) end, samples },
    { "floor: C API, a table per sample (no decoding)", function() return floor_tables(data, st) end, samples },
    { "floor: C API, one table refilled (no decoding)", function() return floor_tables(data, st, floor_into) end,
      samples },
    { "floor: C API, values (no decoding)", function() return floor_values(data, st) end, samples },
  }
  if frames > 0 then
    runs[#runs + 1] = { "perfev.decode, fields ip, tid, time, callchain",
                        function() return selected_chain(data, attr) end, samples }
  end
  local c_ns, script_ns, ns = {}, {}, {}
  for i = 1, #runs do ns[i] = {} end
  local script = path and have("perf") and ("perf script -F ip,tid,time -i %s >/dev/null 2>&1"):format(B.quote(path))
  for r = 1, ROUNDS do
    c_ns[r] = select(4, raw.walk(data, st))
    for i, run in ipairs(runs) do
      local n, sum, t = run[2]()
      local want = csum
      if run[1]:match("callchain") then want = csum + frames end
      assert(n == run[3] and same_sum(sum, want), run[1] .. ": perfev and the C loop disagree")
      ns[i][r] = t
    end
    if script then
      local t0 = raw.children_cpu_ns()
      assert(B.sh(script), "perf script failed")
      script_ns[r] = raw.children_cpu_ns() - t0
    end
  end

  local c = median(c_ns)
  local function row(label, t, n)
    local per = t / n
    print(("  %-48s %8.3f M/s %9.1f ns each  ratio %7.1f"):format(label, 1e3 / per, per, t / c))
    return 1e3 / per
  end
  row("C loop summing ip+tid+time (baseline)", c, records)
  if script then
    row("perf script -F ip,tid,time (process)", median(script_ns), records)
  else
    print("  perf script: skipped (" .. (have("perf") and "synthetic input" or "perf is not installed") .. ")")
  end
  local rate = {}
  for i, run in ipairs(runs) do rate[i] = row(run[1], median(ns[i]), run[3]) end
  print(("  perfev against the floor: a table per record %.2fx, into %.2fx, values %.2fx its time")
        :format(rate[4] / rate[1], rate[5] / rate[2], rate[6] / rate[3]))
  return rate, median(c_ns) / records, median(ns[3]) / samples
end

local function heap(data, attr)
  local function samples() return perfev.decode.samples(data, attr, "ip", "tid", "time") end
  for _, mode in ipairs { { "a table per record", nil }, { "{ into = t }", { into = {} } }, { "fields", samples } } do
    collectgarbage()
    collectgarbage("stop")
    local before = collectgarbage("count")
    local n = 0
    local it = type(mode[2]) == "function" and mode[2]() or perfev.decode(data, attr, mode[2])
    for _ in it do n = n + 1 end
    local growth = collectgarbage("count") - before
    collectgarbage("restart")
    print(("  Lua heap growth, GC stopped, %-20s %10.1f KiB (%.2f bytes a record)"):format(
          mode[1] .. ":", growth, growth * 1024 / n))
  end
end

local function main()
  local dir = B.tmpdir()
  local given = os.getenv("PERFEV_BENCH_DATA")
  local chain_path, flat_path
  if given then
    chain_path = given
  elseif B.have_perf() then
    local burn = B.burn(dir)
    chain_path = B.record { file = dir .. "/chain.data", perf = "-e cpu-clock -c 100000 -P -g",
                            workload = burn, secs = 3, samples = 100000 }
    flat_path = B.record { file = dir .. "/flat.data", perf = "-e cpu-clock -c 20000",
                           workload = burn, secs = 2, samples = FLAT_SAMPLES * 0.9 }
  else
    print("(perf is not installed: decoding synthetic samples instead; perf script is skipped)")
  end

  local data, attr, st
  if chain_path then data, attr, st = B.data(chain_path) else data, attr, st = synthetic(120000) end
  local title = "with callchains (" .. (given or "perf record -e cpu-clock -c 100000 -P -g") .. ")"
  local rate, c_per, sel_per = bench(title, chain_path, data, attr, st)
  heap(data, attr)
  goal("full decode into fresh tables >= 2M records/s (callchain file)",
       ("%.2fM/s (floor %.2fM/s)"):format(rate[1], rate[4]), rate[1] >= 2)
  goal("full decode into a reused table >= 4M records/s (callchain file)",
       ("%.2fM/s (floor %.2fM/s)"):format(rate[2], rate[5]), rate[2] >= 4)
  goal("fields ip, tid, time >= 10M samples/s (callchain file)", ("%.1fM/s"):format(rate[3]), rate[3] >= 10)
  goal("fields ip, tid, time within 10x of the C loop (callchain file)",
       ("%.1fx the C loop"):format(sel_per / c_per), sel_per / c_per <= 10)

  if flat_path then
    data, attr, st = B.data(flat_path)
    local frate, fc, fsel = bench("no callchains (perf record -e cpu-clock -c 20000)", flat_path, data, attr, st)
    goal("fields ip, tid, time >= 10M samples/s (no-callchain file)", ("%.1fM/s"):format(frate[3]), frate[3] >= 10)
    goal("fields ip, tid, time within 10x of the C loop (no-callchain file)",
         ("%.1fx the C loop"):format(fsel / fc), fsel / fc <= 10)
  end
  print("goals (issue 14):")
  for _, g in ipairs(goals) do print(g) end
  B.rmdir(dir)
end

main()
