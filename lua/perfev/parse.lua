-- perf's event grammar in Lua: an event string -> plain tables of attr fields.
--
--   local parse = require "perfev.parse"
--   parse.parse("cycles:u")      --> { type = 0, config = 0, exclude_kernel = true, ..., name = "cpu-cycles:u" }
--   parse.list("{cs,faults}:k")  --> { {...}, {...} }   (always a list)
--
-- The grammar (as the perf tool accepts it; see `man perf-list`):
--
--   list     := item { ',' item }
--   item     := [groupname] '{' event { ',' event } '}' [':' modifiers] | event
--   event    := name [':' modifiers]                  generic, hw-cache, raw rNNN / r0xNNN, PMU alias
--             | name '/' [terms] '/' [modifiers]     generic/raw/cache name with built-in terms
--             | pmu '/' [terms] '/' [modifiers]      sysfs PMU, terms through format/ and events/
--             | 'mem:' addr ['/' len] [':' access [modifiers] [':' modifiers]]
--             | subsys ':' event [':' modifiers]     tracepoint; * and ? glob either part
--   terms    := term { ',' term };  term := key ['=' value]
--
-- Result shape. parse(s) returns one table when the string names one event,
-- else a list of them (group members, comma lists, globs); list(s) always
-- returns a list. Each event table holds:
--   attr fields: type, config, exclude_user, exclude_kernel, exclude_hv,
--     exclude_idle, exclude_host, exclude_guest, pinned, exclusive (booleans),
--     precise_ip (0..3) -- always present; config1, config2, config3,
--     bp_type, bp_addr, bp_len, sample_period, sample_freq, freq, inherit
--     -- present when the string sets them;
--   name: the event's display name (canonical for generic and cache
--     names, the `name=` term when given, else as typed);
--   non-attr extras (see M.EXTRA): group (group number, 1-based, for members
--     of a {...} group), leader (true on a group's first member), group_name,
--     sample_read (S), weak (W), precise_max (P), bpf_counter (b), pmu (PMU
--     name), scale and unit (from a sysfs event's .scale/.unit), terms
--     (built-in terms that are not attr fields: percore, metric-id,
--     call-graph, ...).
--
-- Errors raise "perfev.parse: <what> at position <n>" (1-based), naming
-- what was expected.
--
-- options (second argument): sysfs = PMU devices root (default
-- /sys/bus/event_source/devices), tracefs = tracefs root.
local core = require "perfev.core"
local names = require "perfev.names"
local cache = require "perfev.cache"
local pmu = require "perfev.pmu"
local tracepoint = require "perfev.tracepoint"

local TYPE = core.TYPE

local M = {}

-- Fields of a parsed event that are not attr fields.
M.EXTRA = {
  name = true, group = true, leader = true, group_name = true, sample_read = true,
  weak = true, precise_max = true, bpf_counter = true, pmu = true, scale = true,
  unit = true, terms = true, per_pkg = true, snapshot = true,
}

-- The modifiers, as data. kind:
--   level   -- u/k/h: the first one excludes all three levels, each then
--              re-includes its own; u also excludes guests unless G/H came
--   virt    -- G/H: the first one excludes both, each re-includes its own
--   set     -- sets its field (leader_only: only a group's leader, from a group modifier)
--   precise -- p: precise_ip + 1 (at most max), excludes guests unless G/H came
--   extra   -- a non-attr flag in the result
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
  { "W", "weak", kind = "extra" },
  { "e", "exclusive", kind = "set", leader_only = true },
  { "b", "bpf_counter", kind = "extra" },
}
local MOD = {}
for _, m in ipairs(M.MODIFIERS) do MOD[m[1]] = m end
local MOD_CHARS = {}
for _, m in ipairs(M.MODIFIERS) do MOD_CHARS[#MOD_CHARS + 1] = m[1] end
MOD_CHARS = table.concat(MOD_CHARS, " ")

local LEVELS = { "exclude_user", "exclude_kernel", "exclude_hv" }

-- The bits every event table carries (numbers internally, booleans out).
local BITS = { "exclude_user", "exclude_kernel", "exclude_hv", "exclude_idle",
               "exclude_host", "exclude_guest", "pinned", "exclusive" }

-- Built-in terms: every PMU (and generic/raw/cache names with /terms/) takes
-- them. apply(ev, value) sets the event; kept terms go to ev.terms.
local function assign(field)
  return function(ev, v) ev[field] = v end
end
M.TERMS = {
  config = assign("config"), config1 = assign("config1"),
  config2 = assign("config2"), config3 = assign("config3"),
  name = function(ev, v) ev.name, ev._named = v, true end,
  period = function(ev, v) ev.sample_period = v end,
  freq = function(ev, v) ev.sample_freq, ev.freq = v, true end,
  inherit = function(ev, v) ev.inherit = v ~= 0 end,
  ["no-inherit"] = function(ev) ev.inherit = false end,
  -- record-time options: kept in ev.terms
  percore = "keep", ["metric-id"] = "keep", ["call-graph"] = "keep", ["stack-size"] = "keep",
  ["max-stack"] = "keep", nr = "keep", time = "keep", overwrite = "keep", ["no-overwrite"] = "keep",
  branch_type = "keep", ["aux-output"] = "keep", ["aux-sample-size"] = "keep",
  ["driver-config"] = "keep",
}
local STRING_TERMS = { name = true, ["metric-id"] = true, ["call-graph"] = true,
                       branch_type = true, ["driver-config"] = true }

---------------------------------------------------------------------------
-- the cursor

local P = {}
P.__index = P

local function fail(pos, msg)
  error(("perfev.parse: %s at position %d"):format(msg, pos), 0)
end

function P:peek(n) return self.s:sub(self.i, self.i + (n or 1) - 1) end
function P:eof() return self.i > #self.s end
function P:fail(msg, pos) fail(pos or self.i, msg) end

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
  local at_end = self:eof() or self:peek() == "," or self:peek() == "}"
  if required and self.i == start and (required == "strict" or not at_end) then
    self:fail(("expected a modifier (one of %s), found %s"):format(MOD_CHARS, self:found()))
  end
  return self.s:sub(start, self.i - 1), start
end

-- The end of an event: end of string, ',' or (in a group) '}'.
function P:event_end(in_group)
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

---------------------------------------------------------------------------
-- terms: key[=value] {, key[=value]} up to '/'

function P:terms()
  local list = {}
  if self:peek() == "/" then return list end
  while true do
    local start = self.i
    local key = self.s:match("^[%a_][%w_%-%.]*", self.i)
    if not key then self:fail(("expected a term (key or key=value), found %s"):format(self:found())) end
    self.i = self.i + #key
    local term = { key = key, pos = start }
    if self:peek() == "=" then
      self.i = self.i + 1
      term.vpos = self.i
      local c = self:peek()
      if c == "'" or c == '"' then
        local close = self.s:find(c, self.i + 1, true)
        if not close then self:fail("unterminated quoted value") end
        term.str = self.s:sub(self.i + 1, close - 1)
        self.i = close + 1
      elseif c:match("%d") then
        term.value = self:number("a number")
        local more = self.s:match("^[^,/]+", self.i)
        if more then
          if STRING_TERMS[key] then
            term.str, term.value = self.s:sub(term.vpos, self.i + #more - 1), nil
            self.i = self.i + #more
          else
            self:fail(("expected ',' or '/' after the value of '%s', found %s"):format(key, self:found()))
          end
        end
      else
        local s = self.s:match("^[^,/]+", self.i)
        if not s then self:fail(("expected a value for '%s', found %s"):format(key, self:found())) end
        term.str = s
        self.i = self.i + #s
      end
      if term.str and not term.value and not STRING_TERMS[key] and term.str ~= "?" then
        self:fail(("expected a number for '%s'"):format(key), term.vpos)
      end
    end
    list[#list + 1] = term
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
  if not ok then error(("perfev.parse: bad event file %s ('%s'): %s"):format(where, s, list), 0) end
  return list
end

local function builtin(ev, term, pos)
  local key = term.key
  local rawv = key:match("^r0x(%x+)$") or key:match("^r(%x+)$")
  if rawv and not term.value and not term.str then
    if #rawv:gsub("^0+", "") > 16 then fail(pos, "raw value does not fit in 64 bits") end
    ev.config = math.tointeger(tonumber(rawv, 16)) or tonumber("0x" .. rawv)
    return true
  end
  local t = M.TERMS[key]
  if not t then return false end
  local v = term.value
  if v == nil and term.str == nil then v = 1 end
  if STRING_TERMS[key] then v = term.str or (term.value and tostring(term.value)) end
  if t == "keep" then
    ev.terms = ev.terms or {}
    ev.terms[key] = v
  else
    if v == nil then fail(term.vpos or pos, ("expected a value for '%s'"):format(key)) end
    t(ev, v)
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
    if builtin(ev, term, term.pos) then return end
    if p.formats[term.key] then
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
    fail(term.pos, ("unknown term '%s' for PMU '%s' (valid terms: %s)"):format(term.key, p.name, valid_terms(p)))
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

---------------------------------------------------------------------------
-- events

-- finish(ev, base name, modstring...) -> the event with its name
local function named(ev, name)
  if ev.name == nil then ev.name = name end
  return ev
end

function P:with_modifiers(list, in_group, colon)
  local mods, mpos = "", self.i
  if colon then
    if self:peek() == ":" then
      self.i = self.i + 1
      mods, mpos = self:modifiers(true)
    end
  else
    mods, mpos = self:modifiers(false)
  end
  self:event_end(in_group)
  if mods ~= "" then
    for _, ev in ipairs(list) do
      apply(ev, mods, mpos, false)
      if ev._auto_name then ev.name = ev.name .. ":" .. mods end
    end
  end
  return list
end

function P:breakpoint(start, in_group)
  self.i = self.i + 1                       -- the ':' after mem
  local addr = self:number("an address after 'mem:'")
  local len
  if self:peek() == "/" then
    self.i = self.i + 1
    len = self:number("a length after '/'")
  end
  local access, mods, mpos = "", "", self.i
  if self:peek() == ":" then
    self.i = self.i + 1
    local astart = self.i
    local seen = {}
    while self.s:sub(self.i, self.i):match("^[rwx]$") do
      local c = self:peek()
      if seen[c] then self:fail(("duplicate access '%s' (expected r, w and x at most once each)"):format(c)) end
      seen[c] = true
      self.i = self.i + 1
    end
    access = self.s:sub(astart, self.i - 1)
    mods, mpos = self:modifiers(access == "" or nil)
    if access ~= "" and mods == "" and self:peek() == ":" then
      self.i = self.i + 1
      mods, mpos = self:modifiers(true)
    end
  end
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
  ev.name = self.s:sub(start, self.i - 1)
  if mods ~= "" then apply(ev, mods, mpos, false) end
  return { ev }
end

function P:tracepoint(sys, start, in_group)
  self.i = self.i + 1                       -- ':'
  local name = self:word()
  if not name then
    self:fail(("expected a tracepoint name after '%s:', found %s"):format(sys, self:found()))
  end
  local found, err = tracepoint.expand(sys, name, self.opts.tracefs)
  if not found then fail(start, err) end
  local list = {}
  for _, tp in ipairs(found) do
    local ev = new_event(TYPE.TRACEPOINT, tp.id)
    ev.name = tp.sys .. ":" .. tp.name
    ev._auto_name = true
    list[#list + 1] = ev
  end
  return self:with_modifiers(list, in_group, true)
end

-- word '/' terms '/' modifiers: a PMU, or a generic/raw/cache name with terms.
function P:pmu_event(word, start, in_group)
  self.i = self.i + 1                       -- '/'
  local terms = self:terms()
  self:expect("/", "'/' closing the terms")
  local text_end = self.i - 1
  local list = {}
  local base = self:known(word, start)
  local pmus = {}
  if base and base[1].type then
    local b = base[1]
    local ev = new_event(b.type, b.config)
    for _, t in ipairs(terms) do
      if not builtin(ev, t, t.pos) then
        fail(t.pos, ("unknown term '%s' for '%s' (valid terms: %s)"):format(t.key, word, valid_terms(nil)))
      end
    end
    list[1] = named(ev, b.name)
  else
    pmus = pmu.match(word, self.opts.sysfs)
    if #pmus == 0 then
      fail(start, ("unknown PMU '%s' (no %s/%s: expected a PMU name, or a generic or cache event before '/')")
           :format(word, self.opts.sysfs or pmu.ROOT, word))
    end
    for _, p in ipairs(pmus) do
      local ev = new_event(p.type, 0)
      pmu_terms(p, ev, terms)
      ev.pmu = p.name
      local text = self.s:sub(start, text_end)
      if #pmus > 1 then text = p.name .. self.s:sub(start + #word, text_end) end
      list[#list + 1] = named(ev, text)
    end
  end
  self:with_modifiers(list, in_group, false)
  if #pmus > 0 or base then
    local mods = self.s:sub(text_end + 1, self.i - 1)
    if mods ~= "" then
      for _, ev in ipairs(list) do
        if not ev._named then ev.name = ev.name .. mods end
      end
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
  local c = self:peek()
  if c == "{" then
    self:fail(("a group cannot hold a group: unexpected '{' after '%s'"):format(word))
  end
  if c == "/" then return self:pmu_event(word, start, in_group) end
  if c == ":" and word == "mem" then return self:breakpoint(start, in_group) end
  local base, how = self:known(word, start)
  if not base and how then fail(start, how) end
  if not base and c == ":" then return self:tracepoint(word, start, in_group) end
  if not base then
    fail(start, ("unknown event '%s' (expected a hardware, software or cache event, rNNN, mem:ADDR, "
                 .. "subsys:tracepoint or pmu/terms/; generic names: %s)"):format(word, names.known()))
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
    ev.name = base[1].name
    ev._auto_name = true
    list[1] = ev
  end
  return self:with_modifiers(list, in_group, true)
end

function P:group(name, gnum)
  local open = self.i
  self.i = self.i + 1                       -- '{'
  local members = {}
  if self:peek() == "}" then self:fail("expected an event in the group, found '}'") end
  while true do
    for _, ev in ipairs(self:event(true)) do members[#members + 1] = ev end
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
  local mods, mpos = "", self.i
  if self:peek() == ":" then
    self.i = self.i + 1
    mods, mpos = self:modifiers("strict")
  end
  self:event_end(false)
  for i, ev in ipairs(members) do
    if mods ~= "" then
      apply(ev, mods, mpos, true, i == 1)
      ev.name = ev.name .. (ev.name:find(":", 1, true) and not ev.pmu and "" or ":") .. mods
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

-- list(s, opts) -> list of event tables (see the header for the shape)
function M.list(s, opts)
  if type(s) ~= "string" then
    error("perfev.parse: expected an event string, got " .. type(s), 2)
  end
  local self = setmetatable({ s = s, i = 1, opts = opts or {} }, P)
  if s == "" then self:fail("expected an event, found the end") end
  local out, groups = {}, 0
  while true do
    local gname
    local w = s:match(WORD, self.i)
    if w and s:sub(self.i + #w, self.i + #w) == "{" then
      gname = w
      self.i = self.i + #w
    end
    local list
    if self:peek() == "{" then
      groups = groups + 1
      list = self:group(gname, groups)
    else
      list = self:event(false)
    end
    for _, ev in ipairs(list) do out[#out + 1] = finish(ev) end
    if self:eof() then break end
    self:expect(",", "','")
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
