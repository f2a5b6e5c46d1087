-- bench/attach.lua: what perfev.attach (`perfev profile -p PID`) costs the
-- process it profiles: a CPU-bound Lua loop's time unprofiled, attached at
-- 99 Hz and 999 Hz, beside `perf record -F` (and -g) at the same rates, in
-- one run (the ratios are the claim; absolute times vary from machine to
-- machine and with its load).
--   make bench      (or: lua5.4 bench/attach.lua [rounds]; LUA=luajit for LuaJIT)
--
-- Each run is a fresh interpreter running the workload, which reports its
-- own wall time, CPU time (os.clock: user + system, the kernel's work for
-- the signals and stops included) and, from /proc/self/schedstat, the time
-- it waited for a CPU while runnable. Its **busy** time is the wall time
-- less that wait: the time it ran or was held stopped, what the run would
-- take on a CPU of its own. On a machine shared with other work the wall
-- time measures the load; the busy time does not (the time a held thread
-- waits for perfev to get a CPU is still in it: an upper bound there).
-- perfev attaches from this process (perfev.attach, the engine of `perfev
-- profile -p`); an attached run starts timing at perfev's first sample,
-- once the probe is over (its scan of the target's memory, once per
-- attach, is not a cost per sample: it is printed apart, as perfev's time
-- from the attach to the first sample). perfev's own figures per sample
-- are printed: the time the sampled thread was held (from the report of
-- its stop to its resume) and perfev's CPU time meanwhile. Configurations alternate round after round; the
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

local function slurp(path)
  local f = io.open(path)
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

-- nanoseconds this thread waited on a run queue (0 without schedstats)
local function runq_wait()
  local s = slurp("/proc/self/schedstat")
  return s and tonumber(s:match("^%d+%s+(%d+)")) or 0
end

if arg and arg[1] == "--workload" then
  if arg[2] == "wait" then   -- until the file arg[3] is there (perfev's first sample)
    io.write("waiting\n")
    io.flush()
    local t0 = os.time()
    while not slurp(arg[3]) do
      if os.time() - t0 > 60 then io.write("never sampled\n") os.exit(1) end
    end
  end
  local w0, c0, q0 = core.clock_ns("monotonic"), os.clock(), runq_wait()
  workload()
  local wall, cpu, q = (core.clock_ns("monotonic") - w0) / 1e9, os.clock() - c0, (runq_wait() - q0) / 1e9
  io.write(("%.6f %.6f %.6f\n"):format(wall, cpu, wall - q))
  os.exit(0)
end

-- ---- the parent ----
local self = debug.getinfo(1, "S").short_src
local dir = B.tmpdir()

local function parse(out, cmd)
  local wall, cpu, busy = out:match("(%d+%.%d+) (%d+%.%d+) (%-?%d+%.%d+)")
  assert(wall, cmd .. ": " .. out)
  return { wall = tonumber(wall), cpu = tonumber(cpu), busy = tonumber(busy) }
end

local function base()
  local cmd = ENV .. LUA .. " " .. self .. " --workload"
  return parse(B.sh(cmd), cmd)
end

-- The readers (perfev.attach.puc, .luajit) when installed; else the specs'
-- trivial reader (one frame per sample: what the engine costs, without the
-- Lua stack walk).
local HAVE_READERS = pcall(require, "perfev.attach.puc")
local READER = not HAVE_READERS and (function()
  package.path = "./?.lua;" .. package.path
  return require "spec.support.attach_reader"
end)() or nil

-- the workload in the background, perfev.attach on it until it ends
local function attached(hz)
  local out, go = dir .. "/workload.out", dir .. "/go"
  os.remove(go)
  local cmd = ("%s%s %s --workload wait %s > %s 2>&1 & echo $!"):format(ENV, LUA, self, go, out)
  local pid = assert(tonumber(B.sh(cmd):match("%d+")), cmd)
  for _ = 1, 500 do   -- its Lua state made: it waits to be traced
    if (B.read_file(out) or ""):find("waiting") then break end
    B.sh("sleep 0.01")
  end
  local t0, probe = core.clock_ns("monotonic"), nil
  local p, msg = require("perfev.attach").attach { pid = pid, freq = hz, reader = READER,
    on_sample = function()
      if not probe then
        probe = (core.clock_ns("monotonic") - t0) / 1e9
        local f = assert(io.open(go, "w"))
        f:close()
      end
    end }
  assert(p, msg)
  local a = p.attach
  for _ = 1, 100 do   -- the shell's redirection is written when the process has exited
    if (B.read_file(out) or ""):find("%d\n") then break end
    B.sh("sleep 0.02")
  end
  local r = parse(B.read_file(out) or "", "the attached workload (" .. tostring(a.ended) .. ")")
  r.samples = a.samples
  r.probe = probe or 0
  r.held = a.samples > 0 and a.held_ns / a.samples / 1e3 or 0
  r.held_cpu = a.samples > 0 and (a.held_cpu_ns or 0) / a.samples / 1e3 or 0
  return r
end

local function perf(hz, g)
  local data = dir .. "/perf.data"
  local cmd = ("%sperf record -q %s-F %d -o %s -- %s %s --workload 2>&1"):format(ENV, g and "-g " or "", hz, data, LUA,
                                                                                 self)
  local r = parse(B.sh(cmd), cmd)
  local ok, n = pcall(B.count_samples, data)
  os.remove(data)
  r.samples = ok and n or 0
  return r
end

local have_perf = B.have_perf()
print(("perfev.attach overhead on the target: %d workload iterations, %s, median of %d rounds%s%s")
      :format(N, LUA, ROUNDS, have_perf and "" or " (no perf tool: perf record left out)",
              HAVE_READERS and "" or " (no reader installed: the specs' one-frame reader)"))
local runs = { base = {} }
local CONFIGS = { "attach", "perf", "perf -g" }
for _, hz in ipairs { 99, 999 } do
  for _, c in ipairs(CONFIGS) do runs[c .. hz] = {} end
end
for r = 1, ROUNDS do
  runs.base[r] = base()
  for _, hz in ipairs { 99, 999 } do
    runs["attach" .. hz][r] = attached(hz)
    if have_perf then
      runs["perf" .. hz][r] = perf(hz)
      runs["perf -g" .. hz][r] = perf(hz, true)
    end
  end
end

local function med(list, k)
  local t = {}
  for i, x in ipairs(list) do t[i] = x[k] end
  return B.median(t)
end

local b = { busy = med(runs.base, "busy"), wall = med(runs.base, "wall"), cpu = med(runs.base, "cpu") }
print(("  %-22s %.3f s busy, %.3f s wall, %.3f s CPU"):format("unprofiled", b.busy, b.wall, b.cpu))
for _, hz in ipairs { 99, 999 } do
  local busy = {}
  local function line(what, list, extra)
    if #list == 0 then return end
    local x = { busy = med(list, "busy"), wall = med(list, "wall"), cpu = med(list, "cpu"), n = med(list, "samples") }
    busy[what] = x.busy
    print(("  %-22s %.3f s busy (%.3fx, throughput %.1f%%), %.3f s wall (%.3fx), %.3f s CPU (%.3fx), %d samples%s")
          :format(what, x.busy, x.busy / b.busy, 100 * b.busy / x.busy, x.wall, x.wall / b.wall, x.cpu,
                  x.cpu / b.cpu, x.n, extra or ""))
  end
  local at = runs["attach" .. hz]
  -- the busy time beyond the unprofiled run's, per sample: what each sample cost the target
  local stopped = (med(at, "busy") - b.busy) / math.max(1, med(at, "samples")) * 1e6
  line(("attached %d Hz"):format(hz), at, ("; %.0f us/sample to the target; held %.0f us/sample (perfev's CPU %.0f"
                                           .. " us); probe %.2f s"):format(stopped, med(at, "held"),
                                                                          med(at, "held_cpu"), med(at, "probe")))
  if have_perf then
    line(("perf record -F %d"):format(hz), runs["perf" .. hz])
    line(("perf record -g -F %d"):format(hz), runs["perf -g" .. hz])
    -- the costs (busy time beyond the unprofiled run's), where perf's stands out of the noise
    local aw = busy[("attached %d Hz"):format(hz)]
    local function ratio(x)
      return x - b.busy > 0.01 * b.busy and ("%.2f"):format((aw - b.busy) / (x - b.busy)) or "n/a (perf's in the noise)"
    end
    print(("  %d Hz: attach's cost (busy time) / perf record's: %s, / perf record -g's: %s")
          :format(hz, ratio(busy[("perf record -F %d"):format(hz)]), ratio(busy[("perf record -g -F %d"):format(hz)])))
  end
end
B.rmdir(dir)
