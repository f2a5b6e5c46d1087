-- "Did you mean": the names closest to a misspelt one, for every error
-- message of the Lua layer that names an unknown field, option or event.
local M = {}

-- (a caller's wrong value: raised at its line, naming the function;
-- perfev.options loads this module, so it is asked only then)
local function want(ok, fname, what, v)
  if not ok then require("perfev.options").arg(v, what, "perfev.nearest." .. fname, "its argument") end
end

-- Levenshtein distance, bounded: stops early once every cell exceeds max.
function M.distance(a, b, max)
  want(type(a) == "string", "distance", "string", a)
  want(type(b) == "string", "distance", "string", b)
  want(type(max) == "number" and max == max, "distance", "number", max)
  if math.abs(#a - #b) > max then return max + 1 end
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur, best = { [0] = i }, i
    local ca = a:byte(i)
    for j = 1, #b do
      local cost = ca == b:byte(j) and 0 or 1
      local v = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
      cur[j] = v
      if v < best then best = v end
    end
    if best > max then return max + 1 end
    prev = cur
  end
  return prev[#b]
end

-- list(name, names, n) -> up to n names closest to name: those that
-- contain it or that it contains first, then by edit distance.
function M.list(name, names, n)
  want(type(name) == "string", "list", "string", name)
  want(type(names) == "table", "list", "table", names)
  want(n == nil or type(n) == "number", "list", "number", n)
  n = n or 5
  local max = math.max(2, math.floor(#name / 3))
  local scored, seen = {}, {}
  local lname = name:lower()
  for _, cand in ipairs(names) do
    if not seen[cand] then
      seen[cand] = true
      local lcand = cand:lower()
      local d
      if lcand == lname then
        d = 0
      elseif #name >= 3 and (lcand:find(lname, 1, true) or lname:find(lcand, 1, true) and #cand >= 3) then
        d = 1 + math.abs(#cand - #name) / 100
      else
        d = M.distance(lname, lcand, max)
        if d > max then d = nil end
      end
      if d then scored[#scored + 1] = { cand, d } end
    end
  end
  table.sort(scored, function(x, y) return x[2] < y[2] or (x[2] == y[2] and x[1] < y[1]) end)
  local out = {}
  for i = 1, math.min(n, #scored) do out[i] = scored[i][1] end
  return out
end

-- hint(name, names) -> " (did you mean 'x'?)" for the closest name within
-- a small edit distance, else "". names: a list, or a set (name -> true).
function M.hint(name, names)
  if type(name) ~= "string" then return "" end
  want(type(names) == "table", "hint", "table", names)
  local list = names
  if #names == 0 then
    list = {}
    for k in pairs(names) do
      if type(k) == "string" then list[#list + 1] = k end
    end
  end
  local best = M.list(name, list, 1)[1]
  if not best or best == name then return "" end
  return (" (did you mean '%s'?)"):format(best)
end

return M
