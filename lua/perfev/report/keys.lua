-- The sort keys of perfev.report, as perf report 6.1 defines them
-- (tools/perf/util/sort.c): what identifies a row, the column's header,
-- how a row prints, its width, and the order of rows that tie on overhead.
--
-- Each key: part(s) -> the value that tells rows apart (s: the sample's
-- comm, tid, cpu and resolved entry; by_entry: a function of the entry
-- alone), header, text(row, width), len(row)
-- -> the width the row needs, cmp(a, b) -> a negative number when row a
-- comes first among rows of equal overhead.
local symbols = require "perfev.symbols"

local M = {}

local function pad(s, w)
  if #s >= w then return s:sub(1, w) end
  return s .. (" "):rep(w - #s)
end
M.pad = pad

local function strcmp(a, b)
  if a == b then return 0 end
  return a < b and -1 or 1
end

-- The width of a resolved symbol's column: its name + "[.] "; unresolved: 16 digits + "0x" + "[.] ".
local UNRESOLVED = 16

M.comm = {
  header = "Command",
  part = function(s) return s.comm end,
  text = function(row, w) return pad(row.comm, w) end,
  -- perf sizes the column by the thread's last comm (thread__comm_len)
  len = function(row) return #(row.thread_comm or row.comm) end,
  cmp = function(a, b) return strcmp(a.comm, b.comm) end,
}

-- the thread's comm as the file leaves it (perf prints the thread's last)
M.pid = {
  header = "    Pid:Command",
  part = function(s) return s.tid end,
  text = function(row, w)
    local n = w - 8
    return ("%7.0f:"):format(row.tid) .. pad(row.thread_comm or row.comm, n < 0 and 0 or n)
  end,
  len = function(row) return #(row.thread_comm or row.comm) + 8 end,
  cmp = function(a, b) return a.tid - b.tid end,
}

M.cpu = {
  header = "CPU",
  part = function(s) return s.cpu end,
  text = function(row, w)
    local s = ("%.0f"):format(math.abs(row.cpu))
    if #s < w then s = ("0"):rep(w - #s) .. s end
    return (row.cpu < 0 and "-" or "") .. s
  end,
  len = function() return 3 end,
  cmp = function(a, b) return a.cpu - b.cpu end,
}

M.dso = {
  header = "Shared Object",
  by_entry = true,
  part = function(s) return s.e.dso end,
  text = function(row, w) return pad(row.e.dso.short, w) end,
  len = function(row)
    -- an unresolved symbol widens the dso column to 16 (hists__set_unres_dso_col_len)
    return math.max(#row.e.dso.short, row.e.name and 0 or UNRESOLVED)
  end,
  -- perf's _sort__dso_cmp: an address outside any map (no dso) after every dso
  cmp = function(a, b)
    local da, db = a.e.dso, b.e.dso
    local na, nb = da.nomap or false, db.nomap or false
    if na ~= nb then return na and 1 or -1 end
    return strcmp(da.short, db.short)
  end,
}

-- Unresolved addresses in perf's order: as signed 64-bit numbers (the
-- sign of the difference of two u64), so a corrupt frame (0x8000... to
-- 0xffff7fff...) before a kernel address before a user one.
local GROUP = { x = 0, k = 1, c = 2, u = 3 }
local function addr_order(e)
  return GROUP[e.space], e.addr
end

M.symbol = {
  header = "Symbol",
  by_entry = true,
  part = function(s) return s.e.symkey end,
  text = function(row) return "[" .. row.level .. "] " .. symbols.fast.format(row.e) end,
  last_unpadded = true,
  len = function(row)
    if row.e.name then return #(row.e.object_text or row.e.name) + 4 end
    return UNRESOLVED + 6
  end,
  cmp = function(a, b)
    local ea, eb = a.e, b.e
    if ea.name and eb.name then
      local c = strcmp(ea.name, eb.name)
      if c ~= 0 then return c end
      return ea.start < eb.start and -1 or (ea.start > eb.start and 1 or 0)
    end
    if ea.name then return -1 end
    if eb.name then return 1 end
    return 0          -- perf's sort__sym_sort: two unresolved symbols tie
  end,
}

-- perf's trace: the tracepoint's fields as its print fmt formats them
-- (an output perf had not formatted before printing does not widen the
-- column, and is cut to it: see mark_traces in perfev.report)
M.trace = {
  header = "Trace output",
  part = function(s) return s.trace end,
  text = function(row, w) return (row.trace or ""):sub(1, w) end,
  last_unpadded = true,
  len = function(row) return row.trace_known and #(row.trace or "") or 0 end,
  cmp = function(a, b) return strcmp(a.trace or "", b.trace or "") end,
}

-- The last tie-break: unresolved addresses (perf's input order of them).
M.address = {
  cmp = function(a, b)
    local ea, eb = a.e, b.e
    if ea.name or eb.name then return 0 end
    local ga, va = addr_order(ea)
    local gb, vb = addr_order(eb)
    if ga ~= gb then return ga - gb end
    if va == vb then return 0 end
    return va < vb and -1 or 1
  end,
}

-- perf's --sort names (matched by prefix, as perf does); those perfev
-- does not compute are refused with their name.
M.PERF_KEYS = { "overhead", "overhead_sys", "overhead_us", "overhead_guest_sys",
  "overhead_guest_us", "overhead_children", "sample", "period", "pid", "comm", "dso",
  "symbol", "parent", "cpu", "socket", "srcline", "srcfile", "local_weight", "weight",
  "transaction", "trace", "symbol_size", "dso_size", "cgroup", "cgroup_id", "ipc_null",
  "time", "code_page_size", "local_ins_lat", "ins_lat", "local_p_stage_cyc",
  "p_stage_cyc", "addr" }
M.SUPPORTED = { "pid", "comm", "dso", "symbol", "cpu", "trace" }
M.DEFAULT = "comm,dso,symbol"

-- parse("comm,dso,sym") -> { "comm", "dso", "symbol" } | nil, message
function M.parse(s)
  local out, seen = {}, {}
  for tok in tostring(s):gmatch("[^,%s]+") do
    local name
    for _, k in ipairs(M.PERF_KEYS) do
      if k:sub(1, #tok):lower() == tok:lower() then name = k; break end
    end
    if not name then
      return nil, ("unknown --sort key '%s' (perf's keys: %s)"):format(tok, table.concat(M.PERF_KEYS, " "))
    end
    if name ~= "overhead" and name ~= "overhead_children" then
      if not M[name] then
        return nil, ("--sort key '%s' is not supported by perfev report (supported: %s)")
          :format(name, table.concat(M.SUPPORTED, ", "))
      end
      if not seen[name] then
        seen[name] = true
        out[#out + 1] = name
      end
    end
  end
  if #out == 0 then return nil, "--sort needs at least one of: " .. table.concat(M.SUPPORTED, ", ") end
  return out
end

-- parse_fields("overhead,sample,comm,sym") -> names | nil, message (perf's -F)
local VALUES = { overhead = true, overhead_children = true, sample = true, period = true }
function M.parse_fields(s)
  if type(s) == "table" then s = table.concat(s, ",") end
  local out = {}
  for tok in tostring(s):gmatch("[^,%s]+") do
    local name
    for _, k in ipairs(M.PERF_KEYS) do
      if k:sub(1, #tok):lower() == tok:lower() and (k ~= "overhead_sys" or tok == k) then name = k; break end
    end
    if not name then return nil, ("unknown field '%s' (perf's: %s)"):format(tok, table.concat(M.PERF_KEYS, " ")) end
    if not VALUES[name] and not M[name] then
      return nil, ("field '%s' is not supported by perfev report (supported: overhead, overhead_children, "
                   .. "sample, period, %s)"):format(name, table.concat(M.SUPPORTED, ", "))
    end
    out[#out + 1] = name
  end
  if #out == 0 then return nil, "-F needs at least one field" end
  return out
end

return M
