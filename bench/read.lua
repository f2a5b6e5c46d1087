-- bench/read.lua: what a read costs from Lua against a raw read(2) of the
-- same fd in a C loop (bench/helper/rawread.c), measured side by side in one
-- run, rounds alternating; the ratio of the medians of the rounds is the
-- claim (absolute times vary from machine to machine). Also the Lua heap
-- growth per read (collectgarbage("count") over many reads, after a
-- warm-up of the same loop: on LuaJIT the loop's trace is compiled then).
-- The goals (issue 14): ev:read() <= 1.10x, g:read(t) of 8 events
-- <= 1.20x, 0 bytes per read. Beside each, the floor of any binding: a
-- Lua loop calling a C function that does the same read(2) and returns
-- three numbers (what is left above it is perfev's own).
--   make bench
--   PERFEV_BENCH_N=200000 PERFEV_BENCH_ROUNDS=9   reads per round, rounds
--   lua5.4 bench/read.lua loop ev|group|raw N      only N reads (for callgrind:
--                                                  doc/architecture-core.md)
local perfev = require "perfev"
local raw = require "rawread"
local B = require "bench.support"

local N = tonumber(os.getenv("PERFEV_BENCH_N")) or 200000
local ROUNDS = tonumber(os.getenv("PERFEV_BENCH_ROUNDS")) or 9
local clock = raw.now_ns
local median = B.median

local GOALS = { ev = 1.10, group = 1.20 }
local SPECS = { "task-clock", "cpu-clock", "page-faults", "context-switches",
                "cpu-migrations", "minor-faults", "major-faults", "alignment-faults" }

-- The two subjects, called as a user writes them (method calls), each in
-- a loop of its own: loops.ev(n), loops.group(n).
local ev = assert(perfev.open("task-clock"))
assert(ev:enable())
local g = assert(perfev.group(SPECS))
assert(g:enable())
local t = g:read()
local loops = {
  ev = function(n) for _ = 1, n do ev:read() end end,
  group = function(n) for _ = 1, n do g:read(t) end end,
}
-- what the raw loop reads: the same fds, buffers of the size perfev reads
-- (a group: nr, enabled, running, then value and id per member)
local FD = { ev = ev:fileno(), group = g:leader():fileno() }
local BUFSIZE = { ev = 40, group = 8 * (3 + 2 * #SPECS) }
-- the floor of any binding: a Lua loop calling a C function that does the
-- read(2) and returns three numbers (bench/helper/rawread.c)
local rd = raw.read
local floors = {
  ev = function(n) local fd, size = FD.ev, BUFSIZE.ev for _ = 1, n do rd(fd, size) end end,
  group = function(n) local fd, size = FD.group, BUFSIZE.group for _ = 1, n do rd(fd, size) end end,
}

if arg[1] == "loop" then
  local which, n = arg[2], assert(tonumber(arg[3]), "usage: read.lua loop ev|group|raw N")
  if which == "raw" then
    assert(raw.ns_per_read(FD.group, BUFSIZE.group, n))
  else
    loops[which](1000)
    loops[which](n)
  end
  return
end

local function time_loop(loop)
  local t0 = clock()
  loop(N)
  return (clock() - t0) / N
end

-- Alternates the three measurements so that all see the same machine state.
local function compare(which, label)
  local lua_ns, c_ns, floor_ns = {}, {}, {}
  time_loop(loops[which])                      -- warm-up
  time_loop(floors[which])
  assert(raw.ns_per_read(FD[which], BUFSIZE[which], N))
  for r = 1, ROUNDS do
    lua_ns[r] = time_loop(loops[which])
    c_ns[r] = assert(raw.ns_per_read(FD[which], BUFSIZE[which], N))
    floor_ns[r] = time_loop(floors[which])
  end
  local l, c, f = median(lua_ns), median(c_ns), median(floor_ns)
  local ratio = l / c
  print(("%-24s %8.1f ns  raw read(2) %8.1f ns  ratio %.3f  goal <= %.2f: %s"):format(
    label, l, c, ratio, GOALS[which], ratio <= GOALS[which] and "met" or "NOT MET"))
  print(("%-24s %8.1f ns  (a Lua loop calling a C function that only reads: ratio %.3f; perfev %.3fx it)")
        :format("  floor", f, f / c, l / f))
  return ratio <= GOALS[which]
end

-- Bytes the Lua heap grows by per read, over N reads of the warmed loop.
local function bytes_per_read(which, label)
  loops[which](1000)
  collectgarbage()
  collectgarbage()
  collectgarbage("stop")
  local before = collectgarbage("count")
  loops[which](N)
  local growth = (collectgarbage("count") - before) * 1024
  collectgarbage("restart")
  print(("%-24s %.0f bytes allocated over %d reads (%.4f per read)  goal 0: %s"):format(
    label, growth, N, growth / N, growth == 0 and "met" or "NOT MET"))
  return growth == 0
end

print(("perfev read benchmark (%s): %d reads per round, median of %d rounds"):format(
  require("perfev.compat").runtime, N, ROUNDS))
local met = compare("ev", "ev:read() (task-clock)")
met = compare("group", "g:read(t) (group of 8)") and met
met = bytes_per_read("ev", "ev:read()") and met
met = bytes_per_read("group", "g:read(t)") and met
print(met and "issue 14 read goals: met" or "issue 14 read goals: NOT MET")
ev:close()
g:close()
