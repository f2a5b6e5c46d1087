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
-- so that enabling the leader starts them all at once. Modifiers on the
-- specs are honoured: S (sample_read) members carry PERF_SAMPLE_READ and
-- inherit off, as perf sets them; W (weak_group, on the leader): when the
-- group cannot open as a group, its members open one by one and g.split is
-- true, as perf does. Tool events (duration_time, user_time, system_time)
-- are measured Lua-side beside the kernel group.
local function open_members(attrs, kernel, evnames, opts, grouped)
  local events = {}
  for k, i in ipairs(kernel) do
    local ev, msg, errno = spec.open(attrs[i], opts.pid or 0, opts.cpu or -1, grouped and events[1] or nil,
                                     opts.flags)
    if not ev then
      close_all(events)
      return nil, ("%s (group member %d, '%s')"):format(msg, i, evnames[i]), errno
    end
    ev:data().name = evnames[i]
    events[k] = ev
  end
  return events
end

-- The attrs of the kernel members, as a group (grouped) or one by one;
-- kernel lists their positions, tools the tool events' positions.
local function build(specs, grouped)
  local attrs, evnames, kernel, tools, lead = {}, {}, {}, {}, nil
  for i, s in ipairs(specs) do
    local a, name, t = spec.attr(s)
    evnames[i] = name or ("event" .. i)
    if t and t.tool then
      tools[#tools + 1] = i
    else
      kernel[#kernel + 1] = i
      attrs[i] = a
      lead = lead or t or {}
      a.read_format = (grouped and #kernel == 1) and LEADER_FORMAT or MEMBER_FORMAT
      a.disabled = not grouped or #kernel == 1
      if t and t.sample_read then a.inherit = false end
    end
  end
  return attrs, evnames, kernel, tools, lead or {}
end

function M.new(specs, opts)
  opts = opts or {}
  assert(type(specs) == "table" and #specs > 0, "perfev.group: expected a list of event specs")
  local attrs, evnames, kernel, tools, lead = build(specs, true)
  local events, msg, errno = open_members(attrs, kernel, evnames, opts, true)
  local split = false
  if not events and lead.weak_group then
    attrs = build(specs, false)
    events, msg, errno = open_members(attrs, kernel, evnames, opts, false)
    split = true
  end
  if not events then return nil, msg, errno end
  if #tools == 0 and not split then return core.group_reader(events, evnames) end
  local members, inner = {}, nil
  for k, i in ipairs(kernel) do members[i] = events[k] end
  if not split and #events > 0 then
    local knames = {}
    for k, i in ipairs(kernel) do knames[k] = evnames[i] end
    inner = core.group_reader(events, knames)
  end
  for _, i in ipairs(tools) do
    local t = assert(spec.tool_event(spec.tool(specs[i]), { pid = opts.pid, name = evnames[i] }))
    members[i] = t
  end
  return M.lua_group(members, evnames, kernel, tools, inner, split)
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

---------------------------------------------------------------------------
-- A group read in Lua: when tool events are members (measured around the
-- kernel group), or when a weak group opened its members one by one
-- (g.split). It has the methods of a kernel group; a read refills the
-- caller's table without allocating after the first one.
local LGroup = {}
LGroup.__index = LGroup
LGroup.measure = M.measure

-- lua_group(members, names, kernel, tools, inner, split): members[i] are
-- events or tool events in spec order; kernel and tools their positions;
-- inner the kernel group reader (nil when split or without kernel members).
function M.lua_group(members, evnames, kernel, tools, inner, split)
  local byname = {}
  for i, n in ipairs(evnames) do
    if byname[n] == nil then byname[n] = i end
  end
  local meta = { __index = function(t, k)
    local i = byname[k]
    return i and rawget(t, i) or nil
  end }
  return setmetatable({ m = members, evnames = evnames, kernel = kernel, tools = tools, inner = inner,
                        split = split or false, byname = byname, meta = meta, buf = {} }, LGroup)
end

-- the kernel members' counts into t
local function read_kernel(self, t, raw)
  if self.inner then
    local r, msg, errno = self.inner:read(self.buf)
    if not r then return nil, msg, errno end
    for k, pos in ipairs(self.kernel) do
      t[pos], raw[pos] = r[k], r.raw[k]
    end
    t.time_enabled, t.time_running = r.time_enabled, r.time_running
    return true
  end
  for k, pos in ipairs(self.kernel) do
    local w, msg, errno = self.m[pos]:read_raw()
    if not w then return nil, msg, errno end
    local e, run = w.time_enabled, w.time_running
    t[pos] = run ~= 0 and core.scale(w.value, e, run)
    raw[pos] = w.value
    if k == 1 then t.time_enabled, t.time_running = e, run end
  end
  return true
end

function LGroup:read(t)
  t = t or {}
  if getmetatable(t) == nil then setmetatable(t, self.meta) end
  local raw = rawget(t, "raw")
  if type(raw) ~= "table" or raw == t then
    raw = {}
    t.raw = raw
  end
  local ok, msg, errno = read_kernel(self, t, raw)
  if not ok then return nil, msg, errno end
  for _, pos in ipairs(self.tools) do
    local v, e, r = self.m[pos]:read()
    t[pos], raw[pos] = v, v or 0
    if #self.kernel == 0 then t.time_enabled, t.time_running = e, r end
  end
  return t
end

-- each(method): the kernel group (one ioctl on its leader) or every
-- member, then the tool events.
local function each(self, method)
  if self.inner then
    local ok, msg, errno = self.inner[method](self.inner)
    if not ok then return nil, msg, errno end
  else
    for _, pos in ipairs(self.kernel) do
      local ev = self.m[pos]
      local ok, msg, errno = ev[method](ev)
      if not ok then return nil, msg, errno end
    end
  end
  for _, pos in ipairs(self.tools) do self.m[pos][method](self.m[pos]) end
  return true
end

function LGroup:enable() return each(self, "enable") end
function LGroup:disable() return each(self, "disable") end
function LGroup:reset() return each(self, "reset") end

function LGroup:close()
  for _, pos in ipairs(self.tools) do self.m[pos]:close() end
  if self.inner then return self.inner:close() end
  for k = #self.kernel, 1, -1 do self.m[self.kernel[k]]:close() end
end
LGroup.__close = LGroup.close

function LGroup:leader() return self.m[self.kernel[1] or 1] end

function LGroup:event(k)
  if type(k) == "number" then return self.m[k] end
  local i = self.byname[k]
  return i and self.m[i]
end

function LGroup:events()
  local list = {}
  for i = 1, #self.evnames do list[i] = self.m[i] end
  return list
end

function LGroup:members()
  local list = self:events()
  list.byname = self.byname
  return list
end

function LGroup:names()
  local list = {}
  for i, n in ipairs(self.evnames) do list[i] = n end
  return list
end


return M
