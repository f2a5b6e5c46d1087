-- perfev.frames: perf events per frame of a game loop, and per zone of a
-- frame. See doc/games.md.
--
--   local fr = assert(perfev.frames { events = { "task-clock", "page-faults" }, worst = 5 })
--   while running do
--     local z = fr:zone_begin("physics") physics() z:finish()
--     fr:mark()                        -- once per frame, at its end
--   end
--   print(fr:report())                 -- per event mean, p50, p95, p99, max; zones; worst frames
--
-- One group (perfev.group) counts the events; fr:mark() reads it with one
-- g:read(t) into a table it refills and puts each event's difference into
-- a ring of the last `keep` frames allocated at the start (lua/perfev/frames/series.lua),
-- and the frame into the worst N when it is one: a mark allocates nothing.
-- With profile = true a perfev.profile runs beside the counters; each mark
-- takes the frame's samples: a frame among the worst keeps its profile
-- (p:take()), by function, the others' samples are dropped unbuilt (the
-- engine's take).
-- With gc = true the Lua GC's figures of each frame (bytes allocated and
-- freed, collections; the collector's time where the profiler sees it)
-- follow the events in the same tables (lua/perfev/frames/gc.lua).
local group = require "perfev.group"
local core = require "perfev.core"
local options = require "perfev.options"
local series = require "perfev.frames.series"
local gcfig = require "perfev.frames.gc"

local M = {}

M.DEFAULT_EVENTS = { "task-clock", "page-faults", "context-switches" }
M.DEFAULT_WORST = 5
M.DEFAULT_KEEP = 3600        -- a minute of frames at 60 per second
M.PROFILE_FUNCTIONS = 10     -- the functions a worst frame's profile keeps

local OPTIONS = { events = "table|string", worst = "integer", by = "string|integer", keep = "positive",
                  profile = "boolean|table", enabled = "boolean", timeline = "boolean|positive", name = "string",
                  gc = "boolean" }

local Frames = {}
Frames.__index = Frames
M.Frames = Frames

local Zone = {}
Zone.__index = Zone
M.Zone = Zone

local function fail(msg) options.raise("perfev.frames: " .. msg) end

-- whether member i counts nanoseconds (cpu-clock, task-clock, the tool
-- clocks): shown in milliseconds
local function is_clock(g, i)
  local ev = g.list[i]
  if ev.tool then return true end
  local a = ev:attr()
  local config = tonumber(a.config)
  return tonumber(a.type) == core.TYPE.SOFTWARE and (config == core.SW.CPU_CLOCK or config == core.SW.TASK_CLOCK)
end

local function zeros(n)
  local t = {}
  for i = 1, n do t[i] = 0 end
  return t
end

-- the position of the event `by` names (a name, an alias, a position)
local function position_of(g, by, names)
  if by == nil then return 1 end
  if type(by) == "number" then
    if by >= 1 and by <= #names and by % 1 == 0 then return by end
    fail(("option 'by' must be a position from 1 to %d, got %s"):format(#names, options.describe(by)))
  end
  if g.byname[by] then return g.byname[by] end
  for i = #g.list + 1, #names do
    if names[i] == by then return i end
  end
  local ev = g:event(by)
  for i = 1, #names do
    if ev ~= nil and rawequal(g.list[i], ev) then return i end
  end
  fail(("option 'by' must name one of the events (%s), got '%s'"):format(table.concat(names, ", "), by))
end

-- read(self[, t]) -> t: the group's counts (refilled), then with gc the
-- GC's figures after them
local function read(self, t)
  t = self.group:read(t)
  local gc = self.gc
  if gc then gcfig.read(gc, t, self.ng) end
  return t
end

-- perfev.frames(opts) -> frames | nil, message, errno (the group's or the
-- profiler's refusal). opts: events (a list of specs or an event string;
-- default task-clock, page-faults, context-switches), worst (frames kept
-- as the worst, 5), by (the event that ranks them: a name or a position,
-- the first), keep (frames whose values the percentiles are of, 3600),
-- profile (true or perfev.profile's options: each worst frame carries its
-- Lua profile), enabled (false: made disabled, fr:enable() starts it),
-- timeline (true or the zone calls kept: each frame's and zone's times
-- kept, and with profile the samples in time order: fr:timeline()), name,
-- gc (true: the Lua GC's figures per frame beside the events: alloc-bytes,
-- free-bytes, gc-cycles, and gc-time where the profiler measures it).
function M.new(opts)
  opts = options.check(opts, OPTIONS, "perfev.frames")
  local worst = opts.worst or M.DEFAULT_WORST
  if worst < 0 then fail("option 'worst' must be 0 or more, got " .. options.describe(worst)) end
  local keep = opts.keep or M.DEFAULT_KEEP
  if type(opts.events) == "table" and #opts.events == 0 then fail("option 'events' lists no event") end
  local g, msg, errno = group.new(opts.events or M.DEFAULT_EVENTS)
  if not g then return nil, msg, errno end
  local names = g:names()
  local ng = #names
  -- the profiler first: with gc, whether the collector's time is measured
  -- depends on its engine and event
  local p
  if opts.profile then
    local popts = {}
    for k, v in pairs(type(opts.profile) == "table" and opts.profile or {}) do popts[k] = v end
    -- the samples in time order beside the frames' (as many as zone calls, unless said)
    local tl_want = opts.timeline == true and require("perfev.frames.timeline").DEFAULT_ZONES or opts.timeline
    if tl_want and popts.timeline == nil then
      popts.timeline = math.max(tl_want, require("perfev.profile").DEFAULT_TIMELINE)
    end
    -- a mistake in the profile's options (raised) or a refusal: the group closed
    local pok, pmsg, perrno
    pok, p, pmsg, perrno = pcall(require("perfev.profile").profile, popts)
    if not pok then g:close() error(p, 0) end
    if not p then g:close() return nil, pmsg, perrno end
  end
  local gc
  if opts.gc then
    gc = gcfig.new(p)
    for _, f in ipairs(gc.figures) do names[#names + 1] = f.name end
  end
  local ok, by = pcall(position_of, g, opts.by, names)
  if not ok then
    if p then p:close() end
    if gc then gcfig.close(gc) end
    g:close()
    error(by, 0)
  end
  local n = #names
  local self = setmetatable({
    group = g, names = names, n = n, ng = ng, gc = gc, by = by, worst_n = worst, keep = keep,
    clock = {}, bytes = {}, series = {},
    last = zeros(n),     -- the counts the frame started from
    frame = 0,           -- frames marked
    -- the worst frames, in slots (unordered): frame number, key, counts
    wframe = zeros(worst), wkey = zeros(worst), wcounts = {}, wprofile = {}, wn = 0,
    -- zones: by name, in the order first begun; the open ones as a stack
    zones = {}, zone_list = {}, depth = 0, stack = {}, begin = {}, child = {},
    name = opts.name,
    profiler = p,
  }, Frames)
  self.counts = read(self)   -- the group's counts (and GC figures) at the last mark (refilled)
  self.now = read(self)      -- a zone's end counts (refilled)
  local tl_n = opts.timeline == true and require("perfev.frames.timeline").DEFAULT_ZONES or opts.timeline
  if tl_n then self.tl = require("perfev.frames.timeline").new(n, keep, tl_n) end
  for i = 1, n do
    local f = gc and i > ng and gc.figures[i - ng]
    if f then
      self.clock[i], self.bytes[i] = f.clock == true, f.bytes == true
    else
      self.clock[i], self.bytes[i] = is_clock(g, i), false
    end
    self.series[i] = series.new(keep)
    self.wcounts[i] = zeros(worst)
  end
  if opts.enabled == false then
    self:disable()
  else
    -- raises when another profiler runs on this thread (one per thread)
    local cok, eok, emsg, eerrno = pcall(self.enable, self)
    if not cok then self:close() error(eok, 0) end
    if not eok then self:close() return nil, emsg, eerrno end
  end
  return self
end

local function check(self, method)
  options.self(self, Frames, "perfev.frames", method)
  if self.is_closed then fail("attempt to use a closed frames object") end
end

local function noop() end
-- what zone_begin returns while disabled: its finish is found on it (no
-- metatable lookup) and does nothing
local NULL_ZONE = setmetatable({ name = "(disabled)", finish = noop }, Zone)
local function null_zone() return NULL_ZONE end

-- fr:enable() -> true | nil, message, errno: counting starts (again) from
-- here; the time it was disabled is no frame.
function Frames:enable()
  check(self, "enable")
  if self.enabled then return true end
  local ok, msg, errno = self.group:enable()
  if not ok then return nil, msg, errno end
  if self.profiler then
    if self.profiler.running then self.profiler:resume() else self.profiler:start() end
    self.profiler:take()
  end
  self.enabled = true
  -- the class's methods again (disable() put no-ops on the object)
  self.mark, self.zone_begin, self.zone_end = nil, nil, nil
  read(self, self.counts)
  local last, counts = self.last, self.counts
  for i = 1, self.n do last[i] = counts[i] or 0 end
  if self.tl then self.tl.t = self.tl.now() end
  return true
end

-- fr:disable(): counting stops, fr:mark() and fr:zone_begin() do nothing
-- (the zone they return finishes doing nothing); the zones open now are
-- dropped, and so is the frame in progress.
function Frames:disable()
  check(self, "disable")
  self.mark, self.zone_begin, self.zone_end = noop, null_zone, noop
  if not self.enabled then return true end
  self.enabled = false
  self.depth = 0
  if self.profiler and self.profiler.running then self.profiler:pause() end
  return self.group:disable()
end

function Frames:is_enabled()
  options.self(self, Frames, "perfev.frames", "is_enabled")
  return self.enabled == true
end

-- A worst frame's profile, by function: { weight, samples, unit, event,
-- functions = { { label, name, self, total }, ... by self } }.
local function summary(p)
  local rows = require("perfev.profile.data").by_function(p)
  local fns = {}
  for k = 1, math.min(#rows, M.PROFILE_FUNCTIONS) do
    local r = rows[k]
    fns[k] = { label = r.label, name = r.func.name, self = r.self, total = r.total }
  end
  return { weight = p.weight, samples = p.samples, unit = p.unit, event = p.event, functions = fns }
end

-- The slot the frame just marked (key: its count of the ranking event)
-- takes among the worst ones, nil when it is not one: a free one, else
-- the least bad one's when it is worse.
local function worst_slot(self, key)
  local wn = self.wn
  if wn < self.worst_n then return wn + 1 end
  local slot, wkey = nil, self.wkey
  for k = 1, wn do
    if key > wkey[k] and (slot == nil or wkey[k] < wkey[slot]) then slot = k end
  end
  return slot
end

local function keep_worst(self, slot, key, profile)
  if slot > self.wn then self.wn = slot end
  self.wframe[slot], self.wkey[slot] = self.frame, key
  local wcounts = self.wcounts
  for i = 1, self.n do
    local s = self.series[i]
    wcounts[i][slot] = s.vals[s.pos]
  end
  if profile then self.wprofile[slot] = summary(profile) end
end

-- The zones' counts of the frame just ended into their series.
local function close_zones(self)
  local list = self.zone_list
  for k = 1, #list do
    local z = list[k]
    local acc = z.acc
    for i = 1, self.n do
      series.add(z.series[i], acc[i])
      acc[i] = 0
    end
  end
end

-- fr:mark(): ends a frame (the first one started when fr was made or
-- enabled): one group read, the events' differences into their series.
-- A zone still open carries on into the next frame.
function Frames:mark()
  check(self, "mark")
  local counts, last = self.counts, self.last
  read(self, counts)
  local n, ser = self.n, self.series
  for i = 1, n do
    local v = counts[i] or 0
    series.add(ser[i], v - last[i])
    last[i] = v
  end
  self.frame = self.frame + 1
  local tl = self.tl
  if tl then
    -- the frame's times beside its counts (the same ring positions)
    local t = tl.now()
    series.add(tl.fstart, tl.t)
    series.add(tl.ffinish, t)
    tl.t = t
  end
  close_zones(self)
  local slot, key
  if self.worst_n > 0 then
    local s = ser[self.by]
    key = s.vals[s.pos]
    slot = worst_slot(self, key)
  end
  local profile
  local p = self.profiler
  if p then
    -- the frame's samples: a profile built when the frame is kept, else
    -- dropped (the engine's take: building one reads the functions'
    -- sources to name them, ~0.5 ms a frame)
    if slot then profile = p:take() else p.engine:take() end
  end
  if slot then keep_worst(self, slot, key, profile) end
  if slot and p then
    -- building the kept profile (its functions' sources read to name
    -- them, ~0.5 ms) is perfev's work, not the next frame's: the next
    -- frame starts after it (its counts, its samples and its time); else
    -- the frame after each new worst one looked slow, its profile all
    -- [perfev]
    read(self, counts)
    for i = 1, n do last[i] = counts[i] or 0 end
    p.engine:take()
    if tl then tl.t = tl.now() end
  end
end

-- fr:reset(): the statistics start again from here (warm-up frames left
-- out); the zones stay known, their counts zero.
function Frames:reset()
  check(self, "reset")
  for i = 1, self.n do series.clear(self.series[i]) end
  for _, z in ipairs(self.zone_list) do
    z.calls = 0
    for i = 1, self.n do
      series.clear(z.series[i])
      z.acc[i], z.own[i] = 0, 0
    end
  end
  self.frame, self.wn = 0, 0
  for k = 1, self.worst_n do self.wprofile[k] = nil end
  if self.tl then require("perfev.frames.timeline").restart(self.tl) end
  if self.enabled then
    read(self, self.counts)
    for i = 1, self.n do self.last[i] = self.counts[i] or 0 end
    if self.profiler then self.profiler:take() end
  end
end

---------------------------------------------------------------------------
-- zones

local function new_zone(self, name)
  local z = setmetatable({ name = name, frames = self, calls = 0, acc = zeros(self.n), own = zeros(self.n),
                           series = {}, index = #self.zone_list + 1 }, Zone)
  for i = 1, self.n do
    z.series[i] = series.new(self.keep)
    -- the frames before this zone was first begun: zero for it
    series.skip(z.series[i], self.frame)
  end
  self.zones[name] = z
  self.zone_list[#self.zone_list + 1] = z
  return z
end

-- fr:zone_begin(name) -> zone: the group's counts now; zone:finish() adds
-- the difference to the zone's counts of this frame. Zones nest: each
-- finishes before the one it began in (its parent), and a parent's counts
-- hold its children's (its self counts do not). One zone object per name,
-- reused: a begin allocates nothing once its name and depth were seen.
function Frames:zone_begin(name)
  check(self, "zone_begin")
  local z = self.zones[name]
  if not z then
    if type(name) ~= "string" then
      options.raisef("perfev.frames: zone_begin takes a zone's name (a string), got %s", options.describe(name))
    end
    z = new_zone(self, name)
  end
  local d = self.depth + 1
  self.depth = d
  self.stack[d] = z
  local b = self.begin[d]
  if not b then
    -- a new depth's tables made before the read: with gc, they are
    -- allocations of the frame, not of the zone
    b = zeros(self.n)   -- (the GC figures' slots too: filled after their read)
    self.begin[d] = b
    self.child[d] = zeros(self.n)
  end
  read(self, b)
  local child = self.child[d]
  for i = 1, self.n do child[i] = 0 end
  local tl = self.tl
  if tl then tl.begin[d] = tl.now() end
  return z
end

-- zone:finish(): ends the zone (the innermost open one).
function Zone:finish()
  if getmetatable(self) ~= Zone then options.self(self, Zone, "perfev.frames zone", "finish") end
  local fr = self.frames
  if fr == nil then return end        -- the zone of a disabled frames object
  if not fr.enabled then return end   -- begun before fr:disable()
  local d = fr.depth
  if d == 0 or fr.stack[d] ~= self then
    options.raisef("perfev.frames: zone '%s' finished while %s", tostring(self.name),
                   d == 0 and "no zone is open" or ("zone '" .. fr.stack[d].name .. "' is open (zones finish "
                                                    .. "innermost first)"))
  end
  local now, b, child = fr.now, fr.begin[d], fr.child[d]
  read(fr, now)
  local acc, own = self.acc, self.own
  local parent = d > 1 and fr.child[d - 1]
  -- the timeline's slot for this call (the oldest one's when full)
  local tl, slot = fr.tl, nil
  if tl then
    slot = tl.count % tl.cap + 1
    tl.count = tl.count + 1
    tl.zone[slot], tl.depth[slot], tl.start[slot], tl.finish[slot] = self.index, d, tl.begin[d], tl.now()
  end
  for i = 1, fr.n do
    local delta = (now[i] or 0) - (b[i] or 0)
    acc[i] = acc[i] + delta
    own[i] = own[i] + delta - child[i]
    if parent then parent[i] = parent[i] + delta end
    if slot then tl.counts[i][slot] = delta end
  end
  self.calls = self.calls + 1
  fr.stack[d] = nil
  fr.depth = d - 1
end

-- fr:zone_end(): the innermost open zone's finish, for a caller that does
-- not keep the zone (a C host: examples/embed/perfev_frames.h).
function Frames:zone_end()
  check(self, "zone_end")
  local z = self.stack[self.depth]
  if not z then fail("zone_end: no zone is open") end
  return z:finish()
end

---------------------------------------------------------------------------
-- results

local function event_stats(self, i, s)
  local st = series.stats(s)
  if st then st.name, st.clock, st.bytes = self.names[i], self.clock[i], self.bytes[i] or nil end
  return st
end

-- fr:stats() -> {
--   frames (marked), kept (frames the percentiles are of), by (the ranking event's name),
--   events = { { name, mean, p50, p95, p99, max, total, clock }, ..., [name] = the same },
--   zones = { { name, calls, events = { { name, mean, p50, p95, p99, max, total, self }, [name] } }, [name] },
--   worst = { { frame, counts = { [i], [name] }, profile = { weight, samples, unit, event,
--             functions = { { label, name, self, total } } } }, ... } (the worst first)
-- }. Mean, max and total are of every frame marked; the percentiles of the
-- last `keep` ones (all of them while there are no more).
function Frames:stats()
  check(self, "stats")
  local out = { frames = self.frame, kept = math.min(self.frame, self.keep), by = self.names[self.by],
                events = {}, zones = {}, worst = {} }
  if self.frame == 0 then return out end
  for i = 1, self.n do
    local st = event_stats(self, i, self.series[i])
    out.events[i], out.events[st.name] = st, st
  end
  for _, z in ipairs(self.zone_list) do
    local zt = { name = z.name, calls = z.calls, events = {} }
    for i = 1, self.n do
      local st = event_stats(self, i, z.series[i])
      st.self = z.own[i]
      zt.events[i], zt.events[st.name] = st, st
    end
    out.zones[#out.zones + 1], out.zones[z.name] = zt, zt
  end
  local order = {}
  for k = 1, self.wn do order[k] = k end
  table.sort(order, function(a, b)
    if self.wkey[a] ~= self.wkey[b] then return self.wkey[a] > self.wkey[b] end
    return self.wframe[a] < self.wframe[b]
  end)
  for r, k in ipairs(order) do
    local counts = {}
    for i = 1, self.n do
      counts[i] = self.wcounts[i][k]
      counts[self.names[i]] = counts[i]
    end
    out.worst[r] = { frame = self.wframe[k], counts = counts, profile = self.wprofile[k] }
  end
  return out
end

-- fr:values(event[, zone]) -> a new list of the event's count in each
-- frame kept, oldest first, of the frame or of a zone (event: a name or a
-- position)
function Frames:values(event, zone)
  check(self, "values")
  local i = type(event) == "number" and self.series[event] and event or self.group.byname[event]
  if not i and self.gc then
    for k = self.ng + 1, self.n do
      if self.names[k] == event then i = k end
    end
  end
  if not i then options.raisef("perfev.frames: values: no event '%s'", tostring(event)) end
  if zone == nil then return series.values(self.series[i]) end
  local z = self.zones[zone]
  if not z then options.raisef("perfev.frames: values: no zone '%s'", tostring(zone)) end
  return series.values(z.series[i])
end

-- fr:timeline() -> a perfev.timeline (option timeline): the frames kept
-- (the last `keep`), the latest zone calls, the per-frame counts, and with
-- profile the samples with their stacks; tl:write(path) writes Trace Event
-- JSON (.json) or speedscope's evented profile (.speedscope.json).
function Frames:timeline()
  check(self, "timeline")
  if not self.tl then fail("timeline: no timeline kept (give perfev.frames the option 'timeline')") end
  return require("perfev.frames.timeline").build(self)
end

-- fr:report() -> the per-frame table as text (lua/perfev/frames/report.lua)
function Frames:report()
  check(self, "report")
  return require("perfev.frames.report").text(self:stats())
end

-- fr:close(): the group and the profiler (also __close, __gc)
local function close(self)
  if self.is_closed then return true end
  self.is_closed = true
  self.enabled = false
  self.mark, self.zone_begin, self.zone_end = noop, null_zone, noop
  if self.profiler then self.profiler:close() end
  if self.gc then gcfig.close(self.gc) end
  return self.group:close()
end
function Frames:close()
  options.self(self, Frames, "perfev.frames", "close")
  return close(self)
end
Frames.__close = Frames.close
-- (a finalizer raises nothing: another self is left alone)
function Frames:__gc()
  if getmetatable(self) == Frames then close(self) end
end

function Frames:__tostring()
  options.self(self, Frames, "perfev.frames", "__tostring")
  return ("perfev.frames(%s; %d frames%s)"):format(table.concat(self.names, ", "), self.frame,
                                                  self.is_closed and ", closed" or
                                                  (not self.enabled and ", disabled" or ""))
end

-- perfev.frames is this module, called: perfev.frames(opts)
return setmetatable(M, { __call = function(_, opts) return M.new(opts) end })
