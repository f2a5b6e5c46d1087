-- Terms of perf's event grammar applied to an event table: the built-in
-- terms every PMU takes (config=, period=, call-graph= ...), a sysfs
-- PMU's format/ and events/ terms, and the probe PMUs' own terms.
local core = require "perfev.core"
local pmu = require "perfev.pmu"
local options = require "perfev.options"
local probe_keys = require "perfev.probe_keys"
local V = require "perfev.parse.vocab"
local lexer = require "perfev.parse.lexer"
local compat = require "perfev.compat"

local SAMPLE, BRANCH = core.SAMPLE, core.BRANCH
local fail = lexer.fail
-- perfev.probe (and the ELF reader it uses) load only when a probe is parsed
local function probe() return require "perfev.probe" end

local M = {}

---------------------------------------------------------------------------
-- built-in terms

local function sample_bits(ev, bit, on)
  local st = ev.sample_type or 0
  ev.sample_type = on and (compat.bor(st, bit)) or (compat.band(st, compat.bnot(bit)))
end

local function assign(field)
  return function(ev, v) ev[field] = v end
end

-- set field to (v ~= 0) == when: inherit=1 sets inherit, no-inherit=1 clears it
local function boolean(field, when)
  return function(ev, v) ev[field] = (v ~= 0) == when end
end

local PRIVILEGE = compat.bor(BRANCH.USER, BRANCH.KERNEL, BRANCH.HV)

local function branch_type(ev, v)
  local name = V.BRANCH_FILTERS[v]
  if not name then
    local list = {}
    for k in pairs(V.BRANCH_FILTERS) do list[#list + 1] = k end
    table.sort(list)
    return ("unknown branch filter '%s' (one of %s)"):format(v, table.concat(list, ", "))
  end
  local bits = BRANCH[name]
  if compat.band(bits, compat.bnot(PRIVILEGE)) == 0 then bits = compat.bor(bits, BRANCH.ANY) end
  ev.branch_sample_type = compat.bor(ev.branch_sample_type or 0, bits)
  sample_bits(ev, SAMPLE.BRANCH_STACK, true)
end

local function call_graph(ev, v)
  if not V.CALLGRAPH[v] then
    return ("unknown call-graph mode '%s' (one of fp, dwarf, lbr, no)"):format(v)
  end
  ev._cg = v
end

-- Built-in terms: every PMU (and generic/raw/cache names with /terms/)
-- takes them, as data. [1] kind: "num" (a number; bare means 1), "bool"
-- (bare, 0 or 1), "str" (a string); [2] set(ev, v) -> nil | error message,
-- mapping the term onto attr fields as perf record does; keep: also kept,
-- as given, in ev.terms; tracepoint: a tracepoint takes it too
-- (sched:sched_switch/call-graph=fp/). (perf's driver-config is left out: perf 6.1
-- takes it only for CoreSight sinks.)
local TERMS = {
  config = { "num", assign("config") }, config1 = { "num", assign("config1") },
  config2 = { "num", assign("config2") }, config3 = { "num", assign("config3") },
  name = { "str", function(ev, v) ev.name, ev._named = v, true end },
  period = { "num", function(ev, v) ev.sample_period, ev.sample_freq, ev.freq = v, nil, false end },
  freq = { "num", function(ev, v) ev.sample_freq, ev.sample_period, ev.freq = v, nil, true end },
  inherit = { "num", boolean("inherit", true), keep = true, tracepoint = true },
  ["no-inherit"] = { "num", boolean("inherit", false), keep = true, tracepoint = true },
  overwrite = { "num", boolean("write_backward", true), keep = true, tracepoint = true },
  ["no-overwrite"] = { "num", boolean("write_backward", false), keep = true, tracepoint = true },
  time = { "bool", function(ev, v) sample_bits(ev, SAMPLE.TIME, v == 1) end, keep = true },
  ["aux-output"] = { "num", boolean("aux_output", true), keep = true, tracepoint = true },
  ["aux-sample-size"] = { "num", function(ev, v)
    ev.aux_sample_size = v
    sample_bits(ev, SAMPLE.AUX, v ~= 0)
  end, keep = true, tracepoint = true },
  branch_type = { "str", branch_type, keep = true },
  ["call-graph"] = { "str", call_graph, keep = true, tracepoint = true },
  ["stack-size"] = { "num", assign("_stack"), keep = true, tracepoint = true },
  ["max-stack"] = { "num", assign("_max_stack"), keep = true, tracepoint = true },
  nr = { "num", nil, keep = true, tracepoint = true },
  percore = { "bool", nil, keep = true },
  ["metric-id"] = { "str", nil, keep = true },
}

-- After an event's terms: the callchain fields call-graph, stack-size and
-- max-stack make together (max-stack alone records frame-pointer chains,
-- stack-size alone does nothing; as perf record does).
local function callchain(ev, pos)
  local mode = ev._cg or (ev._max_stack and "fp")
  if not mode then return end
  local cg = V.CALLGRAPH[mode]
  for _, bit in ipairs(cg.sample or {}) do sample_bits(ev, SAMPLE[bit], true) end
  for k, v in pairs(cg.fields or {}) do ev[k] = v end
  for _, b in ipairs(cg.branch or {}) do ev.branch_sample_type = compat.bor(ev.branch_sample_type or 0, BRANCH[b]) end
  if cg.dwarf then
    local size = ev._stack or V.STACK_SIZE
    size = compat.band(size + 7, compat.bnot(7))
    if size == 0 or size > V.STACK_SIZE_MAX then
      options.raisef("perfev.parse: stack-size %.0f is out of range (8..%d) at position %d", ev._stack,
                     V.STACK_SIZE_MAX, pos)
    end
    ev.sample_regs_user, ev.sample_stack_user = V.DWARF_REGS, size
  end
  if ev._max_stack and mode ~= "no" then ev.sample_max_stack = ev._max_stack end
end

-- builtin(ev, term) -> true when term is a built-in term (applied)
local function builtin(ev, term)
  local key = term.key
  local rawv = key:match("^r0x(%x+)$") or key:match("^r(%x+)$")
  if rawv and not term.value and not term.str then
    if #rawv:gsub("^0+", "") > 16 then fail(term.pos, "raw value does not fit in 64 bits") end
    ev.config = compat.hex64("0x" .. rawv)
    return true
  end
  local t = TERMS[key]
  if not t then return false end
  local kind, set = t[1], t[2]
  local v
  if kind == "str" then
    if term.str == nil then
      fail(term.vpos or term.pos, ("expected a string value for '%s'%s")
           :format(key, term.value and ", found a number" or " (" .. key .. "=...)"))
    end
    v = term.str
  else
    if term.str ~= nil then fail(term.vpos, ("expected a number for '%s'"):format(key)) end
    v = term.value
    if v == nil then v = 1 end
    if kind == "bool" and v ~= 0 and v ~= 1 then
      fail(term.vpos or term.pos, ("expected 0 or 1 for '%s'"):format(key))
    end
  end
  if set then
    local err = set(ev, v)
    if err then fail(term.vpos or term.pos, err) end
  end
  if t.keep then
    ev.terms = ev.terms or {}
    ev.terms[key] = v
  end
  return true
end

local function valid_terms(p)
  local list = {}
  for k in pairs(p and p.formats or {}) do list[#list + 1] = k end
  table.sort(list)
  local b = {}
  for k in pairs(TERMS) do b[#b + 1] = k end
  table.sort(b)
  for _, k in ipairs(b) do list[#list + 1] = k end
  return table.concat(list, ",")
end

-- Terms on a PMU: built-in terms first (config= assigns), then format
-- terms OR their bits in (perf's order); an events/ alias expands in place.
local function pmu_terms(p, ev, terms)
  local formats = {}
  local function one(term, from_alias)
    if builtin(ev, term) then return end
    if p.formats[term.key] then
      if term.str ~= nil and (term.quoted or term.str ~= "?") then
        fail(term.vpos, ("expected a number for '%s'"):format(term.key))
      end
      formats[#formats + 1] = term
      return
    end
    local alias = not from_alias and pmu.event(p, term.key)
    if alias then
      -- a value on an alias term (tsc=1) is ignored, as perf does
      for _, t in ipairs(lexer.sysfs_terms(alias.terms, p.dir .. "/events/" .. alias.name)) do
        t.pos, t.vpos = term.pos, term.pos
        one(t, true)
      end
      ev.scale, ev.unit = alias.scale, alias.unit
      ev.per_pkg, ev.snapshot = alias.per_pkg, alias.snapshot
      return
    end
    fail(term.pos, ("unknown term '%s' for PMU '%s' (valid terms: %s)")
         :format(term.key, p.name, valid_terms(p)))
  end
  for _, t in ipairs(terms) do one(t) end
  -- a parameter left '?' by an alias must come from the user's terms
  local given, last = {}, {}
  for _, t in ipairs(formats) do
    if t.str ~= "?" then given[t.key] = true end
    last[t.key] = t
  end
  for k, t in pairs(last) do
    if t.str == "?" and not given[k] then fail(t.pos, ("term '%s' needs a value (%s=N)"):format(k, k)) end
  end
  local fields = {}
  for _, t in ipairs(formats) do
    if t.str ~= "?" then
      local v = t.value or 1
      local ok, err = pmu.set_term(p, t.key, v, fields)
      if not ok then fail(t.vpos or t.pos, err) end
    end
  end
  for k, v in pairs(fields) do ev[k] = compat.bor(ev[k] or 0, v) end
end

-- The probe PMUs' own terms (path, func, offset, addr; ret for the
-- retprobe format term): the vocabulary P:terms lexes them with.
local function probe_vocabulary(p)
  local keys = probe_keys.KEYS[p.name]
  local known = { ret = true }
  for k in pairs(keys) do known[k] = true end
  for k in pairs(TERMS) do known[k] = true end
  for k in pairs(p.formats) do known[k] = true end
  return { keys = keys, known = known }
end

-- probe_terms(p, ev, terms, opts) -> the terms left for pmu_terms: the
-- probe's own terms become uprobe_path/kprobe_func and probe_offset/kprobe_addr.
local function probe_terms(p, ev, terms, opts)
  local keys = probe_keys.KEYS[p.name]
  local args, rest, first = {}, {}, nil
  for _, t in ipairs(terms) do
    local kind = keys[t.key]
    if t.key == "ret" then
      rest[#rest + 1] = { key = "retprobe", value = t.value, str = t.str, pos = t.pos, vpos = t.vpos }
      args.ret = t.value ~= 0
    elseif kind and not probe_keys.FORMAT_KEYS[t.key] then
      first = first or t
      if kind == "string" then
        args[t.key] = t.str or compat.tostring(t.value)
      elseif t.value == nil then
        fail(t.vpos or t.pos, ("expected a number for '%s'"):format(t.key))
      else
        args[t.key] = t.value
      end
    else
      rest[#rest + 1] = t
    end
  end
  if first then
    local f, err = probe().build(p.name, args, { sysfs = opts.sysfs, kallsyms = opts.kallsyms })
    if not f then fail(first.pos, err) end
    for _, k in ipairs { "uprobe_path", "kprobe_func", "probe_offset", "kprobe_addr", "config1", "probe" } do
      ev[k] = f[k]
    end
  end
  return rest
end


M.TERMS = TERMS
M.builtin, M.callchain, M.pmu_terms, M.valid_terms = builtin, callchain, pmu_terms, valid_terms
M.probe_terms, M.probe_vocabulary = probe_terms, probe_vocabulary

return M
