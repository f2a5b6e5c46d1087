-- bench/perfdata.lua: reading a perf.data file of 100k+ samples (written
-- here by `perf record -e cpu-clock -c 100000 -g`) with perfev against
-- `perf script -F ip,tid,time` on the same file, whole process against
-- whole process (interpreter and perf start-up included), printed as
-- ratios. perfev's runs touch ip, tid and time of every sample; one run
-- also prints them as perf script does, to /dev/null.
--   make bench     (needs the perf tool; skipped without it)
local pd = require "perfev.perfdata"
local B = require "bench.support"

local ROUNDS = tonumber(os.getenv("PERFEV_BENCH_ROUNDS")) or 5
local LUA = os.getenv("LUA") or "lua5.4"

local sh, q = B.sh, B.quote

if not B.have_perf() then
  print("bench/perfdata.lua: the perf tool is not installed (Debian: linux-perf); skipped")
  return
end

local dir = B.tmpdir()
local file = dir .. "/perf.data"

local function count_samples(path)
  local f = assert(pd.open(path))
  local n = 0
  for _ in f:records { types = { "sample" } } do n = n + 1 end
  f:close()
  return n
end

-- A cpu-bound Lua loop of `secs` seconds, sampled every 10 us of cpu-clock.
local samples, secs = 0, 1.5
while samples < 100000 and secs < 20 do
  local busy = ("local t = os.clock() local x = 0 while os.clock() - t < %g do " ..
                "for i = 1, 1000 do x = x + i end end"):format(secs)
  local out, ok = sh(("perf record -q -m 1024 -e cpu-clock -c 100000 -g -o %s -- %s -e %s 2>&1")
                     :format(q(file), LUA, q(busy)))
  assert(ok, "perf record failed: " .. out)
  samples = count_samples(file)
  secs = secs * 2
end
local fsize = tonumber((sh("stat -c %s " .. q(file)):gsub("%s+$", "")))

-- Wall-clock nanoseconds of a shell command, output discarded.
local function wall(cmd)
  local out = sh(("s=$(date +%%s%%N); %s >/dev/null 2>&1; e=$(date +%%s%%N); echo $((e - s))"):format(cmd))
  return (assert(tonumber(out), "timing failed: " .. out))
end

local function lua_cmd(body)
  local code = ("package.path = %q; package.cpath = %q; local pd = require 'perfev.perfdata'; " ..
                "local f = assert(pd.open(%q)); %s"):format(package.path, package.cpath, file, body)
  return LUA .. " -e " .. q(code)
end

local runs = {
  { "perf script -F ip,tid,time", ("perf script -F ip,tid,time -i %s"):format(q(file)) },
  { "perfev, time order (as perf script)", lua_cmd(
      "local n = 0 for r in f:records { order = 'time', types = { 'sample' } } do " ..
      "n = n + r.ip + r.tid + r.time end") },
  { "perfev, file order", lua_cmd(
      "local n = 0 for r in f:records { types = { 'sample' } } do n = n + r.ip + r.tid + r.time end") },
  { "perfev, time order, printed like perf script", lua_cmd(
      "local w, fmt = io.write, string.format for r in f:records { order = 'time', types = { 'sample' } } do " ..
      "w(fmt('%7d %d.%09d: %16x\\n', r.tid, r.time // 1000000000, r.time % 1000000000, r.ip)) end") },
}

local median = B.median

local times = {}
for i = 1, #runs do times[i] = {} end
for _ = 1, ROUNDS do   -- alternated, so that every run sees the same machine state
  for i, r in ipairs(runs) do table.insert(times[i], wall(r[2])) end
end

print(("perf.data: %d samples with callchains, %.1f MB; median of %d whole-process runs")
      :format(samples, fsize / 1e6, ROUNDS))
local base = median(times[1])
print(("  %-46s %8.1f ms"):format(runs[1][1], base / 1e6))
for i = 2, #runs do
  local t = median(times[i])
  print(("  %-46s %8.1f ms   %.1fx faster"):format(runs[i][1], t / 1e6, base / t))
end
B.rmdir(dir)
