-- examples/frames_gc.lua: the Lua garbage collector frame by frame in a
-- small game loop, with perfev.frames { gc = true }: each frame's bytes
-- allocated and freed, the collections it ran, and on LuaJIT (profile =
-- true) its time in the collector.
--   LUA_CPATH='build/?.so;;' LUA_PATH='lua/?.lua;lua/?/init.lua;;' lua5.4 examples/frames_gc.lua [FRAMES]
-- Particles are new tables every frame (garbage the collector takes back
-- in steps); every 40th frame loads a level (a burst of garbage) and
-- calls collectgarbage() after it, as a game does at a loading screen.
-- doc/games.md explains the figures.
local perfev = require "perfev"

local FRAMES = tonumber(arg and arg[1]) or 120

local particles = {}
for i = 1, 3000 do particles[i] = { x = 0, y = 0, vx = 0, vy = 0, life = 0 } end

-- the particle system: 500 new particles a frame, the oldest dropped
local function spawn(frame)
  for i = 1, 500 do
    particles[(frame * 500 + i) % 3000 + 1] = { x = i, y = frame, vx = 1, vy = -1, life = 60 }
  end
end

local function step_particles()
  for i = 1, #particles do
    local p = particles[i]
    p.x, p.y = p.x + p.vx, p.y + p.vy
  end
end

-- a level's data: 20,000 small tables and their names, kept until the next load
local level
local function load_level(n)
  level = {}
  for i = 1, 20000 do level[i] = { id = i, name = "tile" .. n .. "_" .. i } end
end

local fr = assert(perfev.frames {
  events = { "task-clock" },
  gc = true,             -- alloc-bytes, free-bytes, gc-cycles (and gc-time on LuaJIT with profile)
  profile = true,        -- LuaJIT: the samples taken in the collector give gc-time
  worst = 3, by = "alloc-bytes",
})

for f = 1, FRAMES do
  local z = fr:zone_begin("particles")
  spawn(f)
  step_particles()
  z:finish()
  if f % 40 == 0 then
    z = fr:zone_begin("load")
    load_level(f)
    collectgarbage()     -- the loading screen's full collection
    z:finish()
  end
  fr:mark()
end

io.write(fr:report())

-- frame by frame: the last 12 frames
local names = fr.names
local has = {}
for _, n in ipairs(names) do has[n] = true end
local cols = { "task-clock", "alloc-bytes", "free-bytes", "gc-cycles", has["gc-time"] and "gc-time" or nil }
local vals = {}
for _, c in ipairs(cols) do vals[c] = fr:values(c) end
local kept = #vals["task-clock"]
print(("\nthe last 12 frames%s:"):format(has["gc-time"] and "" or " (gc-time: not measured on " .. _VERSION .. ")"))
print(("  %5s %10s %10s %10s %6s%s"):format("frame", "ms", "alloc KiB", "free KiB", "cycles",
                                            has["gc-time"] and ("%10s"):format("gc ms") or ""))
local first = fr:stats().frames - kept
for k = math.max(1, kept - 11), kept do
  local line = ("  %5d %10.3f %10.1f %10.1f %6d"):format(first + k, vals["task-clock"][k] / 1e6,
    vals["alloc-bytes"][k] / 1024, vals["free-bytes"][k] / 1024, vals["gc-cycles"][k])
  if has["gc-time"] then line = line .. ("%10.3f"):format(vals["gc-time"][k] / 1e6) end
  print(line)
end
print(("level: %d tiles"):format(#level))
fr:close()
