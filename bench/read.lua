-- bench/read.lua: what a read costs from Lua against a raw read(2) of the
-- same fd in a C loop (bench/helper/rawread.c), measured side by side in one
-- run, rounds alternating; the ratio of the medians of the rounds is the
-- claim (absolute times vary from machine to machine). Also the Lua heap
-- growth per read (collectgarbage("count") over many reads, after a
-- warm-up of the same loop: on LuaJIT the loop's trace is compiled then).
-- The goals (issue 21) are stated against the floor of any binding: a
-- Lua loop calling a C function (bench/helper/rawread.c) that does the
-- same read(2) and gives the same results (ev:read(): the count, scaled or
-- false as ev:read() gives it, enabled, running; g:read(t): the 8 counts,
-- t.raw, t.time_enabled and t.time_running filled into the same table t).
-- ev:read() <= 1.05x its floor, g:read(t) of 8 events <= 1.10x its floor,
-- 0 bytes per read. What is left above the floor is perfev's own.
--   make bench
--   PERFEV_BENCH_N=200000 PERFEV_BENCH_ROUNDS=9   reads per round, rounds
--   lua5.4 bench/read.lua loop WHAT N     only N reads (for callgrind:
--                                         doc/performance.md); WHAT is ev,
--                                         group, floor-ev, floor-group or raw
local perfev = require "perfev"
local raw = require "rawread"
local B = require "bench.support"

local N = tonumber(os.getenv("PERFEV_BENCH_N")) or 200000
local ROUNDS = tonumber(os.getenv("PERFEV_BENCH_ROUNDS")) or 9
local clock = raw.now_ns
local median = B.median

local GOALS = { ev = 1.05, group = 1.10 }
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
-- read(2) and gives what perfev's read gives (bench/helper/rawread.c)
local rd, rdg = raw.read, raw.read_group
local floors = {
  ev = function(n) local fd, size = FD.ev, BUFSIZE.ev for _ = 1, n do rd(fd, size) end end,
  group = function(n) local fd = FD.group for _ = 1, n do rdg(fd, t) end end,
}

-- The floor gives what perfev gives: the same counts (no event of this
-- event counts between the two reads: both are disabled for the check).
do
  assert(ev:disable())
  assert(g:disable())
  local c, e, r = ev:read()
  local fc, fe, fr = rd(FD.ev, BUFSIZE.ev)
  assert(fc == c and fe == e and fr == r, "floor of ev:read() differs from ev:read()")
  local want, got = {}, {}
  g:read(t)
  for k, v in pairs(t) do want[k] = v end
  rdg(FD.group, t)
  for k, v in pairs(t) do got[k] = v end
  for k, v in pairs(want) do assert(got[k] == v, "floor of g:read(t) differs at " .. tostring(k)) end
  for k in pairs(got) do assert(want[k] ~= nil, "floor of g:read(t) sets " .. tostring(k)) end
  assert(ev:enable())
  assert(g:enable())
end

if arg[1] == "loop" then
  local which, n = arg[2], assert(tonumber(arg[3]), "usage: read.lua loop ev|group|floor-ev|floor-group|raw N")
  if which == "raw" then
    assert(raw.ns_per_read(FD.group, BUFSIZE.group, n))
  else
    local loop = loops[which] or floors[which:match("^floor%-(.*)") or ""]
    assert(loop, "usage: read.lua loop ev|group|floor-ev|floor-group|raw N")
    loop(1000)
    loop(n)
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
  local ratio = l / f
  print(("%-24s %8.1f ns  floor %8.1f ns  ratio %.3f  goal <= %.2f: %s"):format(
    label, l, f, ratio, GOALS[which], ratio <= GOALS[which] and "met" or "NOT MET"))
  print(("%-24s %8.1f ns  (raw read(2) in a C loop: perfev %.3fx it, the floor %.3fx it)")
        :format("  raw read(2)", c, l / c, f / c))
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
print(met and "issue 21 read goals: met" or "issue 21 read goals: NOT MET")
ev:close()
g:close()
