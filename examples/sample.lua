-- Sampling, like `perf record` + `perf report --sort sym`: sample a Lua
-- workload on cpu-clock through the mmap ring buffer and print the hottest
-- instruction pointers with the mapping (and offset) each falls in.
--   LUA_CPATH='build/?.so;;' LUA_PATH='lua/?.lua;lua/?/init.lua;;' lua5.4 examples/sample.lua
-- Needs perf_event_paranoid <= 2 for a user-space profile of one's own process.
local perfev = require "perfev"
local compat = require "perfev.compat"

local function workload()
  local t, x = {}, 0
  for i = 1, 300000 do t[i] = (i * 7919) % 100003 end
  table.sort(t)
  for _ = 1, 40 do
    for i = 1, #t, 3 do x = x + math.sin(t[i]) end
  end
  return x
end

-- The executable mappings of this process: { lo, hi, offset, path }.
local function mappings()
  local maps = {}
  for line in io.lines("/proc/self/maps") do
    local lo, hi, perms, off, path = line:match("^(%x+)-(%x+) (%S+) (%x+) %S+ %S+%s*(.*)$")
    if perms and perms:find("x", 1, true) then
      maps[#maps + 1] = { tonumber(lo, 16), tonumber(hi, 16), tonumber(off, 16),
                          path ~= "" and path or "[anon]" }
    end
  end
  return maps
end

local function where(maps, ip)
  for _, m in ipairs(maps) do
    if compat.ult(ip, m[2]) and not compat.ult(ip, m[1]) then
      return ("%s+0x%x"):format(m[4]:match("[^/]*$"), ip - m[1] + m[3])
    end
  end
  return "[kernel or unknown]"
end

local ev = assert(perfev.open { type = "software", config = "cpu-clock", sample_period = 100000,
                                sample_type = { "ip", "tid", "time", "period" },
                                exclude_kernel = true, disabled = true, wakeup_events = 64 })
local ring = assert(ev:mmap(64))

local hits, total = {}, 0
local function drain()
  -- only the field needed, read in place: no table per sample
  -- (ring:records() gives every record as a table; doc/decoding.md)
  for ip in ring:samples("ip") do
    hits[ip] = (hits[ip] or 0) + 1
    total = total + 1
  end
end

ev:enable()
workload()
ev:disable()
drain()

local maps = mappings()
local ips = {}
for ip in pairs(hits) do ips[#ips + 1] = ip end
table.sort(ips, function(a, b) return hits[a] > hits[b] end)
print(("%d samples (every %.1f ms of cpu), %d lost"):format(total, 100000 / 1e6, ring:lost()))
print(("%8s %7s  %-18s %s"):format("samples", "share", "ip", "mapping+offset"))
for i = 1, math.min(15, #ips) do
  local ip = ips[i]
  print(("%8d %6.2f%%  0x%016x %s"):format(hits[ip], 100 * hits[ip] / total, ip, where(maps, ip)))
end
ring:close()
ev:close()
