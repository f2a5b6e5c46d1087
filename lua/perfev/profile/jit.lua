-- The profiler's engine on LuaJIT with its compiler on: compiled traces run
-- no hooks, so the moments to sample come from LuaJIT's own sampler
-- (jit.profile: its timer; the VM stops at the next safe point and
-- materializes the frames of compiled traces), and perfev's event is the
-- weight: each jit.profile sample weighs what the event counted since the
-- one before it. The stack of a sample is read with debug.getinfo on the
-- thread jit.profile names, so frames are labelled as the hook engine
-- labels them (name, source, linedefined, running line); coroutines are
-- followed down the chain of resumers, as in the hook engine, through
-- coroutine.resume and coroutine.wrap replaced while profiling.
--
-- For the clocks the weight is the time between samples; for other events
-- counted this way the count lands on the stack running at the next timer
-- tick (profile.lua gives those events the hook engine on LuaJIT).
--
-- M.collector is the sampling half alone (a counter function gives the
-- weight), so it can be checked without a perf event.
local M = {}

local unpack = table.unpack or rawget(_G, "unpack")
local function pack(...) return { n = select("#", ...), ... } end

-- jit.profile runs one sampler per VM: one profiler at a time (per state).
local active

-- jit.profile's sampling interval for a frequency: whole milliseconds.
function M.interval_ms(freq)
  return math.max(1, math.floor(1000 / freq + 0.5))
end

-- vmstate -> a leaf frame for time spent outside Lua code
local STATES = { G = "[GC]", J = "[JIT compiler]" }

local MAX_FRAMES = 512
local NAME_LEVELS = 64

local function what_of(w)
  if w == "C" then return "C" end
  if w == "main" then return "main" end
  return "Lua"
end

-- A name for a function whose call gave none (called from C: a pcall'd
-- function, a sort comparator): the local or upvalue of a caller that
-- holds it, the outermost first (as csrc/profiler.c's find_name).
local function find_name(th, lv, fn)
  local top = lv
  while top < lv + NAME_LEVELS and debug.getinfo(th, top + 1, "l") do top = top + 1 end
  for up = top, lv + 1, -1 do
    for i = 1, 250 do
      local nm, v = debug.getlocal(th, up, i)
      if not nm then break end
      if v == fn and nm:sub(1, 1) ~= "(" then return nm end
    end
    local info = debug.getinfo(th, up, "f")
    local f = info and info.func
    if f then
      for i = 1, 250 do
        local nm, v = debug.getupvalue(f, i)
        if not nm then break end
        if v == fn and nm ~= "" then return nm end
      end
    end
  end
  return false
end

-- collector(jp, counter[, opts]) -> c with c:start(interval_ms), c:stop(),
-- c:read() giving what the hook engine's p:read() gives (frames, stacks,
-- samples, weight, unattributed). counter() returns the event's running
-- count. opts.main: the main thread (coroutine.running() is nil there on
-- LuaJIT), for the chain of resumers.
function M.collector(jp, counter, opts)
  opts = opts or {}
  local c = { frames = {}, byframe = {}, stacks = {}, bystack = {}, samples = 0, weight = 0,
              unattributed = 0, signals = 0, hooks = 0, lost = 0, truncated = 0,
              chain = {}, names = setmetatable({}, { __mode = "k" }) }
  local function frame_id(name, source, line, linedefined, what)
    local k = table.concat({ name or "", source, line, linedefined, what }, "\0")
    local id = c.byframe[k]
    if not id then
      id = #c.frames + 1
      c.frames[id] = { name = name or nil, source = source, line = line,
                       linedefined = linedefined, what = what }
      c.byframe[k] = id
    end
    return id
  end
  local function name_of(th, lv, d)
    if d.name or d.what ~= "Lua" then return d.name end
    local n = c.names[d.func]
    if n == nil then
      n = find_name(th, lv, d.func)
      c.names[d.func] = n
    end
    return n or nil
  end
  -- the frames of th (leaf first) from level `from` into ids
  local function walk(th, from, ids, relabel)
    for lv = from, math.huge do
      if #ids >= MAX_FRAMES - 1 then return true end
      local d = debug.getinfo(th, lv, "Slnf")
      if not d then return false end
      if relabel and lv == from then      -- our resume/wrap wrapper: shown as the C function
        ids[#ids + 1] = frame_id(d.name or relabel, "[C]", -1, -1, "C")
      else
        local what = what_of(d.what)
        ids[#ids + 1] = frame_id(name_of(th, lv, d), d.short_src, d.currentline,
                                 what == "C" and -1 or d.linedefined, what)
      end
    end
  end
  -- the level of fn on th's stack, or nil
  local function level_of(th, fn)
    for lv = 0, MAX_FRAMES do
      local d = debug.getinfo(th, lv, "f")
      if not d then return nil end
      if d.func == fn then return lv end
    end
  end
  local function on_sample(thread, samples, vmstate)
    local v = counter()
    local w = v - c.last
    c.last = v
    c.signals = c.signals + samples
    if w <= 0 and not opts.by_ticks then return end
    local ids = {}
    local state = STATES[vmstate]
    if state then ids[1] = frame_id(state, "", -1, -1, "C") end
    local full = walk(thread, 0, ids)
    -- down the chain of resumers: each below the wrapper that resumed
    local th = thread
    for i = #c.chain, 1, -1 do
      if full then break end
      local link = c.chain[i]
      if link.co == th then
        local lv = level_of(link.resumer, link.fn)
        if lv then full = walk(link.resumer, lv, ids, link.name) end
        th = link.resumer
      end
    end
    if full then
      ids[#ids + 1] = frame_id("[truncated]", "", -1, -1, "truncated")
      c.truncated = c.truncated + 1
    end
    local n = #ids
    for i = 1, math.floor(n / 2) do ids[i], ids[n + 1 - i] = ids[n + 1 - i], ids[i] end   -- root first
    local k = table.concat(ids, ",")
    local st = c.bystack[k]
    if not st then
      st = { weight = 0, samples = 0, ticks = 0 }
      for i, id in ipairs(ids) do st[i] = id end
      c.stacks[#c.stacks + 1] = st
      c.bystack[k] = st
    end
    st.weight, st.samples, st.ticks = st.weight + w, st.samples + 1, st.ticks + samples
    c.weight, c.samples, c.hooks = c.weight + w, c.samples + 1, c.hooks + 1
  end

  -- coroutine.resume and coroutine.wrap while profiling: they push the
  -- (coroutine, resumer, wrapper) link the sampler walks down
  local function running()
    return coroutine.running() or opts.main
  end
  local function push(co, fn, name)
    c.chain[#c.chain + 1] = { co = co, resumer = running(), fn = fn, name = name }
  end
  local function pop(...)
    c.chain[#c.chain] = nil
    return ...
  end
  function c.wrappers(resume, wrap)
    local function my_resume(co, ...)
      if type(co) ~= "thread" then return resume(co, ...) end
      push(co, my_resume, "resume")
      return pop(resume(co, ...))
    end
    local function my_wrap(f)
      local g = wrap(f)
      local _, co = debug.getupvalue(g, 1)    -- the wrap function's coroutine (5.1 to 5.4)
      if type(co) ~= "thread" then return g end   -- not what we know: left as it is
      local function wrapped(...)
        push(co, wrapped, "wrap")
        local r = pack(pcall(g, ...))
        pop()
        if not r[1] then error(r[2], 0) end
        return unpack(r, 2, r.n)
      end
      return wrapped
    end
    return my_resume, my_wrap
  end

  function c.start(_, interval)
    c.last = counter()
    c.unattributed = c.last        -- counted before the sampler started
    -- "f": function granularity. Without it the check for a pending
    -- sample sits where traces inline their callees, and samples pile up
    -- on the wrong function (1:3 measured as 5:95 here)
    jp.start("fi" .. interval, on_sample)
  end
  function c.stop()
    jp.stop()
    c.chain = {}
    local left = counter() - c.last
    if left > 0 then c.unattributed = c.unattributed + left end
  end
  -- opts.by_ticks: the event's count shared out by timer ticks (see M.new)
  local function by_ticks()
    local n, acc, given = c.signals, 0, 0
    if n == 0 then return end
    for _, st in ipairs(c.stacks) do
      acc = acc + st.ticks
      local upto = math.floor(acc * c.weight / n + 0.5)   -- cumulative: the sum stays exact
      st.weight = upto - given
      given = upto
    end
  end
  function c.read()
    if opts.by_ticks and not c.shared then by_ticks() c.shared = true end
    return { frames = c.frames, stacks = c.stacks, samples = c.samples, weight = c.weight,
             unattributed = c.unattributed, signals = c.signals, hooks = c.hooks, lost = 0,
             truncated = c.truncated, mode = "jit.profile" }
  end
  return c
end

local Engine = {}
Engine.__index = Engine

M.SIGPROF = 27           -- jit.profile's timer signal (setitimer ITIMER_PROF) on Linux

-- new{ event, freq | period } -> engine | nil, message, errno
function M.new(o)
  local ok, jp = pcall(require, "jit.profile")
  if not ok then
    error("perfev.profile: engine 'jit' needs LuaJIT's jit.profile (use engine = 'hook')", 3)
  end
  if o.native then
    -- the event counts here, it does not sample: no callchain to join
    error("perfev.profile: option 'native' needs the hook engine; on LuaJIT with the JIT on the clocks "
          .. "use jit.profile (engine 'jit'): profile an event counted at a boundary of user code "
          .. "(page-faults, context-switches, a tracepoint), or jit.off() and engine = 'hook'", 3)
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
  -- The clocks: the time counted is shared out by jit.profile's ticks,
  -- not given to the sample that ends each interval. A sample waits for
  -- the next function boundary of the code running (where a compiled
  -- trace checks for it), so its interval ends late, and later in long
  -- functions: weighing by interval gave a 1:3 workload 12:88.
  local e = setmetatable({ ev = ev, event_name = name, unit = clock and "nanoseconds" or "events",
                           by_ticks = clock,
                           freq = o.freq, period = o.period, interval = interval, jp = jp,
                           attr_type = a.type, attr_config = a.config }, Engine)
  return e
end

function Engine:start()
  local ev = self.ev
  self.c = M.collector(self.jp, function() return tonumber((ev:read())) or 0 end,
                       { main = require("perfev.core").profiler_thread(), by_ticks = self.by_ticks })
  active = self
  local co = coroutine
  self.saved = { resume = co.resume, wrap = co.wrap }
  local resume, wrap = self.c.wrappers(co.resume, co.wrap)
  rawset(co, "resume", resume)
  rawset(co, "wrap", wrap)
  self.mine = { resume = resume, wrap = wrap }
  ev:enable()
  self.c:start(self.interval)
end

function Engine:stop()
  if active ~= self then return end
  self.ev:disable()         -- first: what it counted is all shared out or unattributed
  self.c:stop()
  local co = coroutine
  for _, k in ipairs { "resume", "wrap" } do
    if co[k] == self.mine[k] then rawset(co, k, self.saved[k]) end   -- unless replaced meanwhile
  end
  active = nil
end

-- the signal jit.profile's timer uses while running (for the specs)
function Engine.signal() return M.SIGPROF end

function Engine:read()
  if not self.c then
    return { frames = {}, stacks = {}, samples = 0, weight = 0, unattributed = 0, signals = 0,
             hooks = 0, lost = 0, truncated = 0, mode = "jit.profile" }
  end
  return self.c:read()
end

function Engine:close()
  self:stop()
  self.ev:close()
end

return M
