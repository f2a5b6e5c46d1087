-- Tracepoint ids from tracefs: <tracefs>/events/<subsystem>/<event>/id, or
-- the "ID: N" line of the event's format file when it has no id file (the
-- ftrace subsystem's events: ftrace:bprint, ftrace:function ...), as perf
-- reads them.
-- tracefs is looked for at /sys/kernel/tracing, then /sys/kernel/debug/tracing
-- (or at the root given); errors name the missing mount or the permission.
local core = require "perfev.core"
local options = require "perfev.options"
local fs = require "perfev.fs"
local pmu = require "perfev.pmu"

local M = {}

M.ROOTS = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" }

-- root(given) -> the tracefs directory holding events/ | nil, message
function M.root(given)
  if given ~= nil then options.arg(given, "string", "perfev.tracepoint", "the tracefs root") end
  local roots = given and { given } or M.ROOTS
  for _, r in ipairs(roots) do
    if fs.isdir(r .. "/events") then return r end
  end
  for _, r in ipairs(roots) do
    if fs.isdir(r) and not fs.dir(r) then
      return nil, ("cannot read %s (permission denied? tracepoints need read access to tracefs: "
                   .. "run as root or adjust its mode)"):format(r)
    end
  end
  return nil, ("tracefs is not mounted (no events/ under %s): mount it with "
               .. "`mount -t tracefs nodev /sys/kernel/tracing`"):format(table.concat(roots, " or "))
end

local function has_glob(s) return s:find("[%*%?]") ~= nil end

-- id(subsystem, event, root) -> id | nil, message
function M.id(sys, name, root)
  local r, msg = M.root(root)
  if not r then return nil, msg end
  local path = ("%s/events/%s/%s/id"):format(r, sys, name)
  local s, _, errno = fs.read(path)
  if not s and errno ~= core.ERRNO.EACCES and errno ~= core.ERRNO.EPERM then
    local format
    format, _, errno = fs.read(("%s/events/%s/%s/format"):format(r, sys, name))
    s = format and format:match("\nID:%s*(%d+)") or format and format:match("^ID:%s*(%d+)")
    if format and not s then
      return nil, ("tracepoint '%s:%s' has no id file and its format file has no 'ID:' line"):format(sys, name)
    end
  end
  if not s then
    if errno == core.ERRNO.EACCES or errno == core.ERRNO.EPERM then
      return nil, ("cannot read %s: permission denied (tracepoints need read access to tracefs)"):format(path)
    end
    return nil, ("unknown tracepoint '%s:%s' (no %s)"):format(sys, name, path)
  end
  return tonumber(s)
end

-- subsystems(root) -> sorted list of subsystem names
function M.subsystems(root)
  local r, msg = M.root(root)
  if not r then return nil, msg end
  local list = {}
  for _, d in ipairs(fs.dir(r .. "/events") or {}) do
    if fs.isdir(r .. "/events/" .. d) then list[#list + 1] = d end
  end
  return list
end

-- events(subsystem, root) -> sorted list of event names in the subsystem
function M.events(sys, root)
  options.arg(sys, "string", "perfev.tracepoint.events", "the subsystem")
  local r, msg = M.root(root)
  if not r then return nil, msg end
  local list = {}
  local base = r .. "/events/" .. sys
  for _, d in ipairs(fs.dir(base) or {}) do
    if fs.exists(base .. "/" .. d .. "/id") or fs.exists(base .. "/" .. d .. "/format") then
      list[#list + 1] = d
    end
  end
  return list
end

-- expand(subsystem glob, event glob, root) -> list of { sys, name, id } | nil, message
-- Globs use * and ?. Without a glob the tracepoint must exist; with a
-- subsystem glob, an event name without a glob must exist in every
-- matching subsystem (as perf requires); an event glob must match at
-- least one event. Sorted by subsystem, then event name.
function M.expand(sys, name, root)
  options.arg(sys, "string", "perfev.tracepoint.expand", "the subsystem")
  options.arg(name, "string", "perfev.tracepoint.expand", "the event name")
  local r, msg = M.root(root)
  if not r then return nil, msg end
  if not has_glob(sys) and not has_glob(name) then
    local id, err = M.id(sys, name, r)
    if not id then return nil, err end
    return { { sys = sys, name = name, id = id } }
  end
  local systems = {}
  if has_glob(sys) then
    local pat = pmu.glob_pattern(sys)
    for _, s in ipairs(M.subsystems(r)) do
      if s:match(pat) then systems[#systems + 1] = s end
    end
  else
    systems[1] = sys
  end
  local list = {}
  local npat = pmu.glob_pattern(name)
  for _, s in ipairs(systems) do
    if has_glob(name) then
      for _, e in ipairs(M.events(s, r)) do
        if e:match(npat) then
          local id = M.id(s, e, r)
          if id then list[#list + 1] = { sys = s, name = e, id = id } end
        end
      end
    else
      local id, err = M.id(s, name, r)
      if not id then return nil, err end
      list[#list + 1] = { sys = s, name = name, id = id }
    end
  end
  if #list == 0 then
    return nil, ("unknown tracepoint '%s:%s' (no match under %s/events)"):format(sys, name, r)
  end
  return list
end

return M
