-- perfev.timeline: what happened when -- the frames of a game loop, its
-- zones, the per-frame counts of its events, and the profiler's samples
-- with their Lua stacks, in time order -- and its files: Chrome's Trace
-- Event JSON (Perfetto's UI, chrome://tracing, speedscope) and
-- speedscope's evented profile. See doc/games.md.
--
--   local fr = perfev.frames { profile = true, timeline = true }
--   ... fr:mark() ...
--   local tl = fr:timeline()
--   tl:write("game.trace.json")          -- Trace Event JSON
--   tl:write("game.speedscope.json")     -- speedscope, evented
--   local p = perfev.profile { timeline = 10000 } ; ... ; p:timeline():write("p.trace.json")
--
-- A timeline is a plain table (times are CLOCK_MONOTONIC nanoseconds):
--   { name, t0 (the earliest time), event, unit (the samples'),
--     counters = { { name, clock }, ... },          -- the frames' events
--     frames = { { number, start, finish, counts = { v1, ... } }, ... },
--     zones = { { name, depth, start, finish, counts = { v1, ... } }, ... },   -- by start
--     samples = { { time, weight, stack = { label, ... root first } }, ... },
--     dropped = { samples, zones } }              -- the oldest, past the bounds
local data = require "perfev.profile.data"
local options = require "perfev.options"

local M = {}

M.FORMATS = { chrome = "perfev.timeline.chrome", speedscope = "perfev.timeline.speedscope" }

local Timeline = {}
Timeline.__index = Timeline
M.Timeline = Timeline

-- samples(raw, opts) -> the samples, named, oldest first; raw: an
-- engine's timeline_read() (frames, stacks, time, stack, weight,
-- samples lists), opts: the profile's build options (the stacks are cut
-- and perfev's frames folded as in its profile). A sample whose stack is
-- cut out (outside p:run's function) is left out.
function M.samples(raw, opts)
  for _, s in ipairs(raw.stacks) do s.weight, s.samples = 0, 0 end
  for k = 1, raw.n do
    local s = raw.stacks[raw.stack[k]]
    s.weight, s.samples = s.weight + raw.weight[k], s.samples + raw.samples[k]
  end
  local p, into = data.build_mapped(raw, opts)
  local labels = {}
  local out = {}
  for k = 1, raw.n do
    local st = into[raw.stack[k]]
    if st then
      local l = labels[st]
      if not l then
        l = data.labels(p, st)
        labels[st] = l
      end
      out[#out + 1] = { time = raw.time[k], weight = raw.weight[k], stack = l }
    end
  end
  return out
end

-- new(t) -> a timeline from its parts (the table itself, t0 set)
function M.new(t)
  t.counters, t.frames, t.zones, t.samples = t.counters or {}, t.frames or {}, t.zones or {}, t.samples or {}
  t.dropped = t.dropped or { samples = 0, zones = 0 }
  local t0
  local function low(v) if v and (t0 == nil or v < t0) then t0 = v end end
  for _, f in ipairs(t.frames) do low(f.start) end
  for _, z in ipairs(t.zones) do low(z.start) end
  for _, s in ipairs(t.samples) do low(s.time - (t.unit == "nanoseconds" and s.weight or 0)) end
  t.t0 = t0 or 0
  return setmetatable(t, Timeline)
end

-- format_of(path) -> "speedscope" (.speedscope.json) | "chrome" (.json) | nil
function M.format_of(path)
  if path:match("%.speedscope%.json$") then return "speedscope" end
  if path:match("%.json$") then return "chrome" end
end

-- tl:format(fmt) -> the file's bytes: "chrome" or "speedscope"
function Timeline:format(fmt)
  options.self(self, Timeline, "perfev.timeline", "format")
  local mod = M.FORMATS[fmt]
  if not mod then options.unknown("perfev.timeline: format", "format", fmt, M.FORMATS, " (chrome, speedscope)") end
  return require(mod).encode(self)
end

-- tl:write(path[, fmt]) -> true | nil, message, errno (the format from the
-- name: .speedscope.json, else .json: Trace Event JSON)
function Timeline:write(path, fmt)
  options.self(self, Timeline, "perfev.timeline", "write")
  options.arg(path, "string", "perfev.timeline: write", "path")
  fmt = fmt or M.format_of(path)
  if not fmt then
    options.raisef("perfev.timeline: write: cannot tell the format of '%s' from its name "
                   .. "(.json: Trace Event JSON, .speedscope.json: speedscope)", path)
  end
  local bytes = self:format(fmt)
  local f, msg, errno = io.open(path, "wb")
  if not f then return nil, msg, errno end
  local ok, wmsg, werrno = f:write(bytes)
  f:close()
  if not ok then return nil, wmsg, werrno end
  return true
end

return M
