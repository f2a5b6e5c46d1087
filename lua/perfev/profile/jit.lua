-- The profiler's engine on LuaJIT: compiled traces run no hooks, so the
-- stacks come from LuaJIT's own sampler (jit.profile: its timer, and
-- jit.profile.dumpstack, which sees through traces), and perfev's event is
-- the weight: each jit.profile sample weighs what the event counted since
-- the one before it. For the clocks that is the time between samples;
-- for other events (page faults, context switches) the count lands on the
-- stack running at the next timer tick, not at the event itself -- the
-- difference from the hook engine, documented in doc/profile.md.
--
-- M.collector is the sampling half alone (no perfev event: a counter
-- function gives the weight), so it can be checked on LuaJIT by itself.
local M = {}

-- jit.profile's sampling interval for a frequency: whole milliseconds.
function M.interval_ms(freq)
  return math.max(1, math.floor(1000 / freq + 0.5))
end

-- One frame of dumpstack's "pl\1f\2" format: "path:line\1name".
local function parse_frame(s)
  local where, name = s:match("^(.-)\1(.*)$")
  if not where then return nil end
  local src, line = where:match("^(.*):(%d+)$")
  if name == "" then name = nil end
  if not src then                          -- a C function or a builtin: "[builtin#n]" or "[C]"
    return { name = name or where, source = "[C]", line = -1, linedefined = -1, what = "C" }
  end
  return { name = name, source = src, line = tonumber(line), linedefined = -1, what = "Lua" }
end

-- vmstate -> a leaf frame for time spent outside Lua code
local STATES = { G = "[GC]", J = "[JIT compiler]", C = nil }

-- collector(jp, counter) -> c with c:start(interval_ms), c:stop(), c:read()
-- giving what the hook engine's p:read() gives (frames, stacks, samples,
-- weight, unattributed). counter() returns the event's running count.
function M.collector(jp, counter)
  local c = { frames = {}, byframe = {}, stacks = {}, bystack = {}, samples = 0, weight = 0,
              unattributed = 0, signals = 0, hooks = 0, lost = 0, truncated = 0 }
  local function frame_id(f)
    local k = table.concat({ f.name or "", f.source, f.line, f.what }, "\0")
    local id = c.byframe[k]
    if not id then
      id = #c.frames + 1
      c.frames[id] = f
      c.byframe[k] = id
    end
    return id
  end
  local function on_sample(thread, samples, vmstate)
    local v = counter()
    local w = v - c.last
    c.last = v
    c.signals = c.signals + samples
    if w <= 0 then return end
    local dump = jp.dumpstack(thread, "pl\1f\2", -200)   -- root first
    local ids = {}
    for s in dump:gmatch("([^\2]+)\2") do
      local f = parse_frame(s)
      if f then ids[#ids + 1] = frame_id(f) end
    end
    local state = STATES[vmstate]
    if state then ids[#ids + 1] = frame_id { name = state, source = "", line = -1, linedefined = -1, what = "C" } end
    local k = table.concat(ids, ",")
    local st = c.bystack[k]
    if not st then
      st = { weight = 0, samples = 0 }
      for i, id in ipairs(ids) do st[i] = id end
      c.stacks[#c.stacks + 1] = st
      c.bystack[k] = st
    end
    st.weight, st.samples = st.weight + w, st.samples + 1
    c.weight, c.samples, c.hooks = c.weight + w, c.samples + 1, c.hooks + 1
  end
  function c.start(_, interval)
    c.last = counter()
    -- "f": function granularity. Without it the check for a pending
    -- sample sits where traces inline their callees, and samples pile up
    -- on the wrong function (1:3 measured as 5:95 here; with "f", 28:72)
    jp.start("fi" .. interval, on_sample)
  end
  function c.stop()
    jp.stop()
    local left = counter() - c.last
    if left > 0 then c.unattributed = c.unattributed + left end
  end
  function c.read()
    return { frames = c.frames, stacks = c.stacks, samples = c.samples, weight = c.weight,
             unattributed = c.unattributed, signals = c.signals, hooks = c.hooks, lost = 0,
             truncated = 0, mode = "jit.profile" }
  end
  return c
end

local Engine = {}
Engine.__index = Engine

-- new{ event, freq | period } -> engine | nil, message, errno
function M.new(o)
  local ok, jp = pcall(require, "jit.profile")
  if not ok then
    error("perfev.profile: engine 'jit' needs LuaJIT's jit.profile (use engine = 'hook')", 3)
  end
  local perfev = require "perfev"
  local a, name = require("perfev.spec").attr(o.event, "perfev.profile")
  a.disabled = true                 -- counting: the weight between two samples
  local ev, msg, errno = perfev.open(a, { name = name })
  if not ev then return nil, msg, errno end
  -- the clocks' period is nanoseconds; other events sample at 1 kHz
  local clock = a.type == 1 and (a.config == 0 or a.config == 1)
  local interval = o.freq and M.interval_ms(o.freq)
                   or (clock and math.max(1, math.floor(o.period / 1e6 + 0.5))) or 1
  local e = setmetatable({ ev = ev, event_name = name, unit = clock and "nanoseconds" or "events",
                           freq = o.freq, period = o.period, interval = interval,
                           attr_type = a.type, attr_config = a.config }, Engine)
  e.c = M.collector(jp, function() return (ev:read()) or 0 end)
  return e
end

function Engine:start()
  self.ev:enable()
  self.c:start(self.interval)
end

function Engine:stop()
  self.c:stop()
  self.ev:disable()
end

function Engine:read() return self.c:read() end

function Engine:close() self.ev:close() end

return M
