-- perfev.group{...}: events read together by one read(2) of their leader.
--
-- One class for every group: kernel members are read by the C group reader
-- (core.group_reader: one read(2) refills the caller's table), tool events
-- (duration_time, user_time, system_time) are measured around it, and a
-- weak group (W) the kernel refused as a group reads its members one by
-- one. The methods and the result tables are the same in every case.
local core = require "perfev.core"
local compat = require "perfev.compat"
local spec = require "perfev.spec"
local open = require "perfev.open"
local tool = require "perfev.tool"
local options = require "perfev.options"
local measure = require "perfev.measure"

local M = {}

local FORMAT, SAMPLE = core.FORMAT, core.SAMPLE
local TIMES = FORMAT.TOTAL_TIME_ENABLED + FORMAT.TOTAL_TIME_RUNNING
-- read_format of every member, leader included, as perf stat sets it
local COUNT_FORMAT = TIMES + FORMAT.ID + FORMAT.GROUP
-- of every member of an S group (the leader's samples read the group), as
-- perf record sets it
local SAMPLE_FORMAT = FORMAT.ID + FORMAT.GROUP + FORMAT.LOST
-- of the members of a weak group opened apart: each read alone
local SPLIT_FORMAT = TIMES + FORMAT.ID

local Group = {}
Group.__index = Group
M.Group = Group

function M.is_group(g)
  return getmetatable(g) == Group
end

local OPTIONS = { pid = "integer|string", cpu = "integer", flags = "table|integer" }

-- The spec of member i, its error naming the member's position.
local function member_attr(s, i)
  local ok, a, name, t = pcall(spec.attr, s, "perfev.group")
  if not ok then
    options.raisef("perfev.group: member %d (%s): %s", i, options.describe(s), options.strip_where(a))
  end
  return a, name, t
end

-- The attrs of the members, as a group (grouped) or one by one; kernel
-- lists the kernel members' positions, tools the tool events'.
local function build(specs, grouped)
  local m = { attrs = {}, names = {}, kernel = {}, tools = {}, specs = {} }
  for i, s in ipairs(specs) do
    local a, name, t = member_attr(s, i)
    m.names[i] = name or ("event" .. i)
    m.specs[i] = t or {}
    if t and t.tool then
      m.tools[#m.tools + 1] = i
    else
      m.kernel[#m.kernel + 1] = i
      m.attrs[i] = a
    end
  end
  local lead = m.kernel[1] and m.specs[m.kernel[1]] or {}
  local sampling = grouped and lead.sample_read
  for k, i in ipairs(m.kernel) do
    local a, t = m.attrs[i], m.specs[i]
    if t.read_format == nil then
      a.read_format = not grouped and SPLIT_FORMAT or sampling and SAMPLE_FORMAT or COUNT_FORMAT
    end
    a.disabled = not grouped or k == 1
    if t.sample_read then a.inherit = false end
    if sampling then
      -- only the leader samples; a member reports through the leader's
      -- samples and takes its sample_type, unless it was given a period
      a.inherit = false
      if k > 1 then
        a.sample_type = compat.bor(m.attrs[m.kernel[1]].sample_type, SAMPLE.READ, SAMPLE.ID)
        if t.sample_period == nil and t.sample_freq == nil then
          a.sample_period, a.freq = 0, false
        end
      end
    end
  end
  return m
end

local function close_all(events)
  for i = #events, 1, -1 do events[i]:close() end
end

-- The kernel members, opened in order, each member with the first as its
-- leader when grouped.
local function open_members(m, opts, grouped)
  local events = {}
  for k, i in ipairs(m.kernel) do
    local t = m.specs[i]
    local ev, msg, errno = open.event(m.attrs[i], {
      pid = opts.pid, cpu = opts.cpu, flags = opts.flags, group = grouped and events[1] or nil,
      name = m.names[i], user_fallback = m.by_name[i], precise_max = t.precise_max })
    if not ev then
      close_all(events)
      return nil, ("%s (group member %d, '%s')"):format(msg, i, m.names[i]), errno
    end
    events[k] = ev
  end
  return events
end

local function new(m, members, reader, split)
  local byname = {}
  for i, n in ipairs(m.names) do
    if byname[n] == nil then byname[n] = i end
  end
  local g = setmetatable({ list = members, labels = m.names, byname = byname, kernel = m.kernel,
                           tools = m.tools, reader = reader, split = split,
                           -- the kernel members alone, grouped: C fills the results
                           direct = reader ~= nil and #m.tools == 0,
                           results = core.group_results(m.names), buf = {} }, Group)
  -- g:read(t) of such a group is one C call from the caller's line: its
  -- own `read`, the reader bound to g, which hands any other call (a bad
  -- self or t, a closed group) to Group.read below
  if g.direct then g.read = reader:bind(g, Group.read) end
  return g
end

-- perfev.group(specs | "{a,b}:u" string, opts) -> group | nil, message, errno
-- opts: pid (0), cpu (-1), flags. The leader opens disabled, members enabled,
-- so that enabling the leader starts them all at once. Modifiers on the
-- specs are honoured: S (sample_read): only the leader samples, and its
-- samples carry every member's count (read_format id|group|lost, as perf
-- record sets it); W (weak_group, on the leader): when the group cannot
-- open as a group, its members open one by one and g.split is true, as
-- perf does. Tool events are measured Lua-side beside the kernel group.
function M.new(specs, opts)
  local whole = type(specs) == "string"
  if whole then specs = require("perfev.parse").list(specs) end
  if type(specs) ~= "table" or #specs == 0 then
    options.raisef("perfev.group: expected a list of event specs or an event string, got %s",
                   type(specs) == "table" and "an empty table" or options.describe(specs))
  end
  opts = options.check(opts, OPTIONS, "perfev.group")
  -- members named by the user may fall back to user space (perfev.open's rule)
  local by_name = {}
  for i, s in ipairs(specs) do by_name[i] = whole or type(s) == "string" end
  local m = build(specs, true)
  m.by_name = by_name
  local events, msg, errno = open_members(m, opts, true)
  local split = false
  if not events and m.specs[m.kernel[1] or 1].weak_group then
    m = build(specs, false)
    m.by_name = by_name
    events, msg, errno = open_members(m, opts, false)
    split = true
  end
  if not events then return nil, msg, errno end
  local members, reader = {}, nil
  for k, i in ipairs(m.kernel) do members[i] = events[k] end
  if not split and #events > 0 then
    local knames = {}
    for k, i in ipairs(m.kernel) do knames[k] = m.names[i] end
    reader = core.group_reader(events, knames)
  end
  for _, i in ipairs(m.tools) do
    local t, tmsg, terrno = tool.new(m.specs[i].tool, { pid = opts.pid, name = m.names[i] })
    if not t then
      if reader then reader:close() else close_all(events) end
      return nil, ("%s (group member %d, '%s')"):format(tmsg, i, m.names[i]), terrno
    end
    members[i] = t
  end
  return new(m, members, reader, split)
end

---------------------------------------------------------------------------
-- methods

local function check(self, method)
  options.self(self, Group, "perfev.group", method)
  if self.is_closed then options.raise("perfev.group: attempt to use a closed group") end
end

-- the kernel members' counts into t (filled by Lua: tools or split)
local function read_kernel(self, t, raw)
  if self.reader then
    local r, msg, errno = self.reader:read(self.buf)
    if not r then return nil, msg, errno end
    for k, pos in ipairs(self.kernel) do
      t[pos], raw[pos] = r[k], r.raw[k]
    end
    t.time_enabled, t.time_running = r.time_enabled, r.time_running
    return true
  end
  for k, pos in ipairs(self.kernel) do
    local w, msg, errno = self.list[pos]:read_raw()
    if not w then return nil, msg, errno end
    local e, run = w.time_enabled, w.time_running
    t[pos] = run ~= 0 and core.scale(w.value, e, run)
    raw[pos] = w.value
    if k == 1 then t.time_enabled, t.time_running = e, run end
  end
  return true
end

-- g:read([t]) -> t: t[i] and t[name] the counts (false: never ran),
-- t.raw[i] the unscaled values, t.lost[i] (read_format lost),
-- t.time_enabled, t.time_running. A refill allocates nothing.
function Group:read(t)
  check(self, "read")
  if t ~= nil and type(t) ~= "table" then
    options.raisef("perfev.group: read takes a table to refill, got %s", options.describe(t))
  end
  if self.direct then return self.reader:read(t) end
  t = t or {}
  if getmetatable(t) == nil then setmetatable(t, self.results) end
  local raw = rawget(t, "raw")
  if type(raw) ~= "table" or raw == t then
    raw = {}
    t.raw = raw
  end
  local ok, msg, errno = read_kernel(self, t, raw)
  if not ok then return nil, msg, errno end
  for _, pos in ipairs(self.tools) do
    local v, e, r = self.list[pos]:read()
    t[pos], raw[pos] = v, v or 0
    if #self.kernel == 0 then t.time_enabled, t.time_running = e, r end
  end
  return t
end

-- each(method): the kernel group (one ioctl on its leader, for the whole
-- group) or every kernel member, and the tool events (before them when
-- enabling, after them otherwise).
local function each(self, method)
  -- the tools' clocks bracket the kernel's counts: started before the
  -- kernel events are enabled, stopped after they are disabled, so that
  -- duration_time is never shorter than a task-clock of one thread
  local tools_first = method == "enable"
  if tools_first then
    for _, pos in ipairs(self.tools) do self.list[pos][method](self.list[pos]) end
  end
  local function failed(msg, errno)
    if tools_first then   -- the kernel's counts did not start: nor do the tools'
      for _, pos in ipairs(self.tools) do self.list[pos]:disable() end
    end
    return nil, msg, errno
  end
  if self.reader then
    local lead = self.list[self.kernel[1]]
    local ok, msg, errno = lead[method](lead, true)
    if not ok then return failed(msg, errno) end
  else
    for _, pos in ipairs(self.kernel) do
      local ev = self.list[pos]
      local ok, msg, errno = ev[method](ev)
      if not ok then return failed(msg, errno) end
    end
  end
  if not tools_first then
    for _, pos in ipairs(self.tools) do self.list[pos][method](self.list[pos]) end
  end
  return true
end

function Group:enable() check(self, "enable") return each(self, "enable") end
function Group:disable() check(self, "disable") return each(self, "disable") end
function Group:reset() check(self, "reset") return each(self, "reset") end

-- g:measure(fn, ...) -> the group's read around fn(...)
function Group:measure(fn, ...)
  check(self, "measure")
  return measure(self, fn, ...)
end

-- g:close(): every member, the leader last (also __close)
function Group:close()
  options.self(self, Group, "perfev.group", "close")
  if self.is_closed then return true end
  self.is_closed = true
  for _, pos in ipairs(self.tools) do self.list[pos]:close() end
  if self.reader then return self.reader:close() end
  for k = #self.kernel, 1, -1 do self.list[self.kernel[k]]:close() end
  return true
end
Group.__close = Group.close

function Group:closed()
  options.self(self, Group, "perfev.group", "closed")
  return self.is_closed == true
end

-- g:leader() -> the first kernel member (nil when every member is a tool event)
function Group:leader()
  options.self(self, Group, "perfev.group", "leader")
  local pos = self.kernel[1]
  return pos and self.list[pos]
end

-- The member counting what event string s names (an alias such as "cs"
-- for "context-switches"): same tool, or same type and config words.
local function member_like(self, s)
  local ok, a, _, t = pcall(spec.attr, s)
  if not ok then return nil end
  if t and t.tool then
    for _, pos in ipairs(self.tools) do
      if self.list[pos].tool == t.tool then return self.list[pos] end
    end
    return nil
  end
  for _, pos in ipairs(self.kernel) do
    local b = self.list[pos]:attr()
    if b.type == a.type and b.config == a.config and b.config1 == a.config1 and b.config2 == a.config2 then
      return self.list[pos]
    end
  end
end

-- g:event(name or position) -> the member; a name may be any spelling of
-- the member's event ("cs" for "context-switches").
function Group:event(k)
  options.self(self, Group, "perfev.group", "event")
  if type(k) == "number" then
    if not options.is_integer(k) or k < 1 or k > #self.labels then
      options.raisef("perfev.group: event: a position must be an integer from 1 to %d, got %s", #self.labels,
                     options.describe(k))
    end
    return self.list[k]
  end
  if type(k) ~= "string" then
    options.raisef("perfev.group: event takes a name or a position, got %s", options.describe(k))
  end
  local i = self.byname[k]
  if i then return self.list[i] end
  return member_like(self, k)
end

-- g:events() -> a new list of the members, in order
function Group:events()
  options.self(self, Group, "perfev.group", "events")
  local list = {}
  for i = 1, #self.labels do list[i] = self.list[i] end
  return list
end

-- g:members() -> g:events(), with byname = { name = position }
function Group:members()
  options.self(self, Group, "perfev.group", "members")
  local list = self:events()
  list.byname = {}
  for k, v in pairs(self.byname) do list.byname[k] = v end
  return list
end

function Group:names()
  options.self(self, Group, "perfev.group", "names")
  local list = {}
  for i, n in ipairs(self.labels) do list[i] = n end
  return list
end

function Group:__tostring()
  options.self(self, Group, "perfev.group", "__tostring")
  return ("perfev.group(%s%s%s)"):format(table.concat(self.labels, ", "), self.split and ", split" or "",
                                        self.is_closed and ", closed" or "")
end

-- perfev.group is this module, called: perfev.group(specs, opts)
return setmetatable(M, { __call = function(_, specs, opts) return M.new(specs, opts) end })
