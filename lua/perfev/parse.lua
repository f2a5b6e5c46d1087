-- perf's event grammar in Lua: an event string -> plain tables of attr fields.
--
--   local parse = require "perfev.parse"
--   parse.parse("cycles:u")      --> { type = 0, config = 0, exclude_kernel = true, ..., name = "cpu-cycles:u" }
--   parse.list("{cs,faults}:k")  --> { {...}, {...} }   (always a list)
--
-- The grammar (as the perf tool accepts it; see `man perf-list` and
-- doc/events.md):
--
--   list     := item { ',' item }
--   item     := [groupname] '{' event { ',' event } '}' [':' modifiers] | event
--   event    := name [':' modifiers]                  generic, hw-cache, raw rNNN / r0xNNN, PMU alias, tool
--             | name '/' [terms] '/' [modifiers]     generic/raw/cache name with built-in terms
--             | pmu '/' [terms] '/' [modifiers]      sysfs PMU, terms through format/ and events/
--             | 'mem:' addr ['/' len] [':' access [modifiers] [':' modifiers]]
--             | subsys ':' event [':' modifiers]     tracepoint; * and ? glob either part
--   terms    := term { ',' term };  term := key ['=' value]
--
-- Whitespace may stand between tokens (around ',', '{', '}', ':', '/' and
-- '='), as in perf; not inside a name, a number or a modifier string, and
-- not between a breakpoint's ':' and its access letters. Term values
-- are quoted with single quotes ('a,b'), without spaces or '/' inside, as
-- in perf; the probe terms of the uprobe and kprobe PMUs (a perfev
-- extension: `uprobe/path=/bin/ls,func=main/`) also take double quotes and
-- any character but the quote.
--
-- Result shape. parse(s) returns one table when the string names one event,
-- else a list of them (group members, comma lists, globs, hybrid PMUs);
-- list(s) always returns a list. Each event table holds:
--   attr fields: type, config, exclude_user, exclude_kernel, exclude_hv,
--     exclude_idle, exclude_host, exclude_guest, pinned, exclusive (booleans),
--     precise_ip (0..3) -- always present; config1, config2, config3,
--     bp_type, bp_addr, bp_len, sample_period, sample_freq, freq, inherit,
--     sample_type, the callchain fields, write_backward, aux_output,
--     aux_sample_size, branch_sample_type, uprobe_path, kprobe_func,
--     probe_offset, kprobe_addr -- present when the string sets them;
--   name: the event's display name (canonical for generic and cache
--     names, the `name=` term when given, else as typed);
--   non-attr extras (see M.EXTRA): group (group number, 1-based, for members
--     of a {...} group), leader (true on a group's first member), group_name,
--     sample_read (S), weak_group (W), precise_max (P), bpf_counter (b), pmu
--     (PMU name), scale and unit (from a sysfs event's .scale/.unit), terms
--     (the built-in terms that are not config*/name/period/freq, as given:
--     percore, metric-id, call-graph, ...), tool (duration_time, user_time,
--     system_time), probe (what a uprobe/kprobe was asked for).
--
-- Errors raise "perfev.parse: <what> at position <n>" (1-based), naming
-- what was expected.
--
-- options (second argument): sysfs = PMU devices root (default
-- /sys/bus/event_source/devices), tracefs = tracefs root, kallsyms = the
-- kernel symbol list kprobe functions are checked against (false: skip).
local core = require "perfev.core"
local names = require "perfev.names"
local cache = require "perfev.cache"
local pmu = require "perfev.pmu"
local tracepoint = require "perfev.tracepoint"
local options = require "perfev.options"
local nearest = require "perfev.nearest"
-- the probe PMUs' keys, as data; perfev.probe (and the ELF reader) load
-- only when a probe is parsed
local probe_keys = require "perfev.probe_keys"
local function probe() return require "perfev.probe" end

local TYPE, SAMPLE, BRANCH = core.TYPE, core.SAMPLE, core.BRANCH

local M = {}

-- Fields of a parsed event that are not attr fields.
M.EXTRA = {
  name = true, group = true, leader = true, group_name = true, sample_read = true,
  weak_group = true, precise_max = true, bpf_counter = true, pmu = true, scale = true,
  unit = true, terms = true, per_pkg = true, snapshot = true, tool = true, probe = true,
}

-- The modifiers, as data. kind:
--   level   -- u/k/h: the first one excludes all three levels, each then
--              re-includes its own; u also excludes guests unless G/H came
--   virt    -- G/H: the first one excludes both, each re-includes its own
--   set     -- sets its field (leader_only: only a group's leader, from a group modifier)
--   precise -- p: precise_ip + 1 (at most max), excludes guests unless G/H came
--   extra   -- a non-attr flag in the result, honoured by perfev.open and
--              perfev.group: P (precise_ip 3, stepped down until the kernel
--              accepts), S (PERF_SAMPLE_READ; in a group only the leader
--              samples), W (a group that cannot open as a group opens its
--              members one by one), b (perf's BPF counters: not supported,
--              kept as a flag)
M.MODIFIERS = {
  { "u", "exclude_user", kind = "level", excludes_guest = true },
  { "k", "exclude_kernel", kind = "level" },
  { "h", "exclude_hv", kind = "level" },
  { "G", "exclude_guest", kind = "virt" },
  { "H", "exclude_host", kind = "virt" },
  { "I", "exclude_idle", kind = "set" },
  { "p", "precise_ip", kind = "precise", max = 3, excludes_guest = true },
  { "P", "precise_max", kind = "extra" },
  { "S", "sample_read", kind = "extra" },
  { "D", "pinned", kind = "set", leader_only = true },
  { "W", "weak_group", kind = "extra" },
  { "e", "exclusive", kind = "set", leader_only = true },
  { "b", "bpf_counter", kind = "extra" },
}
local MOD = {}
for _, m in ipairs(M.MODIFIERS) do MOD[m[1]] = m end
local MOD_CHARS, MOD_SET = {}, {}
for _, m in ipairs(M.MODIFIERS) do
  MOD_CHARS[#MOD_CHARS + 1] = m[1]
  MOD_SET[#MOD_SET + 1] = m[1]
end
MOD_CHARS = table.concat(MOD_CHARS, " ")
MOD_SET = "^[" .. table.concat(MOD_SET) .. "]*$"

local LEVELS = { "exclude_user", "exclude_kernel", "exclude_hv" }

-- The bits every event table carries (numbers internally, booleans out).
local BITS = { "exclude_user", "exclude_kernel", "exclude_hv", "exclude_idle",
               "exclude_host", "exclude_guest", "pinned", "exclusive" }

---------------------------------------------------------------------------
-- built-in terms

local function sample_bits(ev, bit, on)
  local st = ev.sample_type or 0
  ev.sample_type = on and (st | bit) or (st & ~bit)
end

local function assign(field)
  return function(ev, v) ev[field] = v end
end

-- set field to (v ~= 0) == when: inherit=1 sets inherit, no-inherit=1 clears it
local function boolean(field, when)
  return function(ev, v) ev[field] = (v ~= 0) == when end
end

-- branch_type=NAME: perf's branch filter names -> PERF_SAMPLE_BRANCH_*.
-- A privilege level alone (u, k, hv) samples any branch at that level.
M.BRANCH_FILTERS = {
  u = "USER", k = "KERNEL", hv = "HV", any = "ANY", any_call = "ANY_CALL", any_ret = "ANY_RETURN",
  ind_call = "IND_CALL", abort_tx = "ABORT_TX", in_tx = "IN_TX", no_tx = "NO_TX", cond = "COND",
  ind_jmp = "IND_JUMP", call = "CALL", save_type = "TYPE_SAVE", stack = "CALL_STACK",
  priv = "PRIV_SAVE",
}
local PRIVILEGE = BRANCH.USER | BRANCH.KERNEL | BRANCH.HV

local function branch_type(ev, v)
  local name = M.BRANCH_FILTERS[v]
  if not name then
    local list = {}
    for k in pairs(M.BRANCH_FILTERS) do list[#list + 1] = k end
    table.sort(list)
    return ("unknown branch filter '%s' (one of %s)"):format(v, table.concat(list, ", "))
  end
  local bits = BRANCH[name]
  if bits & ~PRIVILEGE == 0 then bits = bits | BRANCH.ANY end
  ev.branch_sample_type = (ev.branch_sample_type or 0) | bits
  sample_bits(ev, SAMPLE.BRANCH_STACK, true)
end

-- call-graph=MODE, as perf record maps it (with stack-size and max-stack,
-- in any order: see callchain() below).
M.CALLGRAPH = {
  fp = { sample = { "CALLCHAIN" } },
  dwarf = { sample = { "CALLCHAIN", "REGS_USER", "STACK_USER", "ADDR", "DATA_SRC" },
            fields = { mmap_data = true, exclude_callchain_user = true }, dwarf = true },
  lbr = { sample = { "CALLCHAIN", "BRANCH_STACK" },
          branch = { "USER", "CALL_STACK", "NO_FLAGS", "NO_CYCLES", "HW_INDEX" } },
  no = {},
}
M.STACK_SIZE = 8192           -- perf's default user stack dump for dwarf
M.STACK_SIZE_MAX = 65528      -- the kernel's limit (u16, 8-byte aligned)

-- The user registers perf records for dwarf unwinding: the x86-64
-- general-purpose ones (perf's PERF_REGS_MASK, without the segment registers).
local SEGMENT = { DS = true, ES = true, FS = true, GS = true }
M.DWARF_REGS = 0
for name, bit in pairs(core.REG) do
  if bit < 24 and not SEGMENT[name] then M.DWARF_REGS = M.DWARF_REGS | (1 << bit) end
end

local function call_graph(ev, v)
  if not M.CALLGRAPH[v] then
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
M.TERMS = {
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
  local cg = M.CALLGRAPH[mode]
  for _, bit in ipairs(cg.sample or {}) do sample_bits(ev, SAMPLE[bit], true) end
  for k, v in pairs(cg.fields or {}) do ev[k] = v end
  for _, b in ipairs(cg.branch or {}) do ev.branch_sample_type = (ev.branch_sample_type or 0) | BRANCH[b] end
  if cg.dwarf then
    local size = ev._stack or M.STACK_SIZE
    size = (size + 7) & ~7
    if size == 0 or size > M.STACK_SIZE_MAX then
      options.raisef("perfev.parse: stack-size %.0f is out of range (8..%d) at position %d", ev._stack,
                     M.STACK_SIZE_MAX, pos)
    end
    ev.sample_regs_user, ev.sample_stack_user = M.DWARF_REGS, size
  end
  if ev._max_stack and mode ~= "no" then ev.sample_max_stack = ev._max_stack end
end

---------------------------------------------------------------------------
-- the cursor

local P = {}
P.__index = P

-- A mistake in the string: raised at the caller's line, with its position.
local function fail(pos, msg)
  options.raisef("perfev.parse: %s at position %d", msg, pos)
end

function P:peek(n) return self.s:sub(self.i, self.i + (n or 1) - 1) end
function P:eof() return self.i > #self.s end
function P:fail(msg, pos) fail(pos or self.i, msg) end

-- Skips whitespace; true when there was some.
function P:ws()
  local _, e = self.s:find("^%s+", self.i)
  if e then self.i = e + 1 end
  return e ~= nil
end

function P:expect(c, what)
  if self:peek() ~= c then
    self:fail(("expected %s, found %s"):format(what or ("'" .. c .. "'"), self:found()))
  end
  self.i = self.i + 1
end

function P:found()
  if self:eof() then return "the end" end
  return "'" .. self:peek() .. "'"
end

local WORD = "^[%w_%.%-%*%?]+"

function P:word()
  local w = self.s:match(WORD, self.i)
  if w then self.i = self.i + #w end
  return w
end

-- A number: 0x hex or decimal, as a 64-bit integer.
function P:number(what)
  local start = self.i
  local hex = self.s:match("^0[xX](%x+)", self.i)
  local v
  if hex then
    if self.s:sub(self.i + 1, self.i + 1) == "X" then self:fail("expected " .. what) end
    local digits = hex:gsub("^0+", "")
    if #digits > 16 then self:fail(what .. " does not fit in 64 bits", start) end
    v = math.tointeger(tonumber(hex, 16)) or tonumber("0x" .. hex)
    self.i = self.i + 2 + #hex
  else
    local dec = self.s:match("^%d+", self.i)
    if not dec then self:fail(("expected %s, found %s"):format(what, self:found())) end
    v = math.tointeger(tonumber(dec))
    if not v then self:fail(what .. " does not fit in 64 bits", start) end
    self.i = self.i + #dec
  end
  return v
end

-- Modifier characters at the cursor: returns the string and its position,
-- after checking duplicates. required: nil (none is fine), "strict" (at
-- least one), true (at least one unless the event ends here).
function P:modifiers(required)
  local start = self.i
  local seen = {}
  while not self:eof() do
    local c = self:peek()
    local m = MOD[c]
    if not m then break end
    seen[c] = (seen[c] or 0) + 1
    if seen[c] > (m.max or 1) then
      if m.max then
        self:fail(("modifier '%s' more than %d times"):format(c, m.max))
      end
      self:fail(("duplicate modifier '%s'"):format(c))
    end
    self.i = self.i + 1
  end
  -- perf takes an empty modifier after an event ("cycles:"), not after a group
  local next_c = self.s:match("^%s*(.?)", self.i)
  local at_end = next_c == "" or next_c == "," or next_c == "}"
  if required and self.i == start and (required == "strict" or not at_end) then
    self:fail(("expected a modifier (one of %s), found %s"):format(MOD_CHARS, self:found()))
  end
  return self.s:sub(start, self.i - 1), start
end

-- The end of an event: end of string, ',' or (in a group) '}'.
function P:event_end(in_group)
  self:ws()
  if self:eof() or self:peek() == "," or (in_group and self:peek() == "}") then return end
  self:fail(("unexpected %s: expected ','%s or the end"):format(self:found(), in_group and ", '}'" or ""))
end

---------------------------------------------------------------------------
-- modifiers -> attr bits

local function new_event(type, config)
  local ev = { type = type, config = config, precise_ip = 0 }
  for _, b in ipairs(BITS) do ev[b] = 0 end
  ev.exclude_guest = 1      -- perf's default for an event without modifiers
  return ev
end

-- apply(ev, mods, pos, add, leader): perf's modifier semantics. A modifier
-- on an event starts from nothing (its own bits replace the defaults); a
-- group's modifier (add) starts from each member's bits.
local function apply(ev, mods, pos, add, leader)
  local st = {}
  for _, b in ipairs(BITS) do st[b] = add and ev[b] or 0 end
  st.precise_ip = add and ev.precise_ip or 0
  local excluded = add and (st.exclude_user | st.exclude_kernel | st.exclude_hv) ~= 0
  local gh = add and ev._gh or false
  for c in mods:gmatch(".") do
    local m = MOD[c]
    local kind, field = m.kind, m[2]
    if kind == "level" then
      if not excluded then
        excluded = true
        for _, l in ipairs(LEVELS) do st[l] = 1 end
      end
      st[field] = 0
    elseif kind == "virt" then
      if not gh then
        gh = true
        st.exclude_guest, st.exclude_host = 1, 1
      end
      st[field] = 0
    elseif kind == "precise" then
      st.precise_ip = st.precise_ip + 1
    elseif kind == "set" then
      if leader or not m.leader_only or not add then st[field] = 1 end
    else
      ev[field] = true
    end
    if m.excludes_guest and not gh then st.exclude_guest = 1 end
  end
  if st.precise_ip > 3 then
    fail(pos, ("precise level %d is above 3 (p at most three times, event and group together)")
         :format(st.precise_ip))
  end
  for k, v in pairs(st) do ev[k] = v end
  ev._gh = gh
end

---------------------------------------------------------------------------
-- names

local function generic(word)
  local g = names.byname[word]
  if g then return { type = g.type, config = g.config, name = g.name } end
  local t = names.tool_byname[word]
  if t then return { type = TYPE.SOFTWARE, config = core.SW.DUMMY, name = t.name, tool = t.name } end
end

local function raw(word)
  local hex = word:match("^r0x(%x+)$") or word:match("^r(%x+)$")
  if hex and #hex:gsub("^0+", "") <= 16 then
    return { type = TYPE.RAW, config = math.tointeger(tonumber(hex, 16)) or tonumber("0x" .. hex),
             name = word }
  end
end

-- L1-dcache-load-misses: a cache word, then up to two op/result words.
local function hw_cache(word)
  for _, cw in ipairs(cache.caches_longest) do
    if word:sub(1, #cw) == cw then
      local rest, words = word:sub(#cw + 1), {}
      local ok = true
      while rest ~= "" and ok do
        ok = false
        if #words < 2 and rest:sub(1, 1) == "-" then
          for _, w in ipairs(cache.words) do
            local after = rest:sub(#w + 2, #w + 2)
            if rest:sub(2, #w + 1) == w and (after == "" or after == "-") then
              words[#words + 1] = w
              rest = rest:sub(#w + 2)
              ok = true
              break
            end
          end
        end
      end
      if ok then
        local config, err = cache.resolve(cw, words)
        if not config then return nil, err end
        -- canonical name: cache-ops for refs, cache-op-misses for misses
        local row = cache.cache_by_word[cw]
        local c = config
        local op = cache.ops[((c >> 8) & 0xff) + 1]
        local name = row[1] .. "-" .. ((c >> 16) == 0 and op[3] or (op[1] .. "-misses"))
        return { type = TYPE.HW_CACHE, config = config, name = name }
      end
    end
  end
end

-- A generic, raw or cache event (what a hybrid PMU's single term may name).
local function numeric(word)
  return generic(word) or raw(word) or (hw_cache(word))
end

-- known(word) -> list of base events | nil, why
function P:known(word, start)
  local ev = generic(word) or raw(word)
  if ev then return { ev } end
  -- perf reads the longest generic name first: branch-misses-load is
  -- branch-misses followed by junk, not a cache event
  for g in pairs(names.byname) do
    if word:sub(1, #g + 1) == g .. "-" then
      fail(start + #g, ("unexpected '%s' after the event '%s'"):format(word:sub(#g + 1), g))
    end
  end
  local c, err = hw_cache(word)
  if c then return { c } end
  if err then return nil, err end
  local found = pmu.find_event(word, self.opts.sysfs)
  if #found > 0 then return found, "pmu" end
  return nil
end

-- Hybrid machines (perf 6.1): a hardware or cache event becomes one event
-- per core PMU (cpu_core, cpu_atom), the PMU's type in config's high 32
-- bits (PERF_PMU_TYPE_SHIFT); a raw event takes the PMU's type. only: one
-- of the hybrid PMUs (cpu_core/cycles/).
local PMU_TYPE_SHIFT, HW_EVENT_MASK = 32, 0xffffffff
local HYBRID = { [TYPE.HARDWARE] = true, [TYPE.HW_CACHE] = true, [TYPE.RAW] = true }

function P:hybrid(list, only)
  local cores = pmu.hybrid(self.opts.sysfs)
  if #cores == 0 then return list end
  local out = {}
  for _, ev in ipairs(list) do
    if HYBRID[ev.type] then
      for _, p in ipairs(cores) do
        if not only or only == p then
          local e = {}
          for k, v in pairs(ev) do e[k] = v end
          if ev.type == TYPE.RAW then
            e.type = p.type
          else
            e.config = (ev.config & HW_EVENT_MASK) | (p.type << PMU_TYPE_SHIFT)
          end
          e.pmu, e._wrap, e._base = p.name, p.name, ev.name
          e.name = p.name .. "/" .. ev.name .. "/"
          out[#out + 1] = e
        end
      end
    else
      out[#out + 1] = ev
    end
  end
  return out
end

---------------------------------------------------------------------------
-- terms: key[=value] {, key[=value]} up to '/'

-- is_string(key, special): does the term take a string value?
local function is_string(key, special)
  local t = M.TERMS[key]
  return (t and t[1] == "str") or (special and special.keys[key] == "string") or false
end

-- An unquoted path (uprobe/path=/bin/ls,func=main/) runs to the next ','
-- (or '}' or space); when the path is the last term, the last '/' of that
-- run closes the terms (what follows it must be modifiers), unless the run
-- is followed by ',' and another term of the probe.
function P:path_value(special)
  local run = self.s:match("^[^,%s}]*", self.i)
  local value = run
  local last = run:match(".*()/")
  if last and run:sub(last + 1):match(MOD_SET) then
    local key = self.s:match("^%s*,%s*([%a_][%w_%-%.]*)", self.i + #run)
    if not (key and special.known[key]) then value = run:sub(1, last - 1) end
  end
  if value == "" then self:fail("expected a path for 'path'") end
  self.i = self.i + #value
  return value
end

-- special: for the probe PMUs, { keys = probe keys -> kind, known = every
-- term key of the PMU }.
function P:terms(special)
  local list = {}
  self:ws()
  if self:peek() == "/" then return list end
  while true do
    self:ws()
    local start = self.i
    local key = self.s:match("^[%a_][%w_%-%.]*", self.i)
    if not key then self:fail(("expected a term (key or key=value), found %s"):format(self:found())) end
    self.i = self.i + #key
    local term = { key = key, pos = start }
    self:ws()
    if self:peek() == "=" then
      self.i = self.i + 1
      self:ws()
      term.vpos = self.i
      local c = self:peek()
      local probe_str = special and special.keys[key] == "string"
      if c == "'" or c == '"' then
        local close = self.s:find(c, self.i + 1, true)
        if not close then self:fail("unterminated quoted value") end
        local v = self.s:sub(self.i + 1, close - 1)
        if not probe_str then
          if c == '"' then
            self:fail("term values are quoted with single quotes ('...'), as in perf")
          end
          if v == "" or v:find("[%s/]") then
            self:fail("a quoted term value cannot be empty or hold spaces or '/' (as in perf)")
          end
        end
        term.str, term.quoted = v, true
        self.i = close + 1
      elseif probe_str and key == "path" then
        term.str = self:path_value(special)
      elseif c:match("%d") then
        term.value = self:number("a number")
        local more = self.s:match("^[^,/%s]+", self.i)
        if more then
          if is_string(key, special) then
            term.str, term.value = self.s:sub(term.vpos, self.i + #more - 1), nil
            self.i = self.i + #more
          else
            self:fail(("expected ',' or '/' after the value of '%s', found %s"):format(key, self:found()))
          end
        end
      else
        local s = self.s:match("^[^,/%s'\"]+", self.i)
        if not s then self:fail(("expected a value for '%s', found %s"):format(key, self:found())) end
        term.str = s
        self.i = self.i + #s
      end
    end
    list[#list + 1] = term
    self:ws()
    if self:peek() == "," then
      self.i = self.i + 1
    elseif self:peek() == "/" then
      return list
    else
      self:fail(("expected ',' or '/' in the terms, found %s"):format(self:found()))
    end
  end
end

-- Parse a terms string from sysfs (an events/ file): "event=0x3c,umask=0x1".
local function sysfs_terms(s, where)
  local q = setmetatable({ s = s .. "/", i = 1, opts = {} }, P)
  local ok, list = pcall(P.terms, q)
  if not ok then
    options.raisef("perfev.parse: bad event file %s ('%s'): %s", where, s, options.strip_where(list))
  end
  return list
end

-- builtin(ev, term) -> true when term is a built-in term (applied)
local function builtin(ev, term)
  local key = term.key
  local rawv = key:match("^r0x(%x+)$") or key:match("^r(%x+)$")
  if rawv and not term.value and not term.str then
    if #rawv:gsub("^0+", "") > 16 then fail(term.pos, "raw value does not fit in 64 bits") end
    ev.config = math.tointeger(tonumber(rawv, 16)) or tonumber("0x" .. rawv)
    return true
  end
  local t = M.TERMS[key]
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
  for k in pairs(M.TERMS) do b[#b + 1] = k end
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
      for _, t in ipairs(sysfs_terms(alias.terms, p.dir .. "/events/" .. alias.name)) do
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
  for k, v in pairs(fields) do ev[k] = (ev[k] or 0) | v end
end

-- The probe PMUs' own terms (path, func, offset, addr; ret for the
-- retprobe format term): the vocabulary P:terms lexes them with.
local function probe_vocabulary(p)
  local keys = probe_keys.KEYS[p.name]
  local known = { ret = true }
  for k in pairs(keys) do known[k] = true end
  for k in pairs(M.TERMS) do known[k] = true end
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
        args[t.key] = t.str or tostring(t.value)
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

---------------------------------------------------------------------------
-- events

-- finish(ev, base name, modstring...) -> the event with its name
local function named(ev, name)
  if ev.name == nil then ev.name = name end
  return ev
end

function P:with_modifiers(list, in_group, colon)
  local mods, mpos = "", self.i
  self:ws()
  if colon then
    if self:peek() == ":" then
      self.i = self.i + 1
      self:ws()
      mods, mpos = self:modifiers(true)
    end
  else
    mods, mpos = self:modifiers(false)
  end
  self:event_end(in_group)
  if mods ~= "" then
    for _, ev in ipairs(list) do
      apply(ev, mods, mpos, false)
      ev._mods = mods
      if ev._wrap and not ev._named then
        ev.name = ev._wrap .. "/" .. ev._base .. ":" .. mods .. "/"
      elseif ev._auto_name then
        ev.name = ev.name .. ":" .. mods
      end
    end
  end
  return list, mods
end

-- mem:ADDR[/LEN][:ACCESS][MODS][:MODS]. Whitespace may stand around ADDR,
-- '/' and LEN; after a space a ':' starts event modifiers, never access
-- letters (as perf's lexer has it).
function P:breakpoint(start, in_group)
  self.i = self.i + 1                       -- the ':' after mem
  self:ws()
  local addr = self:number("an address after 'mem:'")
  local spaced = self:ws()
  local len
  if self:peek() == "/" then
    self.i = self.i + 1
    self:ws()
    len = self:number("a length after '/'")
    spaced = self:ws()
  end
  local access, mods, mpos = "", "", self.i
  if self:peek() == ":" then
    self.i = self.i + 1
    local astart = self.i
    local seen = {}
    while not spaced and self.s:sub(self.i, self.i):match("^[rwx]$") do
      local c = self:peek()
      if seen[c] then self:fail(("duplicate access '%s' (expected r, w and x at most once each)"):format(c)) end
      seen[c] = true
      self.i = self.i + 1
    end
    access = self.s:sub(astart, self.i - 1)
    if access == "" then
      self:ws()
      mods, mpos = self:modifiers(true)
    else
      mods, mpos = self:modifiers(nil)
      if mods == "" then
        self:ws()
        if self:peek() == ":" then
          self.i = self.i + 1
          self:ws()
          mods, mpos = self:modifiers(true)
        end
      end
    end
  end
  local text_end = self.i - 1
  self:event_end(in_group)
  local bp = 0
  local BP = core.BP_TYPE
  if access == "" then bp = BP.R | BP.W end
  for c in access:gmatch(".") do
    bp = bp | (c == "r" and BP.R or c == "w" and BP.W or BP.X)
  end
  if not len then len = bp == BP.X and 8 or 4 end
  local ev = new_event(TYPE.BREAKPOINT, 0)
  ev.bp_type, ev.bp_addr, ev.bp_len = bp, addr, len
  ev.name = self.s:sub(start, text_end):gsub("%s+", "")
  if mods ~= "" then apply(ev, mods, mpos, false) end
  return { ev }
end

-- SDT markers (sdt_provider:name) are tracepoints only once `perf probe`
-- has created them from its probe cache: perfev reads neither that cache
-- nor the binaries' .note.stapsdt notes.
local function sdt_hint(sys, name, err)
  if not sys:match("^sdt_") or err:find("tracefs is not mounted", 1, true) then return err end
  return ("SDT event '%s:%s' is not in tracefs: perfev does not read perf's probe cache; create it "
          .. "first with `perf buildid-cache --add BINARY` and `perf probe %s:%s`, then it opens as a "
          .. "tracepoint (%s)"):format(sys, name, sys, name, err)
end

-- subsys:name[/terms/][[:]modifiers]: the terms are the record-time ones
-- perf takes on a tracepoint.
function P:tracepoint(sys, start, in_group)
  self.i = self.i + 1                       -- ':'
  self:ws()
  local name = self:word()
  if not name then
    self:fail(("expected a tracepoint name after '%s:', found %s"):format(sys, self:found()))
  end
  local found, err = tracepoint.expand(sys, name, self.opts.tracefs)
  if not found then fail(start, sdt_hint(sys, name, err)) end
  self:ws()
  local terms
  if self:peek() == "/" then
    self.i = self.i + 1
    terms = self:terms()
    self:expect("/", "'/' closing the terms")
  end
  local list = {}
  for _, tp in ipairs(found) do
    local ev = new_event(TYPE.TRACEPOINT, tp.id)
    ev.name = tp.sys .. ":" .. tp.name
    ev._auto_name = true
    for _, t in ipairs(terms or {}) do
      local known = M.TERMS[t.key]
      if not (known and known.tracepoint) then
        local valid = {}
        for k, v in pairs(M.TERMS) do
          if v.tracepoint then valid[#valid + 1] = k end
        end
        table.sort(valid)
        fail(t.pos, ("unknown term '%s' for the tracepoint %s:%s (valid terms: %s)")
             :format(t.key, sys, name, table.concat(valid, ",")))
      end
      builtin(ev, t)
    end
    callchain(ev, start)
    list[#list + 1] = ev
  end
  return (self:with_modifiers(list, in_group, not terms or self.s:match("^%s*:", self.i) ~= nil))
end

-- A hybrid PMU with one bare term that is not `event`: perf 6.1 reads the
-- term as an event on that PMU alone (cpu_core/cycles/, cpu_atom/r1a8/).
function P:hybrid_term(p, terms)
  if #terms ~= 1 or terms[1].key == "event" or terms[1].value or terms[1].str then return end
  local is_hybrid = false
  for _, c in ipairs(pmu.hybrid(self.opts.sysfs)) do
    if c == p then is_hybrid = true end
  end
  if not is_hybrid then return end
  local b = numeric(terms[1].key)
  if not b or not HYBRID[b.type] then return end
  local ev = new_event(b.type, b.config)
  ev.name = b.name
  return self:hybrid({ ev }, p)
end

-- word '/' terms '/' modifiers: a PMU, or a generic/raw/cache name with terms.
function P:pmu_event(word, start, in_group)
  self.i = self.i + 1                       -- '/'
  local probe_pmu = probe_keys.KEYS[word] and pmu.get(word, self.opts.sysfs)
  local terms = self:terms(probe_pmu and probe_vocabulary(probe_pmu) or nil)
  self:expect("/", "'/' closing the terms")
  local text_end = self.i - 1
  local text = self.s:sub(start, text_end)
  local list = {}
  local base = self:known(word, start)
  if base and base[1].type then
    local b = base[1]
    if b.tool then fail(start, ("the tool event '%s' takes no terms"):format(word)) end
    local ev = new_event(b.type, b.config)
    for _, t in ipairs(terms) do
      if not builtin(ev, t) then
        fail(t.pos, ("unknown term '%s' for '%s' (valid terms: %s)"):format(t.key, word, valid_terms(nil)))
      end
    end
    callchain(ev, start)
    list = self:hybrid({ named(ev, b.name) })
    for _, e in ipairs(list) do e._wrap = nil end
    if list[1] == ev and not ev._named then ev.name = text end
  else
    local pmus = pmu.match(word, self.opts.sysfs)
    if #pmus == 0 then
      fail(start, ("unknown PMU '%s' (no %s/%s: expected a PMU name, or a generic or cache event before '/')")
           :format(word, self.opts.sysfs or pmu.ROOT, word))
    end
    for _, p in ipairs(pmus) do
      local hybrid = self:hybrid_term(p, terms)
      if hybrid then
        for _, ev in ipairs(hybrid) do
          ev.name, ev._wrap = text, nil
          list[#list + 1] = ev
        end
      else
        local ev = new_event(p.type, 0)
        local rest = terms
        if probe_keys.KEYS[p.name] then rest = probe_terms(p, ev, terms, self.opts) end
        pmu_terms(p, ev, rest)
        callchain(ev, start)
        ev.pmu = p.name
        local name = text
        if #pmus > 1 then name = p.name .. self.s:sub(start + #word, text_end):gsub("^%s+", "") end
        list[#list + 1] = named(ev, name)
      end
    end
  end
  local _, mods = self:with_modifiers(list, in_group, false)
  if mods ~= "" then
    for _, ev in ipairs(list) do
      if not ev._named then ev.name = ev.name .. mods end
    end
  end
  return list
end

function P:event(in_group)
  local start = self.i
  local word = self:word()
  if not word then
    self:fail(("expected an event, found %s"):format(self:found()))
  end
  -- `mem:` is one token: no space before its ':'
  if word == "mem" and self:peek() == ":" then return self:breakpoint(start, in_group) end
  self:ws()
  local c = self:peek()
  if c == "{" then
    self:fail(("a group cannot hold a group: unexpected '{' after '%s'"):format(word))
  end
  if c == "/" then return self:pmu_event(word, start, in_group) end
  local base, how = self:known(word, start)
  if not base and how then fail(start, how) end
  if not base and c == ":" then return self:tracepoint(word, start, in_group) end
  if not base then
    local known = {}
    for n in pairs(names.byname) do known[#known + 1] = n end
    for n in pairs(names.tool_byname) do known[#known + 1] = n end
    table.sort(known)
    fail(start, ("unknown event '%s'%s (expected a hardware, software, cache or tool event, rNNN, mem:ADDR, "
                 .. "subsys:tracepoint or pmu/terms/; generic names: %s)")
                :format(word, nearest.hint(word, known), names.known()))
  end
  local list = {}
  if how == "pmu" then
    for _, f in ipairs(base) do
      local ev = new_event(f.pmu.type, 0)
      pmu_terms(f.pmu, ev, { { key = f.event.name, pos = start } })
      ev.pmu = f.pmu.name
      if #base > 1 then ev.name = f.pmu.name .. "/" .. f.event.name .. "/" else ev.name = word end
      ev._auto_name = true
      list[#list + 1] = ev
    end
  else
    local ev = new_event(base[1].type, base[1].config)
    ev.name, ev.tool = base[1].name, base[1].tool
    ev._auto_name = true
    list = self:hybrid({ ev })
  end
  return (self:with_modifiers(list, in_group, true))
end

function P:group(name, gnum)
  local open = self.i
  self.i = self.i + 1                       -- '{'
  self:ws()
  local members = {}
  if self:peek() == "}" then self:fail("expected an event in the group, found '}'") end
  while true do
    self:ws()
    for _, ev in ipairs(self:event(true)) do members[#members + 1] = ev end
    self:ws()
    if self:peek() == "," then
      self.i = self.i + 1
    elseif self:peek() == "}" then
      self.i = self.i + 1
      break
    else
      self:fail(("expected ',' or '}' closing the group opened at position %d, found %s")
                :format(open, self:found()))
    end
  end
  self:ws()
  local mods, mpos = "", self.i
  if self:peek() == ":" then
    self.i = self.i + 1
    self:ws()
    mods, mpos = self:modifiers("strict")
  end
  self:event_end(false)
  for i, ev in ipairs(members) do
    if mods ~= "" then
      apply(ev, mods, mpos, true, i == 1)
      if ev._wrap then
        ev.name = ev._wrap .. "/" .. ev._base .. ":" .. (ev._mods or "") .. mods .. "/"
      else
        ev.name = ev.name .. (ev.name:find(":", 1, true) and not ev.pmu and "" or ":") .. mods
      end
    end
    ev.group, ev.group_name = gnum, name
    if i == 1 then ev.leader = true end
  end
  return members
end

local function finish(ev)
  local out = {}
  for k, v in pairs(ev) do
    if k:sub(1, 1) ~= "_" then out[k] = v end
  end
  for _, b in ipairs(BITS) do out[b] = ev[b] ~= 0 end
  return out
end

-- Strings that are perf command-line options, not events: metrics.
local function not_an_event(s)
  if s:match("^%s*%-M") or s:match("^%s*%-%-metric") then
    fail(1, "perf metrics (-M, --metrics) are not supported: a metric is a formula over events "
         .. "defined in perf's per-CPU JSON tables (pmu-events), which perfev does not ship; open the "
         .. "events the metric uses (perf list --details shows them) and compute it")
  end
end

local OPTIONS = { sysfs = "string", tracefs = "string", kallsyms = "string|boolean" }

-- list(s, opts) -> list of event tables (see the header for the shape)
function M.list(s, opts)
  if type(s) ~= "string" then
    options.raisef("perfev.parse: expected an event string, got %s", options.describe(s))
  end
  opts = options.check(opts, OPTIONS, "perfev.parse")
  local self = setmetatable({ s = s, i = 1, opts = opts }, P)
  not_an_event(s)
  self:ws()
  if self:eof() then self:fail("expected an event, found the end") end
  local out, groups = {}, 0
  while true do
    self:ws()
    local gname
    local w, space = s:match("^(" .. WORD:sub(2) .. ")(%s*){", self.i)
    if w then
      gname = w
      self.i = self.i + #w + #space
    end
    local list
    if self:peek() == "{" then
      groups = groups + 1
      list = self:group(gname, groups)
    else
      list = self:event(false)
    end
    for _, ev in ipairs(list) do out[#out + 1] = finish(ev) end
    self:ws()
    if self:eof() then break end
    self:expect(",", "','")
    self:ws()
    if self:eof() then self:fail("expected an event after ',', found the end") end
  end
  return out
end

-- parse(s, opts) -> one event table, or a list when s names several events
function M.parse(s, opts)
  local list = M.list(s, opts)
  if #list == 1 and not list[1].group then return list[1] end
  return list
end

return M
