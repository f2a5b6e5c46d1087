-- The source of a function for the workloads the attach specs start in
-- another process: per_ms(f) -> the n for which f(n) takes a millisecond of
-- CPU time (f(n) timed with os.clock, n doubled until it takes 50 ms), so
-- that a workload's calls can last many sampling periods and a fixed
-- period cannot lock onto one phase of a short loop.
local M = {}

M.SOURCE = [[
local function per_ms(f)
  local n, t = 25000, 0
  repeat
    n = n * 2
    local t0 = os.clock()
    f(n)
    t = os.clock() - t0
  until t >= 0.05
  return math.max(1, math.floor(n / (t * 1000)))
end
]]

return M
