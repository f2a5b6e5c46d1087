-- bench/perfdata.lua: reading perf.data files with perfev against `perf
-- script -F ip,tid,time` on the same file, whole process against whole
-- process (interpreter and perf start-up included), CPU time (user +
-- system) and wall time, medians of ROUNDS alternated runs, printed as
-- ratios. Two files, written here by the recording set-up of bench/support:
--   - no callchains: `perf record -e cpu-clock -c 20000`, ~440k samples;
--   - callchains: `perf record -e cpu-clock -c 100000 -g`, 100k+ samples.
-- perfev's runs touch ip, tid and time of every sample: f:samples (no
-- table per sample) in time order, as perf script delivers them (the file
-- mapped, and read through stdio as before the mapping), and in file
-- order; f:records tables; and f:samples printing them as perf script
-- does, to /dev/null.
--   make bench     (needs the perf tool; skipped without it)
--   PERFEV_BENCH_SAMPLES=440000   samples in the file without callchains
local B = require "bench.support"

local ROUNDS = tonumber(os.getenv("PERFEV_BENCH_ROUNDS")) or 5
local FLAT_SAMPLES = tonumber(os.getenv("PERFEV_BENCH_SAMPLES")) or 440000
local q = B.quote

if not B.have_perf() then
  print("bench/perfdata.lua: the perf tool is not installed (Debian: linux-perf); skipped")
  return
end

local dir = B.tmpdir()
local burn = B.burn(dir)

local function lua_cmd(file, body, opts)
  return B.lua_cmd(("local pd = require 'perfev.perfdata'; local f = assert(pd.open(%q, %s)); %s")
                   :format(file, opts or "nil", body))
end

local function runs_for(file)
  return {
    { "perf script -F ip,tid,time", ("perf script -F ip,tid,time -i %s"):format(q(file)) },
    { "perfev f:samples, time order (as perf script)", lua_cmd(file,
        "local n = 0 for ip, tid, time in f:samples('ip', 'tid', 'time', { order = 'time' }) do " ..
        "n = n + ip + tid + time end") },
    { "  the same through stdio (mmap = false: before)", lua_cmd(file,
        "local n = 0 for ip, tid, time in f:samples('ip', 'tid', 'time', { order = 'time' }) do " ..
        "n = n + ip + tid + time end", "{ mmap = false }") },
    { "perfev f:samples, file order", lua_cmd(file,
        "local n = 0 for ip, tid, time in f:samples('ip', 'tid', 'time') do n = n + ip + tid + time end") },
    { "perfev f:records tables, time order", lua_cmd(file,
        "local n = 0 for r in f:records { order = 'time', types = { 'sample' } } do " ..
        "n = n + r.ip + r.tid + r.time end") },
    { "perfev f:samples, time order, printed", lua_cmd(file,
        "local w, fmt = io.write, string.format " ..
        "for ip, tid, time in f:samples('ip', 'tid', 'time', { order = 'time' }) do " ..
        "w(fmt('%7d %d.%09d: %16x\\n', tid, math.floor(time / 1e9), time % 1000000000, ip)) end") },
  }
end

local goals = {}

local function bench(title, file, samples, want)
  local runs = runs_for(file)
  local walls, cpus = {}, {}
  for i = 1, #runs do walls[i], cpus[i] = {}, {} end
  for _ = 1, ROUNDS do   -- alternated, so that every run sees the same machine state
    for i, r in ipairs(runs) do
      local w, c = B.run(r[2])
      table.insert(walls[i], w)
      table.insert(cpus[i], c)
    end
  end
  print(("%s: %d samples, %.1f MB; median of %d whole-process runs")
        :format(title, samples, B.size(file) / 1e6, ROUNDS))
  local bw, bc = B.median(walls[1]), B.median(cpus[1])
  print(("  %-48s %8.1f ms cpu %8.1f ms wall"):format(runs[1][1], bc / 1e6, bw / 1e6))
  for i = 2, #runs do
    local w, c = B.median(walls[i]), B.median(cpus[i])
    print(("  %-48s %8.1f ms cpu %8.1f ms wall   %5.1fx faster (cpu), %5.1fx (wall)")
          :format(runs[i][1], c / 1e6, w / 1e6, bc / c, bw / w))
  end
  local ratio = bc / B.median(cpus[2])
  goals[#goals + 1] = ("  %-64s %-26s %s"):format(
    ("f:samples ip, tid, time >= %dx faster than perf script (%s)"):format(want, title),
    ("%.1fx (cpu), %.1fx (wall)"):format(ratio, bw / B.median(walls[2])), ratio >= want and "met" or "NOT met")
end

local flat, nflat = B.record { file = dir .. "/flat.data", perf = "-e cpu-clock -c 20000",
                               workload = burn, secs = 2, samples = FLAT_SAMPLES * 0.9 }
bench("no callchains", flat, nflat, 5)
local chain, nchain = B.record { file = dir .. "/chain.data", perf = "-m 1024 -e cpu-clock -c 100000 -g",
                                 workload = burn, secs = 3, samples = 100000 }
bench("callchains", chain, nchain, 8)
print("goals (issue 14):")
for _, g in ipairs(goals) do print(g) end
B.rmdir(dir)
