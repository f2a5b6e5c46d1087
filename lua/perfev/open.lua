-- The one open path: perfev.open, perfev.group, perfev.sampler and
-- perfev.record all open their events here.
--
--   spec (name | table | attr) -> attr          perfev.spec
--   attr -> event, with perf's fallbacks        M.event
--   perfev.open(spec, opts)                     M.open
--
-- The kernel-size handshake (E2BIG: a kernel older than the attr perfev
-- builds) is the C core's, inside core.open. The fallbacks here are
-- perf's, tried in turn while the kernel refuses:
--   exclude_guest  EINVAL with exclude_guest/exclude_host set (a PMU such
--                  as msr refuses the bit perf's grammar sets by default):
--                  both cleared
--   read_lost      EINVAL with read_format LOST (kernels before 6.0):
--                  LOST cleared
--   exclude_kernel EACCES/EPERM on an event named by the user (not an
--                  attr given as is): user space only, as perf does at
--                  perf_event_paranoid 2
--   precise_ip     modifier P: precise_ip 3, 2, 1, 0 until one opens
-- Before the first attempt, perf record's rate check (M.check_rate): a
-- frequency above the kernel's perf_event_max_sample_rate (which the
-- kernel refuses, EINVAL) is lowered to it ("max_sample_rate" in
-- fallback), and a cpu-clock/task-clock period shorter than 1e9/max_rate
-- ns opens as asked; both say so through perfev's warning channel
-- (perfev.on_warning, lua/perfev/warn.lua).
-- Each fallback taken is recorded on the event, ev:data().fallback (the
-- names, comma-separated), and stays in the attr: a caller opening the
-- same attr again (the sampler, CPU after CPU) starts from it.
local core = require "perfev.core"
local spec = require "perfev.spec"
local tool = require "perfev.tool"
local options = require "perfev.options"
local fs = require "perfev.fs"
local warn = require "perfev.warn"
local compat = require "perfev.compat"

local M = {}

local E, FORMAT = core.ERRNO, core.FORMAT

local FALLBACKS = {
  { name = "exclude_guest",
    when = function(a, errno) return errno == E.EINVAL and (a.exclude_guest ~= 0 or a.exclude_host ~= 0) end,
    apply = function(a) a.exclude_guest, a.exclude_host = false, false end },
  { name = "read_lost",
    when = function(a, errno) return errno == E.EINVAL and compat.btest(a.read_format, FORMAT.LOST) end,
    apply = function(a) a.read_format = compat.band(a.read_format, compat.bnot(FORMAT.LOST)) end },
  { name = "exclude_kernel",
    when = function(a, errno, how)
      return (errno == E.EACCES or errno == E.EPERM) and how.user_fallback and a.exclude_kernel == 0
    end,
    apply = function(a) a.exclude_kernel, a.exclude_hv = true, true end },
}

local function note(how, name)
  how.taken = how.taken or {}
  for _, n in ipairs(how.taken) do
    if n == name then return end
  end
  how.taken[#how.taken + 1] = name
end

M.MAX_RATE_FILE = "/proc/sys/kernel/perf_event_max_sample_rate"
local CLOCKS = { [core.SW.CPU_CLOCK] = "cpu-clock", [core.SW.TASK_CLOCK] = "task-clock" }

-- check_rate(a, how): perf record's warnings for a rate above the
-- kernel's limit, once per `how` (the sampler opens one attr per CPU).
function M.check_rate(a, how)
  if how.rate_checked then return end
  how.rate_checked = true
  local freq = a.freq ~= 0
  local clock = not freq and a.type == core.TYPE.SOFTWARE and CLOCKS[a.config]
  if not (freq or clock) or a.sample_period == 0 then return end
  local max = tonumber((fs.read(M.MAX_RATE_FILE) or ""):match("%d+"))
  if not max or max == 0 then return end
  local what = how.name and ("event '" .. how.name .. "': ") or ""
  if freq and a.sample_freq > max then
    warn.emit(("%smaximum frequency rate (%.0f Hz) exceeded, throttling from %.0f Hz to %.0f Hz. The limit can "
               .. "be raised via %s; the kernel lowers it when perf's interrupts take too long")
              :format(what, max, a.sample_freq, max, M.MAX_RATE_FILE))
    a.sample_freq = max
    note(how, "max_sample_rate")
  elseif clock and a.sample_period < 1e9 / max then
    warn.emit(("%sa %s period of %.0f ns is a rate above the maximum (%.0f Hz, %s): the kernel throttles it and "
               .. "the sampled code runs many times slower; use a period of %.0f ns or more")
              :format(what, clock, a.sample_period, max, M.MAX_RATE_FILE, math.ceil(1e9 / max)))
  end
end

-- event(a, how) -> event | nil, message, errno. a: the attr (changed by
-- the fallbacks taken); how: pid (0), cpu (-1), group (the leader event),
-- flags, name (set on the event), user_fallback (the exclude_kernel
-- fallback is allowed), precise_max (modifier P). how.taken accumulates
-- the fallbacks taken, for the next open of the same attr.
function M.event(a, how)
  local pid, cpu = how.pid or 0, how.cpu or -1
  local first_msg, first_errno, stepped
  local tried = {}
  M.check_rate(a, how)
  while true do
    local ev, msg, errno = options.call(core.open, a, pid, cpu, how.group, how.flags)
    if ev then
      local data = ev:data()
      data.name = how.name
      if how.taken then data.fallback = table.concat(how.taken, ",") end
      return ev
    end
    first_msg, first_errno = first_msg or msg, first_errno or errno
    local fb
    for _, f in ipairs(FALLBACKS) do
      if not tried[f.name] and f.when(a, errno, how) then
        fb = f
        break
      end
    end
    if fb then
      tried[fb.name] = true
      fb.apply(a)
      note(how, fb.name)
    elseif how.precise_max and a.precise_ip > 0 then
      a.precise_ip = a.precise_ip - 1
      stepped = true
      note(how, "precise_ip")
    else
      if stepped then msg = msg .. " (precise_ip 3 down to 0 tried, for modifier P)" end
      -- the first refusal says what the user asked for; a precise step's
      -- last one says why the lowest level failed too
      if stepped then return nil, msg, errno end
      return nil, first_msg, first_errno
    end
  end
end

-- The attr perfev.open uses for a spec: events open disabled (members of a
-- group enabled, so that enabling their leader starts them: the kernel does
-- not reliably start a disabled member with its leader) and read their
-- enabled/running times, unless the spec says otherwise. An attr is used
-- as given.
local function open_attr(s, in_group)
  local a, name, t = spec.attr(s, "perfev.open")
  if type(s) ~= "userdata" then
    t = t or {}
    if t.disabled == nil then a.disabled = not in_group end
    if t.read_format == nil then
      a.read_format = compat.bor(a.read_format, FORMAT.TOTAL_TIME_ENABLED, FORMAT.TOTAL_TIME_RUNNING)
    end
  end
  return a, name, t
end

local OPTIONS = { pid = "integer|string", cpu = "integer", group = "event|table", flags = "table|integer",
                  name = "string" }

-- leader(g) -> the event that leads g: an event, or a group's leader
function M.leader(g, fname)
  if g == nil or options.is_event(g) then return g end
  local group = require "perfev.group"
  if group.is_group(g) then
    local lead = g:leader()
    if not options.is_event(lead) then
      options.raisef("%s: option 'group': the group has no kernel event to lead another", fname)
    end
    return lead
  end
  options.raisef("%s: option 'group' must be an event or a group, got %s", fname, options.describe(g))
end

-- perfev.open(spec, opts) -> event | nil, message, errno
-- opts: pid (0), cpu (-1), group (event or group), flags, name.
function M.open(s, opts)
  opts = options.check(opts, OPTIONS, "perfev.open")
  -- perf's tool events (duration_time, ...) are measured Lua-side
  local t = spec.tool(s)
  if t then return tool.new(t, { pid = opts.pid, name = opts.name }) end
  local leader = M.leader(opts.group, "perfev.open")
  local a, name, st = open_attr(s, leader ~= nil)
  return M.event(a, { pid = opts.pid, cpu = opts.cpu, group = leader, flags = opts.flags,
                      name = opts.name or name, user_fallback = type(s) == "string",
                      precise_max = st and st.precise_max })
end

-- perfev.open is this module, called: perfev.open(spec, opts)
return setmetatable(M, { __call = function(_, s, opts) return M.open(s, opts) end })
