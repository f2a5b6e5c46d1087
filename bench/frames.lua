-- bench/frames.lua: what perfev.frames costs a game loop, as a ratio
-- against the same loop without it, measured side by side in one run
-- (rounds alternating; the fastest round of each, the least disturbed by
-- whatever else the machine runs, as examples/embed/host.c times its reads):
--   base       the frame's work alone
--   mark       + fr:mark() once a frame
--   mark gc    + fr:mark() once a frame with gc = true (the group read and
--              the Lua GC's figures: the allocation counter's read)
--   zones on   + ZONES zones a frame (begin/finish, half of them nested)
--   zones off  the same code, the frames object disabled (fr:disable())
--   zones timeline  the zones and the mark with timeline = true (each
--              frame's and zone call's times kept: a clock read more a
--              begin, a finish and a mark)
--   profile    + fr:mark() with profile = true (cpu-clock at 999 Hz, the
--              frame's samples taken every mark)
--   profile + timeline  the same with timeline = true (each sample also
--              kept in time order), against profile = true alone
-- and per operation: a mark, a zone (begin + finish) on and off, against
-- an empty loop. Absolute times vary from machine to machine; the ratios
-- at a given frame length are the claim.
--   make bench
--   PERFEV_BENCH_FRAMES=2000 PERFEV_BENCH_ROUNDS=5 PERFEV_BENCH_WORK=20000
local perfev = require "perfev"

local unpack = table.unpack or rawget(_G, "unpack")
-- the profiler's warnings (a lowered rate) said after the figures
local warnings = {}
perfev.on_warning(function(msg) warnings[#warnings + 1] = msg end)

local FRAMES = tonumber(os.getenv("PERFEV_BENCH_FRAMES")) or 2000
local ROUNDS = tonumber(os.getenv("PERFEV_BENCH_ROUNDS")) or 7
local WORK = tonumber(os.getenv("PERFEV_BENCH_WORK")) or 20000   -- loop iterations a frame
local ZONES = 8
local OPS = 200000
-- the thread's CPU time (user and system: the reads' system calls count),
-- not the wall clock: the time the machine gives to others is left out
local clock = function() return perfev.clock_ns("thread_cputime_id") end
local function best(t) return math.min(unpack(t)) end

local function work(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end

local on = assert(perfev.frames {})
local off = assert(perfev.frames { enabled = false })
local tlon = assert(perfev.frames { timeline = true })
-- gc = true: its allocation counter counts every allocation of the state
-- from here (the frames' work allocates nothing: the cost measured is
-- the mark's; an allocating loop's is bench/alloc.lua's counter row)
local gcon = assert(perfev.frames { gc = true })

-- one frame: the work in ZONES pieces, each in a zone, every other one
-- inside the zone before it (depth 2)
local piece = math.floor(WORK / ZONES)
local function plain_frame()
  for _ = 1, ZONES do work(piece) end
end
local function zoned_frame(fr)
  for _ = 1, ZONES / 2 do
    local outer = fr:zone_begin("system")
    work(piece)
    local inner = fr:zone_begin("subsystem")
    work(piece)
    inner:finish()
    outer:finish()
  end
end

local loops = {
  base = function(n) for _ = 1, n do plain_frame() end end,
  mark = function(n) for _ = 1, n do plain_frame() on:mark() end end,
  mark_gc = function(n) for _ = 1, n do plain_frame() gcon:mark() end end,
  zones_on = function(n) for _ = 1, n do zoned_frame(on) on:mark() end end,
  zones_off = function(n) for _ = 1, n do zoned_frame(off) off:mark() end end,
  zones_timeline = function(n) for _ = 1, n do zoned_frame(tlon) tlon:mark() end end,
}
local ORDER = { "base", "mark", "mark_gc", "zones_on", "zones_off", "zones_timeline" }

local function time(loop, n)
  local t0 = clock()
  loop(n)
  return (clock() - t0) / n
end

local per_frame = {}
for _, k in ipairs(ORDER) do
  per_frame[k] = {}
  time(loops[k], FRAMES / 10)   -- warm-up (LuaJIT: the traces compiled)
end
for r = 1, ROUNDS do
  for _, k in ipairs(ORDER) do per_frame[k][r] = time(loops[k], FRAMES) end
end
local base = best(per_frame.base)
print(("perfev.frames (%s), thread CPU time: a frame of %.1f us of Lua work, %d zones a frame, %d frames x %d rounds")
      :format(rawget(_G, "jit") and rawget(_G, "jit").version or _VERSION, base / 1e3, ZONES, FRAMES, ROUNDS))
print(("  %-34s %10s %8s"):format("", "us/frame", "ratio"))
for _, k in ipairs(ORDER) do
  local m = best(per_frame[k])
  print(("  %-34s %10.2f %8.3f"):format(k, m / 1e3, m / base))
end

-- per operation, against an empty loop
local function empty(n) for _ = 1, n do end end
local function marks(n) for _ = 1, n do on:mark() end end
local function marks_gc(n) for _ = 1, n do gcon:mark() end end
-- the GC figures' read alone (what gc = true adds to a mark, a zone's
-- begin and its finish), beside the group read that the mark's noise is
local gcfig = require "perfev.frames.gc"
local gct = {}
local function gc_reads(n) for _ = 1, n do gcfig.read(gcon.gc, gct, 3) end end
local function zone_on(n) for _ = 1, n do on:zone_begin("z"):finish() end end
local function zone_off(n) for _ = 1, n do off:zone_begin("z"):finish() end end
local function marks_off(n) for _ = 1, n do off:mark() end end
local ops = { empty = {}, mark = {}, mark_gc = {}, gc_read = {}, mark_off = {}, zone_on = {}, zone_off = {} }
local OPLOOPS = { empty = empty, mark = marks, mark_gc = marks_gc, gc_read = gc_reads, mark_off = marks_off,
                  zone_on = zone_on, zone_off = zone_off }
local OPORDER = { "empty", "mark", "mark_gc", "gc_read", "mark_off", "zone_on", "zone_off" }
for _, k in ipairs(OPORDER) do time(OPLOOPS[k], OPS / 10) end
for r = 1, ROUNDS do
  for _, k in ipairs(OPORDER) do ops[k][r] = time(OPLOOPS[k], OPS) end
end
local e = best(ops.empty)
print(("  per operation (ns, the fastest round, the empty loop's %.1f ns taken off):"):format(e))
local LABEL = { mark = "mark (one group read)", mark_gc = "mark, gc = true", gc_read = "the GC figures' read alone",
                mark_off = "mark, disabled",
                zone_on = "zone begin+finish, enabled", zone_off = "zone begin+finish, disabled" }
for _, k in ipairs { "mark", "mark_gc", "gc_read", "mark_off", "zone_on", "zone_off" } do
  print(("    %-32s %10.1f"):format(LABEL[k], best(ops[k]) - e))
end
print(("  a mark with gc = true against without: %.0f ns more (ratio %.3f); the frames: ratio %.3f")
      :format(best(ops.mark_gc) - best(ops.mark), (best(ops.mark_gc) - e) / (best(ops.mark) - e),
              best(per_frame.mark_gc) / best(per_frame.mark)))
gcon:close()
on:close()
off:close()
print(("  zones timeline against zones on: ratio %.3f")
      :format(best(per_frame.zones_timeline) / best(per_frame.zones_on)))
tlon:close()

-- profile = true: the frame's samples taken at every mark (the profiler's
-- own sampling cost included), against the same frames without a profile
-- (one profiler per thread: one profiled object, its profiler's timeline
-- switched off and on between the loops, outside the time)
local pf = assert(perfev.frames { profile = true })
local plain = assert(perfev.frames {})
local TIMELINE = require("perfev.profile").DEFAULT_TIMELINE
local function profiled(keep)
  return function(n)
    pf.profiler.engine:timeline(keep)      -- the ring made (or dropped) here, not timed
    local t0 = clock()
    for _ = 1, n do plain_frame() pf:mark() end
    return clock() - t0
  end
end
pf.profiler.timeline_n = TIMELINE
local pl = {
  without = function(n)
    local t0 = clock()
    for _ = 1, n do plain_frame() plain:mark() end
    return clock() - t0
  end,
  profile = profiled(0),
  timeline = profiled(TIMELINE),
}
local PORDER = { "without", "profile", "timeline" }
local pt = { without = {}, profile = {}, timeline = {} }
for _, k in ipairs(PORDER) do pl[k](FRAMES / 10) end
for r = 1, ROUNDS do
  for _, k in ipairs(PORDER) do pt[k][r] = pl[k](FRAMES) / FRAMES end
end
local w, p, pw = best(pt.without), best(pt.profile), best(pt.timeline)
print(("  profile = true: %.2f us/frame against %.2f (ratio %.3f to mark alone, %.3f to base)")
      :format(p / 1e3, w / 1e3, p / w, p / base))
print(("  profile + timeline: %.2f us/frame (ratio %.3f to profile = true alone, %.3f to base; %d samples kept)")
      :format(pw / 1e3, pw / p, pw / base, #pf.profiler:timeline().samples))
pf:close()
plain:close()
for _, msg in ipairs(warnings) do print("  note: " .. msg) end
