-- Event specs -> attrs: an attr userdata, a table of attr fields, or an
-- event string in perf's grammar (perfev.parse). Returns the attr, the
-- event's display name and the spec table (whose non-attr extras --
-- weak_group, sample_read, precise_max, tool -- perfev.open and
-- perfev.group honour). Opening is perfev.open's (lua/perfev/open.lua).
local core = require "perfev.core"
local compat = require "perfev.compat"
local names = require "perfev.names"
local parse = require "perfev.parse"
local options = require "perfev.options"

local M = {}

-- Fields of a spec table that are not attr fields (a parsed event's extras).
local EXTRA = parse.EXTRA

-- config = "cpu-clock": a generic event name gives config (and type).
local function resolve_config(fields, fname)
  local ev = names.byname[fields.config]
  if not ev then
    options.unknown(fname, "event name", fields.config, names.byname,
                    " for field 'config' (a generic event name; " .. names.WHERE .. ")")
  end
  local a = options.call(core.attr, { type = fields.type or ev.type })
  if a.type ~= ev.type then
    options.raisef("%s: field 'config': '%s' is a %s event, but type is %.0f", fname, fields.config,
                   ev.kind, a.type)
  end
  fields.type, fields.config = ev.type, ev.config
end

local function from_table(t, fname)
  local fields = {}
  for k, v in pairs(t) do
    if not EXTRA[k] then fields[k] = v end
  end
  if type(fields.config) == "string" then resolve_config(fields, fname) end
  local a = options.call(core.attr, fields)
  if t.precise_max and a.precise_ip == 0 then a.precise_ip = 3 end
  -- S: the sample carries the counts (PERF_SAMPLE_READ) and, as perf sets
  -- it, the id that tells whose counts they are
  if t.sample_read then
    a.sample_type = compat.bor(a.sample_type, core.SAMPLE.READ, core.SAMPLE.ID)
    a.read_format = compat.bor(a.read_format, core.FORMAT.ID)
  end
  if t.name ~= nil and type(t.name) ~= "string" then
    options.raisef("%s: field 'name' must be a string, got %s", fname, options.describe(t.name))
  end
  return a, t.name or names.name_of(a.type, a.config), t
end

-- One event from a string; a string naming several (a group, a list, a
-- glob) is for perfev.group or perfev.parse.
local function from_string(s, fname)
  local list = parse.list(s)
  if #list ~= 1 then
    options.raisef("%s: '%s' names %d events: open it with perfev.group, or pick one from perfev.parse",
                   fname, s, #list)
  end
  return from_table(list[1], fname)
end

-- attr(spec, fname) -> attr (a new one), name, spec table (nil for an attr
-- userdata). fname: the entry point named in errors ("perfev.attr").
function M.attr(s, fname)
  fname = fname or "perfev.attr"
  local kind = type(s)
  if kind == "string" then return from_string(s, fname) end
  if kind == "table" then return from_table(s, fname) end
  if kind == "userdata" then
    local a = options.call(core.attr, s)
    return a, names.name_of(a.type, a.config)
  end
  options.raisef("%s: an event is a name, a table of attr fields or an attr, got %s", fname,
                 options.describe(s))
end

-- tool(spec) -> the tool event a spec names (a string or a spec table), or nil
function M.tool(s)
  if type(s) == "table" then return s.tool end
  if type(s) == "string" and s:find("_time", 1, true) then
    local ok, list = pcall(parse.list, s)
    if ok and #list == 1 then return list[1].tool end
  end
  return nil
end

return M
