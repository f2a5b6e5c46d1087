-- perfev.attach: the Lua stacks of a process that is already running, on
-- any perf event, without a restart or a change to it. See doc/attach.md.
--
--   local perfev = require "perfev"
--   local p = assert(perfev.attach { pid = 1234, event = "cpu-clock", freq = 99, duration_ms = 10000 })
--   p:write("out.svg")          -- every format perfev.profile writes
--   print(p:report())
--
-- The engine (csrc/attach/tracer.c, attach/wait.c): every thread of the
-- target PTRACE_SEIZEd, a perf event per thread whose overflow signal is
-- that thread's own (a signal whose default action is to ignore), so that
-- each sample stops the thread where it was; the reader of its runtime
-- (perfev.attach.puc, perfev.attach.luajit: the first whose probe
-- recognises it) reads the Lua stack from its memory while it is stopped,
-- then the thread goes on, the signal suppressed. A sample's weight is
-- what the event counted on that thread since its previous sample.
local core = require "perfev.core"
local options = require "perfev.options"
local open = require "perfev.open"
local fs = require "perfev.fs"
local hook = require "perfev.profile.hook"
local profile = require "perfev.profile"
local interrupt = require "perfev.interrupt"
local target_mod = require "perfev.attach.target"

local M = {}

-- The readers, probed in this order.
M.READERS = { "perfev.attach.puc", "perfev.attach.luajit" }

-- The overflow signal: one whose default action is to ignore, so that one
-- still queued when perfev dies (even SIGKILL) does nothing to the target;
-- the first the target does not catch (SigCgt: a handler of its own would
-- run). One a thread blocks stays pending until it unblocks it (glibc
-- blocks every signal for a moment around posix_spawn): the sample is
-- taken then.
M.SIGNALS = { { 23, "SIGURG" }, { 28, "SIGWINCH" } }

M.DEFAULT_FREQ = 99
M.MIN_SWITCH_PERIOD = 3
M.NATIVE_PAGES = 8       -- ring data pages per thread with native = true

local OPTIONS = {
  pid = "positive", event = "spec", freq = "positive", period = "positive", duration_ms = "number",
  native = "boolean", name = "string", reader = "table", on_sample = "function",
}

local function raise(msg) options.raise("perfev.attach: " .. msg) end

-- The bit of signal sig in a /proc status mask (hex digits, sig 1 the lowest bit).
local function has_bit(hex, sig)
  local bit = sig - 1
  local digit = #hex - math.floor(bit / 4)
  if digit < 1 then return false end
  local v = tonumber(hex:sub(digit, digit), 16)
  return math.floor(v / 2 ^ (bit % 4)) % 2 == 1
end

-- signal(pid) -> signo, name | nil, message
function M.signal(pid)
  local s = fs.read(("/proc/%d/status"):format(pid))
  if not s then return nil, ("perfev.attach: no process %d"):format(pid) end
  local caught = s:match("SigCgt:%s*(%x+)")
  for _, sig in ipairs(M.SIGNALS) do
    if not (caught and has_bit(caught, sig[1])) then return sig[1], sig[2] end
  end
  return nil, ("perfev.attach: process %d catches SIGURG and SIGWINCH, the signals whose default "
               .. "action is to ignore: a sample's signal left queued if perfev died would reach "
               .. "its handler, so perfev does not attach"):format(pid)
end

-- probe(t [, reader]) -> state, reader name | nil, message: the first
-- reader that recognises the target's runtime; the message says what each
-- tried.
function M.probe(t, reader)
  local readers, why = {}, {}
  if reader then
    readers[1] = reader
  else
    for _, name in ipairs(M.READERS) do
      local ok, r = pcall(require, name)
      if ok then readers[#readers + 1] = r
      elseif tostring(r):find("module '" .. name .. "' not found", 1, true) then
        why[#why + 1] = name .. ": not installed"
      else why[#why + 1] = ("%s: %s"):format(name, tostring(r)) end
    end
  end
  for _, r in ipairs(readers) do
    local ok, state, msg = pcall(r.probe, t)
    if ok and state then return state, r.name end
    why[#why + 1] = ("%s: %s"):format(tostring(r.name), tostring(ok and msg or state))
  end
  return nil, ("perfev.attach: no Lua runtime recognised in process %d (%s): %s")
    :format(t.pid, tostring(t.exe), table.concat(why, "; "))
end

-- The path perfev reads a target's source from (short_src relative to the
-- target's working directory, through its root), as a chunk name.
local function chunk_of(t, source)
  local c = source:sub(1, 1)
  if c == "=" or c == "[" or source:sub(1, 3) == "..." or source == "" then return nil end
  local path = c == "/" and source or ((t.cwd or "") .. "/" .. source)
  if t.root and t.root ~= "/" then path = ("/proc/%d/root%s"):format(t.pid, path) end
  return "@" .. path
end

-- The raw profile the outputs are built from (perfev.profile.data):
-- frames interned, stacks merged.
local function new_raw()
  return { frames = {}, stacks = {}, fkeys = {}, skeys = {}, lost = 0 }
end

local function intern(raw, t, f)
  local k = table.concat({ f.what or "", f.name or "", f.source or "", tostring(f.line),
                           tostring(f.linedefined), tostring(f.ip) }, "\0")
  local id = raw.fkeys[k]
  if not id then
    id = #raw.frames + 1
    raw.frames[id] = { what = f.what, name = f.name, source = f.source, line = f.line or -1,
                       linedefined = f.linedefined or -1, ip = f.ip,
                       chunk = f.what ~= "C" and f.source and chunk_of(t, f.source) or nil }
    raw.fkeys[k] = id
  end
  return id
end

local function add_stack(raw, t, frames, weight, natives)
  local ids = {}
  for i, f in ipairs(frames) do ids[i] = intern(raw, t, f) end
  for _, f in ipairs(natives or {}) do ids[#ids + 1] = intern(raw, t, f) end
  local k = table.concat(ids, ",")
  local s = raw.skeys[k]
  if not s then
    s = { weight = 0, samples = 0 }
    for i, id in ipairs(ids) do s[i] = id end
    raw.stacks[#raw.stacks + 1] = s
    raw.skeys[k] = s
  end
  s.weight, s.samples = s.weight + weight, s.samples + 1
end

-- The native frames of a sample (native = true): the callchain of the last
-- sample record in the thread's ring, outermost first, as
-- perfev.profile.native takes them ({ what = "native" | "kernel", ip }).
-- The decoder gives the addresses without the PERF_CONTEXT_* markers, and
-- the segments they open in callchain_contexts ({ context = "user" |
-- "kernel" | ..., first, last }).

local function native_frames(rec)
  local chain, space = rec.callchain, {}
  for _, seg in ipairs(rec.callchain_contexts or {}) do
    local what = seg.context == "user" and "native" or "kernel"
    for i = seg.first, seg.last do space[i] = what end
  end
  local out = {}
  for i = #chain, 1, -1 do
    local ip = chain[i]
    out[#out + 1] = { what = space[i] or (ip < 0 and "kernel" or "native"), ip = ip }
  end
  return out
end

-- The session: the tracer, the events, the counts.
local Session = {}
Session.__index = Session

local CS = core.SW.CONTEXT_SWITCHES   -- each stop at a sample is one of its own

function Session:open_thread(tid)
  self.how.pid = tid
  local ev, msg, errno = open.event(self.attr, self.how)
  if not ev then
    -- a thread that exited meanwhile: not an error
    if errno == core.ERRNO.ESRCH then return true end
    return nil, msg, errno
  end
  if self.native then
    local ring
    ring, msg, errno = ev:mmap(M.NATIVE_PAGES)
    if not ring then ev:close() return nil, msg, errno end
    self.rings[tid] = ring
  end
  local ok
  ok, msg, errno = self.tracer:route(tid, ev)
  if not ok then
    if self.rings[tid] then self.rings[tid]:close() self.rings[tid] = nil end
    ev:close()
    return nil, msg, errno
  end
  ev:enable()
  self.events[tid] = ev
  self.last[tid] = 0
  self.threads = self.threads + 1
  return true
end

function Session:close()
  if self.tracer then self.tracer:close() end   -- first: detached while the events hold their fds
  for _, ring in pairs(self.rings) do ring:close() end
  self.rings = {}
  for _, ev in pairs(self.events) do ev:close() end
  self.events = {}
  if self.state and self.state.close then pcall(self.state.close, self.state) end
end

function Session:callchain(tid)
  local ring, chain = self.rings[tid], nil
  if not ring then return nil end
  for rec in ring:records() do
    -- a record's tables are the decoder's to reuse: read at once
    if rec.type == "sample" and rec.callchain then chain = native_frames(rec) end
  end
  return chain
end

-- One sample: the stack read while the thread is stopped, then it goes on.
function Session:sample(tid, regs, err)
  local ev = self.events[tid]
  local frames, why, kind
  local ok = true
  local t0, c0 = core.clock_ns("monotonic"), core.clock_ns("thread_cputime_id")
  self.target:hold()
  if regs then
    ok, frames, why, kind = pcall(self.state.stack, self.state, tid, regs)
    if not ok then frames, why, kind = nil, frames, "dropped" end
  else
    why, kind = err, "dropped"
  end
  self.tracer:resume(tid)
  self.target:flush()
  self.held_ns = self.held_ns + (core.clock_ns("monotonic") - t0)
  self.held_cpu_ns = self.held_cpu_ns + (core.clock_ns("thread_cputime_id") - c0)
  -- Ctrl-C (lua.c's hook) raised inside the reader ends the run as anywhere else
  if not ok and interrupt.is(why) then error(why, 0) end
  local natives = self.native and self:callchain(tid)
  local count = ev and ev:read() or 0
  if type(count) ~= "number" then count = 0 end
  local weight = count - (self.last[tid] or 0)
  self.last[tid] = count
  if self.own_switch then weight = weight - 1 end    -- the stop that took the sample
  if weight <= 0 then weight = 1 end
  self.counts.samples = self.counts.samples + 1
  if frames and #frames > 0 then
    add_stack(self.raw, self.target, frames, weight, natives)
    self.counts.stacks = self.counts.stacks + 1
  elseif kind == "outside" then
    self.counts.outside = self.counts.outside + 1
    -- with the native frames, a sample outside Lua is its native stack
    if natives and #natives > 0 then add_stack(self.raw, self.target, {}, weight, natives) end
  else
    self.counts.dropped = self.counts.dropped + 1
    local r = tostring(why or "no stack")
    self.reasons[r] = (self.reasons[r] or 0) + 1
  end
  if self.on_sample and self.on_sample(tid, frames, why, kind) == true then self.stop = true end
end

-- The loop: stop -> stack -> resume until the deadline, the target's end,
-- or Ctrl-C. Returns why it ended.
function Session:loop(duration)
  local clock = function() return core.clock_ns("monotonic") / 1e9 end
  local deadline = duration and clock() + duration
  while true do
    local left = deadline and (deadline - clock()) * 1000 or 200
    if left <= 0 then return "duration" end
    local kind, tid, a, b = self.tracer:wait(math.min(left, 200))
    if kind == "sample" then
      self:sample(tid, a, b)
      if self.stop then return "stopped" end
    elseif kind == "thread" then
      local ok, msg, errno = self:open_thread(tid)
      if not ok then return "error", msg, errno end
    elseif kind == "exit" then
      local ev, ring = self.events[tid], self.rings[tid]
      if ring then ring:close() self.rings[tid] = nil end
      if ev then ev:close() self.events[tid] = nil end
      if tid == self.target.pid and a then   -- the wait status of the process
        if a % 128 == 0 then self.exit_code = math.floor(a / 256) % 256
        else self.exit_signal = a % 128 end
      end
    elseif kind == "gone" then
      return "exited"
    elseif kind == "exec" then
      return "exec"
    end
    -- "timeout", "interrupted": Lua's hook (Ctrl-C under lua.c) runs here
  end
end

-- The engine perfev.profile's profiler object holds: the run is over
-- when perfev.attach returns it.
local Engine = {}
Engine.__index = Engine
local function over() raise("an attach profile has ended: call perfev.attach again") end
Engine.start, Engine.pause, Engine.resume, Engine.take = over, over, over, over
function Engine.stop() end
function Engine.close() end
function Engine:read() return self.raw end

-- symbolize(raw, pid) -> raw with the native frames named from the
-- target's maps (perfev.profile.native); a target gone meanwhile has no
-- maps to read: its native frames keep their addresses as names.
function M.symbolize(raw, pid)
  local ok, named = pcall(require("perfev.profile.native").symbolize, raw, pid)
  if ok then return named end
  for _, f in ipairs(raw.frames) do
    if f.ip and not f.name then
      f.name, f.source = ("[%s]"):format(require("perfev.compat").hex(f.ip)), "?"
    end
  end
  return raw
end

-- the name of the release before: every duration is in ms, and says so
local RENAMED = { duration = { "duration_ms", convert = function(s) return s * 1000 end, note = " (in ms, not s)" } }

local function check(opts)
  opts = options.check(options.renamed(opts, RENAMED, "perfev.attach"), OPTIONS, "perfev.attach")
  if not opts.pid then raise("option 'pid' is required (the process to attach to)") end
  if opts.freq and opts.period then raise("give 'freq' or 'period', not both") end
  if opts.duration_ms and opts.duration_ms <= 0 then
    raise("option 'duration_ms' must be a number of milliseconds above 0, got " .. tostring(opts.duration_ms))
  end
  if opts.pid == fs.own_pid() then
    raise(("option 'pid': %d is this process: perfev.profile profiles it"):format(opts.pid))
  end
  return opts
end

-- perfev.attach(opts) -> profiler | nil, message, errno
-- opts: pid, event ("cpu-clock"), freq (99 Hz) or period, duration_ms
-- (none: until the target exits or Ctrl-C; 'duration' in seconds is its
-- deprecated name), name, reader (a
-- reader module to use instead of probing), on_sample (fn(tid, frames,
-- why, kind) after each sample, kind "outside" or "dropped" when no
-- frames; returning true ends the run). The profiler is stopped: p:write, p:format,
-- p:report, p:profile as perfev.profile's; p.attach holds the counts:
-- { pid, exe, runtime, reader, states (the reader's: { { L, label } }), signal,
-- threads, samples, stacks, dropped,
-- outside, reasons (why -> count of the dropped), ended ("duration",
-- "exited", "exec", "interrupted", "stopped"), exit_code | exit_signal
-- (the target's, when it exited while attached), held_ns (the time the
-- sampled threads waited for perfev, from the stop's report to the resume:
-- the reader's reads and the registers; held_cpu_ns: the CPU time perfev's
-- thread spent meanwhile, which a loaded machine does not inflate) }.
function M.attach(opts)
  opts = check(opts)
  local pid = opts.pid
  local event = opts.event or profile.DEFAULT_EVENT
  local freq, period = opts.freq, opts.period
  if not freq and not period then
    freq, period = profile.default_rate(event)
    if freq then freq = M.DEFAULT_FREQ end   -- a running service: a lower default rate
  end
  local a, event_name, unit = hook.attr { event = event, freq = freq, period = period }
  a.wakeup_events = 1
  a.inherit = false
  -- the weight is the count read at each sample, not the record's period: a
  -- software event with sample_type PERIOD and a fixed period overflows at
  -- every event (the kernel reports each one's period, perf_swevent_event).
  -- native = true: each sample's callchain, from a small ring per thread
  a.sample_type = opts.native and "callchain" or 0
  local own_switch = a.type == core.TYPE.SOFTWARE and a.config == CS
  if own_switch and a.freq == 0 and a.sample_period < M.MIN_SWITCH_PERIOD then
    -- the stop at a sample is a switch of the thread, and the signal wakes a
    -- sleeping one, which sleeps again (a second switch): below a period of 3
    -- the thread would take samples of its own stops for as long as it sleeps
    a.sample_period = M.MIN_SWITCH_PERIOD
    period = M.MIN_SWITCH_PERIOD
  end
  local signo, signame = M.signal(pid)
  if not signo then return nil, signame, core.ERRNO[signame:find("no process") and "ESRCH" or "EBUSY"] end
  -- seized first: a refusal is the kernel's, with its reason
  local tracer, msg, errno = core.attach_tracer(pid, signo)
  if not tracer then return nil, msg, errno end
  local t
  t, msg = target_mod.new(pid)
  if not t then tracer:close() return nil, msg, core.ERRNO.ESRCH end
  local self = setmetatable({ tracer = tracer, target = t, events = {}, rings = {}, native = opts.native,
                              last = {}, threads = 0, held_ns = 0, held_cpu_ns = 0,
                              attr = a, event_name = event_name, own_switch = own_switch,
                              raw = new_raw(), reasons = {}, on_sample = opts.on_sample,
                              counts = { samples = 0, stacks = 0, dropped = 0, outside = 0 } }, Session)
  self.how = { name = event_name, user_fallback = type(event) == "string" }
  local ok, res, why, err = pcall(function()
    local state, rmsg = M.probe(t, opts.reader)
    if not state then return nil, rmsg, core.ERRNO.ENOENT end
    self.state, self.reader = state, rmsg
    for _, tid in ipairs(tracer:tids()) do
      local good, omsg, oerr = self:open_thread(tid)
      if not good then return nil, omsg, oerr end
    end
    local t0, c0 = os.time(), core.clock_ns("monotonic")
    local lok, ended, lmsg, lerr = pcall(self.loop, self, opts.duration_ms and opts.duration_ms / 1000)
    if lok and ended == "error" then return nil, lmsg, lerr end
    self.ended = lok and ended or (interrupt.is(ended) and "interrupted") or nil
    if not self.ended then error(ended, 0) end
    self.t0, self.elapsed = t0, core.clock_ns("monotonic") - c0
    return true
  end)
  self:close()
  if not ok then error(res, 0) end
  if not res then return nil, why, err end
  local raw = self.raw
  raw.fkeys, raw.skeys = nil, nil
  if opts.native then raw = M.symbolize(raw, pid) end
  local c = self.counts
  raw.attach = { pid = pid, exe = t.exe, runtime = self.state.runtime, reader = self.reader,
                 states = self.state.states,
                 signal = signame, threads = self.threads, samples = c.samples, stacks = c.stacks,
                 dropped = c.dropped, outside = c.outside, reasons = self.reasons, ended = self.ended,
                 exit_code = self.exit_code, exit_signal = self.exit_signal, held_ns = self.held_ns,
                 held_cpu_ns = self.held_cpu_ns }
  local e = setmetatable({ raw = raw, attr_type = a.type, attr_config = a.config }, Engine)
  local p = setmetatable({ engine = e, name = opts.name, event_name = event_name, unit = unit,
                           freq = freq, period = period, raw = raw, t0 = self.t0,
                           duration = self.elapsed, attach = raw.attach,
                           interrupted = self.ended == "interrupted" }, profile.Profiler)
  return p
end

-- perfev.attach is this module, called: perfev.attach(opts)
return setmetatable(M, { __call = function(_, opts) return M.attach(opts) end })
