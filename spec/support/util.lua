-- Helpers shared by the specs (not a spec itself: no _spec in the name).
--   local u = require "spec.support.util"
-- u.h is the bphelper C module (spec/helper/bphelper.c, `make spec-helpers`).
local shell = require "spec.support.shell"

local M = {}

local ok, h = pcall(require, "bphelper")
if not ok then
  error("the spec helper module bphelper is missing: run `make spec-helpers` "
        .. "(builds build/spec/bphelper.so)\n" .. tostring(h), 0)
end
M.h = h

-- errno values (Linux, every architecture perfev builds on)
M.E = {
  EPERM = 1, ENOENT = 2, ESRCH = 3, E2BIG = 7, EBADF = 9, EACCES = 13, EEXIST = 17,
  ENODEV = 19, EINVAL = 22, EOPNOTSUPP = 95,
}

-- sh, have, trim, quote, read_file, exists, lines, tmpdir, rmdir: plain
-- Lua, in their own module so that the benchmarks can use them too.
for k, v in pairs(shell) do M[k] = v end

-- Our own pid: /proc/self/stat read by this process (io.popen's child would
-- see its own).
function M.pid()
  return tonumber(assert(M.read_file("/proc/self/stat")):match("^(%d+)"))
end

-- Open file descriptors of this process, counted in-process by the helper
-- (`ls /proc/PID/fd` through io.popen races with the pipe's own fds).
function M.fd_count()
  return h.fd_count()
end

-- What fd is, as /proc shows it ("anon_inode:[perf_event]").
function M.fd_target(fd)
  return (M.sh("readlink /proc/" .. M.pid() .. "/fd/" .. fd):gsub("%s+$", ""))
end

function M.is_root()
  local status = M.read_file("/proc/self/status") or ""
  return status:match("\nUid:%s+0%s") ~= nil
end

function M.arch()
  return (M.sh("uname -m"):gsub("%s+$", ""))
end

-- The cpu PMU's sysfs directory (absent in most virtual machines).
function M.cpu_pmu()
  for _, name in ipairs { "cpu", "cpu_core", "cpu_atom", "armv8_pmuv3_0", "armv8_pmuv3" } do
    local dir = "/sys/bus/event_source/devices/" .. name
    if M.exists(dir .. "/type") then return dir end
  end
  return nil
end

-- Hardware breakpoints: whether a write watch on the helper's variable opens
-- and counts here. The debug registers are 4 slots shared machine-wide
-- (another process can hold them: ENOSPC), and on some virtual machines a
-- breakpoint opens but never fires. Returns true, or nil and the reason the
-- breakpoint specs are skipped. Whatever the probe opens it closes.
local bp_probe
function M.breakpoints()
  if bp_probe == nil then
    local core = require "perfev.core"
    local ev, msg = core.open(core.attr { type = "breakpoint", bp_type = "w", bp_addr = h.addr(),
                                          bp_len = 8, disabled = true }, 0, -1)
    if not ev then
      bp_probe = "a write breakpoint does not open here: " .. tostring(msg)
    else
      ev:enable()
      h.write(10)
      ev:disable()
      local n = ev:read()
      ev:close()
      bp_probe = n == 10 and true
        or ("breakpoints open but do not fire on this machine (10 writes counted %s)"):format(tostring(n))
    end
  end
  if bp_probe == true then return true end
  return nil, bp_probe
end

-- tracefs: mounted if absent (as root). Returns its path, or nil, reason.
local TRACEFS = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" }
function M.tracefs()
  for _, dir in ipairs(TRACEFS) do
    if M.exists(dir .. "/events/syscalls/sys_enter_getppid/id") then return dir end
  end
  if M.is_root() then
    os.execute("mount -t tracefs nodev /sys/kernel/tracing >/dev/null 2>&1")
    if M.exists(TRACEFS[1] .. "/events/syscalls/sys_enter_getppid/id") then return TRACEFS[1] end
  end
  return nil, "tracefs with syscall tracepoints is not available (mount -t tracefs nodev "
              .. "/sys/kernel/tracing needs root and a kernel with CONFIG_FTRACE_SYSCALLS)"
end

-- The id of a tracepoint "system:name", or nil, reason.
function M.tracepoint_id(system, name)
  local dir, why = M.tracefs()
  if not dir then return nil, why end
  local s = M.read_file(("%s/events/%s/%s/id"):format(dir, system, name))
  if not s then return nil, ("no tracepoint %s:%s"):format(system, name) end
  return assert(tonumber(s))
end

-- Spins for ns nanoseconds of wall time (CLOCK_MONOTONIC); returns a value
-- so that the loop is not optimised into nothing.
function M.spin(ns)
  local t0, x = h.now_ns(), 0
  while h.now_ns() - t0 < ns do x = x + 1 end
  return x
end

-- Burns about ms milliseconds of this process's cpu time in Lua (os.clock:
-- cpu time, so that a sampling event sees that much of this process).
function M.burn(ms)
  local stop, x = os.clock() + ms / 1000, 0
  while os.clock() < stop do
    for i = 1, 1000 do x = x + i % 7 end
  end
  return x
end

-- Every record of src (a ring, a sampler, a perf.data file: anything with
-- :records(opts)), appended to into (default a new list).
function M.collect(src, into, opts)
  into = into or {}
  for rec in src:records(opts) do into[#into + 1] = rec end
  return into
end

-- The records of recs for which pred(rec) holds.
function M.where(recs, pred)
  local out = {}
  for _, r in ipairs(recs) do if pred(r) then out[#out + 1] = r end end
  return out
end

-- The records of recs of type t ("sample", "comm", ...).
function M.of_type(recs, t)
  return M.where(recs, function(r) return r.type == t end)
end

-- Spins until ev (a refresh-limited sampling event) stops counting: two
-- reads 10 ms of spinning apart agree. Returns the count and whether it
-- stopped within timeout_ns (default 5 s) — generous for loaded machines.
function M.spin_until_stopped(ev, timeout_ns)
  local t0, last = h.now_ns(), ev:read()
  while h.now_ns() - t0 < (timeout_ns or 5e9) do
    M.spin(10e6)
    local now = ev:read()
    if now == last then return now, true end
    last = now
  end
  return last, false
end

-- This process's module paths, made absolute (for child processes).
local function absolute_paths()
  local cwd = M.sh("pwd"):gsub("%s+$", "")
  local function absolute(path)
    return (path:gsub("[^;]+", function(p)
      if p:sub(1, 1) == "/" then return p end
      return cwd .. "/" .. p
    end))
  end
  return absolute(package.path), absolute(package.cpath)
end

-- "env LUA_PATH=... LUA_CPATH=... ": a child Lua finds the modules this
-- process found (the ASan core under check-asan, LuaJIT's under LUA=luajit).
function M.lua_env()
  local lpath, cpath = absolute_paths()
  return ("env LUA_PATH='%s' LUA_CPATH='%s' "):format(lpath, cpath)
end

-- Runs a Lua chunk in a child Lua with this process's module paths.
-- prefix: shell commands run first (e.g. "ulimit -n 64"); as: a command
-- that runs the rest as another user. Returns its stdout and stderr.
function M.run_lua(code, prefix, as)
  local tmp = os.tmpname()
  local f = assert(io.open(tmp, "w"))
  f:write(code)
  f:close()
  os.execute("chmod 0644 " .. tmp)
  local cmd = ("%s%s %s 2>&1"):format(M.lua_env(), M.lua_interpreter(), tmp)
  if as then cmd = as .. " " .. cmd end
  if prefix then cmd = prefix .. "; " .. cmd end
  local out = M.sh(cmd)
  os.remove(tmp)
  return out
end

-- Runs a Lua chunk as user nobody (root only, setpriv). Returns its
-- output, or nil, reason.
function M.run_as_nobody(code)
  if not M.is_root() then return nil, "needs root to switch to user nobody" end
  local _, have = M.sh("command -v setpriv >/dev/null 2>&1")
  if not have then return nil, "setpriv (util-linux) is not installed" end
  return M.run_lua(code, nil, "setpriv --reuid=65534 --regid=65534 --clear-groups")
end

-- The interpreter running the specs (arg[-1] under busted's runner).
function M.lua_interpreter()
  local i, exe = -1, nil
  while arg and arg[i] do exe = arg[i]; i = i - 1 end
  if exe and exe:match("lua") then return exe end
  return "lua5.4"
end

-- Asserts that the samples of two events sharing one ring (ring:add) came
-- back routed to their own event: rec.event, that event's id and period,
-- and more than 5 samples of each.
function M.assert_routed(samples, ev1, period1, ev2, period2)
  local assert = require "luassert"
  local n = {}
  for _, s in ipairs(samples) do
    assert.is_true(s.event == ev1 or s.event == ev2)
    assert.equal(s.event:id(), s.id)
    assert.equal(s.event == ev1 and period1 or period2, s.period)
    n[s.event] = (n[s.event] or 0) + 1
  end
  assert.is_true((n[ev1] or 0) > 5 and (n[ev2] or 0) > 5)
end

return M
