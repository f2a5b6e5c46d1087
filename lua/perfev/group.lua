-- perfev.group{...}: events read together by one read(2) of their leader.
local core = require "perfev.core"
local spec = require "perfev.spec"

local FORMAT = core.FORMAT
local TIMES = FORMAT.TOTAL_TIME_ENABLED | FORMAT.TOTAL_TIME_RUNNING
local LEADER_FORMAT = FORMAT.GROUP | FORMAT.ID | TIMES
local MEMBER_FORMAT = FORMAT.ID | TIMES

local M = {}

local function close_all(events)
  for i = #events, 1, -1 do events[i]:close() end
end

-- perfev.group(specs, opts) -> group | nil, message, errno
-- opts: pid (0), cpu (-1), flags. The leader opens disabled, members enabled,
-- so that enabling the leader starts them all at once.
function M.new(specs, opts)
  opts = opts or {}
  assert(type(specs) == "table" and #specs > 0, "perfev.group: expected a list of event specs")
  local attrs, evnames = {}, {}
  for i, s in ipairs(specs) do
    attrs[i], evnames[i] = spec.attr(s)
    evnames[i] = evnames[i] or ("event" .. i)
    local a = attrs[i]
    a.read_format = (i == 1) and LEADER_FORMAT or MEMBER_FORMAT
    a.disabled = (i == 1)
  end
  local events = {}
  for i, a in ipairs(attrs) do
    local ev, msg, errno = spec.open(a, opts.pid or 0, opts.cpu or -1, events[1], opts.flags)
    if not ev then
      close_all(events)
      return nil, ("%s (group member %d, '%s')"):format(msg, i, evnames[i]), errno
    end
    ev:data().name = evnames[i]
    events[i] = ev
  end
  return core.group_reader(events, evnames)
end

local group = core.group_reader_methods

function group:leader() return self:members()[1] end

-- The member counting what event string s names (an alias such as "cs"
-- for "context-switches"): same type and config words.
local function member_like(m, s)
  local ok, a = pcall(spec.attr, s)
  if not ok then return nil end
  for i = 1, #m do
    local b = m[i]:attr()
    if b.type == a.type and b.config == a.config and b.config1 == a.config1
       and b.config2 == a.config2 then
      return m[i]
    end
  end
end

-- g:event(name or position) -> the member event; a name may be any
-- spelling of the member's event ("cs" for "context-switches").
function group:event(k)
  local m = self:members()
  if type(k) == "number" then return m[k] end
  local i = m.byname[k]
  if i then return m[i] end
  if type(k) == "string" then return member_like(m, k) end
end

function group:events()
  local m, list = self:members(), {}
  for i = 1, #m do list[i] = m[i] end
  return list
end

function group:names()
  local list = {}
  for i, ev in ipairs(self:events()) do list[i] = ev:name() end
  return list
end

function group:enable() return self:leader():enable(true) end
function group:disable() return self:leader():disable(true) end
function group:reset() return self:leader():reset(true) end

-- obj:measure(fn, ...) for events and groups: reset, enable, call,
-- disable (also when fn raises), then read.
function M.measure(obj, fn, ...)
  assert(obj:reset())
  assert(obj:enable())
  local ok, err = pcall(fn, ...)
  obj:disable()
  if not ok then error(err, 0) end
  return obj:read()
end

-- g:measure(fn, ...) -> the group's read
group.measure = M.measure

return M
