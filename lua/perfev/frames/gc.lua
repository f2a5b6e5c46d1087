-- perfev.frames' Lua GC figures (option gc): each frame's and each zone
-- call's bytes allocated and freed and the collector's cycles completed,
-- from a perfev.alloc.counter() (the C core's allocator in counting mode:
-- every block, no sampling), and on LuaJIT with profile = true on a clock
-- the time of the profiler's samples taken in the collector ([GC]). They
-- are figures after the group's events, read into the same tables at the
-- same points (a mark, a zone's begin and finish), so that the series,
-- the worst frames, the zones and the timeline hold them as they hold the
-- events. A read refills a table: nothing allocated.
local alloc = require "perfev.alloc"

local M = {}

-- the figures, in their order: name, the counter's field (or the
-- profiler's), shown as
M.FIGURES = {
  { name = "alloc-bytes", field = "alloc_bytes", bytes = true },
  { name = "free-bytes", field = "free_bytes", bytes = true },
  { name = "gc-cycles", field = "gc_cycles" },
}
M.TIME = { name = "gc-time", clock = true }

-- whether a frames' profiler can give the collector's time: the engine
-- that keeps its samples' [GC] weight (LuaJIT's jit engine), on a clock
local function timed(p)
  return p ~= nil and p.unit == "nanoseconds" and type(p.engine.gc_weight) == "function"
end

-- new(profiler) -> rec: { counter, t (the counter's read, refilled),
-- figures = { { name, field, bytes, clock }, ... }, p (when timed) }
function M.new(p)
  local rec = { counter = alloc.counter(), figures = {} }
  for i, f in ipairs(M.FIGURES) do rec.figures[i] = f end
  if timed(p) then
    rec.p = p
    rec.figures[#rec.figures + 1] = M.TIME
  end
  rec.t = rec.counter:read()
  return rec
end

-- read(rec, out, n): the figures into out[n + 1], out[n + 2], ... (running
-- totals since rec was made; the collector's time, the engine's since it
-- started)
function M.read(rec, out, n)
  local t = rec.counter:read(rec.t)
  out[n + 1] = t.alloc_bytes
  out[n + 2] = t.free_bytes
  out[n + 3] = t.gc_cycles
  local p = rec.p
  if p then out[n + 4] = p.engine:gc_weight() end
  return out
end

function M.close(rec)
  rec.counter:close()
end

return M
