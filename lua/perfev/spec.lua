-- Event specs -> attrs: an attr userdata, a table of attr fields, or an
-- event string in perf's grammar (perfev.parse). Returns the attr, the
-- event's display name and the spec table (whose non-attr extras --
-- weak_group, sample_read, precise_max, tool -- perfev.open and
-- perfev.group honour).
--
-- Also perf's tool events (duration_time, user_time, system_time): perf
-- measures them itself, not through the kernel, and so does perfev with a
-- Lua-side pseudo-event (M.tool_event) that perfev.open and perfev.group use.
local core = require "perfev.core"
local names = require "perfev.names"
local parse = require "perfev.parse"
local fs = require "perfev.fs"

local M = {}

-- Fields of a spec table that are not attr fields (a parsed event's extras).
local EXTRA = parse.EXTRA

-- Attrs whose event asked for the maximum precise level (modifier P):
-- spec.open steps precise_ip down from 3 until the kernel accepts one.
local precise_max = setmetatable({}, { __mode = "k" })

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
  if t.precise_max and a.precise_ip == 0 then
    a.precise_ip = 3
    precise_max[a] = true
  end
  if t.sample_read then a.sample_type = a.sample_type | core.SAMPLE.READ end
  return a, t.name or names.name_of(a.type, a.config), t
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

-- attr(spec) -> attr, name, spec table (nil for an attr userdata)
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

-- One open, with perf's fallback for PMUs that refuse the exclude_guest
-- bit perf's grammar sets by default (msr, for one): on EINVAL with
-- exclude_guest or exclude_host set, retry once without them.
local function open_once(a, pid, cpu, group, flags)
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

-- open(attr, pid, cpu, group, flags) -> event | nil, message, errno:
-- core.open with the fallbacks above, and for a P event (precise_max)
-- precise_ip 3, 2, 1, 0 in turn until one opens (perf record's way of
-- finding the maximum precise level); the error is the last one's.
function M.open(a, pid, cpu, group, flags)
  if not precise_max[a] then return open_once(a, pid, cpu, group, flags) end
  local ev, msg, errno
  for level = a.precise_ip, 0, -1 do
    a.precise_ip = level
    ev, msg, errno = open_once(a, pid, cpu, group, flags)
    if ev then return ev end
  end
  return nil, msg .. " (precise_ip 3 down to 0 tried, for modifier P)", errno
end

---------------------------------------------------------------------------
-- tool events

-- Clocks: nanoseconds from the core. The wall clock is CLOCK_MONOTONIC,
-- as perf's duration_time; this process's CPU times come from getrusage
-- (microseconds), another's from /proc/<pid>/stat in clock ticks (USER_HZ,
-- 100 on Linux: 10 ms steps).
M.USER_HZ = 100

local function monotonic_ns() return core.clock_ns("monotonic") end

-- wall_clock() -> function returning nanoseconds, and the clock's name
function M.wall_clock()
  return monotonic_ns, "CLOCK_MONOTONIC"
end

-- cpu_times(pid) -> user ns, system ns (pid 0: this process)
local function cpu_times(pid)
  if pid == 0 then return core.rusage("self") end
  local path = ("/proc/%d/stat"):format(pid)
  local s, err = fs.read(path)
  if not s then return nil, err end
  -- the fields after the command name, which may hold spaces and parentheses
  local rest = s:match("^.*%)%s+(.*)$")
  local f, i = {}, 3
  for w in rest:gmatch("%S+") do
    f[i] = w
    i = i + 1
  end
  local tick = 1000000000 // M.USER_HZ
  return math.tointeger(f[14]) * tick, math.tointeger(f[15]) * tick
end

M.TOOLS = {
  duration_time = function() return M.wall_clock()() end,
  user_time = function(pid) return (cpu_times(pid)) end,
  system_time = function(pid) return select(2, cpu_times(pid)) end,
}

-- The pseudo-event: the methods of an event that counting uses.
local Tool = {}
Tool.__index = Tool

-- tool_event(name, opts) -> a tool event (opts: pid, name). Like an event
-- opened from a name it starts disabled; read() -> count, enabled,
-- running: count is the source's growth while enabled (false when it was
-- never enabled), enabled = running = wall-clock nanoseconds enabled.
function M.tool_event(tool, opts)
  opts = opts or {}
  local source = M.TOOLS[tool]
  if not source then error(("perfev: unknown tool event '%s'"):format(tool), 2) end
  local pid = opts.pid or 0
  if tool ~= "duration_time" and not cpu_times(pid) then
    return nil, ("perfev: %s: no process %d (/proc/%d/stat)"):format(tool, pid, pid), 3
  end
  return setmetatable({ tool = tool, source = function() return source(pid) end, wall = M.wall_clock(),
                        total = 0, wall_total = 0, ever = false, label = opts.name or tool }, Tool)
end

function Tool:check()
  if self.is_closed then error("perfev: attempt to use a closed event", 3) end
end

-- now() -> the source's value and the wall clock's, read once each (once
-- in all for duration_time, whose source is the wall clock)
function Tool:now()
  local w = self.wall()
  if self.tool == "duration_time" then return w, w end
  return self.source(), w
end

function Tool:enable()
  self:check()
  if not self.start then
    self.start, self.wall_start = self:now()
    self.ever = true
  end
  return true
end

function Tool:disable()
  self:check()
  if self.start then
    local v, w = self:now()
    self.total = self.total + (v - self.start)
    self.wall_total = self.wall_total + (w - self.wall_start)
    self.start = nil
  end
  return true
end

function Tool:reset()
  self:check()
  self.total, self.wall_total = 0, 0
  if self.start then self.start, self.wall_start = self:now() end
  return true
end

function Tool:read()
  self:check()
  if not self.ever then return false, 0, 0 end
  local v, w = self.total, self.wall_total
  if self.start then
    local nv, nw = self:now()
    v, w = v + (nv - self.start), w + (nw - self.wall_start)
  end
  return v, w, w
end

function Tool:read_raw()
  local v, e, r = self:read()
  return { value = v or 0, time_enabled = e, time_running = r }
end

function Tool:name() return self.label end
function Tool:close() self.is_closed, self.start = true, nil end
function Tool:closed() return self.is_closed == true end
function Tool:measure(fn, ...)
  assert(self:reset())
  assert(self:enable())
  local ok, err = pcall(fn, ...)
  self:disable()
  if not ok then error(err, 0) end
  return self:read()
end
Tool.__close = Tool.close
Tool.__tostring = function(self)
  return ("perfev.tool(%s%s)"):format(self.tool, self.is_closed and ", closed" or "")
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
