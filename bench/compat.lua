-- bench/compat.lua: ns per call of perfev.compat's integer functions as a
-- caller gets them (checked: a wrong value is refused at the caller's line)
-- and through compat.fast, the unchecked path of perfev's own per-record
-- code (the perf.data writer's time order, report's trace fields).
--   make bench ; make bench LUA=luajit
local compat = require "perfev.compat"
local B = require "bench.support"

local N = tonumber(os.getenv("PERFEV_BENCH_N")) or 2000000
local ROUNDS = 5

local CASES = {
  { "band", function(f) local x = 0 for i = 1, N do x = f(i, 0xff) end return x end },
  { "bor", function(f) local x = 0 for i = 1, N do x = f(i, 0x100) end return x end },
  { "lshift", function(f) local x = 0 for i = 1, N do x = f(i, 3) end return x end },
  { "ult", function(f) local x for i = 1, N do x = f(i, 1000) end return x end },
  { "sub", function(f) local x = 0 for i = 1, N do x = f(i, 7) end return x end },
}

local function ns(loop, f)
  local t = {}
  for r = 1, ROUNDS do
    local t0 = os.clock()
    loop(f)
    t[r] = (os.clock() - t0) * 1e9 / N
  end
  return B.median(t)
end

local empty = function(a) return a end
local base = ns(CASES[1][2], empty)   -- the loop and a Lua call
for _, c in ipairs(CASES) do
  local name, loop = c[1], c[2]
  local checked = ns(loop, compat[name])
  local fast = compat.fast and compat.fast[name]
  print(("%s: compat.%s %.0f ns per call (checked)%s; an empty Lua function: %.0f ns")
    :format(compat.runtime, name, checked, fast and (", compat.fast.%s %.0f ns"):format(name, ns(loop, fast)) or "",
            base))
end
