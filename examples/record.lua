-- Recording, like `perf record -g`: sample a Lua workload in this process
-- into a perf.data file that perf report and perf script read, then show
-- perf report's view of it when the perf tool is installed.
--   LUA_CPATH='build/?.so;;' LUA_PATH='lua/?.lua;lua/?/init.lua;;' lua5.4 examples/record.lua [perf.data]
-- Needs perf_event_paranoid <= 2 for a user-space profile of one's own
-- process (kernel samples are dropped, as perf does, when it is higher
-- than 1 and you are not root).
local perfev = require "perfev"

local output = arg[1] or "perf.data"

local function workload()
  local t, n = {}, 0
  for i = 1, 400000 do
    t[#t + 1] = tostring(i * 7919 % 100003)   -- the interpreter, and snprintf in libc
  end
  table.sort(t)                               -- a C function of Lua's
  for _, s in ipairs(t) do n = n + #s end
  return n
end

local r, msg = perfev.record { output = output, callchain = true, fn = workload }
if not r then
  io.stderr:write(msg, "\n")
  os.exit(1)
end
print(("perfev.record: %d samples (%d lost), %d records, %d bytes -> %s")
      :format(r.samples, r.lost, r.records, r.bytes, output))
print(("  the workload returned %d"):format(r.results[1]))
print(("open it with:\n  perf report -i %s\n  perf script -i %s"):format(output, output))

-- read it back with only the fields needed: values, no table per sample
-- (the callchain is one table refilled for every sample; doc/decoding.md)
local f = assert(require("perfev.perfdata").open(output))
local n, frames = 0, 0
for _, chain in f:samples("ip", "callchain") do
  n = n + 1
  frames = frames + (chain and #chain or 0)
end
print(("read back with f:samples: %d samples, %.1f frames a callchain"):format(n, frames / math.max(n, 1)))

-- a histogram counted in C: the samples tallied by their ip and cpumode,
-- each distinct pair once with its count and period sum (doc/decoding.md)
local hist, distinct = {}, 0
for count, period, _, mode in f:tally("ip", "cpumode") do
  distinct = distinct + 1
  local h = hist[mode] or { samples = 0, period = 0 }
  h.samples, h.period = h.samples + count, h.period + (period or 0)
  hist[mode] = h
end
f:close()
for mode, h in pairs(hist) do
  print(("tallied: %-6s %6d samples, %.1f ms of cpu-clock"):format(mode, h.samples, h.period / 1e6))
end
print(("  (%d distinct ip and cpumode pairs for %d samples)"):format(distinct, n))

if os.execute("perf version >/dev/null 2>&1") then
  print(("\n$ perf report --stdio --no-children --sort dso,sym -i %s | head -25"):format(output))
  local p = io.popen(("perf report --stdio --no-children --sort dso,sym -g none -i '%s' 2>/dev/null | " ..
                      "grep -v '^#' | grep -v '^$' | head -25"):format(output))
  if p then
    io.write(p:read("a"))
    p:close()
  end
else
  print("(the perf tool is not installed: Debian's package is linux-perf)")
end
