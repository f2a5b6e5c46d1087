-- Event specs -> attrs: an attr userdata, a table of attr fields, or an
-- event name. Returns the attr and the event's display name.
local core = require "perfev.core"
local names = require "perfev.names"

local M = {}

local function known_names()
  local list = {}
  for _, kind in ipairs { names.hardware, names.software } do
    for _, row in ipairs(kind) do list[#list + 1] = row[1] end
  end
  return table.concat(list, ", ")
end

local function from_string(s)
  local ev = names.byname[s]
  if not ev then
    error(("perfev: unknown event '%s' at position 1 (known: %s)"):format(s, known_names()), 3)
  end
  return core.attr { type = ev.type, config = ev.config }, ev.name
end

-- Fields of a spec table that are not attr fields.
local EXTRA = { name = true }

-- config = "cpu-clock": a generic event name gives config (and type).
local function resolve_config(fields)
  local ev = names.byname[fields.config]
  if not ev then
    error(("perfev.attr: field 'config': unknown event name '%s' (known: %s)")
          :format(fields.config, known_names()), 4)
  end
  local a = core.attr { type = fields.type or ev.type }
  if a.type ~= ev.type then
    error(("perfev.attr: field 'config': '%s' is a %s event, but type is %d")
          :format(fields.config, ev.kind, a.type), 4)
  end
  fields.type, fields.config = ev.type, ev.config
end

local function from_table(t)
  local fields = {}
  for k, v in pairs(t) do
    if not EXTRA[k] then fields[k] = v end
  end
  if type(fields.config) == "string" then resolve_config(fields) end
  local a = core.attr(fields)
  return a, t.name or names.name_of(a.type, a.config)
end

function M.attr(s)
  local kind = type(s)
  if kind == "string" then return from_string(s) end
  if kind == "table" then return from_table(s) end
  if kind == "userdata" then
    local a = core.attr(s)
    return a, names.name_of(a.type, a.config)
  end
  error("perfev: an event spec is a name, a table of attr fields or an attr, got " .. kind, 3)
end

return M
