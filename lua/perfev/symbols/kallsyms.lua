-- The kernel's symbols from /proc/kallsyms (or perf's copy of it in
-- ~/.debug), looked up the way perf report finds them, without parsing
-- the 100k+ lines: the kernel lists its own text in address order, so an
-- address is found by a binary search over the bytes of the file, in C
-- (core.kallsyms_map, csrc/symbols/kallsyms.c: a regular file is mapped, not
-- copied into a Lua string); the modules' lines (those with "\t[module]",
-- listed after) are parsed here.
--
--   local kallsyms = require "perfev.symbols.kallsyms"
--   local k = kallsyms.open("/proc/kallsyms")     -- nil when unreadable or all zeros
--   local key, name, start, module, object = k:find(v)   -- v: address - 0xffff800000000000
--
-- As in perf (symbol_type__filter, symbols__fixup_end): only T, W, D, B
-- symbols in either case count; of several names at one address the last
-- listed is the one found; a symbol ends where the next one starts, the
-- last of the kernel or of the modules one page after its own page. D and
-- B symbols are data (object: perf prints them name+0xOFF).
local core = require "perfev.core"

local M = {}

local KSPAN = 0x800000000000
local KEEP = { T = true, t = true, W = true, w = true, D = true, d = true, B = true, b = true }
local PAGE = 4096

local K = {}
K.__index = K

-- own(self, method): the check at the top of every method (options.self).
local function own(self, method)
  if getmetatable(self) ~= K then require("perfev.options").self(self, K, "perfev.symbols.kallsyms", method) end
end

-- The modules' symbols of the lines text: sorted by address (equal ones
-- in the file's order, the last listed kept), as parallel arrays.
local function modules(text)
  local mods = { starts = {}, names = {}, mods = {}, n = 0 }
  local list = {}
  for a, ty, name, m in text:gmatch("(%x+) (%a) (%S+)%s*%[([^%]]*)%]") do
    local low = #a == 16 and tonumber(a:sub(5), 16)
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
  return mods
end

-- kallsyms.open(path) -> table | nil, why
function M.open(path)
  local map, msg = core.kallsyms_map(path)
  if not map then return nil, msg end
  if map:size() < 20 then
    map:close()
    return nil, path .. ": empty"
  end
  if not map:first() then
    map:close()
    return nil, path .. ": addresses are hidden (kernel.kptr_restrict)"
  end
  return setmetatable({ map = map, modules = modules(map:modules()) }, K)
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
-- (module: the module's name for a module's symbol; object: a kernel data
-- symbol, D or B)
function K:find(v)
  own(self, "find")
  if type(v) ~= "number" then
    local options = require "perfev.options"
    options.raisef("perfev.symbols.kallsyms: k:find: the value must be a number (an address - 0xffff800000000000),"
                   .. " got %s", options.describe(v))
  end
  local key, name, start, object = self.map:find(v)
  if key then return key, name, start, nil, object end
  local m
  key, name, start, m = module_find(self, v)
  if key then return key, name, start, m, false end
  return nil
end

-- k:core_limit() -> the end of the kernel's last symbol (modules aside),
-- by the rule of find: perf's kernel map reaches there once its symbols
-- are loaded (past _etext: init text, data); nil without kernel lines.
function K:core_limit()
  own(self, "core_limit")
  if self.limit == nil then self.limit = self.map:core_limit() or false end
  return self.limit or nil
end

-- k:close(): the mapping goes (also when the table is collected)
function K:close()
  own(self, "close")
  self.map:close()
end

return M
