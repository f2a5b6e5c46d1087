-- bench/attach.lua: what perfev.attach (`perfev profile -p PID`) costs the
-- process it profiles: a CPU-bound Lua loop's time unprofiled, attached at
-- 99 Hz and 999 Hz, beside `perf record -F` (and -g) at the same rates, in
-- one run (the ratios are the claim; absolute times vary from machine to
-- machine and with its load).
--   make bench      (or: lua5.4 bench/attach.lua [rounds])
--
-- Each run is a fresh interpreter running the workload, which reports its
-- own wall and CPU time (os.clock: user + system, the kernel's work for the
-- signals and stops included; the time a stopped thread waits for perfev
-- is in the wall time alone). Attached runs start timing once the process
-- sees itself traced. Configurations alternate round after round; the
-- median is taken. Needs root (or the right to ptrace one's children).
local B = require "bench.support"
local core = require "perfev.core"

local ROUNDS = tonumber(arg and arg[1]) or 3
local LUA = os.getenv("LUA") or "lua5.4"
local N = tonumber(os.getenv("PERFEV_BENCH_N")) or (LUA:find("luajit") and 40000000 or 6000000)
-- the children find this checkout's modules first, then those of LUA_PATH
local ENV = ("LUA_PATH='lua/?.lua;lua/?/init.lua;./?/init.lua;%s;;' LUA_CPATH='build/?.so;;' ")
            :format(os.getenv("LUA_PATH") or "")

-- ---- the workload, in the child: `bench/attach.lua --workload [wait]` ----
local function workload()
  local t, s = {}, 0
  for i = 1, 1000 do t[i] = i end
  for i = 1, N do
    t[i % 1000 + 1] = i
    s = s + #tostring(i % 977) + t[(i * 7) % 1000 + 1]
  end
  return s
end

local function traced()
  local f = io.open("/proc/self/status")
  local st = f:read("a")
  f:close()
  return st:match("TracerPid:%s*(%d+)") ~= "0"
end

if arg and arg[1] == "--workload" then
  if arg[2] == "wait" then
    local t0 = os.time()
    while not traced() do
      if os.time() - t0 > 30 then io.write("never traced\n") os.exit(1) end
    end
  end
  local w0, c0 = core.clock_ns("monotonic"), os.clock()
  workload()
  io.write(("%.6f %.6f\n"):format((core.clock_ns("monotonic") - w0) / 1e9, os.clock() - c0))
  os.exit(0)
end

-- ---- the parent ----
local self = debug.getinfo(1, "S").short_src
local dir = B.tmpdir()

local function parse(out, cmd)
  local wall, cpu = out:match("(%d+%.%d+) (%d+%.%d+)")
  assert(wall, cmd .. ": " .. out)
  return tonumber(wall), tonumber(cpu)
end

local function base()
  local cmd = ENV .. LUA .. " " .. self .. " --workload"
  return parse(B.sh(cmd), cmd)
end

-- The readers (perfev.attach.puc, .luajit) when installed; else the specs'
-- trivial reader (one frame per sample: what the engine costs, without the
-- Lua stack walk).
local HAVE_READERS = pcall(require, "perfev.attach.puc")
local PRE = HAVE_READERS and "" or ("-e %s "):format(B.quote(
  'package.path="./?.lua;"..package.path require("perfev.attach").READERS={"spec.support.attach_reader"}'))

-- the workload in the background, `perfev profile -p` on it until it ends
local function attached(hz)
  local out = dir .. "/workload.out"
  local cmd = ("%s%s %s --workload wait > %s 2>&1 & echo $!"):format(ENV, LUA, self, out)
  local pid = assert(tonumber(B.sh(cmd):match("%d+")), cmd)
  local perfev = ("%s%s %sbin/perfev profile -p %d -F %d -o %s/attach.folded 2>&1")
                 :format(ENV, LUA, PRE, pid, hz, dir)
  local res = B.sh(perfev)
  local samples = tonumber(res:match("(%d+) samples")) or 0
  local text = B.read_file(out) or ""
  local wall, cpu = parse(text, perfev .. " (" .. res .. ")")
  return wall, cpu, samples
end

local function perf(hz, g)
  local data = dir .. "/perf.data"
  local cmd = ("%sperf record -q %s-F %d -o %s -- %s %s --workload 2>&1"):format(ENV, g and "-g " or "", hz, data, LUA,
                                                                                 self)
  local wall, cpu = parse(B.sh(cmd), cmd)
  local ok, n = pcall(B.count_samples, data)
  os.remove(data)
  return wall, cpu, ok and n or 0
end

local have_perf = B.have_perf()
print(("perfev.attach overhead on the target: %d workload iterations, %s, median of %d rounds%s%s")
      :format(N, LUA, ROUNDS, have_perf and "" or " (no perf tool: perf record left out)",
              HAVE_READERS and "" or " (no reader installed: the specs' one-frame reader)"))
local bw, bc = {}, {}
local rows = {}
for _, hz in ipairs { 99, 999 } do
  rows[hz] = { aw = {}, ac = {}, an = {}, pw = {}, pc = {}, pn = {}, gw = {}, gc = {}, gn = {} }
end
for r = 1, ROUNDS do
  bw[#bw + 1], bc[#bc + 1] = base()
  for _, hz in ipairs { 99, 999 } do
    local t = rows[hz]
    t.aw[r], t.ac[r], t.an[r] = attached(hz)
    if have_perf then
      t.pw[r], t.pc[r], t.pn[r] = perf(hz)
      t.gw[r], t.gc[r], t.gn[r] = perf(hz, true)
    end
  end
end
local w0, c0 = B.median(bw), B.median(bc)
print(("  unprofiled            %.3f s wall, %.3f s CPU"):format(w0, c0))
for _, hz in ipairs { 99, 999 } do
  local t = rows[hz]
  local function line(what, ws, cs, ns)
    local w, c, n = B.median(ws), B.median(cs), B.median(ns)
    print(("  %-21s %.3f s wall (%.3fx, throughput %.1f%%), %.3f s CPU (%.3fx), %d samples")
          :format(what, w, w / w0, 100 * w0 / w, c, c / c0, n))
    return w
  end
  local aw = line(("attached %d Hz"):format(hz), t.aw, t.ac, t.an)
  if have_perf then
    local pw = line(("perf record -F %d"):format(hz), t.pw, t.pc, t.pn)
    local gw = line(("perf record -g -F %d"):format(hz), t.gw, t.gc, t.gn)
    -- the costs (time beyond the unprofiled run's), where perf's stands out of the noise
    local function ratio(x)
      return x - w0 > 0.02 * w0 and ("%.2f"):format((aw - w0) / (x - w0)) or "n/a (in the noise)"
    end
    print(("  %d Hz: attach's cost (wall) / perf record's: %s, / perf record -g's: %s")
          :format(hz, ratio(pw), ratio(gw)))
  end
end
B.rmdir(dir)
