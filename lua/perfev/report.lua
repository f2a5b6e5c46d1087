-- perfev.report: `perf report` for perf.data files (perf's or perfev's):
-- samples grouped by sort keys (comm, dso, symbol by default), overhead
-- weighted by period, with perf's children (cumulative) overhead when the
-- samples have callchains. See doc/report.md.
--
--   local report = require "perfev.report"
--   local rep = assert(report.open("perf.data"))          -- { sort = "comm,dso,sym", children = false, ... }
--   for _, ev in ipairs(rep.events) do
--     for _, row in ipairs(ev.rows) do print(row.overhead, row.comm, row.dso, row.symbol) end
--   end
--   io.write(rep:format())                                -- perf report --stdio
--   local events = report("perf.data")                    -- the same, events and rows only
local core = require "perfev.core"
local unpack = table.unpack or rawget(_G, "unpack")
local pd = require "perfev.perfdata"
local options = require "perfev.options"
local symbols = require "perfev.symbols"
local keys = require "perfev.report.keys"
local callchain = require "perfev.report.callchain"

local M = {}

local Report = {}
Report.__index = Report
M.Report = Report

local TYPES = { "sample", "mmap", "mmap2", "comm", "fork", "lost_samples" }
local MAX_STACK = 127            -- perf's default --max-stack (sysctl kernel.perf_event_max_stack)
local SAMPLE_CALLCHAIN = core.SAMPLE.CALLCHAIN
local TRACEPOINT = core.TYPE.TRACEPOINT

-- The level letter perf prints for a cpumode.
local LEVEL = { kernel = "k", user = ".", hypervisor = "H", guest_kernel = "g", guest_user = "u" }

local OPTIONS = { sort = "string|table", fields = "string|table", callchain = "string|boolean|table",
                  show_nr_samples = "boolean", show_total_period = "boolean", children = "boolean",
                  kallsyms = "string|boolean", debug_dir = "string", perfmap_dir = "string",
                  percent_limit = "number", progress = "boolean", max_stack = "positive" }

local function has_bit(x, bit)
  return math.floor(x / bit) % 2 == 1
end

-- The state of one event's histogram.
local function new_hist(entry)
  return { name = entry.name, attr = entry.attr, samples = 0, period = 0, root = {}, rows = {}, ctx = {},
           default_period = entry.attr.sample_period,
           callchain = has_bit(entry.attr.sample_type, SAMPLE_CALLCHAIN),
           tracepoint = entry.attr.type == TRACEPOINT }
end

-- The node under `node` for sample s's parts of by[1..n] (created on the way).
local function descend(node, by, n, s)
  for i = 1, n do
    local part = by[i].part(s)
    local nxt = node[part]
    if not nxt then
      nxt = {}
      node[part] = nxt
    end
    node = nxt
  end
  return node
end

-- The row of sample s in hist h (created with s's values when new).
local function row_of(h, sortkeys, s)
  local n = #sortkeys
  local node = descend(h.root, sortkeys, n - 1, s)
  local part = sortkeys[n].part(s)
  local row = node[part]
  if not row then
    -- every field a row gets later is set here (false for none yet): see
    -- perfev.report.callchain's node on LuaJIT's template forwarding
    row = { comm = s.comm, tid = s.tid, pid = s.pid, cpu = s.cpu, e = s.e, level = s.level, trace = s.trace or false,
            period = 0, samples = 0, children_period = 0, stamp = 0, tree = false, max_depth = 0,
            thread_comm = false, trace_known = false, seen = 0 }
    node[part] = row
    h.rows[#h.rows + 1] = row
  end
  return row
end

-- The rows of a sample's comm/thread/cpu (the sort keys that do not
-- depend on the address): a table entry -> row, filled as rows are found.
local function ctx_of(self, h, s)
  return descend(h.ctx, self.ctxkeys, #self.ctxkeys, s)
end

-- The frames of a sample's callchain, outermost first, as perf's cursor
-- holds them: self.F[1..n] the entries and, with children, self.R[1..n]
-- the rows (created on the way). With children, perf walks the chain
-- from the outermost caller in (its callchain order is "caller" then),
-- and a row created on the way takes the level of the last frame that
-- had a map, starting from the sample's (fill_callchain_info leaves it
-- alone for an address outside any map). The decoder gives the frames
-- without PERF_CONTEXT_* markers and the markers as segments
-- (rec.callchain_contexts); frames before any marker are user frames, as
-- perf starts.
local MODE_LEVEL = { kernel = "k", user = "." }

-- Frames last..first of one context (mode), outermost first: their
-- entries in self.F, the level of those that have a map in self.L.
local resolve, cache_of, unknown_entry = symbols.fast.resolve, symbols.fast.cache, symbols.fast.unknown_entry
local function walk(self, s, chain, first, last, mode, nf)
  local S = self.S
  local unknown = S.unknown
  local cache = cache_of(S, s.pid, mode)
  local mlevel = MODE_LEVEL[mode]
  local F, L = self.F, self.L
  for i = last, first, -1 do
    local ip = chain[i]
    local e = cache and cache[ip]
    if not e then
      if mlevel then e = resolve(S, s.pid, ip, mode, true) else e = unknown_entry(S, ip) end
    end
    nf = nf + 1
    F[nf] = e
    L[nf] = mlevel and e.dso ~= unknown and mlevel or false
  end
  return nf
end

-- The rows of the frames (self.R), created on the way in the callchain
-- order, each new one with the level of the last frame before it that
-- had a map (from the sample's own level).
local function frame_rows(self, h, s, ctx, nf)
  local F, L, R = self.F, self.L, self.R
  local sample_e, level = s.e, s.level
  local from, to, step = 1, nf, 1
  if self.callee then from, to, step = nf, 1, -1 end
  for i = from, to, step do
    local e = F[i]
    if L[i] then level = L[i] end
    local row = ctx[e]
    if not row then
      s.e, s.level = e, level
      row = row_of(h, self.sortkeys, s)
      ctx[e] = row
    end
    R[i] = row
  end
  s.e, s.level = sample_e, level
end

-- -> the number of frames put in self.F (and, with children, their rows
-- in self.R). perf takes max_stack frames in its callchain order: from the
-- outermost (caller) or from the sample's (callee).
local function frames(self, h, s, ctx, chain, contexts)
  local n = #chain
  local low, high = 1, n
  if self.callee then
    if high > self.max_stack then high = self.max_stack end
  else
    low = n - self.max_stack + 1
    if low < 1 then low = 1 end
  end
  local nseg = contexts and #contexts or 0
  for i = 1, nseg do
    if type(contexts[i].context) ~= "string" then return 0 end   -- a corrupt marker: perf drops the chain
  end
  local nf = 0
  for i = nseg, 1, -1 do
    local c = contexts[i]
    local first = c.first > low and c.first or low
    local last = c.last < high and c.last or high
    if first <= last then nf = walk(self, s, chain, first, last, c.context, nf) end
  end
  local before = nseg > 0 and contexts[1].first - 1 or n
  if before > high then before = high end
  if before >= low then nf = walk(self, s, chain, low, before, "user", nf) end
  if self.children then
    local level = s.level
    frame_rows(self, h, s, ctx, nf)
    s.level = level
  end
  return nf
end

-- Adds the sample's period to the children of every row its chain passes
-- through, once per row (perf's iter_add_next_cumulative_entry).
local function cumulate(self, nf, period, stamp)
  local R = self.R
  for i = 1, nf do
    local row = R[i]
    if row.stamp ~= stamp then
      row.stamp = stamp
      row.children_period = row.children_period + period
    end
  end
end

-- Counts the sample's chain among the distinct chains of its row: the call
-- graphs are built from those once, at the end (finish_graphs).
local PATH = "$"
local function add_path(self, h, row, nf, period, n)
  local F = self.F
  local node = h.paths[row]
  if not node then
    node = {}
    h.paths[row] = node
  end
  for i = 1, nf do
    local e = F[i]
    local nxt = node[e]
    if not nxt then
      nxt = {}
      node[e] = nxt
    end
    node = nxt
  end
  local p = node[PATH]
  if not p then
    local f, r = {}, {}
    for i = 1, nf do f[i] = F[i] end
    if self.children then for i = 1, nf do r[i] = self.R[i] end end
    -- (stop: its last entry in the call graphs' order, perfev.report.callchain's add)
    p = { row = row, F = f, R = r, n = nf, period = 0, samples = 0, stop = self.callee and 1 or nf }
    node[PATH] = p
    h.pathlist[#h.pathlist + 1] = p
  end
  p.period = p.period + period
  p.samples = p.samples + n
end

-- perf's callchain_append of each sample: the whole chain to the sample's
-- row, and with children the chain from each other row's first frame on
-- to that row (in the callchain order: caller, or callee). The rows'
-- trees keep the chains (perfev.report.callchain finds their nodes when
-- they are printed).
local function finish_graphs(self, h)
  for i, p in ipairs(h.pathlist) do
    local R, n = p.R, p.n
    if n > 0 then
      local from, to, step = 1, n, 1
      if self.callee then from, to, step = n, 1, -1 end
      local row = p.row
      row.tree = row.tree or callchain.new(step)
      callchain.add(row.tree, p, from)
      if n > row.max_depth then row.max_depth = n end
      if self.children then
        row.seen = i          -- the rows this chain was added to
        for k = from, to, step do
          local r = R[k]
          if r.seen ~= i then
            r.seen = i
            r.tree = r.tree or callchain.new(step)
            callchain.add(r.tree, p, k)
            local depth = (to - k) * step + 1
            if depth > r.max_depth then r.max_depth = depth end
          end
        end
      end
    end
  end
  h.paths, h.pathlist = nil, nil
end

-- perf 6.1 formats a row's trace output lazily, when its sort compares
-- it with another row's (or the same row's next sample) and at print
-- time; the column is as wide as the outputs formatted before printing
-- (at least its header), and longer ones are cut to it. A row's output
-- is compared when the row has two samples or shares the values of the
-- sort keys before `trace` with another row (its neighbours in perf's
-- trees are then of the same values).
local ROW_VALUE = {
  comm = function(r) return r.comm end, pid = function(r) return r.tid end,
  cpu = function(r) return r.cpu end, dso = function(r) return r.e.dso end,
  symbol = function(r) return r.e.symkey end,
}
local function mark_traces(self)
  local before = {}
  for _, n in ipairs(self.sort) do
    if n == "trace" then break end
    before[#before + 1] = ROW_VALUE[n]
  end
  for _, h in ipairs(self.hists) do
    local count, key = {}, {}
    for _, r in ipairs(h.rows) do
      local node = count
      for i = 1, #before do
        local v = before[i](r)
        node[v] = node[v] or {}
        node = node[v]
      end
      node.n = (node.n or 0) + 1
      key[r] = node
    end
    for _, r in ipairs(h.rows) do r.trace_known = r.samples > 1 or key[r].n > 1 end
  end
end

-- perf's trace column: a tracepoint's raw data through its print fmt
-- (other events: empty, as perf leaves them)
local function trace_output(self, h, rec)
  if not h.tracepoint or not rec.raw then return "" end
  local ev = self.trace_events[h.name]
  if not ev then
    local why
    ev, why = require("perfev.report.trace").event(h.name)
    if not ev then error("perfev.report: --sort trace: " .. why, 0) end
    self.trace_events[h.name] = ev
  end
  if not self.ksym then
    local S = self.S
    self.ksym = function(v)
      local e = resolve(S, -1, v, "kernel")
      if not e.name then return nil end
      local _, x = symbols.fast.split(v)      -- the address in the entry's space: a plain number
      return e.name, x - e.start
    end
  end
  return ev:render(rec.raw, self.ksym)
end

local function progress_bar(opts, size)
  if opts.progress == false then return nil end
  local ok, term = pcall(require, "term")
  local tty = opts.progress == true
  if not tty and ok and term.isatty and io.type(io.stderr) == "file" then
    local iok, yes = pcall(term.isatty, io.stderr)
    tty = iok and yes
  end
  if not tty or not size or size == 0 then return nil end
  local t0, shown = os.clock(), false
  return function(offset, done)
    if not shown and not done and os.clock() - t0 < 0.5 then return end
    if done then
      if shown then io.stderr:write("\r", (" "):rep(60), "\r") end
      return
    end
    shown = true
    local frac = math.min(1, offset / size)
    local w = math.floor(frac * 40)
    io.stderr:write(("\rperfev report: [%s%s] %3.0f%%"):format(("#"):rep(w), ("."):rep(40 - w), frac * 100))
  end
end

-- What a sample's row is made of (and its chain, for the call graphs and
-- the children), counted in C unless trace output is needed.
local TALLY_FIELDS = { "event", "ip", "pid", "tid", "cpu", "cpumode" }
local TALLY_CHAIN_FIELDS = { "event", "ip", "pid", "tid", "cpu", "cpumode", "callchain", "callchain_contexts" }

-- The period of n samples of h whose periods sum to p (a u64 cdata on
-- LuaJIT), or, when they have none, the attr's sample_period (1 if none).
local function period_of(h, p, n)
  if p ~= nil then return tonumber(p) end
  return n * (tonumber(h.default_period) or 1)
end

-- The histograms of f's events (self.hists, and by name), and how the
-- samples are walked: children, call graphs, the order of the chains.
local function prepare(self, f, opts)
  local hists, by_name = {}, {}
  for _, a in ipairs(f:attrs()) do
    if not by_name[a.name] then
      local h = new_hist(a)
      hists[#hists + 1] = h
      by_name[a.name] = h
    end
  end
  self.hists = hists
  local any_chain = false
  for _, h in ipairs(hists) do any_chain = any_chain or h.callchain end
  local children = opts.children
  if children == nil then children = any_chain end
  self.children = children and any_chain
  local g = self.graph_params
  self.graph = any_chain and g.mode ~= "none" and g or nil
  if g.order then self.callee = g.order == "callee" else self.callee = not self.children end
  self.walk_chains = self.children or self.graph ~= nil
  self.F, self.R, self.L = {}, {}, {}
  for _, h in ipairs(hists) do h.paths, h.pathlist = {}, {} end
  return hists, by_name
end

-- sampler(self, comms) -> sample(h, n, period, ip, pid, tid, cpu, mode,
-- rec): n samples of h with these values (one, or a tally of them), their
-- period summed, into their row, the children and the call graphs; rec:
-- the sample's table when its chain or trace is used.
local function sampler(self, comms)
  local S, s = self.S, {}
  -- the rows of the last sample's thread (the next one is often of the same)
  -- (not with the trace key: each sample's own)
  local last_tid, last_h, last_cpu, last_comm, last_ctx
  local reuse_ctx = not self.trace_events
  return function(h, n, period, ip, pid, tid, cpu, mode, rec)
    tid = tid or -1
    s.pid, s.tid, s.cpu = pid or -1, tid, cpu or -1
    if self.trace_events then s.trace = trace_output(self, h, rec) end
    s.comm = comms[tid] or (":" .. tid)
    s.level = LEVEL[mode] or "."
    local e = resolve(S, s.pid, ip or 0, mode == "kernel" and "kernel" or "user")
    s.e = e
    local ctx
    if reuse_ctx and tid == last_tid and h == last_h and s.cpu == last_cpu and s.comm == last_comm then
      ctx = last_ctx
    else
      ctx = ctx_of(self, h, s)
      last_tid, last_h, last_cpu, last_comm, last_ctx = tid, h, s.cpu, s.comm, ctx
    end
    local row = ctx[e]
    if not row then
      row = row_of(h, self.sortkeys, s)
      ctx[e] = row
    end
    row.period = row.period + period
    row.samples = row.samples + n
    h.samples = h.samples + n
    h.period = h.period + period
    if self.children then
      row.children_period = row.children_period + period
      row.stamp = h.samples
    end
    local chain = self.walk_chains and rec and rec.callchain
    if chain then
      local nf = frames(self, h, s, ctx, chain, rec.callchain_contexts)
      if self.children then cumulate(self, nf, period, h.samples) end
      if self.graph and h.callchain then add_path(self, h, row, nf, period, n) end
    end
  end
end

-- sideband(self, comms, bar, base) -> other(rec): a record that is not a
-- sample: mappings, thread names, losses (self.lost), the progress bar
local function sideband(self, comms, bar, base)
  local S = self.S
  self.lost = 0
  return function(rec)
    local t = rec.type
    if t == "mmap" or t == "mmap2" then
      S:mmap(rec)
    elseif t == "comm" then
      comms[rec.tid] = rec.comm
    elseif t == "fork" then
      if comms[rec.ptid] and not comms[rec.tid] then comms[rec.tid] = comms[rec.ptid] end
      if rec.pid ~= rec.ppid then S:fork(rec) end
    elseif t == "lost_samples" then
      self.lost = self.lost + (rec.lost or 0)
    end
    if bar and rec.offset then bar(rec.offset - base) end
  end
end

-- The samples counted in C by what makes their row and their chain
-- (doc/decoding.md's tally): the Lua of sample() runs once per distinct
-- sample, not per sample.
local function read_tallies(self, f, by_name, sample, other, bar)
  local hists = self.hists
  local args = {}
  for i, k in ipairs(self.walk_chains and TALLY_CHAIN_FIELDS or TALLY_FIELDS) do args[i] = k end
  args[#args + 1] = { order = "time", types = TYPES, offsets = bar and true or nil, on_record = other }
  local chained = { callchain = false, callchain_contexts = false }
  for n, w, ev, ip, pid, tid, cpu, mode, chain, contexts in f:tally(unpack(args)) do
    local h = by_name[ev] or hists[1]
    chained.callchain, chained.callchain_contexts = chain, contexts
    sample(h, n, period_of(h, w, n), ip, pid, tid, cpu, mode, chained)
  end
end

-- Trace output needs each sample's raw data: samples bring only the
-- fields used here, decoded into one table; the other records come whole
-- (doc/decoding.md's `fields` with `into`).
local function read_samples(self, f, by_name, sample, other, bar, base)
  local hists = self.hists
  local fields = { "event", "ip", "pid", "tid", "cpu", "period", "cpumode", "callchain", "callchain_contexts" }
  if bar then fields[#fields + 1] = "offset" end
  fields[#fields + 1] = "raw"
  local o = { order = "time", types = TYPES, offsets = bar and true or nil, into = {}, fields = fields }
  local count = 0
  for rec in f:records(o) do
    if rec.type == "sample" then
      local h = by_name[rec.event] or hists[1]
      sample(h, 1, period_of(h, rec.period, 1), rec.ip, rec.pid, rec.tid, rec.cpu, rec.cpumode, rec)
      if bar then
        count = count + 1
        if count % 4096 == 0 then bar(rec.offset - base) end
      end
    else
      other(rec)
    end
  end
end

-- Reads every sample of f into per-event histograms.
local function aggregate(self, f, opts)
  local hists, by_name = prepare(self, f, opts)
  local comms = { [0] = "swapper" }
  local hdr = f:header()
  local size = hdr.data and hdr.data.size
  local bar = progress_bar(opts, size)
  local base = hdr.data and hdr.data.offset or 0
  local sample, other = sampler(self, comms), sideband(self, comms, bar, base)
  if not self.trace_events then
    read_tallies(self, f, by_name, sample, other, bar)
  else
    read_samples(self, f, by_name, sample, other, bar, base)
  end
  if bar then bar(size, true) end
  if self.graph then
    for _, h in ipairs(hists) do finish_graphs(self, h) end
  end
  self.F, self.R, self.L = nil, nil, nil
  for _, h in ipairs(hists) do
    for _, r in ipairs(h.rows) do r.thread_comm = comms[r.tid] or r.comm end
  end
end

-- Orders the rows of a histogram as perf prints them: children, then
-- self overhead (larger first), then each sort key's order.
local function by_value(field)
  return { field = field, cmp = function(a, b)
    if a[field] == b[field] then return 0 end
    return a[field] > b[field] and -1 or 1
  end }
end
local VALUE_ORDER = { overhead = by_value("period"), period = by_value("period"),
                      sample = by_value("samples"), overhead_children = by_value("children_period") }

-- A stable merge sort of list by less(a, b).
local function merge_sort(list, less)
  local n = #list
  local src, dst = list, {}
  local width = 1
  while width < n do
    local i = 1
    while i <= n do
      local mid = math.min(i + width, n + 1)
      local hi = math.min(i + 2 * width, n + 1)
      local a, b, k = i, mid, i
      while a < mid and b < hi do
        if less(src[b], src[a]) then dst[k] = src[b]; b = b + 1
        else dst[k] = src[a]; a = a + 1 end
        k = k + 1
      end
      while a < mid do dst[k] = src[a]; a = a + 1; k = k + 1 end
      while b < hi do dst[k] = src[b]; b = b + 1; k = k + 1 end
      i = i + 2 * width
    end
    src, dst = dst, src
    width = width * 2
  end
  if src ~= list then
    for i = 1, n do list[i] = src[i] end
  end
end

-- The keys that are functions of a row's entry alone, each with an
-- encoder: a string whose byte order is the key's order (prefix-free, so
-- that encodings can be concatenated), or nil where it cannot tell.
local GROUP = { x = "0", k = "1", c = "2", u = "3" }
local mtype = math.type   -- nil on LuaJIT
local function hexnum(v)
  if type(v) ~= "number" then return nil end
  if mtype and mtype(v) == "integer" then   -- any 64-bit integer: the sign, then its bits
    return (v < 0 and "0" or "1") .. ("%016x"):format(v)
  end
  if v < 0 or v >= 2 ^ 53 then return nil end
  return ("1%016x"):format(v)
end
local ENTRY_KEYS = {
  [keys.dso] = function(e) return (e.dso.nomap and "1" or "0") .. e.dso.short .. "\0" end,
  [keys.symbol] = function(e)
    if not e.name then return "1" end
    local n = hexnum(e.start)
    return n and ("0" .. e.name .. "\0" .. n)
  end,
  [keys.address] = function(e)   -- after the symbol key: only unresolved entries meet here
    if e.name then return "" end
    local v = e.addr
    if e.space == "c" and type(v) == "number" then v = v + 4096 end
    local n = hexnum(v)
    return n and (GROUP[e.space] .. n)
  end,
}

-- The keys whose order is one field of the row, ascending (strings byte
-- by byte, as perf's strcmp; numbers as numbers).
local ASCENDING = { [keys.comm] = "comm", [keys.pid] = "tid", [keys.cpu] = "cpu" }

-- rank_entry_keys(order, rows) -> order, where each run of consecutive
-- entry keys is one comparison of two strings (each distinct entry's keys
-- encoded once) instead of up to five comparator calls per pair of rows.
-- A run stays as it is when an entry cannot be encoded (a corrupt frame's
-- address on LuaJIT), and the address key only after the symbol key.
local function rank_entry_keys(order, rows)
  local out, i, n = {}, 1, #order
  while i <= n do
    local run = {}
    while i <= n and ENTRY_KEYS[order[i]] do
      if order[i] == keys.address and order[i - 1] ~= keys.symbol then break end
      run[#run + 1] = order[i]; i = i + 1
    end
    local enc = {}
    for _, r in ipairs(#run > 0 and rows or {}) do
      local e = r.e
      if enc and not enc[e] then
        local parts = {}
        for j, k in ipairs(run) do
          parts[j] = ENTRY_KEYS[k](e)
          if not parts[j] then enc = nil; break end
        end
        if enc then enc[e] = table.concat(parts) end
      end
    end
    if #run == 0 then
      out[#out + 1] = order[i]
      i = i + 1
    elseif not enc then
      for _, k in ipairs(run) do out[#out + 1] = k end
    else
      out[#out + 1] = { enc = enc }
    end
  end
  return out
end

-- Orders the rows of a histogram as perf prints them: children, then
-- self overhead (larger first), then each sort key's order; with -F and
-- no --sort, the fields' order (perf sorts by its output fields then).
local function sort_rows(self, rows)
  local order = {}
  if self.fields and not self.explicit_sort then
    for _, n in ipairs(self.fields) do order[#order + 1] = VALUE_ORDER[n] or keys[n] end
  else
    if self.children then
      order[1] = VALUE_ORDER.overhead_children
      -- perf's __hpp__sort_acc: with call graphs, a caller above its callee
      -- (the deeper tree first, in the caller order) when the children
      -- overheads tie and the rows are of one thread
      if self.graph then
        local sign = self.callee and 1 or -1
        order[2] = { cmp = function(a, b)
          if a.tid ~= b.tid then return 0 end
          return sign * ((a.max_depth or 0) - (b.max_depth or 0))
        end }
      end
    end
    order[#order + 1] = VALUE_ORDER.overhead
    for _, k in ipairs(self.sortkeys) do order[#order + 1] = k end
  end
  for _, k in ipairs { "symbol", "address", "comm", "dso", "pid", "cpu" } do order[#order + 1] = keys[k] end
  -- a key met again can only tie (every key before it tied)
  local seen, uniq = {}, {}
  for _, k in ipairs(order) do
    if not seen[k] then seen[k] = true; uniq[#uniq + 1] = k end
  end
  order = rank_entry_keys(uniq, rows)
  -- keys of plain values compared inline: 1 a value (larger first), 2 a
  -- field in ascending order, 3 an entry run's strings; 0 a comparator
  local kinds, args, m = {}, {}, #order
  for i, k in ipairs(order) do
    if k.field then kinds[i], args[i] = 1, k.field
    elseif ASCENDING[k] then kinds[i], args[i] = 2, ASCENDING[k]
    elseif k.enc then kinds[i], args[i] = 3, k.enc
    else kinds[i], args[i] = 0, k.cmp end
  end
  local function less(a, b)
    for i = 1, m do
      local kind, arg = kinds[i], args[i]
      if kind == 1 then
        local x, y = a[arg], b[arg]
        if x ~= y then return x > y end
      elseif kind == 2 then
        local x, y = a[arg], b[arg]
        if x ~= y then return x < y end
      elseif kind == 3 then
        local x, y = arg[a.e], arg[b.e]
        if x ~= y then return x < y end
      else
        local c = arg(a, b)
        if c ~= 0 then return c < 0 end
      end
    end
    return false
  end
  -- perf's depth rule orders only rows of one thread, so that order may
  -- not be transitive, which table.sort does not allow: a merge sort then
  if self.children and self.graph then merge_sort(rows, less) else table.sort(rows, less) end
end

-- The public rows: plain values.
local function public_row(self, h, r)
  local e = r.e
  local row = {
    overhead = h.period > 0 and 100 * r.period / h.period or 0,
    period = r.period, samples = r.samples,
    comm = r.comm, pid = r.pid, tid = r.tid, cpu = r.cpu, thread_comm = r.thread_comm,
    dso = e.dso.short, dso_path = e.dso.name, sym = e.name, level = r.level,
    symbol = symbols.fast.format(e), address = not e.name and symbols.fast.format(e) or nil,
  }
  if self.children then
    row.children = h.period > 0 and 100 * r.children_period / h.period or 0
    row.children_period = r.children_period
  end
  return row
end

-- report.open(path | file handle, opts) -> report | nil, message, errno
-- opts: sort ("comm,dso,symbol", or a list), fields (perf's -F: overhead,
-- overhead_children, sample, period and sort keys, in the order printed),
-- show_nr_samples, show_total_period (perf's -n and --show-total-period
-- columns), children (default: true when
-- the samples have callchains, as perf), percent_limit, kallsyms (a path,
-- or false), debug_dir, perfmap_dir, max_stack (127), progress (true,
-- false; default: a bar on stderr when it is a terminal and it runs long).
function M.open(src, opts)
  opts = options.check(opts, OPTIONS, "perfev.report")
  if type(src) ~= "string" and io.type(src) ~= "file" then   -- (perfdata.open's message named perfdata.open)
    options.raisef("perfev.report: expected a path, \"-\" or a file handle, got %s", options.describe(src))
  end
  local fields, why
  if opts.fields then
    fields, why = keys.parse_fields(opts.fields)
    if not fields then return nil, "perfev.report: " .. why end
  end
  local graph_params
  graph_params, why = callchain.parse(opts.callchain)
  if not graph_params then return nil, "perfev.report: " .. why end
  -- perf's --percent-limit is also the call graphs' threshold
  if opts.percent_limit and not graph_params.threshold_set then graph_params.min_percent = opts.percent_limit end
  local sort = opts.sort
  if not sort and fields then
    -- perf: without --sort, the fields that are sort keys are the keys
    local ks = {}
    for _, n in ipairs(fields) do if keys[n] then ks[#ks + 1] = n end end
    if #ks > 0 then sort = ks end
  end
  sort = sort or keys.DEFAULT
  if type(sort) == "table" then sort = table.concat(sort, ",") end
  local names
  names, why = keys.parse(sort)
  if not names then return nil, "perfev.report: " .. why end
  local f, msg, errno = pd.open(src)
  if not f then return nil, msg, errno end
  -- perf's default for a file of tracepoints only: the formatted event
  local attrs = f:attrs()
  local all_tp = #attrs > 0
  for _, a in ipairs(attrs) do all_tp = all_tp and a.attr.type == TRACEPOINT end
  if all_tp and not opts.sort and not fields then names = { "trace" } end
  local self = setmetatable({ path = type(src) == "string" and src or nil, sort = names, fields = fields,
                              explicit_sort = opts.sort ~= nil,
                              show_nr_samples = opts.show_nr_samples, show_total_period = opts.show_total_period,
                              percent_limit = opts.percent_limit or 0,
                              max_stack = opts.max_stack or MAX_STACK, graph_params = graph_params }, Report)
  -- perf does not repeat the row's symbol atop its graph with --sort sym...
  local raw_sort = type(opts.sort) == "table" and table.concat(opts.sort, ",") or opts.sort
  self.skip_first = not fields and type(raw_sort) == "string" and raw_sort:sub(1, 3) == "sym"
  self.sortkeys, self.ctxkeys = {}, {}
  for i, n in ipairs(names) do
    self.sortkeys[i] = keys[n]
    if not keys[n].by_entry then self.ctxkeys[#self.ctxkeys + 1] = keys[n] end
  end
  self.S = symbols.new { build_ids = f:features().build_id, kallsyms = opts.kallsyms,
                         debug_dir = opts.debug_dir, perfmap_dir = opts.perfmap_dir }
  for _, n in ipairs(names) do
    if n == "trace" then self.trace_events = {} end
  end
  local ok, err = pcall(aggregate, self, f, opts)
  self.header = f:header()
  self.features = f:features()
  f:close()
  if not ok then return nil, tostring(err) end
  if self.trace_events then mark_traces(self) end
  local all_trace = #self.hists > 0
  for _, h in ipairs(self.hists) do all_trace = all_trace and h.tracepoint end
  self.tracepoints_only = all_trace
  local ents = {}
  for _, h in ipairs(self.hists) do
    for _, r in ipairs(h.rows) do ents[#ents + 1] = r.e end
  end
  symbols.demangle(ents)
  self.events = {}
  for _, h in ipairs(self.hists) do
    if h.samples > 0 then
      sort_rows(self, h.rows)
      local ev = { name = h.name, samples = h.samples, period = h.period, rows = {} }
      for i, r in ipairs(h.rows) do ev.rows[i] = public_row(self, h, r) end
      ev.hist = h
      self.events[#self.events + 1] = ev
    end
  end
  return self
end

-- rep:format([opts]) -> the text of perf report --stdio (opts: percent_limit)
function Report:format(opts)
  options.self(self, Report, "perfev.report", "format")
  return require("perfev.report.stdio").format(self, opts)
end

function Report:__tostring()
  options.self(self, Report, "perfev.report", "__tostring")
  local names = {}
  for i, ev in ipairs(self.events or {}) do names[i] = ("%s: %d samples"):format(ev.name, ev.samples) end
  return ("perfev.report(%s; %s)"):format(self.path or "file handle", table.concat(names, ", "))
end

-- report(path, opts) -> { { name, samples, period, rows = { ... } }, ... } | nil, message, errno
function M.report(src, opts)
  local rep, msg, errno = M.open(src, opts)
  if not rep then return nil, msg, errno end
  local out = {}
  for i, ev in ipairs(rep.events) do
    out[i] = { name = ev.name, samples = ev.samples, period = ev.period, rows = ev.rows }
  end
  out.lost = rep.lost
  out.children = rep.children
  return out
end

setmetatable(M, { __call = function(_, ...) return M.report(...) end })

return M
