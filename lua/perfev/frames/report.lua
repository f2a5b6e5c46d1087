-- The per-frame table of perfev.frames as text (fr:report()): each
-- event's mean, p50, p95, p99 and max per frame (clocks in milliseconds),
-- each zone's the same with its self mean and calls, then the worst frames
-- with their other counts and, when profiled, the functions that ran in
-- them. The GC's figures (option gc) are rows like the events', the bytes
-- in KiB.
local M = {}

local ROW = "%-26s %10.3f %10.3f %10.3f %10.3f %10.3f"
local HEAD = "%-26s %10s %10s %10s %10s %10s"

local function label(st)
  if st.clock then return st.name .. " ms" end
  if st.bytes then return (st.name:gsub("%-bytes$", "")) .. " KiB" end
  return st.name
end

local function scale(st) return st.clock and 1e-6 or st.bytes and 1 / 1024 or 1 end

local function row(name, st)
  local k = scale(st)
  return ROW:format(name, st.mean * k, st.p50 * k, st.p95 * k, st.p99 * k, st.max * k)
end

local function count(st, v)
  if st.clock then return ("%.3f ms"):format(v * 1e-6) end
  if st.bytes then return ("%.1f KiB"):format(v / 1024) end
  return ("%.0f"):format(v)
end

local function pct(x, total)
  if total == 0 then return "  0.0%" end
  return ("%5.1f%%"):format(100 * x / total)
end

-- text(stats) -> the table (stats: fr:stats())
function M.text(st)
  if st.frames == 0 then return "no frame was marked\n" end
  local out = {}
  local kept = st.kept < st.frames and (", percentiles of the last %d"):format(st.kept) or ""
  out[#out + 1] = ("perfev.frames: %d frames%s"):format(st.frames, kept)
  out[#out + 1] = HEAD:format("per frame", "mean", "p50", "p95", "p99", "max")
  for _, e in ipairs(st.events) do out[#out + 1] = row(label(e), e) end
  if #st.zones > 0 then
    out[#out + 1] = HEAD:format("zones per frame", "mean", "p50", "p95", "p99", "max") .. "  self mean"
    for _, z in ipairs(st.zones) do
      out[#out + 1] = ("  %s (%d calls)"):format(z.name, z.calls)
      for _, e in ipairs(z.events) do
        out[#out + 1] = row("    " .. label(e), e) .. ("  %10.3f"):format(e.self / st.frames * scale(e))
      end
    end
  end
  if #st.worst > 0 then
    out[#out + 1] = ("worst %d frames by %s:"):format(#st.worst, st.by)
    local by
    for _, e in ipairs(st.events) do if e.name == st.by then by = e end end
    for _, w in ipairs(st.worst) do
      local parts = {}
      for i, e in ipairs(st.events) do
        if e ~= by then parts[#parts + 1] = ("%s %s"):format(e.name, count(e, w.counts[i])) end
      end
      local key = by.clock and ("%8.3f ms"):format(w.counts[by.name] * 1e-6)
                  or ("%s %s"):format(by.name, count(by, w.counts[by.name]))
      out[#out + 1] = ("  frame %-6d %s  %s"):format(w.frame, key, table.concat(parts, "  "))
      local p = w.profile
      if p then
        if p.samples == 0 then
          out[#out + 1] = "      (no profile sample in this frame)"
        else
          for k = 1, math.min(#p.functions, 5) do
            local f = p.functions[k]
            if f.self == 0 then break end   -- the callers only: their children are above
            out[#out + 1] = ("      %s self  %s total  %s"):format(pct(f.self, p.weight), pct(f.total, p.weight),
                                                                 f.label)
          end
        end
      end
    end
  end
  return table.concat(out, "\n") .. "\n"
end

return M
