-- bench/u64.lua: what a 64-bit value costs beyond 2^53 against one within
-- it, read from an attr field side by side in one run. On Lua 5.3/5.4 both
-- are integers (ratio about 1); on LuaJIT the value beyond 2^53 is made a
-- uint64_t cdata through perfev.compat's ffi functions (csrc/compat.c).
--   make bench ; make bench LUA=luajit
local perfev = require "perfev"
local compat = require "perfev.compat"
local raw = require "rawread"
local B = require "bench.support"

local N = tonumber(os.getenv("PERFEV_BENCH_N")) or 200000
local ROUNDS = 7
local clock = raw.now_ns

local small = perfev.attr{ type = "raw", config = 0x1234 }
local big = perfev.attr{ type = "raw", config = compat.hex64("0x8000000000000001") }
assert(compat.hex(big.config) == "8000000000000001", "the big config reads back exact")

local function ns_per_get(a)
  local t0, x = clock(), nil
  for _ = 1, N do x = a.config end
  assert(x ~= nil)
  return (clock() - t0) / N
end

local function ns_per_set(a, v)
  local t0 = clock()
  for _ = 1, N do a.config = v end
  return (clock() - t0) / N
end

local gs, gb, ss, sb = {}, {}, {}, {}
ns_per_get(small); ns_per_get(big)
for r = 1, ROUNDS do
  gs[r], gb[r] = ns_per_get(small), ns_per_get(big)
  ss[r], sb[r] = ns_per_set(small, 0x1234), ns_per_set(big, big.config)
end
local med = B.median
print(("%s: attr.config get: %.0f ns within 2^53, %.0f ns beyond (%s); ratio %.2f")
  :format(compat.runtime, med(gs), med(gb), type(big.config), med(gb) / med(gs)))
print(("%s: attr.config set: %.0f ns within 2^53, %.0f ns beyond; ratio %.2f")
  :format(compat.runtime, med(ss), med(sb), med(sb) / med(ss)))
