-- perfev.stat.command: start a command the way perf stat does -- corked.
-- The child is started (through /bin/sh and io.popen) and waits on a pipe;
-- the caller opens its counters on the child's pid (inherit, enable_on_exec),
-- then releases it: the counters start at the command's exec, so neither
-- the shell nor perfev's own work is counted. The child's pid comes from
-- the fork record of a dummy event on this process (as perfev.sampler
-- finds its command's); its exit from a per-task dummy event on it, whose
-- poll(2) reports POLLHUP when the task exits -- the same wait serves as
-- the interval timer. The exit status is read from /proc/PID/stat while
-- the child is a zombie (every Lua, LuaJIT too, gets it the same way).
local perfev = require "perfev"

local M = {}

-- ---- /proc (this module's own small readers: perfev's public API only) ----

local function read(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function readable(path)
  local f = io.open(path, "r")
  if f then f:close() return true end
  return false
end

local function isdir(path)
  return readable(path .. "/.")
end

-- threads(pid) -> the tids of a process (/proc/PID/task), or nil
function M.threads(pid)
  local dir = ("/proc/%d/task"):format(pid)
  if not isdir(dir) then return nil end
  local out = {}
  local has_lfs, lfs = pcall(require, "lfs")
  if has_lfs then
    for name in lfs.dir(dir) do out[#out + 1] = tonumber(name) end
  else
    local p = io.popen("ls -1 " .. dir .. " 2>/dev/null", "r")
    if p then
      for name in p:lines() do out[#out + 1] = tonumber(name) end
      p:close()
    end
  end
  table.sort(out)   -- ("." and ".." gave nil, which adds nothing)
  if #out == 0 then return nil end
  return out
end

local C = {}
C.__index = C

local ESRCH = 3

-- Shell quoting: words made of safe characters stay as they are.
function M.quote(s)
  s = tostring(s)
  if s ~= "" and not s:find("[^%w%%+,./:=@_%-]") then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

function M.join(argv)
  local out = {}
  for i, a in ipairs(argv) do out[i] = M.quote(a) end
  return table.concat(out, " ")
end

-- online_cpus() -> the online CPUs (/sys/devices/system/cpu/online: "0-3,5")
function M.online_cpus()
  local s = read("/sys/devices/system/cpu/online")
  if not s then return nil end
  local cpus = {}
  for item in s:gmatch("[^,%s]+") do
    local lo, hi = item:match("^(%d+)%-(%d+)$")
    if not lo then lo = item:match("^(%d+)$") hi = lo end
    for c = tonumber(lo), tonumber(hi) do cpus[#cpus + 1] = c end
  end
  return cpus
end

-- own pid, read by this process (math.tointeger-free for LuaJIT)
function M.own_pid()
  return tonumber(assert(read("/proc/self/stat")):match("^(%d+)"))
end

-- find(prog) -> path | nil, message, exit status (127: not found, as a
-- shell says it)
function M.find(prog)
  if prog:find("/", 1, true) then
    if readable(prog) then return prog end
    return nil, ("%s: No such file or directory"):format(prog), 127
  end
  for dir in (os.getenv("PATH") or "/usr/local/bin:/usr/bin:/bin"):gmatch("[^:]+") do
    local p = dir .. "/" .. prog
    if readable(p) and not isdir(p) then return p end
  end
  return nil, ("%s: command not found"):format(prog), 127
end

-- The stdin the command gets: this process's own (a popen child's stdin
-- is the pipe that releases it).
local function stdin_path(me)
  local p = ("/proc/%d/fd/0"):format(me)
  if readable(p) then return p end
  return "/dev/null"
end

-- The pid of the child io.popen forks, from the fork record of a dummy
-- event on this process (enabled around the popen only).
local function popen_child(me, shell)
  local a = perfev.attr { type = "software", config = perfev.SW.DUMMY, task = true, sample_id_all = true,
                          sample_type = perfev.SAMPLE.TID, disabled = true,
                          exclude_kernel = true, exclude_hv = true }
  local dummy, msg, errno = perfev.open(a, { pid = 0, cpu = -1 })
  if not dummy then return nil, msg, errno end
  local ring
  ring, msg, errno = dummy:mmap(1)
  if not ring then dummy:close() return nil, msg, errno end
  dummy:enable()
  local p, perr = io.popen(shell, "w")
  dummy:disable()
  local child
  for rec in ring:records() do
    if rec.type == "fork" and rec.ppid == me and not child then child = rec.pid end
  end
  ring:close()
  dummy:close()
  if not p then return nil, "cannot start the command: " .. tostring(perr), 0 end
  if not child then
    p:close()
    return nil, "no fork record for the command's process", 0
  end
  return p, child
end

-- watch(pid) -> a ring over a dummy event on the task: poll() says hup when
-- the task has exited; nil, message, errno (ESRCH: it is gone already)
function M.watch(pid)
  local w = perfev.attr { type = "software", config = perfev.SW.DUMMY, disabled = true,
                          exclude_kernel = true, exclude_hv = true }
  local ev, msg, errno = perfev.open(w, { pid = pid, cpu = -1 })
  if not ev then return nil, msg, errno end
  local ring
  ring, msg, errno = ev:mmap(0)
  if not ring then ev:close() return nil, msg, errno end
  return { ring = ring, ev = ev }
end

function M.unwatch(w)
  if w then w.ring:close(); w.ev:close() end
end

-- wait_watch(w, ms) -> true when the task has exited (ms -1: no limit)
function M.wait_watch(w, ms)
  local _, hup = w.ring:poll(ms)
  return hup == true
end

-- start(cmd) -> corked command | nil, message, status. cmd: a list of
-- words (run as they are, no shell syntax) or a string (shell syntax).
function M.start(cmd)
  local body
  if type(cmd) == "table" then
    if #cmd == 0 then return nil, "empty command", 2 end
    local path, msg, status = M.find(cmd[1])
    if not path then return nil, msg, status end
    body = "exec " .. M.join(cmd)
  else
    body = cmd
  end
  local me = M.own_pid()
  local shell = ("read _perfev_go || exit 125; exec <%s; %s"):format(M.quote(stdin_path(me)), body)
  local p, pid, errno = popen_child(me, shell)
  if not p then return nil, pid, 1, errno end
  local self = setmetatable({ pipe = p, pid = pid, me = me }, C)
  local w, msg, werr = M.watch(pid)
  if not w and werr ~= ESRCH then
    self:kill()
    return nil, msg, 1
  end
  self.watch = w
  return self
end

-- c:go(): release the corked command (it execs now)
function C:go()
  self.pipe:write("\n")
  self.pipe:flush()
end

-- c:wait(ms) -> true when the command has exited (ms -1: no limit)
function C:wait(ms)
  if not self.watch then return true end
  return M.wait_watch(self.watch, ms)
end

-- /proc/PID/stat fields after the command name: state is [1], exit_code
-- (the wait status, field 52) is [50]
local function proc_stat(pid)
  local s = read(("/proc/%d/stat"):format(pid))
  if not s then return nil end
  local rest = s:match("^.*%)%s+(.*)$")
  local f = {}
  for w in rest:gmatch("%S+") do f[#f + 1] = w end
  return f
end

-- zombie_status(pid, ring) -> the wait status of child pid once the task
-- has fully exited (its state is Z: every perf event of it has exited too,
-- their counts are final), before its parent reaps it; ring: a watch ring
-- on it, waited on between looks. Also perfev.sampler's s:wait().
function M.zombie_status(pid, ring)
  for _ = 1, 1000 do
    local f = proc_stat(pid)
    if not f then return nil end
    if f[1] == "Z" or f[1] == "X" then return tonumber(f[50]) end
    if ring then ring:poll(1) else return nil end
  end
  return nil
end

local function zombie_status(self)
  return M.zombie_status(self.pid, self.watch and self.watch.ring)
end

-- decode_status(status) -> "exit", code | "signal", number
local function decode(status)
  local low = status % 128
  if low == 0 then return "exit", math.floor(status / 256) % 256 end
  return "signal", low
end
M.decode_status = decode

-- c:finish() -> how ("exit" | "signal"), code: after wait() said it
-- exited; reaps the child.
function C:finish()
  local status = zombie_status(self)
  local how, code
  if status then how, code = decode(status) end
  local ok, phow, pcode = self.pipe:close()
  if not how then
    if type(phow) == "string" then how, code = phow, pcode
    else how, code = "exit", ok and 0 or 1 end
  end
  M.unwatch(self.watch)
  self.watch = nil
  return how, code
end

-- c:kill(): end a corked command that never went (an error before go):
-- its shell reads end-of-file and exits without running it
function C:kill()
  pcall(self.pipe.close, self.pipe)
  M.unwatch(self.watch)
  self.watch = nil
end

-- exit_code(how, code) -> the status a shell reports: the code, or 128 +
-- the signal's number
function M.exit_code(how, code)
  if how == "signal" then return 128 + code end
  return code
end

return M
