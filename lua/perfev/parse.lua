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
--     of a {...} group), leader (true on a group's first member), group_name
--     (on the leader only, as perf),
--     sample_read (S), weak_group (W), precise_max (P), bpf_counter (b), pmu
--     (PMU name), scale and unit (from a sysfs event's .scale/.unit), terms
--     (the built-in terms that are not config*/name/period/freq, as given:
--     percore, metric-id, call-graph, ...), tool (duration_time, user_time,
--     system_time), probe (what a uprobe/kprobe was asked for).
--
-- The tables print (tostring, the REPL) as perfev.parse.event(name: the
-- fields set) and perfev.parse.list(n events: names) (lua/perfev/show.lua);
-- their contents and pairs are those of plain tables.
--
-- Errors raise "perfev.parse: <what> at position <n>" (1-based), naming
-- what was expected.
--
-- options (second argument): sysfs = PMU devices root (default
-- /sys/bus/event_source/devices), tracefs = tracefs root, kallsyms = the
-- kernel symbol list kprobe functions are checked against (false: skip).
local core = require "perfev.core"
local names = require "perfev.names"
local pmu = require "perfev.pmu"
local tracepoint = require "perfev.tracepoint"
local options = require "perfev.options"
local nearest = require "perfev.nearest"
local probe_keys = require "perfev.probe_keys"
local V = require "perfev.parse.vocab"
local lexer = require "perfev.parse.lexer"
local B = require "perfev.parse.base"
local T = require "perfev.parse.terms"
local compat = require "perfev.compat"
local show = require "perfev.show"

local TYPE = core.TYPE
local P, fail, WORD = lexer.P, lexer.fail, lexer.WORD
local new_event, apply, numeric, HYBRID = B.new_event, B.apply, B.numeric, B.HYBRID
local builtin, callchain, pmu_terms, valid_terms = T.builtin, T.callchain, T.pmu_terms, T.valid_terms
local probe_terms, probe_vocabulary = T.probe_terms, T.probe_vocabulary
local BITS = V.BITS
local SAMPLE = core.SAMPLE

local M = {}

-- The vocabulary, for callers and specs: perfev/parse/vocab.lua, terms.lua.
M.EXTRA, M.MODIFIERS, M.BRANCH_FILTERS, M.CALLGRAPH = V.EXTRA, V.MODIFIERS, V.BRANCH_FILTERS, V.CALLGRAPH
M.STACK_SIZE, M.STACK_SIZE_MAX, M.DWARF_REGS = V.STACK_SIZE, V.STACK_SIZE_MAX, V.DWARF_REGS
M.TERMS = T.TERMS

---------------------------------------------------------------------------
-- events

-- numeric_value(word) -> the number a decimal or 0x-hex word spells (exact
-- within 64 bits, on every runtime) | false beyond 64 bits | nil
local function numeric_value(word)
  if not (word:match("^0x%x+$") or word:match("^%d+$")) then return nil end
  return compat.parse_u64(word) or false
end

-- named(ev, name) -> ev, named name unless a name= term already named it
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
  if access == "" then bp = compat.bor(BP.R, BP.W) end
  for c in access:gmatch(".") do
    bp = compat.bor(bp, c == "r" and BP.R or c == "w" and BP.W or BP.X)
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
-- perf takes on a tracepoint. As perf builds a tracepoint (PERF_TP_SAMPLE_TYPE),
-- it samples every hit (sample_period 1 unless a period=/freq= term says
-- otherwise) with RAW|TIME|CPU|PERIOD: what perf record opens. perf stat
-- zeroes both as it never samples; they leave a count unchanged, so perfev
-- keeps them for an event that may be mapped later.
local TP_SAMPLE_TYPE = { SAMPLE.RAW, SAMPLE.TIME, SAMPLE.CPU, SAMPLE.PERIOD }
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
    ev._auto_name, ev._colon = true, true
    for _, t in ipairs(terms or {}) do
      local known = T.TERMS[t.key]
      if not (known and known.tracepoint) then
        local valid = {}
        for k, v in pairs(T.TERMS) do
          if v.tracepoint then valid[#valid + 1] = k end
        end
        table.sort(valid)
        fail(t.pos, ("unknown term '%s' for the tracepoint %s:%s (valid terms: %s)")
             :format(t.key, sys, name, table.concat(valid, ",")))
      end
      builtin(ev, t)
    end
    for _, b in ipairs(TP_SAMPLE_TYPE) do ev.sample_type = compat.bor(ev.sample_type or 0, b) end
    if ev.sample_period == nil and ev.sample_freq == nil then ev.sample_period = 1 end
    callchain(ev, start)
    list[#list + 1] = ev
  end
  return (self:with_modifiers(list, in_group, not terms or self.s:match("^%s*:", self.i) ~= nil))
end

-- TYPE:CONFIG[/terms/][[:]modifiers]: a numeric event, both numbers
-- decimal or 0x hex (perf's PE_VALUE ':' PE_VALUE); the terms are the
-- built-in ones. Named as typed, as perf names it.
local TYPE_MAX = 0xffffffff

function P:numeric_event(word, start, in_group)
  local t = numeric_value(word)
  if compat.ult(TYPE_MAX, t) then fail(start, ("the event type %s does not fit in 32 bits"):format(word)) end
  self.i = self.i + 1                       -- ':'
  self:ws()
  local config = self:number(("a config number after '%s:' (TYPE:CONFIG)"):format(word))
  local ev = new_event(t, config)
  self:ws()
  local terms
  if self:peek() == "/" then
    self.i = self.i + 1
    terms = self:terms()
    self:expect("/", "'/' closing the terms")
    for _, term in ipairs(terms) do
      if not builtin(ev, term) then
        fail(term.pos, ("unknown term '%s' for the event %s (valid terms: %s)")
             :format(term.key, self.s:sub(start, self.i - 1), valid_terms(nil)))
      end
    end
    callchain(ev, start)
  end
  named(ev, (self.s:sub(start, self.i - 1):gsub("%s+$", "")))
  ev._auto_name, ev._colon = not ev._named, true
  local list = self:hybrid({ ev })
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
  if not base and c == ":" and numeric_value(word) then return self:numeric_event(word, start, in_group) end
  if not base and c == ":" then return self:tracepoint(word, start, in_group) end
  if not base then
    local known = {}
    for n in pairs(names.byname) do known[#known + 1] = n end
    for n in pairs(names.tool_byname) do known[#known + 1] = n end
    table.sort(known)
    fail(start, ("unknown event '%s'%s"):format(word, nearest.hint(word, known)), "; " .. names.WHERE)
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
        -- a name holding modifiers already takes the group's after them
        -- (tracepoint and TYPE:CONFIG names hold a ':' of their own)
        local has_mods = ev._mods or (not ev._colon and ev.name:find(":", 1, true))
        ev.name = ev.name .. ((ev.pmu or not has_mods) and ":" or "") .. mods
      end
    end
    -- the group's name is its leader's only, as perf's evsel group_name
    ev.group = gnum
    if i == 1 then ev.leader, ev.group_name = true, name end
  end
  return members
end

local function finish(ev)
  local out = {}
  for k, v in pairs(ev) do
    if k:sub(1, 1) ~= "_" then out[k] = v end
  end
  for _, b in ipairs(BITS) do out[b] = ev[b] ~= 0 end
  return show.event(out)
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
  return show.list(out)
end

-- parse(s, opts) -> one event table, or a list when s names several events
function M.parse(s, opts)
  local list = M.list(s, opts)
  if #list == 1 and not list[1].group then return list[1] end
  return list
end

return M
