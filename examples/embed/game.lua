-- The Lua side of examples/embed/host.c: a game's scripting layer that
-- measures every frame with one group read. The host calls
--   local game = dofile("game.lua")   -- this file returns the table below
--   game.frame(n)                     -- once per frame, after its update:
--                                     -- the frame's scripting, then one group read
--   game.read()                       -- one g:read(t) alone (timed by the host)
--   game.close()                      -- before lua_close
-- Nothing here allocates per frame: g:read(t) refills the same table.
local perfev = require "perfev"

local EVENTS = { "task-clock", "page-faults", "context-switches" }

local g = assert(perfev.group(EVENTS))
local t = g:read()            -- the table every frame refills
local total = { frames = 0 }
for _, name in ipairs(EVENTS) do total[name] = 0 end
local last = {}
for _, name in ipairs(EVENTS) do last[name] = 0 end

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
    last[name] = v
  end
  total.frames = total.frames + 1
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
