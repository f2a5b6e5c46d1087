-- perf stat for Lua: count a Lua function, a command and a running process
-- with perf stat's default events, print them as perf stat does (text,
-- CSV, JSON), and use the numbers as a table.
--
--   lua5.4 examples/stat.lua              -- a function, a command 3 times, a process
--   lua5.4 examples/stat.lua -x ';'       -- the same as CSV, ';' between fields
--   lua5.4 examples/stat.lua -j           -- the same as JSON lines
--
-- From the repository: LUA_CPATH='build/?.so;;' LUA_PATH='lua/?.lua;lua/?/init.lua;;'
-- The command line does the same: bin/perfev stat -r 3 -- ls -l /
local perfev = require "perfev"

local fmt = { format = "text" }
if arg[1] == "-x" then fmt = { format = "csv", sep = arg[2] or "," }
elseif arg[1] == "-j" then fmt = { format = "json" } end

-- 1. A Lua function (with its arguments), perf stat's default events:
--    what this machine lacks prints as <not supported>.
local function build(n)
  local t = {}
  for i = 1, n do t[i] = { i, tostring(i) } end
  return #t
end
local res = assert(perfev.stat { build, 200000 })
io.stderr:write(perfev.stat.format(res, fmt))

-- The result is a table: the counters in perf's order (and by name),
-- each with its count, perf's value (task-clock in msec) and metrics.
local pf = res.counters["page-faults"]
local tc = res.counters["task-clock"]
print(("page faults: %.0f, %.1f per ms of CPU; %s %.3f %s"):format(
  pf.count, pf.count / tc.value, tc.name, tc.metrics[1].value, tc.metrics[1].unit))

-- 2. A command, run 3 times (mean, and the relative standard deviation of
--    the mean as perf stat -r prints it), chosen events.
local r3, msg = perfev.stat { command = { "sh", "-c", "ls -R /usr/share/lua >/dev/null" }, ["repeat"] = 3,
                              events = "task-clock,page-faults,context-switches" }
if not r3 then error(msg) end
io.stderr:write(perfev.stat.format(r3, fmt))
print(("the command exited with %d; page faults %.0f +- %.2f %%"):format(
  r3.status, r3.counters["page-faults"].count, r3.counters["page-faults"].noise))

-- 3. A running process (a shell that sleeps in a loop) for 0.3 s, its
--    counts printed every 100 ms as perf stat -I 100 prints them.
local p = io.popen("exec sh -c 'echo $$; while :; do sleep 0.01; done'", "r")
local pid = tonumber(p:read("l"))
assert(perfev.stat { pid = pid, duration_ms = 300, interval_ms = 100, events = "task-clock,context-switches",
                     on_interval = function(iv, r) io.stderr:write(perfev.stat.interval(r, iv, fmt)) end })
os.execute("kill " .. pid)
p:close()

-- 4. Every CPU for 0.2 s (as root), one line per core: perf stat -a --per-core.
local r4, msg4 = perfev.stat { system_wide = true, duration_ms = 200, aggr = "core", events = "task-clock,page-faults" }
if r4 then
  io.stderr:write(perfev.stat.format(r4, fmt))
  for _, g in ipairs(r4.groups) do
    print(("%s: %d CPU(s), %.2f CPUs utilized"):format(g.id, g.nr, g.counters["task-clock"].metrics[1].value))
  end
else
  print("system-wide counting refused: " .. tostring(msg4))
end
