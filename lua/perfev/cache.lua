-- The hardware-cache event vocabulary (PERF_TYPE_HW_CACHE) as data:
-- cache names, operations and results with every alias the perf tool
-- accepts, and which operations each cache supports.
--
-- A cache event is `cache[-x[-y]]` where x and y are operation or result
-- words; config = cache | op << 8 | result << 16. Names are case-sensitive,
-- as in perf.
local core = require "perfev.core"
local compat = require "perfev.compat"

local C, OP, RES = core.HW_CACHE, core.HW_CACHE_OP, core.HW_CACHE_RESULT

local M = {}

-- { canonical name, id, { ops it supports }, aliases... }
M.caches = {
  { "L1-dcache", C.L1D, { "load", "store", "prefetch" }, "l1-d", "l1d", "L1-data" },
  { "L1-icache", C.L1I, { "load", "prefetch" }, "l1-i", "l1i", "L1-instruction" },
  { "LLC", C.LL, { "load", "store", "prefetch" }, "L2" },
  { "dTLB", C.DTLB, { "load", "store", "prefetch" }, "d-tlb", "Data-TLB" },
  { "iTLB", C.ITLB, { "load" }, "i-tlb", "Instruction-TLB" },
  { "branch", C.BPU, { "load" }, "bpu", "btb", "bpc" },
  { "node", C.NODE, { "load", "store", "prefetch" } },
}

-- { canonical word, id, plural used in canonical names, aliases... }
M.ops = {
  { "load", OP.READ, "loads", "loads", "read" },
  { "store", OP.WRITE, "stores", "stores", "write" },
  { "prefetch", OP.PREFETCH, "prefetches", "prefetches", "speculative-read", "speculative-load" },
}

-- { canonical word, id, aliases... }
M.results = {
  { "refs", RES.ACCESS, "Reference", "ops", "access" },
  { "misses", RES.MISS, "miss" },
}

-- word -> row, for each vocabulary
M.cache_by_word, M.op_by_word, M.result_by_word = {}, {}, {}

local function index(rows, into, skip)
  for _, row in ipairs(rows) do
    into[row[1]] = row
    for i = skip, #row do into[row[i]] = row end
  end
end
index(M.caches, M.cache_by_word, 4)
index(M.ops, M.op_by_word, 4)
index(M.results, M.result_by_word, 3)

-- The op/result words, longest first: "speculative-read" holds a dash, so
-- a name is matched word by word from this list rather than split on '-'.
M.words = {}
for w in pairs(M.op_by_word) do M.words[#M.words + 1] = w end
for w in pairs(M.result_by_word) do M.words[#M.words + 1] = w end
table.sort(M.words, function(a, b) return #a > #b or (#a == #b and a < b) end)

M.caches_longest = {}
for w in pairs(M.cache_by_word) do M.caches_longest[#M.caches_longest + 1] = w end
table.sort(M.caches_longest, function(a, b) return #a > #b or (#a == #b and a < b) end)

-- cache and op rows of this module's tables (cache_by_word ...), checked
local function rows(fname, cache, op)
  if type(cache) ~= "table" or type(cache[3]) ~= "table" or (op ~= nil and type(op) ~= "table") then
    require("perfev.options").raisef("perfev.cache.%s: expects a cache row and an operation row of perfev.cache's "
                                     .. "tables", fname)
  end
end

local function supports(cache, op)
  rows("supports", cache, op or false)
  for _, o in ipairs(cache[3]) do
    if o == op[1] then return true end
  end
  return false
end
M.supports = supports

-- The config of cache/op/result rows (op and result may be nil: load, refs).
function M.config(cache, op, result)
  rows("config", cache, op)
  if result ~= nil and type(result) ~= "table" then rows("config", cache, false) end
  return compat.bor(cache[2], compat.lshift(op and op[2] or OP.READ, 8),
      compat.lshift(result and result[2] or RES.ACCESS, 16))
end

-- resolve(cache word, { word, word }) -> config | nil, message
-- Each word is taken as the operation while none is set, else as the
-- result while none is set; a word that fits neither slot is ignored (perf
-- accepts `LLC-load-store` as LLC-loads). The operation must be one the
-- cache supports.
function M.resolve(cache_word, words)
  local cache = M.cache_by_word[cache_word]
  if not cache then return nil, ("unknown cache '%s'"):format(cache_word) end
  local op, result
  for _, w in ipairs(words) do
    if not op and M.op_by_word[w] then
      op = M.op_by_word[w]
      if not supports(cache, op) then
        return nil, ("the %s cache has no '%s' operation (it has: %s)")
          :format(cache[1], w, table.concat(cache[3], ", "))
      end
    elseif not result and M.result_by_word[w] then
      result = M.result_by_word[w]
    end
  end
  return M.config(cache, op, result)
end

-- Every valid event by its canonical name, as perf list prints them:
-- { name, config } rows (L1-dcache-loads, L1-dcache-load-misses, ...).
function M.events()
  local list = {}
  for _, cache in ipairs(M.caches) do
    for _, opname in ipairs(cache[3]) do
      local op = M.op_by_word[opname]
      list[#list + 1] = { cache[1] .. "-" .. op[3], M.config(cache, op, M.results[1]) }
      list[#list + 1] = { cache[1] .. "-" .. op[1] .. "-misses", M.config(cache, op, M.results[2]) }
    end
  end
  return list
end

return M
