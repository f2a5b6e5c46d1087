-- examples/attach.lua: profile a Lua program that is already running,
-- without restarting or changing it (perfev.attach, doc/attach.md).
--   LUA_CPATH='build/?.so;;' LUA_PATH='lua/?.lua;lua/?/init.lua;;' lua5.4 examples/attach.lua [PID] [out.svg]
-- With no PID it starts a small Lua program (two functions costing 1:3)
-- in the background, attaches to it for 3 seconds at 99 Hz, prints the
-- text report, writes a flame graph, and stops the program. Attaching
-- needs the right to trace the process: its user, or root (doc/attach.md).
local perfev = require "perfev"

local pid, out = tonumber(arg[1]), arg[2] or "attach.svg"
local started, program
if not pid then
  program = os.tmpname()
  local f = assert(io.open(program, "w"))
  f:write([[
local function work(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local function light() local s = work(100000) return s end   -- not a tail call: light stays on the stack
local function heavy() local s = work(300000) return s end
while true do light() heavy() end
]])
  f:close()
  local interp = arg[-1] or "lua5.4"
  local p = assert(io.popen(("%s %s > /dev/null 2>&1 & echo $!"):format(interp, program)))
  pid = tonumber(p:read("l"))
  p:close()
  started = pid
  os.execute("sleep 0.3")   -- the program is running before perfev comes
end

local p, msg = perfev.attach { pid = pid, event = "cpu-clock", freq = 99, duration_ms = 3000 }
if started then os.execute("kill " .. started) end
if not p then
  io.stderr:write(msg, "\n")
  os.exit(1)
end
print(p:report())
local a = p.attach
print(("%s (%s): %d samples, %d dropped, %d outside Lua, %d threads"):format(
  tostring(a.exe), tostring(a.runtime), a.samples, a.dropped, a.outside, a.threads))
assert(p:write(out))       -- the Lua functions are named from their source: read before it goes
print("flame graph written to " .. out)
if program then os.remove(program) end
