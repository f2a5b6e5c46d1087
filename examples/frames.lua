-- examples/frames.lua: a small game loop measured frame by frame with
-- perfev.frames: task-clock, page faults and context switches per frame,
-- its systems in zones, and the worst frames with the Lua functions that
-- ran in them (profile = true).
--   LUA_CPATH='build/?.so;;' LUA_PATH='lua/?.lua;lua/?/init.lua;;' lua5.4 examples/frames.lua [FRAMES]
-- Every 50th frame the AI replans (a slow path): those frames are the
-- worst, and their profiles say replan did it. doc/games.md explains the
-- table.
local perfev = require "perfev"

local FRAMES = tonumber(arg and arg[1]) or 240

local K = rawget(_G, "jit") and 2 or 1   -- LuaJIT's loops are faster

local function step_physics(bodies)
  for i = 1, #bodies do
    local b = bodies[i]
    b.vy = b.vy - 0.1
    b.x, b.y = b.x + b.vx, b.y + b.vy
    if b.y < 0 then b.y, b.vy = 0, -b.vy * 0.8 end
  end
end

local function think(n)
  local s = 0
  for i = 1, n do s = s + i % 13 end
  return s
end

-- the slow path: a big search, with garbage (new tables: page faults
-- when the heap grows)
local function by_cost(a, b) return a.cost < b.cost end

local function replan(n)
  local open = {}
  for i = 1, n do open[i] = { cost = (i * 7919) % 1000, node = i } end
  table.sort(open, by_cost)
  return open[1].node
end

local bodies = {}
for i = 1, 2000 do bodies[i] = { x = i, y = 10 + i % 50, vx = 1, vy = 0 } end

local fr = assert(perfev.frames {
  events = { "task-clock", "page-faults", "context-switches" },
  worst = 3,             -- the 3 slowest frames by task-clock (the first event) ...
  profile = true,        -- ... each with the Lua profile of that frame
})

for f = 1, FRAMES do
  local z = fr:zone_begin("physics")
  for _ = 1, 4 * K do step_physics(bodies) end
  z:finish()
  z = fr:zone_begin("ai")
  think(20000 * K)
  if f % 50 == 0 then
    local plan = fr:zone_begin("replan")   -- a zone inside ai
    replan(20000 * K)
    plan:finish()
  end
  z:finish()
  fr:mark()                                -- the frame ends here
end

io.write(fr:report())

-- the same figures as data
local st = fr:stats()
print(("\nframe task-clock: mean %.3f ms, p99 %.3f ms; the worst frame is %d (%s)"):format(
  st.events["task-clock"].mean / 1e6, st.events["task-clock"].p99 / 1e6, st.worst[1].frame,
  st.worst[1].profile and st.worst[1].profile.functions[1] and st.worst[1].profile.functions[1].label or "no sample"))
fr:close()
