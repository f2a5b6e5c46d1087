-- perfev.resty.labels: the label value a request's series go under, with
-- the number of values bounded. A request's raw label (its URI by default)
-- is collapsed by a rule (the default turns path segments that are ids into
-- ":id": /users/1234/orders/9f86d081884c7d65 -> /users/:id/orders/:id), then
-- admitted while fewer than `max` values exist; past them, its requests go
-- to one overflow series (`overflow`, default "other"). With a shared dict
-- the values are counted across the workers (an atomic incr, and an add per
-- value): `max` holds for the dict, not per worker. Each worker remembers
-- what a raw label became, so the rule and the dict are asked once per raw
-- label and worker, not per request (up to CACHE raw labels, then it
-- forgets them all and asks again).
local series = require "perfev.resty.series"

local M = {}

M.MAX = 100
M.OVERFLOW = "other"
M.CACHE = 4096

-- the dict keys: the number of values admitted, and one per value
local COUNT_KEY, VALUE_KEY = "L", "L\t"

-- Whether a path segment is an id: all digits; a UUID; or hexadecimal of 8
-- characters or more with a digit in it (hashes, object ids). Words, even
-- long ones, are not ("deadbeefcafe" has no digit; "settings" is no hex).
local function is_id(seg)
  if seg:find("^%d+$") then return true end
  if #seg == 36 and seg:find("^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$") then
    return true
  end
  return #seg >= 8 and seg:find("^%x+$") ~= nil and seg:find("%d") ~= nil
end

-- The default rule: each path segment that is an id becomes ":id".
function M.collapse_ids(label)
  if not label:find("%d") then return label end
  return (label:gsub("[^/]+", function(seg) if is_id(seg) then return ":id" end end))
end

-- collapse option -> function(label) -> label | nil, message.
--   nil       the default rule (ids)
--   false     none: labels as they come
--   function  called with the raw label, returns the label
--   list      { { pattern, replacement }, ... }: string.gsub's, in order
local function rule(collapse)
  if collapse == nil then return M.collapse_ids end
  if collapse == false then return function(label) return label end end
  if type(collapse) == "function" then return collapse end
  if type(collapse) == "table" then
    for i, r in ipairs(collapse) do
      if type(r) ~= "table" or type(r[1]) ~= "string" or (type(r[2]) ~= "string" and type(r[2]) ~= "function") then
        return nil, ("option 'collapse': entry %d must be { pattern, replacement }"):format(i)
      end
      local ok, err = pcall(string.find, "", r[1])
      if not ok then return nil, ("option 'collapse': entry %d: %s"):format(i, tostring(err)) end
    end
    return function(label)
      for _, r in ipairs(collapse) do label = label:gsub(r[1], r[2]) end
      return label
    end
  end
  return nil, "option 'collapse' must be false, a function or a list of { pattern, replacement }"
end

local Labels = {}
Labels.__index = Labels

-- M.new{ collapse =, max =, overflow =, dict = } -> labels | nil, message
function M.new(opts)
  local collapse, err = rule(opts.collapse)
  if not collapse then return nil, err end
  local max = opts.max_labels
  if max == nil then max = M.MAX end
  if type(max) ~= "number" or max < 1 or max ~= math.floor(max) then
    return nil, "option 'max_labels' must be a positive integer"
  end
  local overflow = opts.overflow
  if overflow == nil then overflow = M.OVERFLOW end
  if type(overflow) ~= "string" then return nil, "option 'overflow' must be a string" end
  return setmetatable({ collapse = collapse, max = max, overflow = overflow, dict = opts.dict,
                        cache = {}, cached = 0, admitted = {}, refused = {}, n = 0 }, Labels)
end

-- Whether `label` is one of the at most `max` values (admitting it when
-- there is room).
function Labels:admit(label)
  if self.admitted[label] then return true end
  if self.refused[label] then return false end
  local d = self.dict
  if not d then
    if self.n >= self.max then return false end
    self.n = self.n + 1
    self.admitted[label] = true
    return true
  end
  local key = VALUE_KEY .. label
  if d:get(key) then
    self.admitted[label] = true
    return true
  end
  local n = series.incr(d, COUNT_KEY, 1)
  if not n then return false end   -- the dict is full: nowhere to count it
  if n > self.max then
    d:incr(COUNT_KEY, -1)
    return false
  end
  local ok, err = d:safe_add(key, true)   -- no eviction: a full dict says "no memory"
  -- another worker admitted it meanwhile: counted once, by that worker
  if not ok and err == "exists" then d:incr(COUNT_KEY, -1) end
  if not ok and err ~= "exists" then
    d:incr(COUNT_KEY, -1)
    return false
  end
  self.admitted[label] = true
  return true
end

-- labels:refuse(label): its requests go to the overflow from now on (the
-- dict had no room for its series).
function Labels:refuse(label)
  self.admitted[label], self.refused[label] = nil, true
  self.cache, self.cached = {}, 0
end

-- labels:get(raw) -> the label value the request's series go under.
function Labels:get(raw)
  local v = self.cache[raw]
  if v then return v end
  local ok, label = pcall(self.collapse, raw)
  if not ok or type(label) ~= "string" then label = raw end
  if label ~= self.overflow and not self:admit(label) then label = self.overflow end
  if self.cached >= M.CACHE then
    self.cache, self.cached = {}, 0
  end
  self.cache[raw] = label
  self.cached = self.cached + 1
  return label
end

-- Whether a dict key is one of this module's (not a series).
function M.is_own_key(key)
  return key == COUNT_KEY or key:sub(1, #VALUE_KEY) == VALUE_KEY
end

return M
