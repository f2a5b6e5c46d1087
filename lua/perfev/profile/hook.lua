-- The profiler's engine on Lua 5.3 and 5.4: the C core's (csrc/profiler/profiler.c).
-- The event samples 'period' alone into a small ring; each overflow sends a
-- signal to this thread that arms a one-shot Lua hook, which records the
-- stack weighted by the periods the ring holds. While it runs,
-- coroutine.resume and coroutine.wrap are replaced by versions that tell
-- the engine which coroutine runs (Lua hooks are per coroutine).
local perfev = require "perfev"
local core = require "perfev.core"
local cowrap = require "perfev.cowrap"
local spec = require "perfev.spec"

local M = {}

-- How the overflow reaches the thread. "rt": a real-time signal through
-- the fd (F_SETSIG), sent at once from the overflow. That is wrong for
-- events the kernel counts on its way through a page fault or a context
-- switch, which is every software event but the clocks, and tracepoints:
--  * a signal pending while a page fault is handled makes the kernel
--    abandon a fault that would wait (fault_signal_pending: a page under
--    I/O, the first touch of a special mapping) to deliver it; the access
--    is retried, faults again, is counted again, overflows again: with a
--    small period the thread never gets past the fault. (Before routing a
--    signal the core touches the pages perfev itself would fault on so,
--    the vDSO's clock pages and the ring's, csrc/profiler/profiler.c's warm_pages:
--    "rt" then counts a program's anonymous faults exactly, as the take
--    spec checks; a file page under I/O may still loop, not measured.)
--  * a signal sent at a switch out wakes the thread from the very sleep
--    being counted: every wake-up is one more switch (thousands a sleep).
-- "sigtrap" (attr.sigtrap) queues a SIGTRAP as task work, sent on the way
-- back to user space: after the fault is done, when the sleep is over.
-- The clocks keep the real-time signal, which a debugger leaves alone.
local TYPE_SOFTWARE, TYPE_TRACEPOINT, TYPE_BREAKPOINT = core.TYPE.SOFTWARE, core.TYPE.TRACEPOINT, core.TYPE.BREAKPOINT
local CLOCKS = { [core.SW.CPU_CLOCK] = true, [core.SW.TASK_CLOCK] = true }    -- periods in ns
local COOKIE = 0x70726f66                    -- attr.sig_data: "prof", tells our SIGTRAPs

function M.signal_mode(a, want)
  if want == "rt" or type(want) == "number" then return "rt" end
  if want == "sigtrap" then return "sigtrap" end
  if a.type == TYPE_TRACEPOINT or a.type == TYPE_BREAKPOINT
     or (a.type == TYPE_SOFTWARE and not CLOCKS[a.config]) then
    return "sigtrap"
  end
  return "rt"
end

local Engine = {}
Engine.__index = Engine

-- attr(o) -> attr, event name, unit: o.event sampling at o.period or
-- o.freq, disabled, each sample its period (and with o.native its
-- callchain, which perfev.profile.native symbolizes and joins under the Lua
-- frames); unit "nanoseconds" for the clocks, else "events". Both engines
-- (this one and perfev.profile.jit) open what it gives.
function M.attr(o)
  local a, name = spec.attr(o.event, "perfev.profile")   -- a new attr: ours to change
  a.disabled = true
  a.sample_type = o.native and { "period", "callchain" } or "period"
  if o.period then
    a.freq = false
    a.sample_period = o.period
  else
    a.freq = true
    a.sample_freq = o.freq
  end
  return a, name, (a.type == TYPE_SOFTWARE and CLOCKS[a.config]) and "nanoseconds" or "events"
end

-- new{ event, freq | period, signal, pages, native, max_cost } -> engine | nil, message, errno
function M.new(o)
  local a, name, unit = M.attr(o)
  local mode = M.signal_mode(a, o.signal)
  if mode == "sigtrap" then
    a.sigtrap, a.remove_on_exec, a.sig_data = true, true, COOKIE
  else
    a.wakeup_events = 1               -- a wakeup, so a signal, at every sample
  end
  local ev, msg, errno = perfev.open(a, { name = name })
  if not ev then return nil, msg, errno end
  local ring
  ring, msg, errno = ev:mmap(o.pages)
  if not ring then ev:close(); return nil, msg, errno end
  return setmetatable({ ev = ev, ring = ring, p = core.profiler(ev, ring, o.max_cost), signal = o.signal,
                        mode = mode, event_name = name, unit = unit, freq = o.freq,
                        period = o.period, attr_type = a.type, attr_config = a.config }, Engine)
end

function Engine:start()
  local p = self.p
  self.p:start(type(self.signal) == "number" and self.signal or nil)
  -- the running coroutine, for the signal handler
  self.wrapped = cowrap.install(p)
end

function Engine:stop()
  local ok, err = pcall(self.p.stop, self.p)
  cowrap.restore(self.wrapped)
  if not ok then error(err, 0) end
end

-- pause/resume: the event disabled in between (no overflow, no signal);
-- the samples left in the ring at pause are unattributed
function Engine:pause()
  self.ev:disable()
  self.p:discard()
end
function Engine:resume() self.ev:enable() end

-- the samples so far, and a new start for the next ones: one C call that
-- swaps the stacks out, so no sample lands between the read and the reset
-- LuaJIT's debug.getinfo names a function by the call that made the
-- frame below it: after a tail call, by the call of the function that made
-- the tail call. Its names are not the function's (perfev.profile.data
-- names Lua functions by their definition, and by these only on PUC Lua).
local CALL_NAMES = rawget(_G, "jit") and "unsure" or "sure"

function Engine:take()
  local r = self.p:take()
  r.mode, r.call_names = self.mode, CALL_NAMES
  return r
end

-- timeline(n): the latest n samples kept in time order (csrc/profiler/timeline.c);
-- timeline_read() -> { frames, stacks, time, stack, weight, samples, n, count, dropped }
function Engine:timeline(n) self.p:timeline(n) end
function Engine:timeline_read() return self.p:timeline_read() end

-- the signal the event's overflow sends while running
function Engine:signal() return self.p:read().signal end

function Engine:read()
  local r = self.p:read()
  r.mode, r.call_names = self.mode, CALL_NAMES
  return r
end

-- The profiler's own copy of the event's fd is closed here too: an event
-- left open (disabled) until the collector runs would be enabled again by
-- perfev.enable_all() (prctl), and its signal, with no handler any more,
-- would end the process (SIGTRAP, a real-time signal's default).
function Engine:close()
  self.p:stop()
  self.p:close()
  self.ring:close()
  self.ev:close()
end

return M
