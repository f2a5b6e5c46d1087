-- A text report like `perf report --stdio --children`: per Lua function its
-- total (children included) and self share of the event, sorted by self,
-- with where it is defined and the line that costs most; then the lines
-- that cost most, as perf annotate would point at them.
local data = require "perfev.profile.data"

local M = {}

M.MAX_LINES = 20       -- rows of the "by line" section

local function pct(x, total)
  if total == 0 then return "  0.00%" end
  return ("%6.2f%%"):format(100 * x / total)
end

local function where(func, line)
  if func.what == "C" or func.what == "truncated" then return "[C]" end
  return ("%s:%.0f"):format(func.source, line)
end

local function hottest(lines)
  local best, bw = nil, -1
  for line, w in pairs(lines) do
    if w > bw or (w == bw and line < best) then best, bw = line, w end
  end
  return best
end

local function header(p, out)
  local rate = p.period and ("period %.0f"):format(p.period)
               or p.freq and ("%.0f Hz"):format(p.freq) or "?"
  out[#out + 1] = ("# perfev profile: Lua functions on event '%s' (%s)"):format(p.event, rate)
  out[#out + 1] = "#"
  out[#out + 1] = ("# Samples: %.0f  Event count (%s): %.0f  Lost: %.0f"):format(
    p.samples, p.unit, p.weight, p.lost or 0)
  local note = data.throttle_note(p)
  if note then out[#out + 1] = "# Throttled: " .. note end
  local a = p.attach
  if a then
    out[#out + 1] = ("# Attached to process %.0f (%s, %s): %.0f samples, %.0f dropped, %.0f outside Lua, %.0f threads")
      :format(a.pid, tostring(a.exe), tostring(a.runtime), a.samples, a.dropped, a.outside, a.threads)
  end
  if (p.outside or 0) > 0 then
    out[#out + 1] = ("# Outside the profiled function (left out): %.0f"):format(p.outside)
  end
  out[#out + 1] = "#"
end

function M.encode(p)
  local out = {}
  header(p, out)
  local rows = data.by_function(p)
  out[#out + 1] = "# Children      Self  Function (defined at)  [hottest line]"
  out[#out + 1] = "# ........  ........  ......................................."
  out[#out + 1] = "#"
  for _, r in ipairs(rows) do
    local h = hottest(r.lines)
    local lua = r.func.what == "Lua" or r.func.what == "main"
    local hot = h and h >= 0 and lua and r.self > 0 and ("  [%s]"):format(where(r.func, h)) or ""
    out[#out + 1] = ("   %s   %s  %s%s"):format(pct(r.total, p.weight), pct(r.self, p.weight),
                                                 r.label, hot)
  end
  out[#out + 1] = ""
  out[#out + 1] = "# Self by source line"
  out[#out + 1] = "#"
  local lines = {}
  for _, r in ipairs(rows) do
    for line, w in pairs(r.lines) do
      if line >= 0 then lines[#lines + 1] = { where = where(r.func, line), name = r.func.name, w = w } end
    end
  end
  table.sort(lines, function(a, b)
    if a.w ~= b.w then return a.w > b.w end
    return a.where < b.where
  end)
  for i = 1, math.min(#lines, M.MAX_LINES) do
    local l = lines[i]
    out[#out + 1] = ("   %s  %s  %s"):format(pct(l.w, p.weight), l.where, l.name)
  end
  return table.concat(out, "\n") .. "\n"
end

return M
