-- Folded stacks, the input of flamegraph.pl and inferno: one line per
-- stack of functions, root first, ';'-joined, then a space and its weight
-- (the event's count: nanoseconds for the clocks).
local data = require "perfev.profile.data"

local M = {}

-- fold(profile[, tagged]) -> { { labels, key, weight, tags } }, stacks
-- merged by function (stacks that differ in lines only), heaviest first;
-- tagged: stacks with other pprof labels (s.tags) kept apart, their tags
-- in t.tags (folded text has no labels: merged there).
function M.fold(p, tagged)
  local out, by = {}, {}
  for _, s in ipairs(p.stacks) do
    local labels = data.labels(p, s)
    local k = table.concat(labels, ";")
    local tags = tagged and s.tags or nil
    local bk = tags and (k .. "\t" .. tags) or k
    local t = by[bk]
    if t then t.weight = t.weight + s.weight
    else
      t = { labels = labels, key = k, weight = s.weight, tags = tags }
      by[bk] = t
      out[#out + 1] = t
    end
  end
  table.sort(out, function(a, b)
    if a.weight ~= b.weight then return a.weight > b.weight end
    if a.key ~= b.key then return a.key < b.key end
    return (a.tags or "") < (b.tags or "")
  end)
  return out
end

function M.encode(p)
  local lines = {}
  for i, t in ipairs(M.fold(p)) do lines[i] = ("%s %.0f"):format(t.key, t.weight) end
  if #lines == 0 then return "" end
  return table.concat(lines, "\n") .. "\n"
end

-- decode(text[, opts]) -> a profile of folded lines (frames, funcs,
-- stacks, weight, samples) that the other outputs encode: stacks folded
-- elsewhere, or summed from several processes (perfev.resty adds up its
-- workers' this way). A frame is its label: "name (source:line)" a Lua
-- function, "name [C]" a C one. A stack may end with a tab and its pprof
-- labels ("key\2value\1..."; perfev.resty's dicts keep them so): the
-- stack's tags. opts: event, unit, name, samples.
function M.decode(text, opts)
  opts = opts or {}
  local p = { frames = {}, funcs = {}, stacks = {}, weight = 0, samples = 0, lost = 0, outside = 0, outside_samples = 0,
              event = opts.event or "?", unit = opts.unit or "events", name = opts.name }
  local by = {}
  local function id_of(label)
    local id = by[label]
    if id then return id end
    id = #p.funcs + 1
    local c = label:match("^(.-) %[C%]$")
    local src, line = label:match("%((.-):(%d+)%)$")
    local what = c and "C" or (src and "Lua") or "folded"
    -- a Lua function's name is its label's before the place: pprof shows
    -- it by name and file, as Go's
    local name = c or (src and label:match("^(.-) %(")) or label
    p.funcs[id] = { name = name, label = label, what = what, source = src,
                    linedefined = tonumber(line) or -1 }
    p.frames[id] = { name = name, source = src, line = -1, linedefined = tonumber(line) or -1,
                     what = what, func = id }
    by[label] = id
    return id
  end
  for line in text:gmatch("[^\n]+") do
    local stack, w = line:match("^(.-)%s+(%d+)%s*$")
    if stack then
      local tags
      stack, tags = stack:match("^([^\t]*)\t?(.*)$")
      local ids = {}
      for label in stack:gmatch("[^;]+") do ids[#ids + 1] = id_of(label) end
      w = tonumber(w)
      p.stacks[#p.stacks + 1] = { frames = ids, weight = w, samples = 1, tags = tags ~= "" and tags or nil }
      p.weight, p.samples = p.weight + w, p.samples + 1
    end
  end
  table.sort(p.stacks, function(a, b) return a.weight > b.weight end)
  if opts.samples then p.samples = opts.samples end
  return p
end

return M
