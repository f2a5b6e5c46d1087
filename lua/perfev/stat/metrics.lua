-- perfev.stat.metrics: the derived metrics perf stat prints beside each
-- count (its "shadow statistics"): CPUs utilized, rates per second, GHz,
-- insn per cycle, miss ratios. Each counter gets a list of metrics
--   { value = number, fmt = "%8.3f", unit = "CPUs utilized" }
-- (fmt nil: the metric's column is left blank, its unit still named in
-- JSON), or no list at all (the event has no metric: perf's JSON says
-- "(null)").
local M = {}

-- miss kind -> the kind of its denominator, the unit perf prints
local RATIOS = {
  ["branch-misses"] = { "branches", "of all branches", "%7.2f%%" },
  ["l1d-miss"] = { "l1d", "of all L1-dcache accesses", "%7.2f%%" },
  ["l1i-miss"] = { "l1i", "of all L1-icache accesses", "%7.2f%%" },
  ["dtlb-miss"] = { "dtlb", "of all dTLB cache accesses", "%7.2f%%" },
  ["itlb-miss"] = { "itlb", "of all iTLB cache accesses", "%7.2f%%" },
  ["ll-miss"] = { "ll", "of all LL-cache accesses", "%7.2f%%" },
  ["cache-misses"] = { "cache-refs", "of all cache refs", "%8.3f %%" },
  ["stalled-front"] = { "cycles", "frontend cycles idle", "%7.2f%%" },
  ["stalled-back"] = { "cycles", "backend cycles idle", "%7.2f%%" },
}

-- The value of the first counted counter of a kind with the same privilege
-- filters (perf never mixes :u and :k counts in a metric). For the clock
-- events (kind nsecs) the count in ns, for the others the scaled value;
-- nil when there is none. Clock events of any filter stand in for one of
-- the same filter, as perf 6.1 does for its rates.
local function find(counters, kind, ctx)
  local any
  for _, c in ipairs(counters) do
    if c.kind == kind and c.supported and c.counted then
      local v = kind == "nsecs" and c.count or c.value
      if c.ctx == ctx then return v end
      any = any or v
    end
  end
  if kind == "nsecs" then return any end
  return nil
end

local function blank(unit) return { { unit = unit } } end

-- perf's K/M/G prefixes for rates
local function rate(per_sec)
  local prefix = ""
  for _, p in ipairs { "K", "M", "G" } do
    if per_sec > 1000 then per_sec, prefix = per_sec / 1000, p end
  end
  return per_sec, prefix .. "/sec"
end

-- of(c, counters, wall_ns) -> the metrics of counter c
function M.of(c, counters, wall_ns)
  local kind, avg = c.kind, c.value
  if kind == "nsecs" then
    if wall_ns and wall_ns > 0 then
      return { { value = c.count / wall_ns, fmt = "%8.3f", unit = "CPUs utilized" } }
    end
    return blank("CPUs utilized")
  elseif kind == "instructions" then
    local out
    local cycles = find(counters, "cycles", c.ctx)
    if cycles and cycles ~= 0 then
      out = { { value = avg / cycles, fmt = "%7.2f ", unit = "insn per cycle" } }
    else
      out = blank("insn per cycle")
    end
    local front = find(counters, "stalled-front", c.ctx) or 0
    local back = find(counters, "stalled-back", c.ctx) or 0
    local stalled = math.max(front, back)
    if stalled ~= 0 and avg ~= 0 then
      out[2] = { value = stalled / avg, fmt = "%7.2f ", unit = "stalled cycles per insn" }
    end
    return out
  elseif RATIOS[kind] then
    local r = RATIOS[kind]
    local total = find(counters, r[1], c.ctx)
    if not total then return blank(r[2]) end
    return { { value = total ~= 0 and avg / total * 100 or 0, fmt = r[3], unit = r[2] } }
  elseif kind == "cycles" then
    local nsecs = find(counters, "nsecs", c.ctx)
    if nsecs and nsecs ~= 0 then return { { value = avg / nsecs, fmt = "%8.3f", unit = "GHz" } } end
    return blank("Ghz")      -- perf 6.1's spelling when there is no clock
  end
  local nsecs = find(counters, "nsecs", c.ctx)
  if nsecs then
    local v, unit = 0, "/sec"
    if nsecs ~= 0 then v, unit = rate(1e9 * avg / nsecs) end
    return { { value = v, fmt = "%8.3f", unit = unit } }
  end
  return nil
end

-- add(counters, wall_ns): sets c.metrics on every counted counter
function M.add(counters, wall_ns)
  for _, c in ipairs(counters) do
    if c.supported and c.counted then c.metrics = M.of(c, counters, wall_ns) end
  end
end

return M
