-- The profiler's engine on LuaJIT with its compiler on: compiled traces run
-- no hooks, so the samples are taken by LuaJIT's own sampler (jit.profile:
-- the VM stops at the next new line, where compiled traces
-- check for a pending sample, and materializes their frames), and
-- perfev's event is its clock and its weight: the event samples into a
-- small ring and each overflow is sent to this thread as SIGPROF, the
-- signal of jit.profile's own timer (which is set too slow to fire), so
-- that jit.profile takes a sample; the sample weighs the periods the ring
-- holds then. (jit.profile's timer is setitimer(ITIMER_PROF), checked at
-- the kernel's ticks: requests of a few ms in nginx got their samples late
-- in each request, 1:3 measured 4:96; the event's hrtimer is exact.)
--
-- The stack of a sample is read with debug.getinfo on the thread
-- jit.profile names, so frames are labelled as the hook engine labels them
-- (name, source, linedefined, running line); coroutines are followed down
-- the chain of resumers, as in the hook engine, through coroutine.resume
-- and coroutine.wrap replaced while profiling.
--
-- M.collector (a Collector, the sampling half alone: a weigh function
-- gives the weight) can be checked without a perf event.
local interrupt = require "perfev.interrupt"
local cowrap = require "perfev.cowrap"

local M = {}

local unpack = table.unpack or rawget(_G, "unpack")
local function pack(...) return { n = select("#", ...), ... } end


-- jit.profile's sampling interval for a frequency: whole milliseconds.
function M.interval_ms(freq)
  return math.max(1, math.floor(1000 / freq + 0.5))
end

-- vmstate -> a leaf frame for time spent outside Lua code
local STATES = { G = "[GC]", J = "[JIT compiler]" }

local MAX_FRAMES = 512
local STACK_EVERY, STACK_MARGIN = 256, 512 * 1024
local NAME_LEVELS = 64

local function what_of(w)
  if w == "C" then return "C" end
  if w == "main" then return "main" end
  return "Lua"
end

-- A name for a function by its value: the local or upvalue of a caller
-- that holds it, the outermost first (as csrc/profiler/profiler.c's find_name).
-- debug.getinfo's own name ("n") is not used: LuaJIT gives the name of the
-- call that made the frame below, which after a tail call is the call of
-- the function that made it (issue 19: every function of a parser named
-- `value`). Lua functions are named by their definition
-- (perfev.profile.data); this name is the one they get when it has none.
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

-- The C functions of the libraries loaded, by value: "byte", "insert",
-- "pcall" (the names PUC Lua's calls give them, found by what they are).
local library
local function library_name(fn)
  if not library then
    library = {}
    for _, lib in ipairs { "_G", "string", "table", "math", "io", "os", "coroutine", "debug", "bit", "jit" } do
      local t = package.loaded[lib]
      if type(t) == "table" then
        for k, v in pairs(t) do
          if type(v) == "function" and type(k) == "string" and library[v] == nil then library[v] = k end
        end
      end
    end
  end
  return library[fn]
end

-- weigher(counter) -> a weigh function over a running count: what was
-- counted since the call before.
function M.weigher(counter)
  local last = 0
  return function()
    local v = counter()
    local w = v - last
    last = v
    return w
  end
end

-- The sampling half: a Collector turns jit.profile's samples into the
-- raw profile the hook engine's p:read() gives (frames, stacks, samples,
-- weight, unattributed).
local Collector = {}
Collector.__index = Collector
M.Collector = Collector

-- collector(jp, weigh[, opts]) -> c with c:start(interval_ms), c:stop(),
-- c:read(), c:take(), c:pause(), c:resume(), c:wrappers(resume, wrap).
-- weigh() returns the event's weight since it was called last (and the
-- records lost meanwhile). opts.main: the main thread
-- (coroutine.running() is nil there on LuaJIT), for the chain of resumers.
-- opts.tag(thread) -> a string or nil: the sample's pprof labels
-- (perfev.resty.tags: its request's uri and trace id), kept apart in
-- stacks of their own (st.tags). opts.recorded(st): called with each
-- sample's stack (one of c.stacks) once it is recorded (perfev.alloc gives
-- it its pending blocks).
function M.collector(jp, weigh, opts)
  opts = opts or {}
  local c = setmetatable({ jp = jp, weigh = weigh, main = opts.main, dump = jp.dumpstack, chain = {},
                           tag_of = opts.tag, recorded = opts.recorded, clock = opts.clock,
                           stack_left = opts.stack_left,
                           names = setmetatable({}, { __mode = "k" }),
                           -- our resume/wrap closures -> label
                           wrappers_of = setmetatable({}, { __mode = "k" }),
                           -- the weight of the samples taken in the collector ([GC]) since
                           -- the start: not reset by c:take() (perfev.frames' gc-time)
                           gc_weight = 0 }, Collector)
  c:reset()
  return c
end

-- c:reset(): no samples yet (start, and after each take)
function Collector:reset()
  self.frames, self.byframe, self.stacks, self.bystack, self.bysig = {}, {}, {}, {}, {}
  -- the profile's frame ids and stacks start again
  if self.tl then self.tl.map, self.tl.of = {}, {} end
  self.truncates = {}
  self.samples, self.weight, self.unattributed, self.signals, self.hooks, self.lost, self.truncated =
    0, 0, 0, 0, 0, 0, 0
end

-- chunk: the whole source (debug.getinfo's, for a chunk loaded from a
-- string: its text), where perfev.profile.data reads the definition
function Collector:frame_id(name, source, line, linedefined, what, chunk)
  local k = table.concat({ name or "", source, line, linedefined, what }, "\0")
  local id = self.byframe[k]
  if not id then
    id = #self.frames + 1
    self.frames[id] = { name = name or nil, source = source, line = line,
                        linedefined = linedefined, what = what, chunk = chunk }
    self.byframe[k] = id
  end
  return id
end

-- a function's name by its value (found once per function)
function Collector:name_of(th, lv, d)
  if d.what == "main" then return nil end
  local n = self.names[d.func]
  if n == nil then
    n = (d.what == "C" and library_name(d.func)) or find_name(th, lv, d.func)
    self.names[d.func] = n
  end
  return n or nil
end

-- the frames of th (leaf first) from level `from` into ids; our
-- resume/wrap wrappers shown as the C function the user called. True
-- when the stack was cut at MAX_FRAMES.
function Collector:walk(th, from, ids)
  for lv = from, math.huge do
    if #ids >= MAX_FRAMES - 1 then return true end
    local d = debug.getinfo(th, lv, "Slf")
    if not d then return false end
    local wrapper = self.wrappers_of[d.func]
    if wrapper then
      ids[#ids + 1] = self:frame_id(wrapper, "[C]", -1, -1, "C")
    else
      local what = what_of(d.what)
      ids[#ids + 1] = self:frame_id(self:name_of(th, lv, d), d.short_src, d.currentline,
                                    what == "C" and -1 or d.linedefined, what,
                                    what == "Lua" and d.source or nil)
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

-- A sample's signature: jit.profile.dumpstack's string of the running
-- thread's frames and of each resumer's down the chain (function name
-- and running line of each level, built in C), with the VM state. The
-- same signature gives the same stack: debug.getinfo walks a stack the
-- first time its signature is seen; after that a sample costs the
-- signature and a table look-up, no table built.
function Collector:signature(thread, vmstate)
  -- Only the innermost MAX_FRAMES links of the chain: each adds a frame
  -- at least (its wrapper), so the stack is cut within them; the whole
  -- chain made a sample cost its depth squared (issue 20: 30,000 nested
  -- coroutine.wrap took over 60 s and 2.7 GB, 0.1 s unprofiled).
  local dump, chain = self.dump, self.chain
  local parts = { vmstate, dump(thread, "pfl\1", MAX_FRAMES) }
  for i = #chain, math.max(1, #chain - MAX_FRAMES + 1), -1 do
    parts[#parts + 1] = dump(chain[i].resumer, "pfl\1", MAX_FRAMES)
  end
  return table.concat(parts, "\2")
end

-- the frame ids of a sample's stack, root first, and whether it was cut:
-- the VM state's frame, the thread's, then down the chain of resumers,
-- each below the wrapper that resumed
function Collector:stack_ids(thread, vmstate)
  local ids = {}
  local state = STATES[vmstate]
  if state then ids[1] = self:frame_id(state, "", -1, -1, "C") end
  local full = self:walk(thread, 0, ids)
  local th = thread
  for i = #self.chain, 1, -1 do
    if full then break end
    local link = self.chain[i]
    if link.co == th then
      local lv = level_of(link.resumer, link.fn)
      if lv then full = self:walk(link.resumer, lv, ids) end
      th = link.resumer
    end
  end
  if full then
    ids[#ids + 1] = self:frame_id("[truncated]", "", -1, -1, "truncated")
  end
  local n = #ids
  for i = 1, math.floor(n / 2) do ids[i], ids[n + 1 - i] = ids[n + 1 - i], ids[i] end   -- root first
  return ids, full
end

-- the stack of these ids and labels (one table per distinct stack)
function Collector:stack_of(ids, tags)
  local k = table.concat(ids, ",")
  if tags then k = k .. "\3" .. tags end
  local st = self.bystack[k]
  if not st then
    -- the frame ids first, the counts set last: LuaJIT 2.1-20230119
    -- forwards a load from a constructor's table to the constructor's
    -- value after a key added in the same trace rehashed it (see
    -- perfev.report.callchain's node)
    st = {}
    for i, id in ipairs(ids) do st[i] = id end
    st.weight, st.samples, st.tags = 0, 0, tags
    self.stacks[#self.stacks + 1] = st
    self.bystack[k] = st
  end
  return st
end

-- records a sample of weight w: its stack, found by its signature
function Collector:record(thread, vmstate, w)
  local tags = self.tag_of and self.tag_of(thread)
  local sig = self.dump and self:signature(thread, vmstate)
  if sig and tags then sig = sig .. "\3" .. tags end
  local st = sig and self.bysig[sig]
  if st then
    if self.truncates[st] then self.truncated = self.truncated + 1 end
  else
    local ids, full = self:stack_ids(thread, vmstate)
    if full then self.truncated = self.truncated + 1 end
    st = self:stack_of(ids, tags)
    if sig then
      self.bysig[sig] = st
      if full then self.truncates[st] = true end
    end
  end
  st.weight, st.samples = st.weight + w, st.samples + 1
  self.weight, self.samples, self.hooks = self.weight + w, self.samples + 1, self.hooks + 1
  if vmstate == "G" then self.gc_weight = self.gc_weight + w end
  if self.tl then self:tl_add(st, w) end
  return st
end

-- c:timeline(n): the latest n samples kept in time order, each its time
-- (core.clock_ns(): CLOCK_MONOTONIC, as csrc/profiler/timeline.c), weight
-- and stack, interned in tables of the timeline's own (c:reset() starts
-- the profile's frame ids again). The slots are made here: a sample
-- allocates only when its stack is new to the timeline. 0: none.
function Collector:timeline(n)
  self.tl = nil
  if n <= 0 then return end
  local tl = { cap = n, count = 0, frames = {}, byframe = {}, stacks = {}, bystack = {}, map = {}, of = {},
               time = {}, weight = {}, samples = {}, stack = {}, now = self.clock or require("perfev.core").clock_ns }
  for i = 1, n do tl.time[i], tl.weight[i], tl.samples[i], tl.stack[i] = 0, 0, 0, 0 end
  self.tl = tl
end

-- the timeline's frame id of the profile's frame fid
function Collector:tl_frame(fid)
  local tl = self.tl
  local mine = tl.map[fid]
  if not mine then
    local f = self.frames[fid]
    local k = table.concat({ f.name or "", f.source, f.line, f.linedefined, f.what }, "\0")
    mine = tl.byframe[k]
    if not mine then
      mine = #tl.frames + 1
      tl.frames[mine] = f
      tl.byframe[k] = mine
    end
    tl.map[fid] = mine
  end
  return mine
end

-- the timeline's id of the profile's stack st (root first frame ids)
function Collector:tl_stack(st)
  local tl = self.tl
  local id = tl.of[st]
  if id then return id end
  local ids = {}
  for i = 1, #st do ids[i] = self:tl_frame(st[i]) end
  local k = table.concat(ids, ",")
  id = tl.bystack[k]
  if not id then
    id = #tl.stacks + 1
    tl.stacks[id] = ids
    tl.bystack[k] = id
  end
  tl.of[st] = id
  return id
end

function Collector:tl_add(st, w)
  local tl = self.tl
  if tl.busy then return end   -- c:timeline_read() runs (a sample in it)
  local slot = tl.count % tl.cap + 1
  tl.time[slot], tl.weight[slot], tl.samples[slot], tl.stack[slot] = tl.now(), w, 1, self:tl_stack(st)
  tl.count = tl.count + 1
end

-- c:timeline_read() -> { frames, stacks, time, stack, weight, samples (lists,
-- oldest first), n, count, dropped, capacity } (what the hook engine's gives)
function Collector:timeline_read()
  local out = { frames = {}, stacks = {}, time = {}, stack = {}, weight = {}, samples = {}, n = 0,
                count = 0, dropped = 0, capacity = 0 }
  local tl = self.tl
  if not tl then return out end
  tl.busy = true
  for i, f in ipairs(tl.frames) do out.frames[i] = f end
  for i, st in ipairs(tl.stacks) do
    local t = { weight = 0, samples = 0 }
    for j, id in ipairs(st) do t[j] = id end
    out.stacks[i] = t
  end
  local n = math.min(tl.count, tl.cap)
  local first = tl.count > tl.cap and tl.count % tl.cap or 0
  for i = 1, n do
    local slot = (first + i - 1) % tl.cap + 1
    out.time[i], out.weight[i], out.samples[i], out.stack[i] =
      tl.time[slot], tl.weight[slot], tl.samples[slot], tl.stack[slot]
  end
  out.n, out.count, out.dropped, out.capacity = n, tl.count, tl.count - n, tl.cap
  tl.busy = false
  return out
end

-- jit.profile's callback. What the event counts while a sample is
-- recorded is the profiler's own (the page faults of its tables, for
-- one): weighed when the sample is done and unattributed, not left in the
-- ring for the next sample to charge to its stack. (Each of those counts
-- sent a signal too: the sample that follows finds no weight and returns
-- at once.)
function Collector:on_sample(thread, samples, vmstate)
  if self.paused then return end          -- the event is disabled meanwhile: nothing counted
  if self.taking then return end          -- c:take(): the ring keeps the weight for the next sample
  local w, lost = self.weigh()
  self.lost = self.lost + (lost or 0)
  self.signals = self.signals + samples
  if w <= 0 then return end
  local st = self:record(thread, vmstate, w)
  if self.recorded then self.recorded(st) end
  local own
  own, lost = self.weigh()
  self.lost = self.lost + (lost or 0)
  if own > 0 then self.unattributed = self.unattributed + own end
end

-- coroutine.resume and coroutine.wrap while profiling: they push the
-- (coroutine, resumer, wrapper) link the sampler walks down
--
-- LuaJIT nests resumes on the C stack with no bound (80 bytes a
-- coroutine.wrap): past ~100,000 it crashes, profiled or not. Every
-- STACK_EVERY links the C stack left is checked, and a resume that would
-- leave less than STACK_MARGIN is refused with an error.
function Collector:push(co, fn)
  local n = #self.chain + 1
  if self.stack_left and n % STACK_EVERY == 0 then
    local left = self.stack_left()
    if left and left < STACK_MARGIN then
      require("perfev.options").raise(("perfev.profile: coroutines nested %d deep: %d KiB of the C stack "
        .. "left, refused (LuaJIT would crash further down)"):format(n, math.floor(left / 1024)))
    end
  end
  self.chain[n] = { co = co, resumer = coroutine.running() or self.main, fn = fn }
end

function Collector:wrappers(resume, wrap)
  local function pop(...)
    self.chain[#self.chain] = nil
    return ...
  end
  local function my_resume(co, ...)
    if type(co) ~= "thread" then return resume(co, ...) end
    self:push(co, my_resume)
    return pop(resume(co, ...))
  end
  local function my_wrap(f)
    local g = wrap(f)
    local _, co = debug.getupvalue(g, 1)    -- the wrap function's coroutine (5.1 to 5.4)
    if type(co) ~= "thread" then return g end   -- not what we know: left as it is
    local function wrapped(...)
      self:push(co, wrapped)
      local r = pack(pcall(g, ...))
      pop()
      if not r[1] then error(r[2], 0) end
      return unpack(r, 2, r.n)
    end
    self.wrappers_of[wrapped] = "wrap"
    return wrapped
  end
  self.wrappers_of[my_resume] = "resume"
  return my_resume, my_wrap
end

function Collector:start(interval)
  self.unattributed = self.weigh()       -- counted before the sampler started
  -- "l": line granularity: compiled traces check for a pending sample
  -- at each new line, not only at function entries ("f"), where the
  -- samples of a loop's end land on the next function called (1:3
  -- measured 27:73, and a coroutine's 6/7 as 80%; with "l": 25:75, 85%)
  self.jp.start("li" .. interval, function(thread, samples, vmstate) self:on_sample(thread, samples, vmstate) end)
end

function Collector:stop()
  local left = self.weigh()
  self.jp.stop()
  self.chain = {}
  if left > 0 then self.unattributed = self.unattributed + left end
end

-- c:pause(), c:resume(): samples dropped in between (the caller stops
-- the event's count meanwhile)
function Collector:pause() self.paused = true end

function Collector:resume()      -- what was left at pause: unattributed
  self.unattributed = self.unattributed + self.weigh()
  self.paused = false
end

-- c:take(): c:read() and c:reset() with no sample recorded in between
-- (jit.profile's callback can run at any line): a sample meanwhile
-- leaves its periods in the ring, weighed by the next one
function Collector:take()
  self.taking = true
  local r = self:read()
  self:reset()
  self.taking = false
  return r
end

function Collector:read()
  return { frames = self.frames, stacks = self.stacks, samples = self.samples, weight = self.weight,
           unattributed = self.unattributed, signals = self.signals, hooks = self.hooks, lost = self.lost,
           truncated = self.truncated, mode = "jit.profile", call_names = "sure" }
end

local Engine = {}
Engine.__index = Engine

M.SIGPROF = 27           -- jit.profile's timer signal (setitimer ITIMER_PROF) on Linux

-- new{ event, freq | period } -> engine | nil, message, errno
function M.new(o)
  local ok, jp = pcall(require, "jit.profile")
  if not ok then
    require("perfev.options").raise("perfev.profile: engine 'jit' needs LuaJIT's jit.profile (use engine = 'hook')")
  end
  if o.native then
    -- the event counts here, it does not sample: no callchain to join
    require("perfev.options").raise("perfev.profile: option 'native' needs the hook engine; on LuaJIT with "
          .. "the JIT on the clocks use jit.profile (engine 'jit'): profile an event counted at a boundary of "
          .. "user code (page-faults, context-switches, a tracepoint), or jit.off() and engine = 'hook'")
  end
  local perfev = require "perfev"
  local a, name, unit = require("perfev.profile.hook").attr(o)   -- o.native was refused above
  a.wakeup_events = 1               -- a wakeup, so a signal, at every sample
  local ev, msg, errno = perfev.open(a, { name = name })
  if not ev then return nil, msg, errno end
  local ring
  ring, msg, errno = ev:mmap(o.pages or 8)
  if not ring then ev:close() return nil, msg, errno end
  return setmetatable({ ev = ev, ring = ring, event_name = name, jp = jp,
                        unit = unit, freq = o.freq, period = o.period, max_cost = o.max_cost,
                        attr_type = a.type, attr_config = a.config }, Engine)
end

-- jit.profile's own timer, made too slow to fire: the event is the clock
local NO_TIMER_MS = 3600000

-- jp with its callback timed: each sample's cost (the callback, and a
-- signal's per sample) charged to budget, which lowers the event's rate
-- past its bound (csrc/profiler/budget.c)
--
-- Ctrl-C: luajit.c's SIGINT hook raises "interrupted!" at the next
-- instruction, also inside this callback, which LuaJIT calls unprotected
-- (an error there is a PANIC: the process died without its profile). It
-- is caught here. A hook set from here does not outlive the callback
-- (LuaJIT restores its hook state after it), and luajit.c's handler has
-- reset SIGINT to its default: kept (core.signal_keep, taken at start)
-- puts that handler back and sends SIGINT again 1 ms later, out of the
-- callback, where its hook raises "interrupted!" in the script
-- (doc/profile.md).
local function timed(jp, budget, kept)
  local now, charge = budget.now, budget.charge
  local function sample(cb, thread, samples, vmstate)
    local t0 = now(budget)
    cb(thread, samples, vmstate)
    charge(budget, t0, samples)
  end
  return setmetatable({ start = function(mode, cb)
    return jp.start(mode, function(thread, samples, vmstate)
      local ok, err = pcall(sample, cb, thread, samples, vmstate)
      if not ok then
        if not interrupt.is(err) then error(err, 0) end
        if kept then kept:again(1) end
      end
    end)
  end }, { __index = jp })
end

function Engine:start()
  local core = require "perfev.core"
  local ring = self.ring
  -- the samples' periods the ring holds, summed and consumed in C (no
  -- record tables), and the records lost
  local drain = core.profiler_drain
  self.gc_done = self:gc_weight()        -- a new collector: the weight so far kept
  self.budget = core.profiler_budget(self.ev, self.max_cost or 0)
  self.kept_sigint = core.signal_keep(2)   -- SIGINT's handler now (luajit.c's while a script runs)
  self.c = M.collector(timed(self.jp, self.budget, self.kept_sigint), function()
    local w, _, lost = drain(ring, self.budget)
    return w, lost
  end, { main = core.profiler_thread(), tag = self.tag, stack_left = core.stack_left })
  if self.timeline_n then self.c:timeline(self.timeline_n) end
  self.wrapped = cowrap.install(self.c)
  -- jit.profile's SIGPROF handler first, then the event's overflows sent
  -- as SIGPROF to this thread: each one asks jit.profile for a sample
  self.budget:start(ring)
  -- SIGPROF ignored under jit.profile, which keeps the disposition it finds
  -- and gives it back when it stops: lua_close stops it before the
  -- finalizers close the event, and a signal sent then, under the default,
  -- would end the process (a profile or perfev.frames running at exit)
  self.sigprof = core.signal_ignore(M.SIGPROF)
  self.c:start(NO_TIMER_MS)
  local ok, msg = core.profiler_route(self.ev, M.SIGPROF, ring)   -- its pages touched first
  if not ok then
    self:stop()
    error("perfev.profile: routing the event's signal: " .. tostring(msg), 0)
  end
  self.ev:enable()
  self.running = true
end

function Engine:stop()
  if not self.running then return end
  self.running = false
  -- a signal already on its way is taken inside this function: its
  -- sample would be attributed to stop itself; paused, the collector
  -- leaves its weight in the ring, and c:stop() counts it unattributed
  self.c:pause()
  -- the event stops before jit.profile gives SIGPROF back to its old
  -- handler (the default ends the process): a signal sent before the
  -- ioctl is taken on its way back, by jit.profile's handler. Through the
  -- budget's own fd: the event's may have been closed under the profiler
  -- (its signal would still come); where that fails, jit.profile's
  -- handler stays, taking the signals
  local quiet, msg = self.budget:quiesce()
  if not quiet then error("perfev.profile: stopping the event's signal: " .. tostring(msg), 0) end
  self.c:stop()
  if self.sigprof then self.sigprof:restore() self.sigprof = nil end
  cowrap.restore(self.wrapped)
end

-- timeline(n), timeline_read(): as the hook engine's (the collector's; a
-- start begins a new one)
function Engine:timeline(n)
  self.timeline_n = n
  if self.c then self.c:timeline(n) end
end
function Engine:timeline_read()
  if not self.c then return M.collector({}, function() return 0 end):timeline_read() end
  return self.c:timeline_read()
end

-- e:gc_weight() -> the weight of the samples taken in the collector
-- (vmstate G: the leaf [GC]) since the engine was made, every start's
-- (perfev.frames' gc-time: the differences between marks)
function Engine:gc_weight()
  return (self.gc_done or 0) + (self.c and self.c.gc_weight or 0)
end

-- the signal jit.profile's timer uses while running (for the specs)
function Engine.signal() return M.SIGPROF end

function Engine:pause()
  self.c:pause()
  self.ev:disable()
end

function Engine:resume()
  self.ev:enable()
  self.c:resume()
end

-- the samples so far, and a new start for the next ones
function Engine:take()
  if not self.c then return self:read() end
  return self.budget:read(self.c:take())
end

function Engine:read()
  if not self.c then
    return { frames = {}, stacks = {}, samples = 0, weight = 0, unattributed = 0, signals = 0,
             hooks = 0, lost = 0, truncated = 0, mode = "jit.profile" }
  end
  return self.budget:read(self.c:read())
end

function Engine:close()
  self:stop()
  if self.budget then self.budget:close() end   -- its copy of the fd (hook.lua's Engine:close)
  self.ring:close()
  self.ev:close()
end

return M
