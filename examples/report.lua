-- examples/report.lua: record this script's own work into a perf.data
-- file with perfev.record, then read it back with perfev.report, as
-- `perf report --stdio` would show it, and as Lua tables.
--   lua5.4 examples/report.lua [perf.data]       (as root, or perf_event_paranoid <= 1)
local perfev = require "perfev"

local path = arg[1] or os.tmpname()

local function work()
  local s = 0
  for i = 1, 3e6 do s = s + math.sin(i) * math.sqrt(i) end
  return s
end

local rec, msg = perfev.record { output = path, fn = work, freq = 4000, callchain = true }
if not rec then
  io.stderr:write("examples/report.lua: cannot record: ", msg, "\n")
  os.exit(1)
end
print(("recorded %d samples into %s"):format(rec.samples, path))

-- the text of perf report --stdio --no-children -g callee --percent-limit 5:
-- each row, and under it the call graph of who called it
local report = require "perfev.report"
local rep = assert(report.open(path, { sort = "comm,dso,sym", children = false, callchain = "callee",
                                       percent_limit = 5 }))
io.write(rep:format())

-- the same rows as tables: the five heaviest functions by self overhead
local events = assert(perfev.report(path))
for _, ev in ipairs(events) do
  print(("%s: %d samples, period %.0f"):format(ev.name, ev.samples, ev.period))
  for i = 1, math.min(5, #ev.rows) do
    local r = ev.rows[i]
    print(("  %6.2f%%  %-10s %-22s [%s] %s"):format(r.overhead, r.comm, r.dso, r.level, r.symbol))
  end
end
if not arg[1] then os.remove(path) end
