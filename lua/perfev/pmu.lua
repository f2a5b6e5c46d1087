-- PMUs from sysfs: /sys/bus/event_source/devices/<pmu>/{type,format/*,events/*}.
-- The sysfs root is a parameter (specs use fixture trees); PMUs are read
-- once per root and cached.
--
--   local pmu = require "perfev.pmu"
--   local p = pmu.get("cpu")            -- or pmu.get("cpu", "spec/fixtures/sysfs/devices")
--   p.type, p.formats.umask, p.events["mem-loads"]
--   local fields = {}
--   assert(pmu.set_term(p, "umask", 0x81, fields))   -- fields.config |= 0x81 << 8
local fs = require "perfev.fs"
local compat = require "perfev.compat"

local M = {}

M.ROOT = "/sys/bus/event_source/devices"

local cache = {}   -- root -> { names = list, pmus = name -> pmu | false }

-- A caller's value of the wrong kind, refused at its line naming the
-- function (perfev.options, loaded only then)
local function want(v, kind, fname, name)
  if type(v) ~= kind then require("perfev.options").arg(v, kind, "perfev.pmu." .. fname, name) end
end
local function not_pmu(p, fname)
  require("perfev.options").raisef("perfev.pmu.%s: expects a PMU (perfev.pmu.get's), got %s", fname, type(p))
end
local function want_root(root, fname)
  if root ~= nil then want(root, "string", fname, "the sysfs root") end
end

local function root_cache(root)
  want_root(root, "root")
  root = root or M.ROOT
  local c = cache[root]
  if not c then
    c = { pmus = {} }
    cache[root] = c
  end
  return c, root
end

-- Forget what was read (after a module load, or between fixture trees).
function M.reset(root)
  want_root(root, "reset")
  if root then cache[root] = nil else cache = {} end
end

-- names(root) -> sorted list of PMU names (empty when the root is missing)
function M.names(root)
  local c, r = root_cache(root)
  if not c.names then c.names = fs.dir(r) or {} end
  return c.names
end

-- parse_format("config1:0-7,32-35") -> { field = "config1", ranges = {{0,7},{32,35}}, bits = 12 }
function M.parse_format(s)
  want(s, "string", "parse_format", "the format")
  local field, spec = s:match("^%s*(config%d?):([%d,%-]+)%s*$")
  if not field then return nil, ("bad format '%s'"):format(s) end
  local ranges = fs.ranges(spec)
  if not ranges then return nil, ("bad format '%s'"):format(s) end
  local f = { field = field, ranges = ranges, bits = 0 }
  for _, r in ipairs(ranges) do
    if r[2] > 63 then return nil, ("bad format '%s'"):format(s) end
    f.bits = f.bits + r[2] - r[1] + 1
  end
  return f
end

local function load(root, name)
  local dir = root .. "/" .. name
  local type_s = fs.read(dir .. "/type")
  local ty = type_s and tonumber(type_s)
  if not ty then return false end
  local p = { name = name, type = ty, dir = dir, formats = {}, events = {}, event_names = {} }
  for _, f in ipairs(fs.dir(dir .. "/format") or {}) do
    local s = fs.read(dir .. "/format/" .. f)
    p.formats[f] = s and M.parse_format(s) or nil
  end
  local files = fs.dir(dir .. "/events") or {}
  local present = {}
  for _, f in ipairs(files) do present[f] = true end
  for _, f in ipairs(files) do
    if not f:find(".", 1, true) then
      local terms = fs.read(dir .. "/events/" .. f)
      if terms then
        local ev = { name = f, terms = terms }
        if present[f .. ".scale"] then
          ev.scale = tonumber(fs.read(dir .. "/events/" .. f .. ".scale"))
        end
        if present[f .. ".unit"] then ev.unit = fs.read(dir .. "/events/" .. f .. ".unit") end
        if present[f .. ".per-pkg"] then ev.per_pkg = fs.read(dir .. "/events/" .. f .. ".per-pkg") == "1" end
        if present[f .. ".snapshot"] then ev.snapshot = fs.read(dir .. "/events/" .. f .. ".snapshot") == "1" end
        p.events[f:lower()] = ev      -- aliases match case-insensitively, like perf
        p.event_names[#p.event_names + 1] = f
      end
    end
  end
  return p
end

-- get(name, root) -> pmu | nil: the PMU with exactly that name.
function M.get(name, root)
  want(name, "string", "get", "the name")
  local c, r = root_cache(root)
  local p = c.pmus[name]
  if p == nil then
    p = (not name:find("/", 1, true) and name ~= "." and name ~= "..") and load(r, name) or false
    c.pmus[name] = p
  end
  return p or nil
end

-- all(root) -> list of every PMU (sorted by name)
function M.all(root)
  local list = {}
  for _, n in ipairs(M.names(root)) do
    local p = M.get(n, root)
    if p then list[#list + 1] = p end
  end
  return list
end

local function glob_pattern(g)
  want(g, "string", "glob_pattern", "the glob")
  g = g:gsub("%*+", "*")   -- one star for a run: a run would backtrack for nothing
  return "^" .. g:gsub("[%^%$%(%)%%%.%[%]%+%-]", "%%%0"):gsub("%*", ".*"):gsub("%?", ".") .. "$"
end
M.glob_pattern = glob_pattern

-- match(word, root) -> list of PMUs a PMU name in an event string means:
-- the PMU of that exact name; else the uncore PMUs (names starting with
-- "uncore_", which may be left out) whose name is the word, the word
-- followed by _N, or matches the word as a glob (`*imc*`). Empty when none.
function M.match(word, root)
  want(word, "string", "match", "the word")
  local exact = M.get(word, root)
  if exact then return { exact } end
  local list = {}
  local pat = word:find("[%*%?]") and glob_pattern(word)
  for _, n in ipairs(M.names(root)) do
    local short = n:match("^uncore_(.+)$")
    if short then
      local base = short:match("^(.-)_%d+$")
      if short == word or base == word or (pat and (n:match(pat) or short:match(pat))) then
        local p = M.get(n, root)
        if p then list[#list + 1] = p end
      end
    end
  end
  return list
end

-- set_term(pmu, term, value, fields) -> true | nil, message
-- ORs value into the bits of the PMU's format term (perf's behaviour:
-- a term given twice ORs its values).
function M.set_term(p, term, value, fields)
  if type(p) ~= "table" or type(p.formats) ~= "table" then not_pmu(p, "set_term") end
  want(fields, "table", "set_term", "the fields")
  if not compat.isinteger(value) then
    require("perfev.options").arg(value, "integer", "perfev.pmu.set_term", "the value")
  end
  local f = p.formats[term]
  if not f then return nil, "unknown" end
  if f.bits < 64 and (value < 0 or compat.rshift(value, f.bits) ~= 0) then
    return nil, ("value too big for format '%s', maximum is %d"):format(term, (compat.lshift(1, f.bits)) - 1)
  end
  local v = value
  local field = fields[f.field] or 0
  for _, r in ipairs(f.ranges) do
    local width = r[2] - r[1] + 1
    local mask = width == 64 and -1 or (compat.lshift(1, width)) - 1
    field = compat.bor(field, compat.lshift(compat.band(v, mask), r[1]))
    v = width == 64 and 0 or compat.rshift(v, width)
  end
  fields[f.field] = field
  return true
end

-- hybrid(root) -> the hybrid core PMUs (cpu_core, cpu_atom), cpu_core
-- first; empty on other machines. As perf 6.1 decides it: a PMU whose name
-- starts with "cpu_" and whose `cpus` file lists CPUs.
function M.hybrid(root)
  local c, r = root_cache(root)
  if not c.hybrid then
    local list = {}
    for _, n in ipairs(M.names(root)) do
      local cpus = n:match("^cpu_") and fs.read(r .. "/" .. n .. "/cpus")
      local p = cpus and cpus:match("^%d") and M.get(n, root)
      if p then
        p.cpus = cpus
        list[#list + 1] = p
      end
    end
    table.sort(list, function(a, b) return a.name > b.name end)
    c.hybrid = list
  end
  return c.hybrid
end

-- event(pmu, name) -> the named event of the PMU (case-insensitive) | nil
function M.event(p, name)
  if type(p) ~= "table" or type(p.events) ~= "table" then not_pmu(p, "event") end
  want(name, "string", "event", "the name")
  return p.events[name:lower()]
end

-- find_event(name, root) -> list of { pmu, event } for a bare alias name
-- that some PMU's events/ directory defines.
function M.find_event(name, root)
  want(name, "string", "find_event", "the name")
  local list = {}
  for _, p in ipairs(M.all(root)) do
    local ev = M.event(p, name)
    if ev then list[#list + 1] = { pmu = p, event = ev } end
  end
  return list
end

return M
