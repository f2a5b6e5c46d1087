-- Folded stacks, the input of flamegraph.pl and inferno: one line per
-- stack of functions, root first, ';'-joined, then a space and its weight
-- (the event's count: nanoseconds for the clocks).
local data = require "perfev.profile.data"

local M = {}

-- fold(profile) -> { { labels, weight } }, stacks merged by function
-- (stacks that differ in lines only), heaviest first.
function M.fold(p)
  local out, by = {}, {}
  for _, s in ipairs(p.stacks) do
    local labels = data.labels(p, s)
    local k = table.concat(labels, ";")
    local t = by[k]
    if t then t.weight = t.weight + s.weight
    else
      t = { labels = labels, key = k, weight = s.weight }
      by[k] = t
      out[#out + 1] = t
    end
  end
  table.sort(out, function(a, b)
    if a.weight ~= b.weight then return a.weight > b.weight end
    return a.key < b.key
  end)
  return out
end

function M.encode(p)
  local lines = {}
  for i, t in ipairs(M.fold(p)) do lines[i] = ("%s %.0f"):format(t.key, t.weight) end
  if #lines == 0 then return "" end
  return table.concat(lines, "\n") .. "\n"
end

return M
