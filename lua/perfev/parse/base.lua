-- Base events of perf's event grammar: generic, raw and hardware-cache
-- names to type and config, hybrid PMUs, and modifier letters to the
-- exclude bits (perf's exact semantics).
local core = require "perfev.core"
local names = require "perfev.names"
local cache = require "perfev.cache"
local pmu = require "perfev.pmu"
local V = require "perfev.parse.vocab"
local lexer = require "perfev.parse.lexer"
local compat = require "perfev.compat"

local TYPE = core.TYPE
local P, fail = lexer.P, lexer.fail
local MOD, LEVELS, BITS = V.MOD, V.LEVELS, V.BITS

local M = {}

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
  local excluded = add and (compat.bor(st.exclude_user, st.exclude_kernel, st.exclude_hv)) ~= 0
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
    return { type = TYPE.RAW, config = compat.hex64("0x" .. hex),
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
        local op = cache.ops[(compat.band(compat.rshift(c, 8), 0xff)) + 1]
        local name = row[1] .. "-" .. ((compat.rshift(c, 16)) == 0 and op[3] or (op[1] .. "-misses"))
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
            e.config = compat.bor(compat.band(ev.config, HW_EVENT_MASK), compat.lshift(p.type, PMU_TYPE_SHIFT))
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


M.new_event, M.apply, M.numeric, M.HYBRID = new_event, apply, numeric, HYBRID

return M
