-- bench/report.lua: `perfev report` against `perf report --stdio` on the
-- same perf.data files of 100k+ samples, whole process against whole
-- process (interpreter and perf start-up, symbol loading, output to
-- /dev/null), median of ROUNDS alternated runs: wall time and CPU time
-- (user + system of the child), printed as ratios.
--
-- Files: cpu-clock every 100 us on every CPU (perf record -a, as root),
-- with callchains (-g) and without; the -g file in perf's default view
-- (rows and call graphs) and with `-g none` (rows), each against perfev's
-- same view. Without root, a Lua loop sampled every 10 us (no callchains).
--   make bench     (needs the perf tool; skipped without it)
local B = require "bench.support"

local ROUNDS = tonumber(os.getenv("PERFEV_BENCH_ROUNDS")) or 3
local LUA = B.LUA
local sh, q = B.sh, B.quote

if not B.have_perf() then
  print("bench/report.lua: the perf tool is not installed (Debian: linux-perf); skipped")
  return
end

local dir = B.tmpdir()

local root = sh("id -u"):match("^0") ~= nil

-- Records until the file holds 100k samples (bench/support's set-up).
local function record(name, g)
  if root then
    return B.record { file = dir .. "/" .. name, perf = ("-a %s -e cpu-clock -c 100000"):format(g and "-g" or ""),
                      workload = function(secs) return ("sleep %g"):format(secs) end, secs = 3, samples = 100000 }
  end
  return B.record { file = dir .. "/" .. name, perf = "-e cpu-clock -c 10000",
                    workload = function(secs) return B.lua_burn(secs / 3) end, secs = 3, samples = 100000 }
end

local run = B.run

local function perfev_cmd(file, graph)
  local code = ("package.path = %q; package.cpath = %q; " ..
                "os.exit(require('perfev.cli.report').run { input = %q, call_graph = %s })")
               :format(package.path, package.cpath, file, graph and ("%q"):format(graph) or "nil")
  return LUA .. " -e " .. q(code)
end

local function bench(title, file, samples, runs)
  local walls, cpus = {}, {}
  for i = 1, #runs do walls[i], cpus[i] = {}, {} end
  for _ = 1, ROUNDS do   -- alternated, so that every run sees the same machine state
    for i, r in ipairs(runs) do
      local w, c = run(r[2])
      table.insert(walls[i], w)
      table.insert(cpus[i], c)
    end
  end
  local fsize = B.size(file)
  print(("%s: %d samples, %.1f MB; median of %d whole-process runs"):format(title, samples, fsize / 1e6, ROUNDS))
  for i, r in ipairs(runs) do
    local w, c = B.median(walls[i]), B.median(cpus[i])
    local ratio = ""
    -- a perf run's ratio: against the perfev run that prints the same view
    local k = r[3]
    if k then
      local mw, mc = B.median(walls[k]), B.median(cpus[k])
      local function rel(x) return x >= 1 and ("%.1fx faster"):format(x) or ("%.1fx slower"):format(1 / x) end
      ratio = ("   perfev %s (wall), %s (cpu)"):format(rel(w / mw), rel(c / mc))
    end
    print(("  %-40s %8.0f ms wall %8.0f ms cpu%s"):format(r[1], w / 1e6, c / 1e6, ratio))
  end
end

local flat, nflat = record("flat.data", false)
bench("cpu-clock, no callchains", flat, nflat, {
  { "perf report --stdio", ("perf report --stdio -i %s"):format(q(flat)), 2 },
  { "perfev report", perfev_cmd(flat) },
})
if root then
  local g, ng = record("g.data", true)
  bench("cpu-clock -g (children)", g, ng, {
    { "perf report --stdio (with call graphs)", ("perf report --stdio -i %s"):format(q(g)), 4 },
    { "perf report --stdio -g none", ("perf report --stdio -g none -i %s"):format(q(g)), 3 },
    { "perfev report -g none", perfev_cmd(g, "none") },
    { "perfev report (with call graphs)", perfev_cmd(g) },
  })
end
B.rmdir(dir)
