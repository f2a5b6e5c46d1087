-- perfev.stat.format: a perfev.stat result printed as perf stat 6.1 prints
-- it -- the default text, CSV (-x SEP) and JSON (-j) -- byte for byte in
-- layout: the same columns and widths, field order, keys and number
-- formats, so that what parses perf stat's output parses perfev's.
-- JSON strings go through lua-cjson (escaped where perf would not).
local cjson = require "cjson"
local aggr = require "perfev.stat.aggr"

local M = {}

local NOT_SUPPORTED, NOT_COUNTED = "<not supported>", "<not counted>"
local METRIC_LEN = 35

-- C's "%-*s" with a computed width (a negative width left-justifies too)
local function pad(s, w)
  if w < 0 then w = -w end
  return s .. (" "):rep(w - #s)
end

local function jstr(s)
  return (cjson.encode(tostring(s)):gsub("\\/", "/"))
end

-- "%6lu.%09lu": seconds and nanoseconds of a time in ns
local function stamp(ns, json)
  local sec = math.floor(ns / 1e9)
  local frac = math.floor(ns - sec * 1e9)
  if json then return ("%.0f.%09.0f"):format(sec, frac) end
  return ("%6.0f.%09.0f"):format(sec, frac)
end
M.stamp = stamp

local function is_integer_scale(c)
  return math.floor(c.scale) == c.scale
end

-- perf's running percentage: in text a float; in CSV and JSON the
-- integer 100 * run / ena (perf divides u64s), printed with %.2f
local function pcnt(c, exact)
  local run, ena = c.running, c.enabled
  if run == ena or ena == 0 then return 100 end
  if exact then return 100 * run / ena end
  return math.floor(100 * run / ena)
end

-- the noise column (-r N): text only when not zero
local function noise(cfg, pct)
  if cfg.runs <= 1 then return "" end
  if cfg.mode == "json" then return ('"variance" : %.2f, '):format(pct) end
  if cfg.mode == "csv" then return ("%s%.2f%%"):format(cfg.sep, pct) end
  if pct ~= 0 then return ("  ( +-%6.2f%% )"):format(pct) end
  return ""
end

local function running(cfg, c)
  if cfg.mode == "json" then
    return ('"event-runtime" : %.0f, "pcnt-running" : %.2f, '):format(c.running, pcnt(c))
  elseif cfg.mode == "csv" then
    return ("%s%.0f%s%.2f"):format(cfg.sep, c.running, cfg.sep, pcnt(c))
  elseif c.running ~= c.enabled then
    return ("  (%.2f%%)"):format(pcnt(c, true))
  end
  return ""
end

-- one metric: m nil (the event has none), m.fmt nil (a blank column)
local function metric(cfg, m)
  if cfg.mode == "json" then
    local unit = m and m.unit or "(null)"
    return ('"metric-value" : %f, "metric-unit" : %s}'):format(m and m.value or 0, jstr(unit))
  elseif cfg.mode == "csv" then
    if not (m and m.fmt) then return cfg.sep .. cfg.sep end
    local v = m.fmt:format(m.value):match("^%s*([%d%.]*)")
    return cfg.sep .. v .. cfg.sep .. m.unit:match("^%s*(.-)$")
  end
  if not (m and m.fmt) then return pad("", METRIC_LEN) end
  local head = " # " .. m.fmt:format(m.value)
  return head .. " " .. pad(m.unit, METRIC_LEN - #head - 1)
end

-- The continuation line of a second metric (insn per cycle, then stalled
-- cycles per insn).
local function new_line(cfg, prefix)
  if cfg.mode == "json" then return "\n" .. (prefix or "{") end
  if cfg.mode == "csv" then return "\n" .. (prefix or "") .. cfg.sep:rep(3) end
  return "\n" .. (prefix or "") .. (" "):rep(49)
end

local function value_text(cfg, c)
  if cfg.mode == "json" then return ('"counter-value" : "%f", '):format(c.value) end
  local fmt
  if cfg.mode == "csv" then fmt = is_integer_scale(c) and "%.0f" or "%.2f"
  else fmt = is_integer_scale(c) and "%18.0f" or "%18.2f" end
  return fmt:format(c.value) .. cfg.sep
end

local function unit_name(cfg, c, name_width)
  if cfg.mode == "json" then
    return ('"unit" : %s, "event" : %s, '):format(jstr(c.unit), jstr(c.name))
  elseif cfg.mode == "csv" then
    return c.unit .. cfg.sep .. c.name
  end
  return pad(c.unit, cfg.unit_width) .. cfg.sep .. pad(c.name, name_width)
end

-- line(cfg, c, prefix) -> the line(s) of one counter, newline included.
-- prefix: the interval's time stamp (nil outside interval mode).
function M.line(cfg, c, prefix)
  local out = { prefix or (cfg.mode == "json" and "{" or "") }
  if not (c.supported and c.counted) then
    local label = c.supported and NOT_COUNTED or NOT_SUPPORTED
    if cfg.mode == "json" then out[#out + 1] = ('"counter-value" : %s, '):format(jstr(label))
    elseif cfg.mode == "csv" then out[#out + 1] = label .. cfg.sep
    else out[#out + 1] = ("%18s"):format(label) .. cfg.sep end
    out[#out + 1] = unit_name(cfg, c, -25)
    if cfg.mode == "text" then out[#out + 1] = metric(cfg, { unit = "" }) end
    out[#out + 1] = noise(cfg, 0)
    out[#out + 1] = running(cfg, c)
    if cfg.mode ~= "text" then out[#out + 1] = metric(cfg, { unit = "" }) end
    out[#out + 1] = "\n"
    return table.concat(out)
  end
  out[#out + 1] = value_text(cfg, c)
  out[#out + 1] = unit_name(cfg, c, 32)
  if cfg.mode ~= "text" then
    out[#out + 1] = noise(cfg, c.noise or 0)
    out[#out + 1] = running(cfg, c)
  end
  local ms = c.metrics
  out[#out + 1] = metric(cfg, ms and ms[1])
  for i = 2, ms and #ms or 0 do
    out[#out + 1] = new_line(cfg, prefix)
    out[#out + 1] = metric(cfg, ms[i])
  end
  if cfg.mode == "text" then
    out[#out + 1] = noise(cfg, c.noise or 0)
    out[#out + 1] = running(cfg, c)
  end
  out[#out + 1] = "\n"
  return table.concat(out)
end

-- config(res, opts) -> what the line printers need. opts.format: "text"
-- (default), "csv" or "json"; opts.sep: the CSV separator (",").
-- The result and options a caller gave, checked (issue 20: a wrong one
-- raised "attempt to index" from this file); raised at the caller's line.
local function check(res, opts, fname, list)
  local options = require "perfev.options"
  -- (an interval's res is perfev.stat's result in the making: no counters
  -- yet, the interval's own are list)
  if type(res) ~= "table" or type(list or res.counters) ~= "table" then
    options.raisef("%s: expects what perfev.stat returned, got %s", fname, options.describe(res))
  end
  if opts ~= nil and type(opts) ~= "table" then
    options.raisef("%s: options must be a table, got %s", fname, options.describe(opts))
  end
  if opts and opts.sep ~= nil and type(opts.sep) ~= "string" then
    options.raisef("%s: the separator must be a string, got %s", fname, options.describe(opts.sep))
  end
end

function M.config(res, opts, list, fname)
  check(res, opts, fname or "perfev.stat.format", list)
  opts = opts or {}
  local mode = opts.format or "text"
  if mode ~= "text" and mode ~= "csv" and mode ~= "json" then
    require("perfev.options").raisef("%s: format is 'text', 'csv' or 'json', got '%s'",
                                     fname or "perfev.stat.format", tostring(mode))
  end
  local uw = 4
  for _, c in ipairs(list or res.counters) do uw = math.max(uw, #c.unit) end
  return { mode = mode, sep = mode == "csv" and (opts.sep or ",") or " ", unit_width = uw,
           runs = res.runs or 1 }
end

local function header(res)
  local what
  if res.target == "pid" then what = ("process id '%s'"):format(res.pid)
  elseif res.target == "system" then what = "'system wide'"
  else what = ("'%s'"):format(res.label) end
  return ("\n Performance counter stats for %s%s:\n\n"):format(what,
    res.runs > 1 and (" (%d runs)"):format(res.runs) or "")
end

-- perf's digits for a time given with its standard deviation: two more
-- than the deviation's first significant digit
local function precision(sd)
  if sd > 1 then return 2 end
  if sd <= 0 then return 9 end
  return math.floor(math.ceil(-math.log(sd, 10)) + 0.5) + 2
end

local function nmi_watchdog()
  local f = io.open("/proc/sys/kernel/nmi_watchdog", "r")
  if not f then return false end
  local s = f:read("l")
  f:close()
  return s == "1"
end

local function footer(res)
  local out = { "\n" }
  if res.runs == 1 then
    out[#out + 1] = (" %17.9f seconds time elapsed"):format(res.elapsed)
    if res.user then
      out[#out + 1] = "\n\n"
      out[#out + 1] = (" %17.9f seconds user\n"):format(res.user)
      out[#out + 1] = (" %17.9f seconds sys\n"):format(res.sys)
    end
  else
    local p = precision(res.elapsed_sd)
    out[#out + 1] = (" %17." .. p .. "f +- %." .. p .. "f seconds time elapsed"):format(res.elapsed, res.elapsed_sd)
    local pct = res.elapsed ~= 0 and 100 * res.elapsed_sd / res.elapsed or 0
    if pct ~= 0 then out[#out + 1] = ("  ( +-%6.2f%% )"):format(pct) end
  end
  out[#out + 1] = "\n\n"
  local hint = false
  for _, c in ipairs(res.counters) do
    if c.supported and not c.counted then hint = true end
  end
  if hint and nmi_watchdog() then
    out[#out + 1] = "Some events weren't counted. Try disabling the NMI watchdog:\n" ..
      "\techo 0 > /proc/sys/kernel/nmi_watchdog\n\tperf stat ...\n\techo 1 > /proc/sys/kernel/nmi_watchdog\n"
  end
  return table.concat(out)
end

-- The lines of an aggregated result (perf stat -A, --per-*): perf prints
-- each counter over the CPUs with -A, each socket/die/core/node's
-- counters in turn, and with --per-thread each counter over the threads,
-- the largest count first.
-- groups, counters: the run's (res.groups, res.counters) or an interval's;
-- stamp_prefix: an interval's time stamp (before each line; in JSON its
-- first keys).
local function aggregated(res, cfg, out, groups, counters, stamp_prefix)
  local mode = res.aggr
  groups, counters = groups or res.groups, counters or res.counters
  local function line(g, i)
    local p = aggr.prefix(mode, g, cfg.mode, cfg.sep)
    if stamp_prefix then
      p = stamp_prefix .. (cfg.mode == "json" and p:gsub("^{", "") or p)
    end
    out[#out + 1] = M.line(cfg, g.counters[i], p)
  end
  if mode == "none" or mode == "thread" then
    for i in ipairs(counters) do
      local list = groups
      if mode == "thread" then
        list = {}
        for k, g in ipairs(groups) do list[k] = g end
        table.sort(list, function(a, b)
          local x, y = a.counters[i].count or 0, b.counters[i].count or 0
          if x ~= y then return x > y end
          return a.tid < b.tid
        end)
      end
      for _, g in ipairs(list) do line(g, i) end
    end
  else
    for _, g in ipairs(groups) do
      for i in ipairs(counters) do line(g, i) end
    end
  end
end

-- format(res, opts) -> the whole output of a run (without interval lines)
function M.format(res, opts, fname)
  local cfg = M.config(res, opts, nil, fname)
  local out = {}
  if cfg.mode == "text" then out[1] = header(res) end
  if res.groups then aggregated(res, cfg, out)
  else
    for _, c in ipairs(res.counters) do out[#out + 1] = M.line(cfg, c) end
  end
  if cfg.mode == "text" then out[#out + 1] = footer(res) end
  return table.concat(out)
end

-- perf 6.1's interval header columns between "time" and "counts", by
-- aggregation mode
local INTERVAL_HEAD = { none = "CPU       ", socket = "socket cpus", die = "die          cpus",
                        core = "core            cpus", node = "node   cpus", thread = "            comm-pid     " }

-- interval(res, iv, opts) -> the lines of one interval (iv: an element of
-- res.intervals, iv.index its number from 1): in text, a header line
-- first and every 25 intervals, as perf does. With an aggregation (-A,
-- --per-*), each group's lines, in the order of the whole run's.
function M.interval(res, iv, opts)
  if type(iv) ~= "table" or type(iv.counters) ~= "table" or type(iv.time) ~= "number"
     or type(iv.index) ~= "number" then
    local options = require "perfev.options"
    options.raisef("perfev.stat.interval: expects an interval of what perfev.stat returned (res.intervals[i]), "
                   .. "got %s", options.describe(iv))
  end
  local cfg = M.config(res, opts, iv.counters, "perfev.stat.interval")
  local out = {}
  if cfg.mode == "text" and (iv.index - 1) % 25 == 0 then
    local head = iv.groups and INTERVAL_HEAD[res.aggr]
    out[1] = ("#           time %s            counts %" .. cfg.unit_width .. "s events\n")
             :format(head and (head .. " ") or "", "unit")
  end
  local prefix
  if cfg.mode == "json" then prefix = ('{"interval" : %s, '):format(stamp(iv.time, true))
  else prefix = stamp(iv.time) .. cfg.sep end
  if iv.groups then
    aggregated(res, cfg, out, iv.groups, iv.counters, prefix)
  else
    for _, c in ipairs(iv.counters) do out[#out + 1] = M.line(cfg, c, prefix) end
  end
  return table.concat(out)
end

return M
