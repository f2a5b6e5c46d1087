-- The text of `perf report --stdio` (perf 6.1, tools/perf/ui/stdio/hist.c
-- and builtin-report.c) for a perfev.report: the header lines, one
-- section per event with samples, columns as wide as perf makes them.
-- perf's random "Tip" at the end is left out; callchains are not drawn
-- (perf's `-g none`).
local keys = require "perfev.report.keys"

local M = {}

-- perf's convert_unit: 19787 -> 19, "K"
local function convert_unit(n)
  local unit = " "
  for _, u in ipairs { "K", "M", "G" } do
    if n > 1000 then
      n = math.floor(n / 1000)
      unit = u
    end
  end
  return n, unit
end

local function percent(v, total)
  if total == 0 then return 0 end
  return 100 * v / total
end

-- The columns of a report: overhead ones, then the sort keys.
local function columns(rep, h, shown)
  local cols = {}
  local function pct_col(header, field)
    cols[#cols + 1] = { header = header, width = 8, right = true,
                        text = function(r) return ("%7.2f%%"):format(percent(r[field], h.period)) end }
  end
  if rep.children then pct_col("Children", "children_period"); pct_col("Self", "period")
  else pct_col("Overhead", "period") end
  local comm_width = #keys.comm.header
  for _, r in ipairs(h.rows) do comm_width = math.max(comm_width, keys.comm.len(r)) end
  for i, k in ipairs(rep.sortkeys) do
    local w = #k.header
    for _, r in ipairs(h.rows) do w = math.max(w, k.len(r)) end
    if k == keys.pid then w = math.max(w, comm_width + 8) end
    local last = i == #rep.sortkeys
    -- the symbol is printed unpadded when it is the last column
    local text = k.text
    if k.last_unpadded and not last then text = function(r) return keys.pad(k.text(r, w), w) end end
    cols[#cols + 1] = { header = k.header, width = w, key = k, text = function(r) return text(r, w) end }
  end
  local _ = shown
  return cols
end

local function cell_header(c)
  local s = c.header
  if #s >= c.width then return s end
  if c.right then return (" "):rep(c.width - #s) .. s end
  return s .. (" "):rep(c.width - #s)
end

local function section(out, rep, ev, limit)
  local h = ev.hist
  local n, unit = convert_unit(h.samples)
  out[#out + 1] = ("# Samples: %.0f%s of event '%s'\n"):format(n, unit, h.name)
  out[#out + 1] = ("# Event count (approx.): %.0f\n#\n"):format(h.period)
  local cols = columns(rep, h)
  local hdr, dots = {}, {}
  for i, c in ipairs(cols) do
    hdr[i] = cell_header(c)
    dots[i] = ("."):rep(math.max(c.width, #c.header))
  end
  out[#out + 1] = "# " .. table.concat(hdr, "  ") .. "\n"
  out[#out + 1] = "# " .. table.concat(dots, "  ") .. "\n#\n"
  local line = {}
  for _, r in ipairs(h.rows) do
    local p = percent(rep.children and r.children_period or r.period, h.period)
    if p >= limit then
      for i, c in ipairs(cols) do line[i] = c.text(r) end
      out[#out + 1] = "  " .. table.concat(line, "  ") .. "\n"
    end
  end
  out[#out + 1] = "\n\n"
end

-- format(rep[, opts]) -> string
function M.format(rep, opts)
  opts = opts or {}
  local limit = opts.percent_limit or rep.percent_limit or 0
  local out = {
    "# To display the perf.data header info, please use --header/--header-only options.\n#\n#\n",
    ("# Total Lost Samples: %.0f\n#\n"):format(rep.lost or 0),
  }
  for _, ev in ipairs(rep.events) do section(out, rep, ev, limit) end
  return table.concat(out)
end

return M
