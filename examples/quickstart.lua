-- Quickstart: count software events around a Lua workload, like `perf stat`,
-- and say plainly which hardware events this machine cannot count.
--   make demo     (or: LUA_CPATH='build/?.so;;' LUA_PATH='lua/?.lua;lua/?/init.lua;;' lua5.4 examples/quickstart.lua)
local perfev = require "perfev"

local function workload()
  local t = {}
  for i = 1, 200000 do t[i] = ("%d"):format(i) end   -- allocates: page faults
  table.sort(t)
  os.execute("sleep 0.05")                            -- sleeps: context switches
  return #t
end

local g = assert(perfev.group { "task-clock", "context-switches", "cpu-migrations",
                                "page-faults", "minor-faults", "major-faults" })
local r = g:measure(workload)

print(("%-20s %16s"):format("event", "count"))
for i, name in ipairs(g:names()) do
  local v = r[i]
  print(("%-20s %16s"):format(name, v == false and "<not counted>" or tostring(v)))
end
print(("task-clock: %.3f ms on cpu; group enabled %.3f ms, running %.3f ms"):format(
  r["task-clock"] / 1e6, r.time_enabled / 1e6, r.time_running / 1e6))
g:close()

-- One event on its own. Closed by ev:close(), or by the garbage collector;
-- on Lua 5.4, `local ev <close> = ...` closes it when the block ends.
do
  local ev = assert(perfev.open("task-clock"))
  local n = ev:measure(function() for _ = 1, 1e6 do end end)
  print(("an empty loop of 1e6 iterations: %.3f ms of task-clock"):format(n / 1e6))
  ev:close()
end

-- Hardware events need a hardware PMU; virtual machines rarely have one.
print("\nhardware events on this machine:")
local missing, why = {}, nil
for _, name in ipairs { "cycles", "instructions", "cache-misses", "branch-misses" } do
  local ev, msg = perfev.open(name)
  if ev then
    local n = ev:measure(workload)
    print(("  %-14s %s"):format(name, n == false and "<not counted>" or tostring(n)))
    ev:close()
  else
    missing[#missing + 1], why = name, msg
  end
end
if #missing > 0 then
  print(("  not available here: %s\n  because: %s"):format(table.concat(missing, ", "), why))
end
