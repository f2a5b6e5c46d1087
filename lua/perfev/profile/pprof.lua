-- pprof's profile.proto (github.com/google/pprof/proto/profile.proto),
-- gzipped, as go tool pprof, Pyroscope, Parca and Cloud Profiler read it:
-- two sample values (samples, and the event's count), a location per Lua
-- frame and line, a function per Lua function; a stack's tags as the
-- sample's labels (pprof -tags, -tagfocus).
local pb = require "perfev.profile.protobuf"
local zlib = require "zlib"

local M = {}

-- Profile's fields
local SAMPLE_TYPE, SAMPLE, LOCATION, FUNCTION, STRING_TABLE = 1, 2, 4, 5, 6
local TIME_NANOS, DURATION_NANOS, PERIOD_TYPE, PERIOD, DEFAULT_SAMPLE_TYPE = 9, 10, 11, 12, 14

local function strings()
  local list, index = { "" }, { [""] = 0 }
  return function(s)
    s = s or ""
    local i = index[s]
    if not i then
      list[#list + 1] = s
      i = #list - 1
      index[s] = i
    end
    return i
  end, list
end

local function value_type(str, typ, unit)
  return pb.message():uint(1, str(typ)):uint(2, str(unit))
end

-- The uncompressed message.
function M.proto(p)
  local str, list = strings()
  local m = pb.message()
  local unit = p.unit == "nanoseconds" and "nanoseconds" or "count"
  local kind = p.unit == "nanoseconds" and "cpu" or p.event
  -- p.sample_types: several values per stack (s.values, in that order:
  -- perfev.alloc's alloc_objects, alloc_space, inuse_objects, inuse_space),
  -- rounded to integers as profile.proto holds them
  local types = p.sample_types or { { "samples", "count" }, { kind, unit } }
  for _, t in ipairs(types) do m:bytes(SAMPLE_TYPE, value_type(str, t[1], t[2])) end
  for _, s in ipairs(p.stacks) do
    local locs = {}
    for i = #s.frames, 1, -1 do locs[#locs + 1] = s.frames[i] end   -- leaf first
    local values = { s.samples, s.weight }
    if p.sample_types then
      values = {}
      for i, v in ipairs(s.values) do values[i] = math.floor(v + 0.5) end
    end
    local sm = pb.message():packed(1, locs):packed(2, values)
    -- its pprof labels (Sample.label: key and str, indexes of strings):
    -- "key\2value\1key\2value" (perfev.resty.tags)
    for k, v in (s.tags or ""):gmatch("([^\1\2]+)\2([^\1]*)") do
      sm:bytes(3, pb.message():uint(1, str(k)):uint(2, str(v)))
    end
    m:bytes(SAMPLE, sm)
  end
  for id, f in ipairs(p.frames) do
    local line = pb.message():uint(1, f.func):uint(2, math.max(f.line or 0, 0))
    m:bytes(LOCATION, pb.message():uint(1, id):bytes(4, line))
  end
  for id, f in ipairs(p.funcs) do
    -- pprof drops what looks like C++ template arguments (<...>) and
    -- parameter lists ((...)) from names: an anonymous function by place
    local name = f.name
    if f.what == "Lua" and name == "<anonymous>" then
      name = ("anonymous@%s:%.0f"):format(f.source, f.linedefined)
    end
    m:bytes(FUNCTION, pb.message():uint(1, id):uint(2, str(name)):uint(3, str(f.label))
                                  :uint(4, str(f.what == "C" and "[C]" or f.source))
                                  :uint(5, math.max(f.linedefined or 0, 0)))
  end
  if p.time then m:uint(TIME_NANOS, p.time * 1e9) end
  if p.duration then m:uint(DURATION_NANOS, p.duration) end
  local pt = p.period_type or { kind, unit }
  m:bytes(PERIOD_TYPE, value_type(str, pt[1], pt[2]))
  if p.period then m:uint(PERIOD, p.period)
  elseif p.freq and p.unit == "nanoseconds" then m:uint(PERIOD, math.floor(1e9 / p.freq)) end
  if p.default_sample then m:uint(DEFAULT_SAMPLE_TYPE, str(p.default_sample)) end
  -- the string table last: every string is known by now
  for _, s in ipairs(list) do m:bytes(STRING_TABLE, s) end
  return m:encode()
end

function M.encode(p)
  local gzip = zlib.deflate(6, 31)      -- window 15 + 16: a gzip stream
  return (gzip(M.proto(p), "finish"))   -- the bytes alone, not eof and the counts
end

return M
