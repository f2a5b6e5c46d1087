-- The Lua side of examples/embed/host.c: a game's scripting layer that
-- measures every frame with one group read. The host calls
--   local game = dofile("game.lua")   -- this file returns the table below
--   game.frame(n)                     -- once per frame, after its update:
--                                     -- the frame's scripting, then fr:mark()
--   game.read()                       -- one g:read(t) alone (timed by the host)
--   game.report()                     -- the per-frame table: mean, p50, p95, p99,
--                                     -- max of each event, and the worst frames
--   game.write_timeline(path)         -- the frames, zones and per-frame counts in time
--                                     -- order: .json Trace Event JSON, .speedscope.json
--   game.close()                      -- before lua_close
-- perfev.frames counts the frames: fr:mark() once a frame (one group read
-- into a table it refills, each event's count into a ring allocated once),
-- two zones inside each frame (the scripting's two systems), and the
-- per-frame table of fr:report() at the end, and the timeline of the
-- last frames (timeline = true: their times and their zones' kept in rings
-- made at the start) for Perfetto's UI or speedscope (doc/games.md), and
-- the Lua GC's bytes and collections of each frame and zone (gc = true).
local perfev = require "perfev"

local EVENTS = { "task-clock", "page-faults", "context-switches" }

-- gc = true: each frame's and zone's Lua GC figures too (alloc-bytes,
-- free-bytes, gc-cycles), the host's zone marked from C included
local fr = assert(perfev.frames { events = EVENTS, worst = 5, timeline = true, gc = true,
                                  name = "examples/embed game loop" })
local g = fr.group
local t = g:read()            -- game.read's table, refilled

local game = {}

-- the frames object, for the host's own zones (perfev_frames.h)
game.frames = fr

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

-- The frame's scripting, each system in a zone; the mark ends the frame.
function game.frame()
  local z = fr:zone_begin("think")
  local a = think()
  z:finish()
  z = fr:zone_begin("animate")
  local b = animate()
  z:finish()
  game.state = a + b
  fr:mark()
end

-- The per-frame table a game developer reads: per event the mean, the
-- 50th, 95th and 99th percentiles (nearest rank) and the max of a frame,
-- the zones the same, then the 5 slowest frames by task-clock with their
-- other counts.
function game.report() return fr:report() end

function game.read() g:read(t) end

-- The timeline file (Trace Event JSON or speedscope's, from the name).
function game.write_timeline(path) assert(fr:timeline():write(path)) end

-- The leader's fd, for the host's raw read(2) of the same group.
function game.leader_fd() return g:events()[1]:fileno() end

-- { frames = n, [event] = the count over every frame }
function game.totals()
  local st = fr:stats()
  local total = { frames = st.frames }
  for _, name in ipairs(EVENTS) do total[name] = st.events[name] and st.events[name].total or 0 end
  return total
end

function game.close() fr:close() end

return game
