-- perfev.alloc: where Lua code allocates memory, by Lua stack -- the bytes
-- and blocks allocated, sampled on average every `period` bytes (Go's
-- MemProfileRate), and those still live at the end (in use). Written as
-- pprof with Go's heap profile's sample types (alloc_objects, alloc_space,
-- inuse_objects, inuse_space), and as folded stacks, SVG and text by
-- perfev.profile's outputs. See doc/memory.md.
--
--   local perfev = require "perfev"
--   local a = perfev.alloc { period = 512 * 1024 }
--   a:start() ; work() ; a:stop()         -- or a:run(work, ...)
--   a:write("heap.pb.gz")                 -- go tool pprof -sample_index=alloc_space heap.pb.gz
--   a:write("alloc.svg")                  -- one sample type: `sample` (alloc_space by default)
--   print(a:report("inuse_space"))
--
-- The engine is the C core's allocator (csrc/allocprof/allocprof.c): it samples, the
-- stack of a sample is recorded at the next safe point by a one-shot hook
-- (Lua 5.3, 5.4) or by jit.profile (LuaJIT: perfev.alloc.luajit).
local core = require "perfev.core"
local options = require "perfev.options"
local cowrap = require "perfev.cowrap"
local data = require "perfev.profile.data"
local output = require "perfev.profile.output"

local unpack = table.unpack or rawget(_G, "unpack")
local function pack(...) return { n = select("#", ...), ... } end

local M = {}

M.DEFAULT_PERIOD = 512 * 1024       -- bytes, Go's runtime.MemProfileRate
M.SAMPLES = { "alloc_objects", "alloc_space", "inuse_objects", "inuse_space" }
M.DEFAULT_SAMPLE = "alloc_space"
local UNITS = { alloc_objects = "count", alloc_space = "bytes", inuse_objects = "count", inuse_space = "bytes" }
-- the C core's figures for each sample type
local FIELD = { alloc_objects = "objects", alloc_space = "space", inuse_objects = "inuse_objects",
                inuse_space = "inuse_space" }

local OPTIONS = { period = "positive", sample = "string", collect = "boolean", fn = "function",
                  args = "table", output = "string", name = "string", engine = "string" }

local function fail(msg) options.raise("perfev.alloc: " .. msg) end

local function check_sample(s, what)
  if s ~= nil and not UNITS[s] then
    options.unknown("perfev.alloc", what or "sample", s, UNITS,
                    " (alloc_objects, alloc_space, inuse_objects, inuse_space)")
  end
  return s
end

-- "hook" on PUC Lua; "jit" on LuaJIT (its count hooks do not run in
-- compiled code: jit.profile takes the stacks, also with the JIT off)
local function default_engine()
  return rawget(_G, "jit") and "jit" or "hook"
end

local Alloc = {}
Alloc.__index = Alloc

-- perfev.alloc(opts) -> profiler. opts: period (bytes between samples on
-- average, 512 KiB; 1: every allocation), sample (the sample type of the
-- single-valued outputs: folded, svg, text, speedscope; alloc_space),
-- collect (a full garbage collection before stop, so that in use is what
-- is reachable: true), name, fn and args (profile fn now), output (with fn).
function M.new(opts)
  opts = options.check(opts, OPTIONS, "perfev.alloc")
  check_sample(opts.sample)
  local period = opts.period or M.DEFAULT_PERIOD
  if period ~= math.floor(period) then fail("option 'period' must be a whole number of bytes, got " .. period) end
  local engine = opts.engine or default_engine()
  if engine ~= "hook" and engine ~= "jit" then
    options.unknown("perfev.alloc", "engine", engine, { hook = true, jit = true }, " (hook, jit)")
  end
  if engine == "hook" and rawget(_G, "jit") then fail("engine 'hook' is for Lua 5.3 and 5.4: LuaJIT uses 'jit'") end
  local a = setmetatable({ period = period, sample = opts.sample or M.DEFAULT_SAMPLE, name = opts.name,
                           collect = opts.collect ~= false, engine_name = engine }, Alloc)
  if opts.fn then
    a:run(opts.fn, unpack(opts.args or {}))
    if opts.output then assert(a:write(opts.output)) end
  end
  return a
end

-- a:start() -> a
function Alloc:start()
  if self.running then fail("the profiler is running already") end
  if self.engine_name == "jit" then
    self.ap = core.allocprof(self.period, "signal")
    self.jit = require("perfev.alloc.luajit").new(self.ap)
    self.jit:start()
  else
    self.ap = core.allocprof(self.period, "hook")
    self.wrapped = cowrap.install(self.ap)
  end
  self.running = true
  self.raw, self.results = nil, {}
  self.t0 = os.time()
  self.clock0 = core.clock_ns("monotonic")
  self.ap:start()
  return self
end

-- a:stop() -> a: a full collection first (collect = true), so that what is
-- in use is what the program still reaches.
function Alloc:stop()
  if not self.running then return self end
  if self.collect then collectgarbage("collect") end
  self.ap:stop()
  self.running = false
  self.duration = core.clock_ns("monotonic") - self.clock0
  local r = self.ap:read()
  if self.jit then
    self.raw = self.jit:stop(r)
  else
    cowrap.restore(self.wrapped)
    local stacks = {}
    for i, ids in ipairs(r.stacks) do stacks[i] = { ids = ids, values = r.values[i] } end
    self.raw = { frames = r.frames, stacks = stacks, call_names = "sure" }
  end
  self.counts = r
  self.unattributed = r.values[0]
  self.ap:close()
  self.ap = nil
  return self
end

-- a:run(fn, ...) -> fn's results; the allocations are fn's (the frames
-- below it left out). fn's error is raised again after the profiler stopped.
function Alloc:run(fn, ...)
  options.arg(fn, "function", "perfev.alloc: run", "fn")
  local info = debug.getinfo(1, "S")
  self.root = { source = info.short_src, linedefined = info.linedefined }
  self:start()
  local res = pack(xpcall(fn, debug.traceback, ...))
  self:stop()
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, res.n)
end

-- a:profile([sample]) -> the profile (perfev.profile.data's) weighted by one
-- sample type, each stack with all four in `values` (alloc_objects,
-- alloc_space, inuse_objects, inuse_space); stacks whose four are all 0
-- are left out, and with `only` those whose sample is 0.
function Alloc:profile(sample, only)
  sample = check_sample(sample) or self.sample
  if self.running then fail("stop the profiler before reading its profile") end
  if not self.raw then fail("the profiler has not run") end
  local key = sample .. (only and "/only" or "")
  if self.results[key] then return self.results[key] end
  local stacks, field = {}, FIELD[sample]
  for _, s in ipairs(self.raw.stacks) do
    local v = s.values
    if v then
      local values = { v.objects, v.space, v.inuse_objects, v.inuse_space }
      local any = values[1] > 0 or values[3] > 0
      local w = v[field]
      if any and (not only or w > 0) then
        local t = { weight = w, samples = v.samples, values = values }
        for i, id in ipairs(s.ids) do t[i] = id end
        stacks[#stacks + 1] = t
      end
    end
  end
  local raw = { frames = self.raw.frames, stacks = stacks, call_names = self.raw.call_names }
  local p = data.build(raw, {
    root = self.root, event = sample, unit = UNITS[sample], period = self.period, name = self.name,
    time = self.t0, duration = self.duration,
    sample_types = { { "alloc_objects", "count" }, { "alloc_space", "bytes" },
                     { "inuse_objects", "count" }, { "inuse_space", "bytes" } },
    period_type = { "space", "bytes" }, default_sample = sample,
  })
  self.results[key] = p
  return p
end

-- a:totals() -> { alloc_bytes, alloc_count, free_bytes, free_count (every
-- allocation, counted, not sampled; but those of the profiler while it
-- records a stack), sampled, dropped, live (sampled
-- blocks in use), period, unattributed (the values of the samples whose
-- stack was not recorded: taken in stop) }
function Alloc:totals()
  if not self.counts then fail("the profiler has not run") end
  local c = self.counts
  return { alloc_bytes = c.alloc_bytes, alloc_count = c.alloc_count, free_bytes = c.free_bytes,
           free_count = c.free_count, sampled = c.sampled, dropped = c.dropped, live = c.live,
           period = c.period, unattributed = self.unattributed }
end

-- a:write(path[, format[, sample]]) -> true | nil, message, errno. pprof
-- (.pb.gz) holds the four sample types; the others the one asked.
-- output's refusals (in perfev.profile's words: it writes both) said as
-- this method's
local function said(method, ok, ...)
  if not ok then fail(method .. ": " .. (options.strip_where((...)):gsub("^perfev%.profile: ", ""))) end
  return ...
end

function Alloc:write(path, format, sample)
  local fmt = format or (type(path) == "string" and output.format_of(path))
  if fmt == "perfdata" then fail("perf.data holds events, not allocations: write .pb.gz, .folded, .svg or .txt") end
  local p = self:profile(sample, fmt ~= "pprof")
  return said("write", pcall(output.write, p, path, format))
end

-- a:format(fmt[, sample]) -> the bytes
function Alloc:format(fmt, sample)
  if fmt == "perfdata" then fail("perf.data holds events, not allocations") end
  local p = self:profile(sample, fmt ~= "pprof")
  return said("format", pcall(output.format, p, fmt))
end

-- a:report([sample]) -> text like perf report --stdio, of one sample type
function Alloc:report(sample)
  return output.format(self:profile(sample, true), "text")
end

function Alloc:close()
  if self.running then self:stop() end
end
Alloc.__close = Alloc.close

function Alloc:__tostring()
  return ("perfev.alloc(period %.0f, %s)"):format(self.period, self.running and "running" or "stopped")
end

for name, fn in pairs(Alloc) do   -- (__close and __tostring too)
  if type(fn) == "function" then
    Alloc[name] = function(self, ...)
      options.self(self, Alloc, "perfev.alloc", name)
      return fn(self, ...)
    end
  end
end

M.Alloc = Alloc

-- perfev.alloc is this module, callable: perfev.alloc{...} is M.new{...},
-- perfev.alloc.counter() the per-frame figures below
setmetatable(M, { __call = function(_, opts) return M.new(opts) end })

-- The garbage collector's figures for a game loop's frames (perfev.frames
-- with gc = true reads one at each mark and zone): perfev.alloc.counter() -> c, c:read(t) -> t with
--   gc_cycles    GC cycles completed since c was made (a finalizer that
--                makes the next one: each cycle runs it once; in Lua 5.4's
--                generational mode, minor collections count too)
--   alloc_bytes, alloc_count, free_bytes, free_count
--                every block the state allocated and freed since (the
--                C core's allocator in "count" mode: two additions a call,
--                no sampling, no stack)
--   heap_bytes   collectgarbage("count") in bytes
-- filled into t, which is refilled with no allocation from the second read
-- on. c:close() takes the allocator out. The time the collector takes is
-- not in it: PUC Lua's collector runs inside the allocations of the code
-- that triggers it, with no mark of its own (on LuaJIT, a profile's
-- samples taken in the collector have the leaf frame [GC]).
local Counter = {}
Counter.__index = Counter

local function sentinel(c)
  local mt = {}
  mt.__gc = function()
    if c.on then
      c.cycles = c.cycles + 1
      sentinel(c)
    end
  end
  local newproxy = rawget(_G, "newproxy")
  if newproxy then                         -- LuaJIT: __gc on userdata only
    local u = newproxy(true)
    getmetatable(u).__gc = mt.__gc
  else
    setmetatable({}, mt)
  end
end

function M.counter()
  local c = setmetatable({ ap = core.allocprof(1, "count"), cycles = 0, on = true }, Counter)
  sentinel(c)
  c.ap:start()
  return c
end

function Counter:read(t)
  options.self(self, Counter, "perfev.alloc.counter", "read")
  if t ~= nil and type(t) ~= "table" then   -- (options.arg allocates: a read allocates nothing)
    options.arg(t, "table", "perfev.alloc.counter: c:read", "the table to fill")
  end
  t = t or {}
  self.ap:counts(t)
  t.gc_cycles = self.cycles
  t.heap_bytes = collectgarbage("count") * 1024
  return t
end

function Counter:close()
  options.self(self, Counter, "perfev.alloc.counter", "close")
  if not self.on then return end
  self.on = false
  self.ap:close()
end
Counter.__close = Counter.close

return M
