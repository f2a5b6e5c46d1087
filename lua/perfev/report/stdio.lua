-- The text of `perf report --stdio` (perf 6.1, tools/perf/ui/stdio/hist.c
-- and builtin-report.c) for a perfev.report: the header lines, one
-- section per event with samples, columns as wide as perf makes them.
-- perf's random "Tip" at the end is left out; callchains are not drawn
-- (perf's `-g none`).
local keys = require "perfev.report.keys"
local callchain = require "perfev.report.callchain"

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

-- The columns of a report: the overhead ones (or -F's fields, in their
-- order), then the sort keys.
local function columns(rep, h, opts)
  local comm_width = #keys.comm.header
  for _, r in ipairs(h.rows) do comm_width = math.max(comm_width, keys.comm.len(r)) end
  local VALUE = {
    overhead = { rep.children and "Self" or "Overhead", 8, function(r)
      return ("%7.2f%%"):format(percent(r.period, h.period)) end },
    overhead_children = { "Children", 8, function(r)
      return ("%7.2f%%"):format(percent(r.children_period, h.period)) end },
    sample = { "Samples", 12, function(r) return ("%12.0f"):format(r.samples) end },
    period = { "Period", 12, function(r) return ("%12.0f"):format(r.period) end },
  }
  local names = rep.fields
  if not names then
    names = {}
    if rep.children then names[1] = "overhead_children" end
    names[#names + 1] = "overhead"
    if opts.show_nr_samples then names[#names + 1] = "sample" end
    if opts.show_total_period then names[#names + 1] = "period" end
    for _, n in ipairs(rep.sort) do names[#names + 1] = n end
  end
  local cols = {}
  for i, name in ipairs(names) do
    local v = VALUE[name]
    if v then
      cols[#cols + 1] = { header = v[1], width = v[2], right = true, text = v[3] }
    else
      local k = keys[name]
      local w = #k.header
      for _, r in ipairs(h.rows) do w = math.max(w, k.len(r)) end
      if k == keys.pid then w = math.max(w, comm_width + 8) end
      -- the symbol is printed unpadded when it is the last column
      local text = k.text
      if k.last_unpadded and i < #names then text = function(r) return keys.pad(k.text(r, w), w) end end
      cols[#cols + 1] = { header = k.header, width = w, key = k, text = function(r) return text(r, w) end }
    end
  end
  return cols
end

local function cell_header(c)
  local s = c.header
  if #s >= c.width then return s end
  if c.right then return (" "):rep(c.width - #s) .. s end
  return s .. (" "):rep(c.width - #s)
end

local function section(out, rep, ev, limit, opts)
  local h = ev.hist
  local n, unit = convert_unit(h.samples)
  out[#out + 1] = ("# Samples: %.0f%s of event '%s'\n"):format(n, unit, h.name)
  out[#out + 1] = ("# Event count (approx.): %.0f\n#\n"):format(h.period)
  local cols = columns(rep, h, opts)
  local hdr, dots = {}, {}
  for i, c in ipairs(cols) do
    hdr[i] = cell_header(c)
    dots[i] = ("."):rep(math.max(c.width, #c.header))
  end
  out[#out + 1] = "# " .. table.concat(hdr, "  ") .. "\n"
  out[#out + 1] = "# " .. table.concat(dots, "  ") .. "\n#\n"
  local line = {}
  local graph = rep.graph
  local gopts = { total = h.period, event_callchain_total = h.period, skip_first = rep.skip_first }
  for _, r in ipairs(h.rows) do
    local p = percent(rep.children and r.children_period or r.period, h.period)
    if p >= limit then
      for i, c in ipairs(cols) do line[i] = c.text(r) end
      out[#out + 1] = "  " .. table.concat(line, "  ") .. "\n"
      if graph and r.tree then
        gopts.row_total = rep.children and r.children_period or r.period
        callchain.format(out, r.tree, graph, gopts)
      end
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
  local o = { show_nr_samples = opts.show_nr_samples, show_total_period = opts.show_total_period }
  if o.show_nr_samples == nil then o.show_nr_samples = rep.show_nr_samples end
  if o.show_total_period == nil then o.show_total_period = rep.show_total_period end
  for _, ev in ipairs(rep.events) do section(out, rep, ev, limit, o) end
  return table.concat(out)
end

return M
