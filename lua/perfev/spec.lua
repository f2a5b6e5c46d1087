-- Event specs -> attrs: an attr userdata, a table of attr fields, or an
-- event string in perf's grammar (perfev.parse). Returns the attr and the
-- event's display name.
local core = require "perfev.core"
local names = require "perfev.names"
local parse = require "perfev.parse"

local M = {}

-- Fields of a spec table that are not attr fields (a parsed event's extras).
local EXTRA = parse.EXTRA

-- config = "cpu-clock": a generic event name gives config (and type).
local function resolve_config(fields)
  local ev = names.byname[fields.config]
  if not ev then
    error(("perfev.attr: field 'config': unknown event name '%s' (known: %s)")
          :format(fields.config, names.known()), 4)
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

-- One event from a string; a string naming several (a group, a list, a
-- glob) is for perfev.group or perfev.parse.
local function from_string(s)
  local list = parse.list(s)
  if #list ~= 1 then
    error(("perfev: '%s' names %d events: open it with perfev.group, or pick one from perfev.parse")
          :format(s, #list), 3)
  end
  return from_table(list[1])
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

-- open(attr, pid, cpu, group, flags) -> event | nil, message, errno:
-- core.open, with perf's fallback for PMUs that refuse the exclude_guest
-- bit perf's grammar sets by default (msr, for one): on EINVAL with
-- exclude_guest or exclude_host set, retry once without them.
function M.open(a, pid, cpu, group, flags)
  local ev, msg, errno = core.open(a, pid, cpu, group, flags)
  if not ev and errno == 22 and (a.exclude_guest ~= 0 or a.exclude_host ~= 0) then
    local guest, host = a.exclude_guest, a.exclude_host
    a.exclude_guest, a.exclude_host = false, false
    ev = core.open(a, pid, cpu, group, flags)
    if ev then return ev end
    a.exclude_guest, a.exclude_host = guest, host
  end
  return ev, msg, errno
end

return M
