-- bench/profile.lua: what perfev.profile costs a CPU-bound Lua program,
-- against the same program unprofiled and under `perf record -F` at the
-- same frequency, at 99 Hz and 999 Hz, in one run (the ratios are the
-- claim; absolute times vary from machine to machine).
--   make bench          (or: lua5.4 bench/profile.lua [rounds]; --vs-perf [rounds]:
--                        the command against perf record at 1, 10, 100 kHz alone)
--
-- Each configuration runs the workload in a fresh interpreter, which
-- reports the CPU time it took itself (os.clock: user + system of the
-- process, signals and hooks included; perf record's own process is not
-- in it, its sample writing in the kernel is). Configurations alternate,
-- round after round, and the median is taken. Overhead per sample is
-- (time - baseline) / samples.
local B = require "bench.support"

local ONLY_VS_PERF = arg and arg[1] == "--vs-perf"   -- the last section alone
local ROUNDS = tonumber(arg and arg[ONLY_VS_PERF and 2 or 1]) or 5
local LUA = os.getenv("LUA") or "lua5.4"
-- LuaJIT runs the workload ~5 times faster: 5 times the iterations keep
-- its runs as long (a run's length in traces varies by ~1.5x from one
-- process to the next: more samples per run make the cost stand out)
local N = tonumber(os.getenv("PERFEV_BENCH_N")) or (LUA:find("luajit") and 40000000 or 8000000)
local ENV = "LUA_PATH='lua/?.lua;lua/?/init.lua;./?/init.lua;;' LUA_CPATH='build/?.so;;' "

-- ---- the workload, in the child: `bench/profile.lua --workload [perfev HZ]` ----
local function workload()
  -- table churn, string work and calls: what Lua programs do
  local t, s = {}, 0
  for i = 1, 1000 do t[i] = i end
  for i = 1, N do
    t[i % 1000 + 1] = i
    s = s + #tostring(i % 977) + t[(i * 7) % 1000 + 1]
  end
  return s
end

if arg and arg[1] == "--workload" then
  local hz = tonumber(arg[3])
  local p
  if arg[2] == "perfev" then
    p = assert(require("perfev").profile { event = "cpu-clock", freq = hz })
  end
  local t0 = os.clock()
  if p then p:run(workload) else workload() end
  local cpu = os.clock() - t0
  local samples = p and p:profile().samples or 0
  io.write(("%.6f %d\n"):format(cpu, samples))
  os.exit(0)
end

-- ---- the parent ----
local function child(cmd)
  local out, ok = B.sh(cmd)
  local cpu, samples = out:match("(%d+%.%d+) (%d+)")
  assert(ok and cpu, cmd .. ": " .. out)
  return tonumber(cpu), tonumber(samples), out
end

-- Address-space randomization off for the runs (setarch -R), when the
-- tool is there: with it on, LuaJIT's runs of the same workload took
-- 0.66 s or 1.0 s by process (where its machine code landed), a spread
-- larger than what is measured; off: 0.60-0.67 s.
local NORAND = B.sh("setarch -R true 2>/dev/null && echo yes"):find("yes") and "setarch -R " or ""
local self = debug.getinfo(1, "S").short_src
local dir = B.tmpdir()
local function base() return child(ENV .. NORAND .. LUA .. " " .. self .. " --workload") end
local function perfev(hz) return child(("%s%s%s %s --workload perfev %d"):format(ENV, NORAND, LUA, self, hz)) end
local function perf(hz)
  local data = dir .. "/perf.data"
  local cpu, _, out = child(("%sperf record -q -F %d -o %s -- %s%s %s --workload 2>&1; "
                             .. "echo S $(perf script -i %s -F ip 2>/dev/null | wc -l)")
                            :format(ENV, hz, data, NORAND, LUA, self, data))
  local n = tonumber(out:match("\nS (%d+)") or out:match("^S (%d+)"))
  return cpu, n or 0
end

local have_perf = B.have_perf()
print(("perfev.profile overhead: %d workload iterations, %s, median of %d rounds%s%s")
      :format(N, LUA, ROUNDS, have_perf and "" or " (no perf tool: perf record left out)",
              NORAND ~= "" and ", ASLR off (setarch -R)" or ""))
-- 9999 Hz besides the two rates asked for: at 99 Hz the cost hides in
-- the machine's noise; at 10 kHz the cost per sample stands out of it.
for _, hz in ipairs(ONLY_VS_PERF and {} or { 99, 999, 9999 }) do
  local t = { base = {}, perfev = {}, perf = {}, ns = {}, np = {} }
  for r = 1, ROUNDS do
    t.base[r] = base()
    t.perfev[r], t.ns[r] = perfev(hz)
    if have_perf then t.perf[r], t.np[r] = perf(hz) end
  end
  local b, pv, n = B.median(t.base), B.median(t.perfev), B.median(t.ns)
  print(("%4d Hz  unprofiled %.3f s | perfev %.3f s, ratio %.3f, %d samples, %.1f us/sample")
        :format(hz, b, pv, pv / b, n, n > 0 and (pv - b) / n * 1e6 or 0))
  if have_perf then
    local pf, np = B.median(t.perf), B.median(t.np)
    print(("         perf record -F %d %.3f s, ratio %.3f, %d samples, %.1f us/sample;"
           .. " perfev/perf record overhead: %.2f")
          :format(hz, pf, pf / b, np, np > 0 and (pf - b) / np * 1e6 or 0,
                  (pf - b) ~= 0 and (pv - b) / (pf - b) or 0))
    -- both pay the kernel's sampling interrupt: the difference is perfev's
    -- signal, hook and stack walk (meaningful where samples are many)
    print(("         perfev's signal + hook beyond perf record's sampling: %.1f us/sample")
          :format(n > 0 and np > 0 and ((pv - b) / n - (pf - b) / np) * 1e6 or 0))
  end
end

-- ---- the command against perf record at high rates ----
-- `perfev profile -F HZ -o x.folded script.lua` and `perf record -F HZ --
-- lua script.lua` on the same script, wall time of the whole command and
-- samples, at 1, 10 and 100 kHz: where a sample costs more than the
-- period allows, the kernel throttles perf record's event and perfev's
-- bound (max_overhead, 25 %) lowers its rate, so that neither run takes
-- many times the script's own time (unbounded, -F 100000 took 161 s for a
-- 1.4 s script).
local script = dir .. "/script.lua"
local f = assert(io.open(script, "w"))
f:write(([[
local function leaf(i) return #tostring(i %% 977) end
local function mid(i) return leaf(i) + 1 end
local s = 0
for i = 1, %d do s = s + mid(i) end
]]):format(LUA:find("luajit") and 20000000 or 2000000))
f:close()
local core = require "perfev.core"
-- wall(cmd) -> wall seconds, output, CPU seconds (user + system) of cmd
local function wall(cmd)
  local u0, s0 = core.rusage("children")
  local t0 = core.clock_ns()
  local out = B.sh(cmd .. " 2>&1")
  local t1 = core.clock_ns()
  local u1, s1 = core.rusage("children")
  return (t1 - t0) / 1e9, out, ((u1 - u0) + (s1 - s0)) / 1e9
end
-- a run longer than LIMIT seconds is killed and shown as such (perf
-- record -F 100000 ran for minutes here, when the kernel's
-- perf_event_max_sample_rate was back at 100000)
local LIMIT = tonumber(os.getenv("PERFEV_BENCH_LIMIT")) or 60
local KILL = ("timeout -s KILL %d "):format(LIMIT)
local PERFEV = ENV .. KILL .. LUA .. " bin/perfev profile"
print(("\nperfev profile against perf record on the same script (%s; wall and CPU time of the "
       .. "command, median of %d rounds)"):format(LUA, ROUNDS))
local bt, bc = {}, {}
for r = 1, ROUNDS do
  local w, _, c = wall(LUA .. " " .. script)
  bt[r], bc[r] = w, c
end
local unprof, basec = B.median(bt), B.median(bc)
print(("  unprofiled   %.3f s wall, %.3f s CPU"):format(unprof, basec))
for _, hz in ipairs { 1000, 10000, 100000 } do
  local t = { pv = {}, pvn = {}, pf = {}, pfn = {}, pvc = {}, pfc = {} }
  local note
  for r = 1, ROUNDS do
    local out
    t.pv[r], out, t.pvc[r] = wall(("%s -F %d -o %s/x.folded %s"):format(PERFEV, hz, dir, script))
    t.pvn[r] = tonumber(out:match("(%d+) samples")) or 0
    note = out:match("rate was lowered from [^\n]*") or note
    if have_perf then
      local w, _, c = wall(("%sperf record -q -F %d -o %s/perf.data -- %s %s"):format(KILL, hz, dir, LUA, script))
      t.pf[r], t.pfc[r] = w, c
      local ok, n = pcall(B.count_samples, dir .. "/perf.data")
      t.pfn[r] = ok and n or 0
      os.remove(dir .. "/perf.data")
    end
  end
  local pv, pvn, pvc = B.median(t.pv), B.median(t.pvn), B.median(t.pvc)
  local line = ("  -F %-6d perfev %.3f s wall (%.2fx), %.3f s CPU (%.2fx), %d samples")
               :format(hz, pv, pv / unprof, pvc, pvc / basec, pvn)
  if have_perf then
    local pf, pfn, pfc = B.median(t.pf), B.median(t.pfn), B.median(t.pfc)
    line = line .. ("\n            perf   %.3f s wall (%.2fx), %.3f s CPU (%.2fx), %d samples; perfev/perf wall %.2f")
                   :format(pf, pf / unprof, pfc, pfc / basec, pfn, pv / pf)
  end
  print((line:gsub("(%d+%.%d+) s wall", function(v)
    return tonumber(v) >= LIMIT - 0.5 and ("killed at %d s"):format(LIMIT) or v .. " s wall"
  end)))
  if note then print("             perfev: " .. note) end
end
B.rmdir(dir)
