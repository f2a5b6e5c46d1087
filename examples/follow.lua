-- Following a command, like `perf record -- CMD` + `perf report --sort dso`:
-- start a command under perfev.sampler (one inherited cpu-clock event per
-- CPU, armed before the command starts), then print the hottest
-- instruction pointers by mapping (file+offset, resolved through the
-- mmap2 records of the command's own processes) and its fork/comm/exit
-- events.
--   LUA_CPATH='build/?.so;;' LUA_PATH='lua/?.lua;lua/?/init.lua;;' lua5.4 examples/follow.lua ['CMD']
-- The default command is a short CPU-bound Lua loop run by a shell.
local perfev = require "perfev"

local lua = arg and arg[-1] or "lua5.4"
local cmd = arg and arg[1] or
  ("sleep 0; %s -e 'local t = {} for i = 1, 3e6 do t[i %% 1000 + 1] = math.sin(i) end'"):format(lua)

local s = assert(perfev.sampler { command = cmd, period = 250000,   -- a sample every 0.25 ms of cpu
                                  comm = true, task = true, mmap2 = true })
print(("following pid %d: %s"):format(s.pid, cmd))

local hits, total, happened = {}, 0, {}
local function drain()
  for rec in s:records() do
    if rec.type == "sample" then
      -- resolved now: the mappings are those the records so far describe
      local file, off = s:resolve(rec.pid, rec.ip)
      local where = file and ("%s+0x%x"):format(file:match("[^/]*$"), off)
                    or (rec.cpumode == "kernel" and "[kernel]" or "[unknown]")
      hits[where] = (hits[where] or 0) + 1
      total = total + 1
    elseif rec.type == "fork" then
      happened[#happened + 1] = ("%12d  fork  pid %d from %d"):format(rec.time, rec.pid, rec.ppid)
    elseif rec.type == "comm" then
      happened[#happened + 1] = ("%12d  comm  pid %d is now '%s'%s"):format(rec.time, rec.pid, rec.comm,
                                                                          rec.comm_exec and " (exec)" or "")
    elseif rec.type == "exit" then
      happened[#happened + 1] = ("%12d  exit  pid %d"):format(rec.time, rec.pid)
    end
  end
end

-- drain while the command runs: the rings are small, the command is not
repeat
  local readable, hup, errno = s:poll(100)   -- false, false: nothing yet
  assert(readable ~= nil, hup, errno)
  drain()
until hup
drain()
local ok, how, code, output = s:wait()
local counts = s:read()

print(("%s with %s %d; its output: %d bytes"):format(ok and "finished" or "failed", how, code, #output))
print(("%d samples, %.1f ms of cpu-clock in the command's processes, %d lost")
      :format(total, counts[1] / 1e6, s:lost()))
print()
for _, line in ipairs(happened) do print(line) end
print()
local keys = {}
for k in pairs(hits) do keys[#keys + 1] = k end
table.sort(keys, function(a, b) return hits[a] > hits[b] end)
print(("%8s %7s  %s"):format("samples", "share", "mapping+offset"))
for i = 1, math.min(15, #keys) do
  local k = keys[i]
  print(("%8d %6.2f%%  %s"):format(hits[k], 100 * hits[k] / total, k))
end
s:close()
