-- bench/report.lua: `perfev report` against `perf report --stdio` on the
-- same perf.data files, whole process against whole process (interpreter
-- and perf start-up, symbol loading, output to /dev/null), median of
-- ROUNDS alternated runs: wall time and CPU time (user + system of the
-- child), printed as ratios.
--
-- Files:
--  * large: cpu-clock every 100 us on every CPU (perf record -a, as root),
--    100k+ samples, with callchains (-g) and without; the -g file in
--    perf's default view (rows and call graphs) and with `-g none` (rows),
--    each against perfev's same view. Without root, a Lua loop sampled
--    every 10 us (no callchains).
--  * small -g files of one program, as a user records one (perf record
--    -F 999 -g -- PROGRAM): an interpreter without frame pointers (Debian's
--    lua5.4: every chain 127 garbage addresses, tens of thousands of
--    output lines) for ~0.75 s (a few hundred samples) and ~5 s (a few
--    thousand); a C program with frame pointers (short, real chains);
--    and `ls` (a handful of samples: start-up and symbol loading).
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

local function perfev_cmd(file, graph, no_children)
  local code = ("package.path = %q; package.cpath = %q; " ..
                "os.exit(require('perfev.cli.report').run { input = %q, call_graph = %s, no_children = %s })")
               :format(package.path, package.cpath, file, graph and ("%q"):format(graph) or "nil",
                       tostring(no_children or false))
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

-- ---- small -g files of one program (perf record -F 999 -g -- PROGRAM) ----

-- Debian's lua5.4 (no frame pointers) when it is there: its chains are
-- garbage; else this interpreter.
local JUNK_LUA = B.have("lua5.4") and "lua5.4" or LUA
local function junk_burn(secs)
  local busy = ("local t = os.clock() local x = 0 " ..
                "local function f(n) local s = 0 for i = 1, n do s = s + i %% 7 end return s end " ..
                "local function g(n) local s = {} for i = 1, n do s[i] = tostring(i) end return #s end " ..
                "while os.clock() - t < %g do x = x + f(1000) + g(100) end"):format(secs)
  return JUNK_LUA .. " -e " .. q(busy)
end

-- the default view (rows and call graphs) and --no-children, each against perf's
local function small(title, name, workload, secs, samples)
  local file, n = B.record { file = dir .. "/" .. name, perf = "-F 999 -g", workload = workload, secs = secs,
                             samples = samples }
  bench(title, file, n, {
    { "perf report --stdio", ("perf report --stdio -i %s"):format(q(file)), 3 },
    { "perf report --stdio --no-children", ("perf report --stdio --no-children -i %s"):format(q(file)), 4 },
    { "perfev report", perfev_cmd(file) },
    { "perfev report --no-children", perfev_cmd(file, nil, true) },
  })
end

small(("-g, %s without frame pointers (junk chains), ~0.75 s"):format(JUNK_LUA), "junk-small.data",
      junk_burn, 0.75, 300)
small(("-g, %s without frame pointers (junk chains), ~5 s"):format(JUNK_LUA), "junk-mid.data",
      junk_burn, 5, 3000)
small("-g, a C program with frame pointers, ~3 s", "fp.data", B.burn(dir), 3, 2000)
small("-g, ls (a handful of samples)", "ls.data", function() return "ls -lR /usr/share/doc/perl" end, 0, 0)
B.rmdir(dir)
