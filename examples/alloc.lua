-- examples/alloc.lua: where a game loop's garbage comes from, and what it
-- keeps, by Lua function (perfev.alloc; doc/memory.md).
--   lua5.4 examples/alloc.lua [OUT]      (also lua5.3, luajit; OUT: $TMPDIR/alloc.pb.gz)
-- writes OUT, a pprof profile (go tool pprof -sample_index=alloc_space|inuse_space ...),
-- and beside it BASE.alloc.svg (the bytes allocated) and BASE.inuse.svg (what
-- is still in use), BASE being OUT without ".pb.gz", and prints the text
-- reports.
local perfev = require "perfev"

local out = arg and arg[1] or (os.getenv("TMPDIR") or "/tmp") .. "/alloc.pb.gz"
local base = out:gsub("%.pb%.gz$", "")

local entities = {}
for i = 1, 300 do entities[i] = { x = i, y = 0, vx = 1, vy = 2, name = "entity" .. i } end

local log = {}                       -- what the game keeps: one line per 10th frame

-- physics: a fresh vector per entity and frame (garbage)
local function step_physics()
  for _, e in ipairs(entities) do
    local v = { x = e.x + e.vx, y = e.y + e.vy }
    e.x, e.y = v.x, v.y
  end
end

-- ui: a label string per entity and frame (garbage, three times physics')
local function draw_labels(frame)
  local n = 0
  for _, e in ipairs(entities) do
    local label = ("%s at (%d, %d) frame %d"):format(e.name, e.x, e.y, frame)
    n = n + #label
  end
  return n
end

-- telemetry: kept for good
local function record_frame(frame)
  if frame % 10 == 0 then
    log[#log + 1] = ("frame %d: %d entities "):format(frame, #entities) .. ("."):rep(2000)
  end
end

local function game(frames)
  for frame = 1, frames do
    step_physics()
    draw_labels(frame)
    record_frame(frame)
  end
end

local a = perfev.alloc { period = 64 * 1024 }
a:run(game, 600)

assert(a:write(out, "pprof"))                             -- every sample type
assert(a:write(base .. ".alloc.svg"))                     -- alloc_space
assert(a:write(base .. ".inuse.svg", nil, "inuse_space"))
local t = a:totals()
print(("%.1f MB allocated in %d blocks, %d sampled (period %d bytes); written: %s, %s.alloc.svg, %s.inuse.svg")
      :format(t.alloc_bytes / 1e6, t.alloc_count, t.sampled, t.period, out, base, base))
print(a:report("alloc_space"))
print(a:report("inuse_space"))
