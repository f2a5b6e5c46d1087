-- perfev.resty.series: the series of one label, as a worker keeps them and
-- as the shared dict holds them. A worker keeps each label's series in one
-- array (`acc`), added to by each request and zeroed when flushed:
--   acc[1]                 requests
--   acc[1 + i]             the sum of event i (the kernel's unit: ns, counts)
--   acc[m]                 requests measured (m = n + 2: only with option
--                          sample > 1; otherwise every request is)
--   acc[h.off + b]         requests of event i in bucket b of its histogram
--                          (b = #h.bounds + 1: above every bound)
-- With sample = K each measured request stands for K: its counts are added
-- K times to the sums and its bucket (M.add's weight).
-- The dict's key of a series is its prefix (keys[pos]) and the label:
-- "0\t/work/light", "1\t/work/light", "m\t/work/light", "h1\t3\t/work/light".
local prom = require "perfev.resty.prom"

local M = {}

local function ascending(list)
  if type(list) ~= "table" or #list == 0 then return false end
  for k, v in ipairs(list) do
    if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then return false end
    if k > 1 and v <= list[k - 1] then return false end
  end
  return true
end

-- M.layout(events, divisors, buckets, sampled) -> layout | nil, message
--   divisors  per event: from the kernel's unit to the metric's base unit
--             (1e9: the event is a clock, in seconds)
--   buckets   nil: the defaults (prom.SECONDS for clocks, prom.COUNTS
--             otherwise); false: no histograms; a table by event name:
--             its upper bounds in the base unit, ascending, or false
--   sampled   true: a series of the requests measured (option sample > 1)
function M.layout(events, divisors, buckets, sampled)
  if buckets ~= nil and buckets ~= false and type(buckets) ~= "table" then
    return nil, "option 'buckets' must be false or a table of upper bounds by event name"
  end
  if type(buckets) == "table" then
    local known = {}
    for _, ev in ipairs(events) do known[ev] = true end
    for ev, list in pairs(buckets) do
      if not known[ev] then return nil, ("option 'buckets': '%s' is not one of the events"):format(tostring(ev)) end
      if list ~= false and not ascending(list) then
        return nil, ("option 'buckets': '%s' must be a list of ascending numbers, or false"):format(ev)
      end
    end
  end
  local n = #events
  local keys = { "0\t" }
  for i = 1, n do keys[1 + i] = i .. "\t" end
  local width, hist, measured = 1 + n, {}, nil
  if sampled then
    width = width + 1
    measured = width
    keys[measured] = "m\t"
  end
  for i, ev in ipairs(events) do
    local list
    if buckets == nil then
      list = divisors[i] ~= 1 and prom.SECONDS or prom.COUNTS
    elseif buckets then
      list = buckets[ev]
      if list == nil then list = divisors[i] ~= 1 and prom.SECONDS or prom.COUNTS end
    end
    if list then
      -- the bounds in the kernel's unit: a clock's in whole nanoseconds
      -- (2.5e-5 * 1e9 is 25000.000000000004)
      local h = { bounds = {}, le = {}, off = width }
      for b, v in ipairs(list) do
        local k = v * divisors[i]
        if divisors[i] ~= 1 then k = math.floor(k + 0.5) end
        h.bounds[b], h.le[b] = k, prom.number(v)
      end
      h.le[#list + 1] = "+Inf"
      for b = 1, #list + 1 do keys[width + b] = ("h%d\t%d\t"):format(i, b) end
      width = width + #list + 1
      hist[i] = h
    end
  end
  -- the counters' positions: requests, sums, measured
  return { n = n, width = width, keys = keys, hist = hist, measured = measured, counters = measured or 1 + n }
end

-- A label's series, all 0.
function M.acc(layout)
  local acc = {}
  for pos = 1, layout.width do acc[pos] = 0 end
  return acc
end

-- The bucket of d among ascending bounds: the first whose bound d does not
-- exceed, #bounds + 1 above them all (a binary search: 5 steps for the 17
-- default bounds of a clock, where a scan took up to 18).
local function bucket(bounds, d)
  local lo, hi = 1, #bounds + 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if d > bounds[mid] then lo = mid + 1 else hi = mid end
  end
  return lo
end
M.bucket = bucket

-- M.add(layout, acc, t, start, delta, events, weight): one request
-- measured, whose counts were `start` before it and `t` after it;
-- delta[name] its counts. weight (the option sample's K): how many
-- requests it stands for in the sums and buckets.
function M.add(layout, acc, t, start, delta, events, weight)
  acc[1] = acc[1] + 1
  local m = layout.measured
  if m then acc[m] = acc[m] + 1 end
  local hist = layout.hist
  for i = 1, layout.n do
    local d = (t[i] or 0) - start[i]
    delta[events[i]] = d
    acc[i + 1] = acc[i + 1] + d * weight
    local h = hist[i]
    if h then
      local pos = h.off + bucket(h.bounds, d)
      acc[pos] = acc[pos] + weight
    end
  end
end

-- M.incr(dict, key, v) -> the new value | nil, err: dict:incr that never
-- evicts. ngx_lua's incr with an init value adds a missing key by evicting
-- the least recently used ones when the dict is full (its third result,
-- forcible): other series, whose counts went without a word (issue 20:
-- /work/light's 12,056 requests gone, 1,062 series summing to 29,767 of
-- 49,191). A missing key is added by safe_add, which says "no memory".
function M.incr(dict, key, v)
  local nv, err = dict:incr(key, v)
  if nv or err ~= "not found" then return nv, err end
  local ok
  ok, err = dict:safe_add(key, v)
  if ok then return v end
  if err == "exists" then return dict:incr(key, v) end   -- another worker added it meanwhile
  return nil, err
end

-- M.read(layout, dict, worker) -> counts, hist: what the dict holds (or,
-- without a dict, this worker's sums: { [label] = acc }), as
-- counts[i][label] (i = 0: requests; i = "m": requests measured, with
-- option sample > 1) and hist[i][label][b].
function M.read(layout, dict, worker)
  local counts, hist = {}, {}
  for i = 0, layout.n do counts[i] = {} end
  counts.m = {}
  for i in pairs(layout.hist) do hist[i] = {} end
  local function put(key, v)
    if key:sub(1, 2) == "m\t" then
      counts.m[key:sub(3)] = v
      return
    end
    local i, label = key:match("^(%d+)\t(.*)$")
    if i then
      i = tonumber(i)
      if counts[i] then counts[i][label] = v end
      return
    end
    local b
    i, b, label = key:match("^h(%d+)\t(%d+)\t(.*)$")
    i = tonumber(i)
    if i and hist[i] then
      local by = hist[i][label] or {}
      hist[i][label] = by
      by[tonumber(b)] = v
    end
  end
  if dict then
    for _, key in ipairs(dict:get_keys(0)) do
      local v = dict:get(key)
      if type(v) == "number" then put(key, v) end
    end
  else
    for label, acc in pairs(worker) do
      for pos = 1, layout.width do put(layout.keys[pos] .. label, acc[pos]) end
    end
  end
  return counts, hist
end

return M
