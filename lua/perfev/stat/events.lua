-- perfev.stat.events: the event list of a perf stat run. Each entry says
-- how perf stat names, scales and labels the event, and which of perf's
-- shadow statistics it feeds (for the derived metrics):
--   { name, spec (a perfev.parse table), unit, scale, kind, ctx, tool }
-- kind: "nsecs" (task-clock, cpu-clock), "cycles", "instructions",
-- "branches", "branch-misses", "cache-refs", "cache-misses",
-- "stalled-front", "stalled-back", "l1d", "l1d-miss", "l1i", "l1i-miss",
-- "ll", "ll-miss", "dtlb", "dtlb-miss", "itlb", "itlb-miss", or nil.
local perfev = require "perfev"

local M = {}

local TYPE, HW, SW = perfev.TYPE, perfev.HW, perfev.SW
local TYPE_HARDWARE, TYPE_SOFTWARE, TYPE_HW_CACHE = TYPE.HARDWARE, TYPE.SOFTWARE, TYPE.HW_CACHE

local HW_KIND = {
  [HW.CPU_CYCLES] = "cycles", [HW.INSTRUCTIONS] = "instructions",
  [HW.CACHE_REFERENCES] = "cache-refs", [HW.CACHE_MISSES] = "cache-misses",
  [HW.BRANCH_INSTRUCTIONS] = "branches", [HW.BRANCH_MISSES] = "branch-misses",
  [HW.STALLED_CYCLES_FRONTEND] = "stalled-front", [HW.STALLED_CYCLES_BACKEND] = "stalled-back",
}
-- cache ids of PERF_TYPE_HW_CACHE (the low byte of config); perf's shadow
-- statistics use the read accesses and the read misses only
local CACHE_KIND = { [0] = "l1d", [1] = "l1i", [2] = "ll", [3] = "dtlb", [4] = "itlb" }

-- Tool events: perf measures them itself, in nanoseconds.
local TOOL_UNIT = { duration_time = "ns", user_time = "ns", system_time = "ns" }

-- perf stat's default events (perf 6.1, builtin-stat.c): the stalled-cycles
-- events only when the cpu PMU lists them in sysfs, as perf checks.
local DEFAULT = {
  "task-clock", "context-switches", "cpu-migrations", "page-faults", "cycles",
  { "stalled-cycles-frontend", sysfs = "stalled-cycles-frontend" },
  { "stalled-cycles-backend", sysfs = "stalled-cycles-backend" },
  "instructions", "branches", "branch-misses",
}
M.SYSFS = "/sys/bus/event_source/devices/cpu/events/"

local function has_sysfs(name)
  local f = io.open(M.SYSFS .. name, "r")
  if f then f:close() return true end
  return false
end

-- default() -> the names of perf stat's default event set on this machine
function M.default()
  local out = {}
  for _, e in ipairs(DEFAULT) do
    if type(e) == "string" then out[#out + 1] = e
    elseif has_sysfs(e.sysfs) then out[#out + 1] = e[1] end
  end
  return out
end

local function byte(n, k)   -- byte k (0 = lowest) of a non-negative number
  return math.floor(n / 256 ^ k) % 256
end

local function kind_of(t)
  -- tonumber: LuaJIT may give config words as uint64_t cdata
  local ty, config = tonumber(t.type), tonumber(t.config)
  if not (ty and config) then return nil end
  if ty == TYPE_SOFTWARE and (config == SW.CPU_CLOCK or config == SW.TASK_CLOCK) then return "nsecs" end
  if ty == TYPE_HARDWARE then return HW_KIND[config] end
  if ty == TYPE_HW_CACHE then
    local cache, op, result = CACHE_KIND[byte(config, 0)], byte(config, 1), byte(config, 2)
    if cache and op == 0 and config < 2 ^ 24 then
      if result == 0 then return cache end
      if result == 1 then return cache .. "-miss" end
    end
  end
  return nil
end

-- perf's context bits: counts of different privilege filters are never
-- mixed in one metric
local function ctx_of(t)
  local c = {}
  for _, k in ipairs { "exclude_kernel", "exclude_user", "exclude_hv", "exclude_host", "exclude_idle" } do
    c[#c + 1] = t[k] and "1" or "0"
  end
  return table.concat(c)
end

-- The names as the user typed them, one per event of a list: perf names
-- an event by its own text ("cycles:u", "msr/tsc/"), a group's members
-- without the braces and the group's modifiers.
local function typed_names(s)
  local out, depth, slash, cur = {}, 0, false, {}
  local function flush()
    local name = table.concat(cur)
    if name ~= "" then out[#out + 1] = name end
    cur = {}
  end
  local skip_mods = false
  for i = 1, #s do
    local c = s:sub(i, i)
    if skip_mods then
      if c == "," then skip_mods = false end
    elseif c == "/" then
      slash = not slash
      cur[#cur + 1] = c
    elseif slash then
      cur[#cur + 1] = c
    elseif c == "{" then
      depth = depth + 1
    elseif c == "}" then
      depth = depth - 1
      flush()
      skip_mods = true      -- a group's ":u" belongs to no single name
    elseif c == "," then
      flush()
    elseif not c:match("%s") then
      cur[#cur + 1] = c
    end
  end
  flush()
  return out
end

local function entry(t, name)
  local e = { name = name or t.name, spec = t, kind = kind_of(t), ctx = ctx_of(t), tool = t.tool }
  if e.tool then
    e.unit, e.scale = TOOL_UNIT[e.tool] or "ns", 1
  elseif e.kind == "nsecs" then
    e.unit, e.scale = "msec", 1e-6     -- perf shows clock events in msec
  else
    e.unit, e.scale = t.unit or "", tonumber(t.scale) or 1
  end
  return e
end

-- parse(events) -> entries. events: nil (perf's default set), a string in
-- perf's grammar ("task-clock,page-faults", "{cycles,instructions}:u"),
-- or a list of strings and spec tables. Raises perfev.parse's error for
-- an unknown event.
function M.parse(events)
  if events == nil then events = M.default() end
  if type(events) == "string" then events = { events } end
  local out = {}
  for _, item in ipairs(events) do
    if type(item) == "string" then
      local list = perfev.parse_list(item)
      local names = typed_names(item)
      if #names ~= #list then names = {} end
      for i, t in ipairs(list) do out[#out + 1] = entry(t, names[i]) end
    elseif type(item) == "table" then
      out[#out + 1] = entry(item, item.name)
    else
      error(("perfev.stat: option 'events': an event is a string or a table, got %s"):format(type(item)), 0)
    end
  end
  return out
end

M.typed_names = typed_names
return M
