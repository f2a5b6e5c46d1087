-- perfev.resty.prom: the Prometheus text exposition format (version 0.0.4)
-- of perfev.resty's metrics: counter families, the event_info gauge, and
-- histograms (cumulative buckets, le="+Inf", _sum, _count); and the
-- default buckets of the per-request histograms.
local M = {}

-- A label value in the exposition format: \ " and newline escaped.
function M.escape(s)
  return (s:gsub("[\\\"\n]", { ["\\"] = "\\\\", ['"'] = '\\"', ["\n"] = "\\n" }))
end

-- A sample value as Prometheus's clients print it: an integer as one, a
-- float in the shortest form that reads back as the same double (0.543968089,
-- not 0.54396808900000004), NaN and infinities as the format spells them.
function M.number(v)
  if v ~= v then return "NaN" end
  if v == math.huge then return "+Inf" end
  if v == -math.huge then return "-Inf" end
  if v == math.floor(v) and v > -2 ^ 53 and v < 2 ^ 53 then return ("%.0f"):format(v) end
  for digits = 15, 16 do
    local s = ("%." .. digits .. "g"):format(v)
    if tonumber(s) == v then return s end
  end
  return ("%.17g"):format(v)
end

-- The default upper bounds of the per-request histograms, in the metric's
-- base unit: seconds for the clocks (10 us to 2.5 s, 1-2.5-5 per decade),
-- counts for the other events (0, then 1-2-5 per decade to 10000).
M.SECONDS = { 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
              1, 2.5 }
M.COUNTS = { 0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000 }

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

-- counter(out, name, help, values, divisor, label_name): a counter family,
-- one sample per label value (values: { [label] = value in the kernel's
-- unit }), sorted by label.
function M.counter(out, name, help, values, divisor, label_name)
  out[#out + 1] = ("# HELP %s %s\n# TYPE %s counter\n"):format(name, help, name)
  for _, label in ipairs(sorted_keys(values)) do
    out[#out + 1] = ('%s{%s="%s"} %s\n'):format(name, label_name, M.escape(label), M.number(values[label] / divisor))
  end
end

-- histogram(out, name, help, h, sums, divisor, label_name): a histogram
-- family: h = { bounds = { upper bounds in the kernel's unit, ascending },
-- le = { their le strings }, [label] = { count per bucket, the last one
-- above every bound } }, sums = { [label] = sum in the kernel's unit }.
-- The buckets are cumulative; +Inf and _count are the number observed.
function M.histogram(out, name, help, h, sums, divisor, label_name)
  out[#out + 1] = ("# HELP %s %s\n# TYPE %s histogram\n"):format(name, help, name)
  local nb = #h.bounds + 1
  for _, label in ipairs(sorted_keys(h.by)) do
    local counts, l = h.by[label], M.escape(label)
    local c = 0
    for b = 1, nb do
      c = c + (counts[b] or 0)
      out[#out + 1] = ('%s_bucket{%s="%s",le="%s"} %s\n'):format(name, label_name, l, h.le[b], M.number(c))
    end
    out[#out + 1] = ('%s_sum{%s="%s"} %s\n'):format(name, label_name, l, M.number((sums[label] or 0) / divisor))
    out[#out + 1] = ('%s_count{%s="%s"} %s\n'):format(name, label_name, l, M.number(c))
  end
end

return M
