-- One count per frame, for perfev.frames: the values of the last `keep`
-- frames in a ring allocated once (adding one allocates nothing), and the
-- sum, count and max of every frame added since the start or a clear.
-- The statistics a game developer reads of them: mean, the 50th, 95th and
-- 99th percentiles (nearest rank, of the frames kept) and max.
local M = {}

-- new(keep) -> series: { vals (keep slots), keep, pos, n, sum, max }
function M.new(keep)
  local vals = {}
  for i = 1, keep do vals[i] = 0 end
  return { vals = vals, keep = keep, pos = 0, n = 0, sum = 0, max = 0 }
end

-- add(s, v): the next frame's value
function M.add(s, v)
  local pos = s.pos + 1
  if pos > s.keep then pos = 1 end
  s.pos = pos
  s.vals[pos] = v
  local n = s.n + 1
  s.n = n
  s.sum = s.sum + v
  if n == 1 or v > s.max then s.max = v end
end

-- skip(s, count): count frames of 0 (a new series: its ring holds zeros)
function M.skip(s, count)
  if count <= 0 then return end
  s.pos = (s.pos + count - 1) % s.keep + 1
  if s.n == 0 then s.max = 0 elseif s.max < 0 then s.max = 0 end
  s.n = s.n + count
end

function M.clear(s)
  local vals = s.vals
  for i = 1, s.keep do vals[i] = 0 end
  s.pos, s.n, s.sum, s.max = 0, 0, 0, 0
end

-- values(s) -> a new list of the kept values, oldest first
function M.values(s)
  local out, kept = {}, math.min(s.n, s.keep)
  local first = s.n > s.keep and s.pos + 1 or 1
  for k = 0, kept - 1 do
    local i = first + k
    if i > s.keep then i = i - s.keep end
    out[k + 1] = s.vals[i]
  end
  return out
end

-- percentile(sorted, p) -> the nearest-rank p-th percentile of a sorted
-- list: the smallest value with at least p % of the list at or below it.
function M.percentile(sorted, p)
  local n = #sorted
  if n == 0 then return nil end
  local rank = math.ceil(p / 100 * n)
  if rank < 1 then rank = 1 end
  return sorted[rank]
end

-- stats(s) -> { mean, p50, p95, p99, max, total, frames, kept }: mean,
-- max and total of every frame added, percentiles of the kept ones;
-- nil before the first frame.
function M.stats(s)
  if s.n == 0 then return nil end
  local sorted = M.values(s)
  table.sort(sorted)
  return { mean = s.sum / s.n, max = s.max, total = s.sum, frames = s.n, kept = #sorted,
           p50 = M.percentile(sorted, 50), p95 = M.percentile(sorted, 95),
           p99 = M.percentile(sorted, 99) }
end

return M
