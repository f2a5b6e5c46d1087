-- A timeline as Trace Event JSON, the JSON Object Format of the Trace
-- Event Format (what Perfetto's UI, chrome://tracing and speedscope
-- import): timestamps in microseconds from the timeline's start, one
-- process and one thread (the game loop's):
--   "M" metadata: process_name, thread_name
--   "B"/"E" duration events: each frame ("frame N", cat "frame") and each
--     zone (cat "zone") nested in it, the counts of its events in the E
--     event's args
--     (perfev.timeline.nest: a zone carried over a mark is two slices)
--   "C" counter events: each event's count per frame, at the frame's start
--     (the clocks in milliseconds)
--   "i" instant events (thread scope): each sample, named by its leaf
--     function, "sf" its stack in "stackFrames" (id -> { name, category,
--     parent }), its weight in args. (Not the format's global "samples":
--     speedscope shows those instead of the frames and zones.)
local cjson = require "cjson"
local nest = require "perfev.timeline.nest"

local M = {}

M.PID, M.TID = 1, 1

local function us(tl, ns) return (ns - tl.t0) / 1000 end

-- the counts of an item as args: { ["task-clock ms"] = 1.2, ["page-faults"] = 3 }
local function counter_name(c) return c.clock and (c.name .. " ms") or c.name end
local function counts_args(tl, counts, extra)
  local args = extra or {}
  for i, c in ipairs(tl.counters) do
    local v = counts and counts[i]
    if v then args[counter_name(c)] = c.clock and v / 1e6 or v end
  end
  return args
end

-- stack frames: one node per (parent, label), ids from 1 (the dictionary's
-- keys are their strings; "sf" and "parent" the numbers, as the format's
-- examples give them)
local function stack_frames()
  local nodes, byparent, n = {}, {}, 0
  local function id_of(labels)
    local parent = 0
    for _, l in ipairs(labels) do
      local kids = byparent[parent]
      if not kids then
        kids = {}
        byparent[parent] = kids
      end
      local id = kids[l]
      if not id then
        n = n + 1
        id = n
        kids[l] = id
        nodes[tostring(id)] = { name = l, category = "Lua", parent = parent > 0 and parent or nil }
      end
      parent = id
    end
    return parent > 0 and parent or nil
  end
  return nodes, id_of
end

function M.encode(tl)
  local ev = {
    { name = "process_name", ph = "M", pid = M.PID, tid = M.TID, args = { name = tl.name or "perfev" } },
    { name = "thread_name", ph = "M", pid = M.PID, tid = M.TID, args = { name = "game loop" } },
  }
  local function add(e)
    e.pid, e.tid = M.PID, M.TID
    ev[#ev + 1] = e
  end
  for _, e in ipairs(nest.events(tl)) do
    local iv = e.iv
    local name = iv.frame and ("frame " .. iv.item.number) or iv.name
    local cat = iv.frame and "frame" or "zone"
    if e.kind == "O" then
      add { name = name, cat = cat, ph = "B", ts = us(tl, e.at) }
    else
      -- the counts on the E event: the format merges a pair's args (and
      -- speedscope names a slice by its B event's name and args: one
      -- name per zone, not one per call)
      local extra = iv.frame and { frame = iv.item.number } or { depth = iv.item.depth }
      add { name = name, cat = cat, ph = "E", ts = us(tl, e.at), args = counts_args(tl, iv.item.counts, extra) }
    end
  end
  for _, f in ipairs(tl.frames) do
    for i, c in ipairs(tl.counters) do
      local v = f.counts[i]
      if v then
        add { name = counter_name(c), cat = "counter", ph = "C", ts = us(tl, f.start),
              args = { value = c.clock and v / 1e6 or v } }
      end
    end
  end
  local nodes, id_of = stack_frames()
  for _, s in ipairs(tl.samples) do
    local sf = id_of(s.stack)
    local ts = us(tl, s.time)
    add { name = s.stack[#s.stack] or "?", cat = "sample", ph = "i", s = "t", ts = ts, sf = sf,
          args = { weight = s.weight, event = tl.event } }
  end
  local doc = { traceEvents = ev, displayTimeUnit = "ms", stackFrames = nodes,
                otherData = { exporter = "perfev", event = tl.event, unit = tl.unit,
                              dropped_samples = tl.dropped.samples, dropped_zones = tl.dropped.zones } }
  return cjson.encode(doc)
end

return M
