-- perfev.frames' timeline (option timeline): when each frame and each zone
-- call began and ended (core.clock_ns(), CLOCK_MONOTONIC: the profiler's
-- samples' clock, csrc/profiler/timeline.c), kept in rings allocated when
-- the frames object is made -- the frames' times beside their counts (the
-- last `keep` frames), the latest `cap` zone calls with their counts -- so
-- that a mark or a zone allocates nothing; and the perfev.timeline made of
-- them with the profiler's samples (fr:timeline()).
local core = require "perfev.core"
local series = require "perfev.frames.series"
local timeline = require "perfev.timeline"

local M = {}

M.DEFAULT_ZONES = 65536     -- zone calls kept: 8 zones a frame at 60 frames a second for 2 minutes

-- new(n, keep, cap) -> rec: n events, frames kept, zone calls kept
function M.new(n, keep, cap)
  local rec = { cap = cap, count = 0, now = core.clock_ns, t = 0, begin = {},
                zone = {}, depth = {}, start = {}, finish = {}, counts = {},
                fstart = series.new(keep), ffinish = series.new(keep) }
  for k = 1, cap do rec.zone[k], rec.depth[k], rec.start[k], rec.finish[k] = 0, 0, 0, 0 end
  for i = 1, n do
    local c = {}
    for k = 1, cap do c[k] = 0 end
    rec.counts[i] = c
  end
  for d = 1, 16 do rec.begin[d] = 0 end
  return rec
end

-- restart(rec): frames and zones dropped, the next frame starts now
function M.restart(rec)
  rec.count = 0
  series.clear(rec.fstart)
  series.clear(rec.ffinish)
  rec.t = rec.now()
end

-- build(fr) -> the perfev.timeline of a frames object
function M.build(fr)
  local rec = fr.tl
  local counters = {}
  for i = 1, fr.n do counters[i] = { name = fr.names[i], clock = fr.clock[i] } end
  local starts, finishes = series.values(rec.fstart), series.values(rec.ffinish)
  local vals = {}
  for i = 1, fr.n do vals[i] = series.values(fr.series[i]) end
  local frames, k = {}, #starts
  for j = 1, k do
    local counts = {}
    for i = 1, fr.n do counts[i] = vals[i][#vals[i] - k + j] end
    frames[j] = { number = fr.frame - k + j, start = starts[j], finish = finishes[j], counts = counts }
  end
  local zones = {}
  local n = math.min(rec.count, rec.cap)
  local first = rec.count > rec.cap and rec.count % rec.cap or 0
  for j = 1, n do
    local slot = (first + j - 1) % rec.cap + 1
    local counts = {}
    for i = 1, fr.n do counts[i] = rec.counts[i][slot] end
    zones[j] = { name = fr.zone_list[rec.zone[slot]].name, depth = rec.depth[slot], start = rec.start[slot],
                 finish = rec.finish[slot], counts = counts }
  end
  table.sort(zones, function(a, b)
    if a.start ~= b.start then return a.start < b.start end
    return a.depth < b.depth
  end)
  local samples, dropped, p = {}, 0, fr.profiler
  if p and p.timeline_n then samples, dropped = p:timeline_samples() end
  return timeline.new { name = fr.name or "perfev.frames", event = p and p.event_name, unit = p and p.unit,
                        counters = counters, frames = frames, zones = zones, samples = samples,
                        dropped = { samples = dropped, zones = rec.count - n } }
end

return M
