-- speedscope's file format (https://www.speedscope.app/file-format-schema.json):
-- one "sampled" profile, a sample per distinct stack of functions with its
-- weight (nanoseconds for the clocks, else the event's count).
local cjson = require "cjson"
local folded = require "perfev.profile.folded"

local M = {}

M.SCHEMA = "https://www.speedscope.app/file-format-schema.json"

local function frame_of(f)
  local t = { name = f.name }
  if f.what ~= "C" and f.what ~= "truncated" then
    t.file = f.source
    if f.linedefined and f.linedefined > 0 then t.line = f.linedefined end
    if f.what == "Lua" then t.name = f.label end
  end
  return t
end

function M.encode(p)
  local frames, index = {}, {}
  for i, f in ipairs(p.funcs) do
    frames[i] = frame_of(f)
    index[f.label] = i - 1
  end
  local samples, weights, total = {}, {}, 0
  for i, t in ipairs(folded.fold(p)) do
    local s = {}
    for j, l in ipairs(t.labels) do s[j] = index[l] end
    samples[i], weights[i] = s, t.weight
    total = total + t.weight
  end
  local unit = p.unit == "nanoseconds" and "nanoseconds" or "none"
  local doc = {
    ["$schema"] = M.SCHEMA,
    exporter = "perfev",
    name = p.name or ("perfev profile (%s)"):format(p.event),
    activeProfileIndex = 0,
    shared = { frames = frames },
    profiles = { {
      type = "sampled", name = ("Lua functions on %s"):format(p.event), unit = unit,
      startValue = 0, endValue = total, samples = samples, weights = weights,
    } },
  }
  local s = cjson.encode(doc)
  -- lua-cjson writes an empty table as {}: the schema wants arrays
  s = s:gsub('"(%a+)":{}', function(k)
    if k == "frames" or k == "samples" or k == "weights" then return '"' .. k .. '":[]' end
  end)
  return s
end

return M
