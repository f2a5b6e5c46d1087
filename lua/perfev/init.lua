-- perfev: Linux perf events for Lua. `require "perfev"` gives the C core
-- (perfev.core) plus names, groups and conveniences built on it.
local core = require "perfev.core"
local names = require "perfev.names"
local group = require "perfev.group"
local spec = require "perfev.spec"

local M = {}
for k, v in pairs(core) do M[k] = v end
M._VERSION = "perfev 0.1.0"
M.names = names

local READ_TIMES = core.FORMAT.TOTAL_TIME_ENABLED | core.FORMAT.TOTAL_TIME_RUNNING

-- perfev.attr(spec): an attr from an attr, a table of fields or an event name.
function M.attr(s)
  return spec.attr(s)
end

-- The attr perfev.open uses for a spec: events open disabled (members of a
-- group enabled, so that enabling their leader starts them: the kernel does
-- not reliably start a disabled member with its leader) and read their
-- enabled/running times, unless the spec says otherwise.
local function open_attr(s, in_group)
  local a, name = spec.attr(s)
  if type(s) ~= "userdata" then
    local t = type(s) == "table" and s or {}
    if t.disabled == nil then a.disabled = not in_group end
    if t.read_format == nil then a.read_format = READ_TIMES end
  end
  return a, name
end

local function is_permission(errno)
  return errno == 1 or errno == 13   -- EPERM, EACCES
end

-- perfev.open(spec, opts) -> event | nil, message, errno
-- opts: pid (0), cpu (-1), group (event or group), flags, name.
function M.open(s, opts)
  opts = opts or {}
  -- perf's tool events (duration_time, ...) are measured Lua-side
  local tool = spec.tool(s)
  if tool then return spec.tool_event(tool, opts) end
  local a, name = open_attr(s, opts.group ~= nil)
  local leader = opts.group
  if type(leader) == "userdata" and leader.leader then leader = leader:leader() end
  local ev, msg, errno = spec.open(a, opts.pid or 0, opts.cpu or -1, leader, opts.flags)
  -- like perf: when the kernel refuses kernel-mode counting to this user,
  -- count user space only, and say so on the event
  if not ev and is_permission(errno) and type(s) == "string" and a.exclude_kernel == 0 then
    a.exclude_kernel, a.exclude_hv = true, true
    ev = core.open(a, opts.pid or 0, opts.cpu or -1, leader, opts.flags)
    if ev then ev:data().fallback = "exclude_kernel" end
  end
  if not ev then return nil, msg, errno end
  ev:data().name = opts.name or name
  return ev
end

local event = core.event_methods

-- ev:measure(fn, ...) -> count, enabled, running: reset, enable, call, disable.
event.measure = group.measure

-- perfev.group(specs | "{a,b}:u" string, opts)
function M.group(specs, opts)
  if type(specs) == "string" then specs = M.parse_list(specs) end
  return group.new(specs, opts)
end
M.spec = spec

-- perfev.parse(s) -> event table, or a list of them (see perfev/parse.lua)
M.parse = require("perfev.parse").parse
M.parse_list = require("perfev.parse").list
-- What a script may never use is loaded on first access, so that
-- `require "perfev"` stays cheap (start-up matters in OpenResty and games):
--   perfev.list([filter], [opts]) -> the events of this machine, like perf list
--   perfev.uprobe{ path, func | offset | addr, ret } / perfev.kprobe{ func | addr,
--     offset, ret } -> a spec table perfev.open takes (see perfev/probe.lua)
--   perfev.sampler(opts) -> a per-CPU sampling session over a task and its
--     children, or a command (see perfev/sampler.lua, doc/sampler.md)
--   perfev.record(opts) -> summary: sample into a perf.data file, like perf
--     record (see perfev/record.lua, doc/perfdata-write.md)
--   perfev.perfdata, perfev.perfmap: the modules
local LAZY = {   -- key -> module, and the field of it (nil: the module itself)
  list = { "perfev.list", "list" },
  uprobe = { "perfev.probe", "uprobe" }, kprobe = { "perfev.probe", "kprobe" },
  sampler = { "perfev.sampler" }, record = { "perfev.record", "record" },
  perfdata = { "perfev.perfdata" }, perfmap = { "perfev.perfmap" },
}
setmetatable(M, { __index = function(t, k)
  local where = LAZY[k]
  if not where then return nil end
  local v = require(where[1])
  if where[2] then v = v[where[2]] end
  rawset(t, k, v)
  return v
end })

return M
