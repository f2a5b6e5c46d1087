-- perfev.list([filter], [opts]): the events of this machine, like `perf list`.
--
-- Returns a list of rows { name, kind, aliases, can_open, errno, scale, unit }
-- sorted by kind then name; kind is "hardware", "software", "tool",
-- "hw-cache", "pmu" or "tracepoint" (tool events -- duration_time,
-- user_time, system_time -- are measured Lua-side and always open). can_open says whether a disabled open of the event
-- (as perfev.parse builds it) succeeds now; probes are cached per process
-- (opts.refresh = true probes again). The list prints like perf list.
-- Closing a tracepoint event waits for an RCU grace period (tens of ms), so
-- when a listing holds more than opts.max_tracepoint_probes (50)
-- tracepoints, one of them is probed and its answer given to all (the row
-- then has probed = "one tracepoint for all").
--
-- Printed (tostring, the REPL), a listing of at most SHOWN (40) rows is
-- perf list's text; a longer one is a summary: the kinds with their counts
-- and how to filter; an empty one says that nothing matched the filter
-- (with the closest name, "did you mean"). l:format() is always the whole text (`perfev list`).
--
-- filter: nil (everything); a kind ("hw", "hardware", "sw", "software",
-- "tool", "cache", "hwcache", "hw-cache", "pmu", "tracepoint"); or a glob (* ?) on
-- names; else a substring of names. opts: sysfs, tracefs (roots), probe
-- (false: do not probe, can_open is nil).
local names = require "perfev.names"
local cache = require "perfev.cache"
local pmu = require "perfev.pmu"
local tracepoint = require "perfev.tracepoint"
local parse = require "perfev.parse"
local spec = require "perfev.spec"
local open = require "perfev.open"
local options = require "perfev.options"
local nearest = require "perfev.nearest"

local M = {}

local KINDS = {
  hw = "hardware", hardware = "hardware", sw = "software", software = "software", tool = "tool",
  cache = "hw-cache", hwcache = "hw-cache", ["hw-cache"] = "hw-cache",
  pmu = "pmu", tracepoint = "tracepoint",
}
local ORDER = { hardware = 1, software = 2, tool = 3, ["hw-cache"] = 4, pmu = 5, tracepoint = 6 }
local LABEL = { hardware = "Hardware event", software = "Software event", tool = "Tool event",
                ["hw-cache"] = "Hardware cache event", pmu = "Kernel PMU event",
                tracepoint = "Tracepoint event" }

local probed = {}   -- name -> { ok, errno }

local function probe(name, opts)
  local hit = probed[name]
  if hit and not opts.refresh then return hit[1], hit[2] end
  local ok, t = pcall(parse.parse, name, { sysfs = opts.sysfs, tracefs = opts.tracefs })
  local can, errno = false, nil
  if ok and t.type then
    local made, a = pcall(spec.attr, t)
    if made then
      a.disabled = true
      local ev, _, e = open.event(a, { precise_max = t.precise_max })
      if ev then ev:close() can = true else errno = e end
    end
  end
  probed[name] = { can, errno }
  return can, errno
end

local function rows(opts, want)
  local list = {}
  local function add(kind, name, extra)
    if want and want ~= kind then return end
    local r = { name = name, kind = kind }
    for k, v in pairs(extra or {}) do r[k] = v end
    list[#list + 1] = r
  end
  for _, pair in ipairs { { "hardware", names.hardware }, { "software", names.software } } do
    for _, row in ipairs(pair[2]) do
      local aliases = {}
      for i = 3, #row do aliases[#aliases + 1] = row[i] end
      add(pair[1], row[1], { aliases = aliases })
    end
  end
  for _, row in ipairs(names.tool) do add("tool", row[1], { what = row[2] }) end
  for _, ev in ipairs(cache.events()) do add("hw-cache", ev[1]) end
  if not want or want == "pmu" then
    for _, p in ipairs(pmu.all(opts.sysfs)) do
      for _, n in ipairs(p.event_names) do
        local ev = p.events[n:lower()]
        add("pmu", p.name .. "/" .. n .. "/", { scale = ev.scale, unit = ev.unit })
      end
    end
  end
  if not want or want == "tracepoint" then
    for _, sys in ipairs(tracepoint.subsystems(opts.tracefs) or {}) do
      for _, e in ipairs(tracepoint.events(sys, opts.tracefs) or {}) do
        add("tracepoint", sys .. ":" .. e)
      end
    end
  end
  return list
end

-- matcher(filter) -> function(row): whether the row's name or an alias
-- matches: a glob (* ?), else a substring. The pattern is made once.
local function matcher(filter)
  local test
  if filter:find("[%*%?]") then
    local pat = pmu.glob_pattern(filter)
    test = function(n) return n:match(pat) ~= nil end
  else
    test = function(n) return n:find(filter, 1, true) ~= nil end
  end
  return function(row)
    if test(row.name) then return true end
    for _, a in ipairs(row.aliases or {}) do
      if test(a) then return true end
    end
    return false
  end
end

local Listing = {}
Listing.__index = Listing

-- l:format() -> every row as perf list prints it
function Listing.format(self)
  options.self(self, Listing, "perfev.list", "format")
  local out = {}
  for _, r in ipairs(self) do
    local name = r.name
    if r.aliases and #r.aliases > 0 then name = name .. " OR " .. table.concat(r.aliases, " OR ") end
    local status = r.can_open == nil and "" or (r.can_open and "" or "  (cannot open here)")
    local unit = r.unit and ("  [" .. r.unit .. (r.scale and (" x" .. r.scale) or "") .. "]") or ""
    out[#out + 1] = ("  %-50s [%s]%s%s"):format(name, LABEL[r.kind], unit, status)
  end
  return table.concat(out, "\n")
end

M.SHOWN = 40
local FILTER_OF = { hardware = "hw", software = "sw", tool = "tool", ["hw-cache"] = "cache",
                    pmu = "pmu", tracepoint = "tracepoint" }

-- What an empty listing prints as: the filter that matched nothing, and
-- the closest name where one is near (listing -> message; weak keys, so
-- that the rows stay the listing's only contents).
local EMPTY = setmetatable({}, { __mode = "k" })

-- The summary a long listing prints as: what the REPL shows of perfev.list().
function Listing.__tostring(self)
  options.self(self, Listing, "perfev.list", "__tostring")
  if #self == 0 then return EMPTY[self] or "perfev.list: no events" end
  if #self <= M.SHOWN then return self:format() end
  local count, can, kinds = {}, {}, {}
  local ncan = 0
  for _, r in ipairs(self) do
    if not count[r.kind] then count[r.kind] = 0; can[r.kind] = 0; kinds[#kinds + 1] = r.kind end
    count[r.kind] = count[r.kind] + 1
    if r.can_open then can[r.kind] = can[r.kind] + 1; ncan = ncan + 1 end
  end
  local probed_any = self[1].can_open ~= nil
  local out = { ("perfev.list: %d events%s"):format(#self, probed_any and (", %d can open here"):format(ncan) or "") }
  for _, k in ipairs(kinds) do
    out[#out + 1] = ("  %-22s %5d  %-18s perfev.list(%q)"):format(LABEL[k], count[k],
      probed_any and ("(%d can open)"):format(can[k]) or "", FILTER_OF[k])
  end
  out[#out + 1] = "filter: perfev.list(\"sched:*\") (a glob), perfev.list(\"fault\") (a substring);"
  out[#out + 1] = ("l:format() prints all %d rows (as `perfev list`); each row: name, kind, aliases, can_open")
                  :format(#self)
  return table.concat(out, "\n")
end

-- no_match(filter, all) -> "perfev.list: no event matches 'x' (did you
-- mean 'y'?)": the closest event name, alias or kind of the whole list
local function no_match(filter, all)
  local known = {}
  for k in pairs(KINDS) do known[#known + 1] = k end
  for _, r in ipairs(all) do
    known[#known + 1] = r.name
    -- a tracepoint's or a PMU event's own name, which a filter may be near
    known[#known + 1] = r.name:match("^[^:/]+[:/]([^:/]+)/?$")
    for _, a in ipairs(r.aliases or {}) do known[#known + 1] = a end
  end
  return ("perfev.list: no event matches '%s'%s"):format(filter, nearest.hint(filter, known))
end

-- list(filter, opts) -> rows (printable)
local OPTIONS = { sysfs = "string", tracefs = "string", probe = "boolean", refresh = "boolean",
                  max_tracepoint_probes = "integer", kallsyms = "string|boolean" }

function M.list(filter, opts)
  if filter ~= nil then options.arg(filter, "string", "perfev.list", "the filter (argument #1)") end
  opts = options.check(opts, OPTIONS, "perfev.list")
  local want = filter and KINDS[filter]
  local all = rows(opts, want)
  local out = setmetatable({}, Listing)
  local ntp = 0
  local matches = filter and not want and matcher(filter)
  for _, r in ipairs(all) do
    if not matches or matches(r) then
      out[#out + 1] = r
      if r.kind == "tracepoint" then ntp = ntp + 1 end
    end
  end
  if opts.probe ~= false then
    local one_tp
    for _, r in ipairs(out) do
      if r.kind == "tracepoint" and ntp > (opts.max_tracepoint_probes or 50) then
        one_tp = one_tp or { probe(r.name, opts) }
        r.can_open, r.errno, r.probed = one_tp[1], one_tp[2], "one tracepoint for all"
      else
        r.can_open, r.errno = probe(r.name, opts)
      end
    end
  end
  if #out == 0 and filter then EMPTY[out] = no_match(filter, want and rows(opts) or all) end
  table.sort(out, function(a, b)
    if a.kind ~= b.kind then return ORDER[a.kind] < ORDER[b.kind] end
    return a.name < b.name
  end)
  return out
end

-- Forget the cached probes.
function M.reset() probed = {} end

return M
