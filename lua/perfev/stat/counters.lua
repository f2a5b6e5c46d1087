-- perfev.stat.counters: the counting events of a perf stat run, opened
-- through perfev.open on a list of tasks (every thread of a process, a
-- command's corked child, or this process), one event per entry and task,
-- and read back summed over the tasks. An event this machine lacks is kept
-- as unsupported (perf prints it "<not supported>"); perf's tool events
-- (duration_time, user_time, system_time) are measured by perfev.stat.
local perfev = require "perfev"

local M = {}

local S = {}
S.__index = S

-- errnos for which perf stat shows an event as "<not supported>" and goes
-- on: EINVAL, ENOSYS, ENOENT, EOPNOTSUPP, ENXIO, ENODEV
local UNSUPPORTED = { [22] = true, [38] = true, [2] = true, [95] = true, [6] = true, [19] = true }

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

-- open(entries, targets, flags) -> set | nil, message, errno, entry.
-- targets: tasks (a tid; 0: this process) or { pid = -1, cpu = N } for
-- a CPU (system-wide); flags: inherit, enable_on_exec.
function M.open(entries, tids, flags)
  local self = setmetatable({ items = {} }, S)
  for i, e in ipairs(entries) do
    local item = { entry = e, evs = {}, supported = true }
    self.items[i] = item
    if not e.tool then
      local spec = copy(e.spec)
      spec.disabled = true
      spec.inherit = flags.inherit and true or false
      spec.enable_on_exec = flags.enable_on_exec and true or false
      for _, tid in ipairs(tids) do
        local pid, cpu = tid, -1
        if type(tid) == "table" then pid, cpu = tid.pid, tid.cpu end
        local ev, msg, errno = perfev.open(spec, { pid = pid, cpu = cpu, name = e.name })
        if not ev then
          if UNSUPPORTED[errno] and #item.evs == 0 then
            item.supported, item.error = false, msg
            break
          end
          self:close()
          return nil, msg, errno, e
        end
        item.evs[#item.evs + 1] = ev
        if ev:data().fallback == "exclude_kernel" then item.user_only = true end
      end
    end
  end
  return self
end

function S:enable()
  for _, item in ipairs(self.items) do
    for _, ev in ipairs(item.evs) do ev:enable() end
  end
end

function S:disable()
  for _, item in ipairs(self.items) do
    for _, ev in ipairs(item.evs) do ev:disable() end
  end
end

-- read([members]) -> { [i] = { count, enabled, running } } summed over the
-- tasks, or over the targets whose indexes members lists (count: scaled
-- when multiplexed, false when no task's event ever ran)
function S:read(members)
  local out = {}
  for i, item in ipairs(self.items) do
    local count, ena, run = false, 0, 0
    local n = members and #members or #item.evs
    for j = 1, n do
      local ev = item.evs[members and members[j] or j]
      local v, e, r
      if ev then v, e, r = ev:read() end
      -- tonumber: plain numbers on every Lua (LuaJIT may give cdata)
      if v then count = (count or 0) + tonumber(v) end
      ena, run = ena + (tonumber(e) or 0), run + (tonumber(r) or 0)
    end
    out[i] = { count = count, enabled = ena, running = run }
  end
  return out
end

function S:close()
  for _, item in ipairs(self.items) do
    for _, ev in ipairs(item.evs) do ev:close() end
    item.evs = {}
  end
end

return M
