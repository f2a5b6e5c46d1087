-- The Lua side of examples/embed/host.c: a game's scripting layer that
-- measures every frame with one group read. The host calls
--   local game = dofile("game.lua")   -- this file returns the table below
--   game.frame(n)                     -- once per frame, after its update:
--                                     -- the frame's scripting, then one group read
--   game.read()                       -- one g:read(t) alone (timed by the host)
--   game.report()                     -- the per-frame table: mean, p50, p95, p99,
--                                     -- max of each event, and the worst frames
--   game.close()                      -- before lua_close
-- g:read(t) refills the same table; each frame's counts go into arrays
-- (which grow now and then, by doubling) for the report at the end.
local perfev = require "perfev"

local EVENTS = { "task-clock", "page-faults", "context-switches" }

local g = assert(perfev.group(EVENTS))
local t = g:read()            -- the table every frame refills
local total = { frames = 0 }
for _, name in ipairs(EVENTS) do total[name] = 0 end
local last = {}
for _, name in ipairs(EVENTS) do last[name] = 0 end
-- each frame's counts, by event: per_frame[name][frame]
local per_frame = {}
for _, name in ipairs(EVENTS) do per_frame[name] = {} end

g:enable()

local game = {}

-- The frame's scripting: two functions whose costs are 3:1 by construction
-- (the same loop, three quarters and a quarter of the iterations), what a
-- profile of the frames shows (host.c's PROFILE argument: perfev.profile
-- resumed and paused around each call of game.frame, doc/embedding.md).
local function work(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end

local K = rawget(_G, "jit") and 10 or 1   -- LuaJIT runs the loop ~10 times faster
local function think() local r = work(30000 * K) return r end
local function animate() local r = work(10000 * K) return r end

-- The counts of this frame (since the previous one) go to the totals.
function game.frame()
  game.state = think() + animate()
  g:read(t)
  for i = 1, #EVENTS do
    local name = EVENTS[i]
    local v = t[i]
    total[name] = total[name] + (v - last[name])
    per_frame[name][total.frames + 1] = v - last[name]
    last[name] = v
  end
  total.frames = total.frames + 1
end

-- The per-frame table a game developer reads: per event the mean, the
-- 50th, 95th and 99th percentiles (nearest rank) and the max of a frame,
-- then the WORST slowest frames by task-clock with their other counts.
local WORST = 5
local function percentile(sorted, p)
  return sorted[math.max(1, math.ceil(p / 100 * #sorted))]
end

function game.report()
  local n = total.frames
  if n == 0 then return "no frame ran\n" end
  local out = { ("%-18s %10s %10s %10s %10s %10s"):format("per frame", "mean", "p50", "p95", "p99", "max") }
  for _, name in ipairs(EVENTS) do
    local scale, label = 1, name
    if name == "task-clock" then scale, label = 1e-6, "task-clock ms" end
    local sorted = {}
    for f = 1, n do sorted[f] = per_frame[name][f] * scale end
    table.sort(sorted)
    out[#out + 1] = ("%-18s %10.3f %10.3f %10.3f %10.3f %10.3f"):format(label, total[name] * scale / n,
      percentile(sorted, 50), percentile(sorted, 95), percentile(sorted, 99), sorted[n])
  end
  local order = {}
  for f = 1, n do order[f] = f end
  local clock = per_frame["task-clock"]
  table.sort(order, function(a, b) return clock[a] > clock[b] end)
  out[#out + 1] = ("worst %d frames by task-clock:"):format(math.min(WORST, n))
  for i = 1, math.min(WORST, n) do
    local f = order[i]
    out[#out + 1] = ("  frame %-6d %8.3f ms  page-faults %d  context-switches %d"):format(f, clock[f] * 1e-6,
      per_frame["page-faults"][f], per_frame["context-switches"][f])
  end
  return table.concat(out, "\n") .. "\n"
end

function game.read() g:read(t) end

-- The leader's fd, for the host's raw read(2) of the same group.
function game.leader_fd() return g:events()[1]:fileno() end

function game.totals() return total end

function game.close()
  g:disable()
  g:close()
end

return game
