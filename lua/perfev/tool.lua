-- perf's tool events (duration_time, user_time, system_time): perf
-- measures them itself, not through the kernel, and so does perfev, with a
-- Lua-side pseudo-event that perfev.open and perfev.group return in their
-- place. It has the methods of an event that counting uses.
local core = require "perfev.core"
local fs = require "perfev.fs"
local options = require "perfev.options"
local measure = require "perfev.measure"
local show = require "perfev.show"

local M = {}

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
  local path = ("/proc/%.0f/stat"):format(pid)
  local s, err = fs.read(path)
  if not s then return nil, err end
  -- the fields after the command name, which may hold spaces and parentheses
  local rest = s:match("^.*%)%s+(.*)$")
  local f, i = {}, 3
  for w in rest:gmatch("%S+") do
    f[i] = w
    i = i + 1
  end
  local tick = math.floor(1000000000 / M.USER_HZ)
  return tonumber(f[14]) * tick, tonumber(f[15]) * tick
end

M.TOOLS = {
  duration_time = function() return monotonic_ns() end,
  user_time = function(pid) return (cpu_times(pid)) end,
  system_time = function(pid) return select(2, cpu_times(pid)) end,
}

local Tool = {}
Tool.__index = Tool
M.Tool = Tool

local function check(self, method)
  options.self(self, Tool, "perfev.tool", method)
  if self.is_closed then options.raise("perfev.tool: attempt to use a closed event") end
end

-- new(name, opts) -> a tool event | nil, message, errno (opts: pid, name).
-- Like an event opened from a name it starts disabled; read() -> count,
-- enabled, running: count is the source's growth while enabled (false when
-- it was never enabled), enabled = running = wall-clock nanoseconds enabled.
function M.new(tool, opts)
  opts = opts or {}
  local source = M.TOOLS[tool]
  if not source then options.unknown("perfev.open", "tool event", tool, M.TOOLS) end
  local pid = options.arg(opts.pid or 0, "integer", "perfev.open", "option 'pid' of a tool event")
  if tool ~= "duration_time" and not cpu_times(pid) then
    return nil, ("perfev: %s: no process %.0f (/proc/%.0f/stat)"):format(tool, pid, pid), core.ERRNO.ESRCH
  end
  return setmetatable({ tool = tool, source = function() return source(pid) end, wall = monotonic_ns,
                        total = 0, wall_total = 0, ever = false, label = opts.name or tool }, Tool)
end

-- now() -> the source's value and the wall clock's, read once each (once
-- in all for duration_time, whose source is the wall clock)
local function now(self)
  local w = self.wall()
  if self.tool == "duration_time" then return w, w end
  return self.source(), w
end

function Tool:enable()
  check(self, "enable")
  if not self.start then
    self.start, self.wall_start = now(self)
    self.ever = true
  end
  return true
end

function Tool:disable()
  check(self, "disable")
  if self.start then
    local v, w = now(self)
    self.total = self.total + (v - self.start)
    self.wall_total = self.wall_total + (w - self.wall_start)
    self.start = nil
  end
  return true
end

function Tool:reset()
  check(self, "reset")
  self.total, self.wall_total = 0, 0
  if self.start then self.start, self.wall_start = now(self) end
  return true
end

function Tool:read()
  check(self, "read")
  if not self.ever then return false, 0, 0 end
  local v, w = self.total, self.wall_total
  if self.start then
    local nv, nw = now(self)
    v, w = v + (nv - self.start), w + (nw - self.wall_start)
  end
  return v, w, w
end

function Tool:read_raw()
  check(self, "read_raw")
  local v, e, r = self:read()
  return show.reading({ value = v or 0, time_enabled = e, time_running = r })
end

function Tool:measure(fn, ...)
  check(self, "measure")
  return measure(self, fn, ...)
end

function Tool:name()
  options.self(self, Tool, "perfev.tool", "name")
  return self.label
end

function Tool:close()
  options.self(self, Tool, "perfev.tool", "close")
  self.is_closed, self.start = true, nil
  return true
end

function Tool:closed()
  options.self(self, Tool, "perfev.tool", "closed")
  return self.is_closed == true
end

Tool.__close = Tool.close

function Tool:__tostring()
  options.self(self, Tool, "perfev.tool", "__tostring")
  return ("perfev.tool(%s%s)"):format(self.tool, self.is_closed and ", closed" or "")
end

return M
