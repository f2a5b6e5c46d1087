-- perfev.profile: where Lua code spends a perf event -- time (cpu-clock,
-- task-clock), page faults, context switches, a tracepoint, a uprobe,
-- hardware events where there is a PMU -- by Lua function, with the stacks
-- weighted by the event's period. See doc/profile.md.
--
--   local perfev = require "perfev"
--   local p = perfev.profile { event = "cpu-clock", freq = 999 }
--   p:start() ; work() ; p:stop()
--   p:write("out.svg")                -- .folded .speedscope.json .pb.gz .data .txt
--   print(p:report())                 -- like perf report --stdio
--   local q = perfev.profile { fn = work, args = { 1, 2 } }   -- profiled at once
--
-- The engine is pluggable (perfev.profile.engines): "hook" (Lua 5.3/5.4, the
-- C core's signal-armed one-shot hook, csrc/profiler/profiler.c) and "jit" (LuaJIT,
-- whose compiled traces run no hooks: jit.profile's stacks weighted by the
-- event's count, lua/perfev/profile/jit.lua).
local core = require "perfev.core"
local options = require "perfev.options"
local data = require "perfev.profile.data"
local output = require "perfev.profile.output"
local warn = require "perfev.warn"

local unpack = table.unpack or rawget(_G, "unpack")
local function pack(...) return { n = select("#", ...), ... } end

local M = {}

M.engines = {
  hook = "perfev.profile.hook",
  jit = "perfev.profile.jit",
}
M.DEFAULT_EVENT = "cpu-clock"
M.DEFAULT_FREQ = 999
-- the share of the thread's CPU time the profiler's own work may take
-- before it lowers the rate (the kernel's perf_cpu_time_max_percent for
-- perf record's sampling interrupt): csrc/profiler/budget.c
M.DEFAULT_MAX_OVERHEAD = 25
-- timeline = true: the samples kept in time order (the latest ones)
M.DEFAULT_TIMELINE = 100000

local OPTIONS = {
  event = "spec", freq = "positive", period = "positive", fn = "function", args = "table",
  output = "string", signal = "string|positive", pages = "positive", engine = "string",
  name = "string", native = "boolean", max_overhead = "number", timeline = "boolean|positive",
}

local function fail(msg)
  options.raise("perfev.profile: " .. msg)
end

local function check(opts)
  opts = options.check(opts, OPTIONS, "perfev.profile")
  if opts.freq and opts.period then fail("give 'freq' or 'period', not both") end
  if opts.engine and not M.engines[opts.engine] then
    options.unknown("perfev.profile", "engine", opts.engine, M.engines, " (hook, jit)")
  end
  local mo = opts.max_overhead
  if mo and not (mo > 0 and mo <= 100) then
    fail("option 'max_overhead' must be a percentage above 0, at most 100 (no bound), got " .. tostring(mo))
  end
  local s = opts.signal
  if type(s) == "string" and s ~= "rt" and s ~= "sigtrap" then
    fail("option 'signal' must be \"rt\", \"sigtrap\" or a real-time signal number")
  end
  return opts
end

-- LuaJIT with its compiler on runs compiled traces without hooks: "jit"
-- (jit.profile's timer, the event as the weight) for the events that
-- happen anywhere in running code (the clocks, hardware events). Events
-- the kernel counts at a boundary of user code (page faults, context
-- switches, tracepoints: the hook engine's sigtrap mode) are delivered on
-- the way back to user space, where the hook engine's one-shot hook
-- attributes them to the stack that made them (at the end of the trace
-- running then): "hook" there too.
local function default_engine(event, signal)
  local jit = rawget(_G, "jit")
  if type(jit) == "table" and jit.status and jit.status() then
    local hook = require "perfev.profile.hook"
    local a = require("perfev.spec").attr(event, "perfev.profile")
    if hook.signal_mode(a, signal) == "sigtrap" then return "hook" end
    return "jit"
  end
  return "hook"
end

-- The rate when none is given: a frequency (999 Hz) for the events that
-- count time or run anywhere in code (the clocks, hardware events); a
-- period (1: every one) for those the kernel counts at a boundary of user
-- code (page faults, context switches, migrations, tracepoints,
-- breakpoints: the hook engine's sigtrap events). A frequency there
-- makes few samples of a sparse event: the kernel raises the period of
-- a burst of faults (-F 999: 34 samples where -c 1 gives 3,773). perf
-- record 6.1 gives page-faults -F 4000 and tracepoints period 1; the
-- bound on the profiler's cost (max_overhead) raises the period of an
-- event that fires too often.
M.DEFAULT_PERIOD = 1
local function default_rate(event)
  local a = require("perfev.spec").attr(event, "perfev.profile")
  if require("perfev.profile.hook").signal_mode(a) == "sigtrap" then return nil, M.DEFAULT_PERIOD end
  return M.DEFAULT_FREQ, nil
end
-- (the event's refusal, perfev.parse's or perfev.attr's, said as this function's)
function M.default_rate(event)
  local ok, freq, period = pcall(default_rate, event)
  if not ok then options.raise("perfev.profile.default_rate: " .. options.strip_where(freq)) end
  return freq, period
end

local Profiler = {}
Profiler.__index = Profiler

-- The profiler running in this Lua state. The hook engine's C half also
-- keeps one per thread (its signal handler's way in); LuaJIT's jit.profile
-- is one sampler per VM: one profiler at a time, whichever the engines.
local current

-- perfev.profile(opts) -> profiler | nil, message, errno
-- opts: event (default "cpu-clock"), freq or period (by default 999 Hz,
-- or period 1 for an event counted at a boundary of user code:
-- M.default_rate), max_overhead
-- (25: the percent of the thread's CPU time above which the rate is
-- lowered, 100 for no bound), signal ("rt",
-- "sigtrap" or a number), pages (ring data pages, 8), engine, name,
-- fn and args (profile fn at once and return the stopped profiler),
-- output (with fn: write the profile there), timeline (true or a number
-- of samples: the latest ones kept in time order with their stacks,
-- p:timeline(); M.DEFAULT_TIMELINE for true).
function M.profile(opts)
  opts = check(opts)
  local event = opts.event or M.DEFAULT_EVENT
  local engine = require(M.engines[opts.engine or default_engine(event, opts.signal)])
  local freq, period = opts.freq, opts.period
  if not freq and not period then freq, period = default_rate(event) end
  local e, msg, errno = engine.new {
    event = event,
    freq = freq,
    period = period, signal = opts.signal, pages = opts.pages or (opts.native and 128 or 8), native = opts.native,
    max_cost = (opts.max_overhead or M.DEFAULT_MAX_OVERHEAD) / 100,
  }
  if not e then return nil, msg, errno end
  local p = setmetatable({ engine = e, name = opts.name, native = opts.native, event_name = e.event_name,
                           unit = e.unit, freq = e.freq, period = e.period }, Profiler)
  if opts.timeline then
    p.timeline_n = opts.timeline == true and M.DEFAULT_TIMELINE or opts.timeline
    e:timeline(p.timeline_n)
  end
  if opts.fn then
    p:run(opts.fn, unpack(opts.args or {}))
    if opts.output then assert(p:write(opts.output)) end
  end
  return p
end

-- p:start() -> p. Raises when this or another profiler runs on this thread.
function Profiler:start()
  if self.running then fail("the profiler is running already") end
  if current and current.running then
    options.raise("perfev.profile: a profiler is running on this thread already (stop it first: one per thread)")
  end
  self.engine:start()
  current = self
  self.running = true
  self.t0 = os.time()
  self.clock0 = core.clock_ns("monotonic")
  self.result = nil
  self.warned = nil
  return self
end

-- Says once per run that the rate was lowered (perfev.warn's channel).
local function say_throttled(self, raw)
  if self.warned or (raw.throttled or 0) == 0 then return end
  self.warned = true
  warn.emit("perfev.profile: " .. data.throttle_note(raw))
end

-- p:stop() -> p (the samples are read out now).
function Profiler:stop()
  if not self.running then return self end
  self.running = false
  if self.paused then self.engine:resume() self.paused = false end
  self.engine:stop()
  self.duration = core.clock_ns("monotonic") - self.clock0
  local raw = self.engine:read()
  -- native frames are named now, while the files they are in are mapped
  if self.native then raw = require("perfev.profile.native").symbolize(raw) end
  self.raw = raw
  self.result = nil
  say_throttled(self, raw)
  return self
end

-- p:pause(), p:resume(): while running, the samples in between are
-- dropped (the event is disabled): profile some requests of a server and
-- not the others, the sampling clock going on (perfev.resty).
function Profiler:pause()
  if not self.running then fail("the profiler is not running") end
  if not self.paused then self.engine:pause() self.paused = true end
  return self
end

function Profiler:resume()
  if not self.running then fail("the profiler is not running") end
  if self.paused then self.engine:resume() self.paused = false end
  return self
end

-- p:take() -> the profile of the samples since start or the last take,
-- while running (best paused): the next take starts from here.
function Profiler:take()
  if not self.running then fail("the profiler is not running") end
  local raw = self.engine:take()
  say_throttled(self, raw)
  if self.native then raw = require("perfev.profile.native").symbolize(raw) end
  return data.build(raw, self:build_opts())
end

-- p:run(fn, ...) -> fn's results. The samples are fn's: frames below it
-- (the caller, this module) are left out. fn's error is raised again after
-- the profiler stopped (the profile is kept); p.traceback is then the
-- traceback where it was raised (a string error's), nil otherwise.
function Profiler:run(fn, ...)
  options.arg(fn, "function", "perfev.profile: run", "fn")
  -- the samples' frames below this function's xpcall are the caller's
  local info = debug.getinfo(1, "S")
  self.root = { source = info.short_src, linedefined = info.linedefined }
  self.traceback = nil
  local function keep_traceback(e)
    if type(e) == "string" then self.traceback = debug.traceback(e, 2) end
    return e
  end
  self:start()
  local res = pack(xpcall(fn, keep_traceback, ...))
  self:stop()
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, res.n)
end

-- p:profile() -> the profile: { stacks = { { frames, weight, samples } },
-- frames = { { name, source, line, linedefined, what, label, func } },
-- weight, samples, lost, event, unit, ... } (see perfev/profile/data.lua).
function Profiler:profile()
  if self.running then fail("stop the profiler before reading its profile") end
  if not self.raw then fail("the profiler has not run") end
  if not self.result then self.result = data.build(self.raw, self:build_opts()) end
  return self.result
end

function Profiler:build_opts()
  return { root = self.root, event = self.event_name, unit = self.unit, freq = self.freq,
           period = self.period, name = self.name, time = self.t0, duration = self.duration,
           attr_type = self.engine.attr_type, attr_config = self.engine.attr_config, namer = self.namer }
end

-- p:timeline_samples() -> the samples kept in time order, named as the
-- profile names them ({ time, weight, stack = { labels, root first } }),
-- and how many fell out of the ring (perfev.timeline.samples)
function Profiler:timeline_samples()
  if not self.timeline_n then fail("no timeline: give perfev.profile the option 'timeline'") end
  local raw = self.engine:timeline_read()
  if self.native then
    -- the samples' stacks renumbered as the stacks that became equal merged
    raw = require("perfev.profile.native").symbolize(raw)
    for k = 1, raw.n do raw.stack[k] = raw.into[raw.stack[k]] end
  end
  return require("perfev.timeline").samples(raw, self:build_opts()), raw.dropped
end

-- p:timeline() -> the samples in time order as a perfev.timeline (its
-- :write(path) writes Trace Event JSON or speedscope's evented profile):
-- the latest ones (option timeline), each its time, weight and stack.
function Profiler:timeline()
  local samples, dropped = self:timeline_samples()
  return require("perfev.timeline").new { name = self.name or ("perfev profile (%s)"):format(self.event_name),
                                          event = self.event_name, unit = self.unit, samples = samples,
                                          dropped = { samples = dropped, zones = 0 } }
end

-- p:write(path[, format]) -> true | nil, message, errno. The format from
-- the name (.svg .folded .speedscope.json .pb.gz .data .txt) or given.
function Profiler:write(path, format)
  return output.write(self:profile(), path, format)
end

-- p:format(fmt) -> the bytes of the profile in a format (not "perfdata").
function Profiler:format(fmt)
  return output.format(self:profile(), fmt)
end

-- p:report() -> text like perf report --stdio.
function Profiler:report()
  return output.format(self:profile(), "text")
end

function Profiler:close()
  if self.running then self:stop() end
  self.engine:close()
end
Profiler.__close = Profiler.close
Profiler.__gc = Profiler.close

function Profiler:__tostring()
  return ("perfev.profile(%s, %s)"):format(tostring(self.event_name), self.running and "running" or "stopped")
end

-- Every method checks its self first (one called with '.' gets its first
-- argument as self: p.stop("x") returned "x", p.start() indexed nil).
for name, fn in pairs(Profiler) do
  if type(fn) == "function" then
    Profiler[name] = function(self, ...)
      options.self(self, Profiler, "perfev.profile", name)
      return fn(self, ...)
    end
  end
end

M.Profiler = Profiler
M.formats = output.FORMATS
M.format_of = output.format_of

-- perfev.profile is this module, called: perfev.profile(opts); its other
-- functions (formats, format_of, engines, default_rate) are reachable
return setmetatable(M, { __call = function(_, opts) return M.profile(opts) end })
