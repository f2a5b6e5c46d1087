-- The kernel's symbols from /proc/kallsyms (or perf's copy of it in
-- ~/.debug), looked up the way perf report finds them, without parsing
-- the 100k+ lines: the kernel lists its own text in address order, so an
-- address is found by a binary search over the bytes of the file; the
-- modules' lines (those with "\t[module]", listed after) are parsed.
--
--   local kallsyms = require "perfev.symbols.kallsyms"
--   local k = kallsyms.open("/proc/kallsyms")     -- nil when unreadable or all zeros
--   local key, name, start, module = k:find(v)    -- v: address - 0xffff800000000000
--
-- As in perf (symbol_type__filter, symbols__fixup_end): only T, W, D, B
-- symbols in either case count; of several names at one address the last
-- listed is the one found; a symbol ends where the next one starts, the
-- last of the kernel or of the modules one page after its own page.
local M = {}

local KSPAN = 0x800000000000
local KEEP = { T = true, t = true, W = true, w = true, D = true, d = true, B = true, b = true }
-- data symbols: perf makes them STT_OBJECT, which it prints as name+0xOFF
local OBJECT = { D = true, d = true, B = true, b = true }
local PAGE = 4096

local find, sub, byte = string.find, string.sub, string.byte

local K = {}
K.__index = K

-- the address of the line starting at pos, as v (nil below the kernel base)
local function addr(s, pos)
  local low = tonumber(sub(s, pos + 4, pos + 15), 16)
  if not low or byte(s, pos) ~= 102 then return nil end   -- "f"
  return low - KSPAN
end

local function kept(s, pos)
  return KEEP[sub(s, pos + 17, pos + 17)]
end

local function next_line(s, pos)
  local nl = find(s, "\n", pos, true)
  return nl and nl + 1 or #s + 1
end

local function prev_line(s, pos)   -- start of the line before the line at pos (nil at the first)
  if pos <= 1 then return nil end
  local p = pos - 2
  while p >= 1 and byte(s, p) ~= 10 do p = p - 1 end
  return p + 1
end

-- kallsyms.open(path) -> table | nil, why
function M.open(path)
  local f, msg = io.open(path, "r")
  if not f then return nil, msg end
  local s = f:read("a")
  f:close()
  if not s or #s < 20 then return nil, path .. ": empty" end
  if not addr(s, 1) then return nil, path .. ": addresses are hidden (kernel.kptr_restrict)" end
  -- the modules' lines come after the kernel's
  local modpos = find(s, "\t[", 1, true)
  local core_end = #s + 1
  if modpos then core_end = prev_line(s, modpos + 1) or 1 end
  local mods = { starts = {}, names = {}, mods = {}, n = 0 }
  if modpos then
    local list = {}
    for a, ty, name, m in sub(s, core_end):gmatch("(%x+) (%a) (%S+)%s*%[([^%]]*)%]") do
      local low = #a == 16 and tonumber(sub(a, 5), 16)
      if KEEP[ty] and low and low >= KSPAN then list[#list + 1] = { low - KSPAN, name, m, #list } end
    end
    table.sort(list, function(x, y)
      if x[1] ~= y[1] then return x[1] < y[1] end
      return x[4] < y[4]
    end)
    local n = 0
    for _, e in ipairs(list) do
      if n > 0 and mods.starts[n] == e[1] then
        mods.names[n], mods.mods[n] = e[2], e[3]
      else
        n = n + 1
        mods.starts[n], mods.names[n], mods.mods[n] = e[1], e[2], e[3]
      end
    end
    mods.n = n
  end
  return setmetatable({ s = s, core_end = core_end, modules = mods, names = {} }, K)
end

-- The last line in [lo, hi) whose address is <= v (lo's is).
local function last_le(s, lo, hi, v)
  while true do
    local after = next_line(s, lo)
    if after >= hi then return lo end
    local mid = math.floor((after + hi) / 2)
    local m = mid == after and after or next_line(s, mid - 1)
    if m >= hi then
      hi = mid
    else
      local a = addr(s, m)
      if a and a <= v then lo = m else hi = m end
    end
  end
end

local function core_find(self, v)
  local s, hi = self.s, self.core_end
  if hi <= 1 then return nil end
  local first = addr(s, 1)
  if not first or v < first then return nil end
  local pos = last_le(s, 1, hi, v)
  while pos and not kept(s, pos) do pos = prev_line(s, pos) end
  if not pos then return nil end
  local start = addr(s, pos)
  -- the end: the next kept symbol's start, or past the kernel's last page
  local nxt = next_line(s, pos)
  local stop
  while nxt < hi do
    if kept(s, nxt) then
      local a = addr(s, nxt)
      if a and a > start then stop = a; break end
    end
    nxt = next_line(s, nxt)
  end
  if not stop then
    if self.modules.n > 0 then stop = math.ceil((start + PAGE) / PAGE) * PAGE
    else stop = math.ceil(start / PAGE) * PAGE + PAGE end
  end
  if v >= stop then return nil end
  local key = pos
  local name = self.names[key]
  if not name then
    name = sub(s, pos + 19, find(s, "[\t\n]", pos + 19) - 1)
    self.names[key] = name
  end
  return key, name, start, OBJECT[sub(s, pos + 17, pos + 17)] or false
end

-- The end of the kernel's last symbol (modules aside), by the rule of
-- core_find: perf's kernel map reaches there once its symbols are loaded
-- (past _etext: init text, data), nil without kernel lines.
function K:core_limit()
  if self.limit ~= nil then return self.limit or nil end
  local s, pos = self.s, self.core_end > 1 and prev_line(self.s, self.core_end) or nil
  while pos and not kept(s, pos) do pos = prev_line(s, pos) end
  local start = pos and addr(s, pos)
  local limit = false
  if start then
    if self.modules.n > 0 then limit = math.ceil((start + PAGE) / PAGE) * PAGE
    else limit = math.ceil(start / PAGE) * PAGE + PAGE end
  end
  self.limit = limit
  return limit or nil
end

local function module_find(self, v)
  local t = self.modules
  local lo, hi = 1, t.n
  if hi == 0 or v < t.starts[1] then return nil end
  while lo < hi do
    local mid = math.floor((lo + hi + 1) / 2)
    if t.starts[mid] <= v then lo = mid else hi = mid - 1 end
  end
  local start = t.starts[lo]
  local stop = t.starts[lo + 1] or (math.ceil(start / PAGE) * PAGE + PAGE)
  if v >= stop then return nil end
  return -lo, t.names[lo], start, t.mods[lo]
end

-- k:find(v) -> key (unique per symbol), name, start, module, object | nil
-- (object: a kernel data symbol, D or B)
function K:find(v)
  local key, name, start, object = core_find(self, v)
  if key then return key, name, start, nil, object end
  local m
  key, name, start, m = module_find(self, v)
  if key then return key, name, start, m end
  return nil
end

return M
