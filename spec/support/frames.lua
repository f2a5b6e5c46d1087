-- What the frames specs (frames, frames_gc, timeline) compute the same way:
-- the nearest-rank percentile from its definition, a list's first n, and
-- the heap a loop of frames grows by.
local M = {}

-- The nearest-rank percentile p of list (the smallest value with at least
-- p % of the values at or below it), written here again from its definition.
function M.nearest_rank(list, p)
  local sorted = {}
  for i, v in ipairs(list) do sorted[i] = v end
  table.sort(sorted)
  local rank = math.ceil(p * #sorted / 100)
  return sorted[rank < 1 and 1 or rank]
end

-- t[1..n] as a new list
function M.copy(t, n)
  local c = {}
  for i = 1, n do c[i] = t[i] end
  return c
end

-- nested_frames(fr) -> frames(count): count frames of fr, each with a zone
-- "physics" nested in a zone "update" (the loop the allocation specs run)
function M.nested_frames(fr)
  return function(count)
    for _ = 1, count do
      local outer = fr:zone_begin("update")
      local inner = fr:zone_begin("physics")
      inner:finish()
      outer:finish()
      fr:mark()
    end
  end
end

-- least_growth(frames, n[, settled]) -> the least KiB the Lua heap grew by over 3
-- rounds of frames(n), the collector stopped. LuaJIT runs with its
-- compiler off: its heap also holds the traces it compiles, and when it
-- compiles one depends on the run (a side trace for a branch taken now and
-- then: 0.3 to 7 KiB in some rounds of 10000 frames); compiled code
-- allocates no more than the interpreter does. Warmed up first (zones and
-- depths seen), then a full collection and a few more frames (group_spec
-- says why). The least of 3 rounds (LuaJIT's interpreter too grew by 0.6
-- KiB in one round of one run in three): an allocation per mark would be
-- in every round. settled(), if given, runs just before the rounds.
function M.least_growth(frames, n, settled)
  local jit = rawget(_G, "jit")
  if jit then
    jit.off()
    jit.flush()
  end
  frames(1000)
  collectgarbage()
  collectgarbage()
  collectgarbage("stop")
  frames(100)
  if settled then settled() end
  local grown = math.huge
  for _ = 1, 3 do
    local before = collectgarbage("count")
    frames(n)
    grown = math.min(grown, collectgarbage("count") - before)
  end
  collectgarbage("restart")
  if jit then jit.on() end
  return grown
end

return M
