-- A timeline as speedscope's file format
-- (https://www.speedscope.app/file-format-schema.json), "evented"
-- profiles: open ("O") and close ("C") events of frames, at nanoseconds
-- from the timeline's start, well nested and in time order.
--   1. "frames and zones": each frame ("frame"), its zones inside
--      (perfev.timeline.nest); when the timeline has frames or zones
--   2. "Lua samples on EVENT": the samples' stacks, each sample's stack
--      open from the sample before it (or its weight before it, for
--      the clocks) to its time; when it has samples
-- The frames and zones come first: speedscope opens on it.
local cjson = require "cjson"
local nest = require "perfev.timeline.nest"
local SCHEMA = require("perfev.profile.speedscope").SCHEMA

local M = {}

local function frames_table()
  local frames, index = {}, {}
  return frames, function(name)
    local i = index[name]
    if not i then
      frames[#frames + 1] = { name = name }
      i = #frames - 1
      index[name] = i
    end
    return i
  end
end

local function zones_profile(tl, frame_of)
  local events, last = {}, 0
  for _, e in ipairs(nest.events(tl)) do
    local at = e.at - tl.t0
    events[#events + 1] = { type = e.kind, frame = frame_of(e.iv.name), at = at }
    if at > last then last = at end
  end
  return { type = "evented", name = "frames and zones", unit = "nanoseconds", startValue = 0, endValue = last,
           events = events }
end

-- the samples: each stack open over [start, time], start the time of the
-- sample before, or time - weight for a clock where that is later (a gap
-- with no sample is no stack)
local function samples_profile(tl, frame_of)
  local events, open, prev = {}, {}, nil
  local clock = tl.unit == "nanoseconds"
  local function close_to(n, at)
    for i = #open, n + 1, -1 do
      events[#events + 1] = { type = "C", frame = open[i], at = at }
      open[i] = nil
    end
  end
  local last = 0
  for _, s in ipairs(tl.samples) do
    local t = s.time - tl.t0
    local start = prev or (clock and t - s.weight or t)
    if clock and t - s.weight > start then start = t - s.weight end
    if start > t then start = t end
    if prev and start > prev then close_to(0, prev) end
    local ids = {}
    for i, l in ipairs(s.stack) do ids[i] = frame_of(l) end
    local same = 0
    while same < #open and same < #ids and open[same + 1] == ids[same + 1] do same = same + 1 end
    close_to(same, start)
    for i = same + 1, #ids do
      events[#events + 1] = { type = "O", frame = ids[i], at = start }
      open[i] = ids[i]
    end
    prev, last = t, t
  end
  close_to(0, last)
  return { type = "evented", name = ("Lua samples on %s"):format(tl.event or "?"), unit = "nanoseconds",
           startValue = 0, endValue = last, events = events }
end

function M.encode(tl)
  local frames, frame_of = frames_table()
  local profiles = {}
  if #tl.frames > 0 or #tl.zones > 0 then profiles[#profiles + 1] = zones_profile(tl, frame_of) end
  if #tl.samples > 0 then profiles[#profiles + 1] = samples_profile(tl, frame_of) end
  if #profiles == 0 then
    profiles[1] = { type = "evented", name = "empty", unit = "nanoseconds", startValue = 0, endValue = 0,
                    events = {} }
  end
  local doc = { ["$schema"] = SCHEMA, exporter = "perfev", name = tl.name or "perfev timeline",
                activeProfileIndex = 0, shared = { frames = frames }, profiles = profiles }
  local s = cjson.encode(doc)
  -- lua-cjson writes an empty table as {}: the schema wants arrays
  return (s:gsub('"(%a+)":{}', function(k)
    if k == "frames" or k == "events" then return '"' .. k .. '":[]' end
  end))
end

return M
