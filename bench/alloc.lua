-- bench/alloc.lua: what perfev.alloc costs a loop that allocates, as a
-- ratio against the same loop without it, measured side by side in one
-- run (rounds alternating; the fastest round of each, in the thread's CPU
-- time):
--   base       the loop alone
--   default    under perfev.alloc at its default period (512 KiB)
--   64 KiB     under perfev.alloc { period = 65536 }
--   counter    under perfev.alloc.counter() (every block counted, no sampling:
--              what perfev.frames' per-frame GC figures cost)
-- Each profiled round starts and stops its profiler (stop runs a full
-- collection: collect = false here, the loop's own collections are
-- measured, not that one). The loop: a game frame's garbage, small tables
-- (vectors), strings and closures.
--   make bench
--   PERFEV_BENCH_ROUNDS=5 PERFEV_BENCH_FRAMES=3000 lua bench/alloc.lua
local perfev = require "perfev"
local alloc = require "perfev.alloc"

local unpack = table.unpack or rawget(_G, "unpack")
local ROUNDS = tonumber(os.getenv("PERFEV_BENCH_ROUNDS")) or 7
local FRAMES = tonumber(os.getenv("PERFEV_BENCH_FRAMES")) or 3000
local clock = function() return perfev.clock_ns("thread_cputime_id") end
local function best(t) return math.min(unpack(t)) end

local entities = {}
for i = 1, 200 do entities[i] = { x = i, y = -i, name = "e" .. i } end

local count = 0
local function frame()
  local out = {}
  for i, e in ipairs(entities) do
    local v = { x = e.x + 1, y = e.y - 1 }            -- a vector a frame per entity
    local label = e.name .. ":" .. count               -- a string
    local f = function() return v.x + #label end       -- a closure
    out[i] = f
    count = count + 1
  end
  return out
end

local function loop()
  local keep
  for _ = 1, FRAMES do keep = frame() end
  return keep
end

local runs = {
  { name = "base", run = function() return loop() end },
  { name = "default", run = function()
      local a = perfev.alloc { collect = false }
      a:start() loop() a:stop()
      return a
    end },
  { name = "64 KiB", run = function()
      local a = perfev.alloc { period = 65536, collect = false }
      a:start() loop() a:stop()
      return a
    end },
  { name = "counter", run = function()
      local c = alloc.counter()
      loop()
      c:close()
    end },
}

local times, last = {}, {}
for _, r in ipairs(runs) do times[r.name] = {} end
for _ = 1, ROUNDS do
  for _, r in ipairs(runs) do
    collectgarbage()
    local t0 = clock()
    last[r.name] = r.run()
    times[r.name][#times[r.name] + 1] = clock() - t0
  end
end

local base = best(times.base)
local lua = rawget(_G, "jit") and rawget(_G, "jit").version or _VERSION
print(("perfev.alloc overhead (%s; %d frames of %d entities; the fastest of %d rounds, thread CPU time)")
      :format(lua, FRAMES, #entities, ROUNDS))
for _, r in ipairs(runs) do
  local t = best(times[r.name])
  local extra = ""
  local a = last[r.name]
  if type(a) == "table" and a.totals then
    local tt = a:totals()
    extra = ("  %.0f MB allocated, %d samples"):format(tt.alloc_bytes / 1e6, tt.sampled)
  end
  print(("  %-8s %8.1f ms  %.3fx%s"):format(r.name, t / 1e6, t / base, extra))
end
