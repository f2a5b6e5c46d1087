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
--  * as root, a busy machine: `perf record -a` without callchains while
--    short processes of many binaries run (the C compiler, python3, Lua,
--    coreutils: what builds and test runs give), 100k+ samples: every
--    binary's symbol table is loaded, and each distinct address is a row.
--  * small -g files of one program, as a user records one (perf record
--    -F 999 -g -- PROGRAM): an interpreter without frame pointers (Debian's
--    lua5.4: every chain 127 garbage addresses, tens of thousands of
--    output lines) for ~0.75 s (a few hundred samples) and ~5 s (a few
--    thousand); a C program with frame pointers (short, real chains);
--    and `ls` (a handful of samples: start-up and symbol loading).
--   make bench     (needs the perf tool; skipped without it)
--   PERFEV_BENCH_BASE=DIR: DIR/lua's perfev timed beside (before/after)
--   (with this build's core: a checkout from before core.symtab finishes
--   its ELF tables in its Lua fallback, this core having no elf_finish)
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

-- PERFEV_BENCH_BASE=DIR: a second perfev (DIR/lua, another checkout's
-- modules, with this build's core) is timed beside, on the same files in
-- the same rounds: "before" and "after" figures of one run.
local BASE = os.getenv("PERFEV_BENCH_BASE")

local function perfev_cmd(file, graph, no_children, base)
  local path = package.path
  if base then path = ("%s/lua/?.lua;%s/lua/?/init.lua;%s"):format(base, base, path) end
  local code = ("package.path = %q; package.cpath = %q; " ..
                "os.exit(require('perfev.cli.report').run { input = %q, call_graph = %s, no_children = %s })")
               :format(path, package.cpath, file, graph and ("%q"):format(graph) or "nil",
                       tostring(no_children or false))
  return LUA .. " -e " .. q(code)
end

-- runs: { title, command, the index of the perf run it prints the view of
-- (for perfev's) }; with BASE, each perfev run is timed again with BASE's
-- modules.
local function bench(title, file, samples, runs)
  if BASE then
    local all = {}
    for _, r in ipairs(runs) do
      all[#all + 1] = r
      if r.base then all[#all + 1] = { r[1] .. " [base]", r.base, r[3] } end
    end
    runs = all
  end
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
    -- a perfev run's ratio: against the perf run that prints the same view
    local k = r[3]
    if k then
      local pw, pc = B.median(walls[k]), B.median(cpus[k])
      local function rel(x) return x >= 1 and ("%.1fx faster"):format(x) or ("%.1fx slower"):format(1 / x) end
      ratio = ("   %s (wall), %s (cpu) than perf"):format(rel(pw / w), rel(pc / c))
    end
    print(("  %-44s %8.0f ms wall %8.0f ms cpu%s"):format(r[1], w / 1e6, c / 1e6, ratio))
  end
end

-- a perfev run of the view of perf run k
local function perfev_run(title, k, file, graph, no_children)
  return { title, perfev_cmd(file, graph, no_children), k,
           base = BASE and perfev_cmd(file, graph, no_children, BASE) }
end

local flat, nflat = record("flat.data", false)
bench("cpu-clock, no callchains", flat, nflat, {
  { "perf report --stdio", ("perf report --stdio -i %s"):format(q(flat)) },
  perfev_run("perfev report", 1, flat),
})
-- a machine at work for secs: short processes of many binaries, in a loop
local function busy_work(secs)
  local src = dir .. "/busy.c"
  local f = assert(io.open(src, "w"))
  f:write("#include <stdio.h>\nint main(void) { for (int i = 0; i < 1000; i++) printf(\"%d\\n\", i); return 0; }\n")
  f:close()
  local cmds = {}
  if B.have("cc") then cmds[#cmds + 1] = ("cc -O2 -o %s %s"):format(q(dir .. "/busy"), q(src)) end
  if B.have("python3") then
    cmds[#cmds + 1] = "python3 -c " .. q("import json; [json.dumps(list(range(500))) for i in range(2000)]")
  end
  cmds[#cmds + 1] = LUA .. " -e " .. q("local s = 0 for i = 1, 3e6 do s = s + i % 7 end")
  cmds[#cmds + 1] = "ls -lR /usr/share/doc >/dev/null; sort /etc/services >/dev/null; od /bin/ls | tail -1 >/dev/null"
  local loop = ("t=$(( $(date +%%s) + %d )); while [ $(date +%%s) -lt $t ]; do %s; done")
               :format(math.ceil(secs), table.concat(cmds, "; "))
  return "sh -c " .. q(loop)
end

if root then
  local busy, nbusy = B.record { file = dir .. "/busy.data", perf = "-a -e cpu-clock -c 100000", workload = busy_work,
                                 secs = 5, samples = 100000 }
  bench("cpu-clock -a, no callchains, a busy machine (cc, python3, Lua, coreutils)", busy, nbusy, {
    { "perf report --stdio", ("perf report --stdio -i %s"):format(q(busy)) },
    perfev_run("perfev report", 1, busy),
  })
  local g, ng = record("g.data", true)
  bench("cpu-clock -g (children)", g, ng, {
    { "perf report --stdio (with call graphs)", ("perf report --stdio -i %s"):format(q(g)) },
    { "perf report --stdio -g none", ("perf report --stdio -g none -i %s"):format(q(g)) },
    perfev_run("perfev report -g none", 2, g, "none"),
    perfev_run("perfev report (with call graphs)", 1, g),
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
    { "perf report --stdio", ("perf report --stdio -i %s"):format(q(file)) },
    { "perf report --stdio --no-children", ("perf report --stdio --no-children -i %s"):format(q(file)) },
    perfev_run("perfev report", 1, file),
    perfev_run("perfev report --no-children", 2, file, nil, true),
  })
end

small(("-g, %s without frame pointers (junk chains), ~0.75 s"):format(JUNK_LUA), "junk-small.data",
      junk_burn, 0.75, 300)
small(("-g, %s without frame pointers (junk chains), ~5 s"):format(JUNK_LUA), "junk-mid.data",
      junk_burn, 5, 3000)
small("-g, a C program with frame pointers, ~3 s", "fp.data", B.burn(dir), 3, 2000)
small("-g, ls (a handful of samples)", "ls.data", function() return "ls -lR /usr/share/doc/perl" end, 0, 0)
B.rmdir(dir)
