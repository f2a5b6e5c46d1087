-- perfev.stat: perf stat for Lua. Counts events over a Lua function, a
-- command (and the processes it starts) or a running process, with perf
-- stat's default event set, repeats (mean and relative standard deviation),
-- interval mode and perf's derived metrics; returns the result as a table
-- and prints it as perf stat 6.1 does (text, CSV, JSON). See doc/stat.md.
--
--   local perfev = require "perfev"
--   local r = perfev.stat{ function() work() end }          -- or { fn, arg1, ... }
--   io.stderr:write(perfev.stat.format(r))                  -- perf stat's text
--   local r2 = perfev.stat{ command = { "ls", "-l" }, events = "task-clock,page-faults",
--                           ["repeat"] = 5 }
--   print(perfev.stat.format(r2, { format = "csv", sep = "," }))
local perfev = require "perfev"
local events = require "perfev.stat.events"
local counters = require "perfev.stat.counters"
local command = require "perfev.stat.command"
local metrics = require "perfev.stat.metrics"
local format = require "perfev.stat.format"
local aggr = require "perfev.stat.aggr"

local M = {}

local unpack = table.unpack or rawget(_G, "unpack")   -- LuaJIT: the global
local ESRCH = perfev.ERRNO.ESRCH

local options = require "perfev.options"

local OPTIONS = {
  fn = "function", args = "table", command = "string|table", pid = "integer", duration_ms = "number",
  events = "string|table", ["repeat"] = "positive", interval_ms = "number", on_interval = "function",
  label = "string", inherit = "boolean", system_wide = "boolean",
  cpus = "cpus", aggr = "string", metrics = "string",
}
-- the names of the release before (README documented them): 'run' is
-- 'fn' as in perfev.profile and perfev.record; every duration is in
-- milliseconds and its name says so
local RENAMED = {
  run = { "fn" },
  duration = { "duration_ms", convert = function(s) return s * 1000 end, note = " (in ms, not s)" },
  interval = { "interval_ms" },
}

-- (raised at the caller's line, however the call came: options.raise)
local function fail(fmt, ...)
  options.raise("perfev.stat: " .. fmt:format(...))
end

-- The function given as [1] (its arguments after it) moved to fn/args,
-- the rest checked by name.
local function positional(opts)
  if type(opts) ~= "table" then
    options.raisef("perfev.stat: takes a table of options, got %s", options.describe(opts))
  end
  local named, n = {}, opts.n or #opts
  for k, v in pairs(opts) do
    if type(k) == "number" then
      if k ~= math.floor(k) or k < 1 then fail("unknown option [%s]", tostring(k)) end
    elseif k ~= "n" then
      named[k] = v
    end
  end
  if opts[1] ~= nil then
    if type(opts[1]) ~= "function" then fail("[1] must be a function, got %s", type(opts[1])) end
    if opts.fn or opts.run then fail("give the function as [1] or as 'fn', not both") end
    named.fn, named.args = opts[1], { unpack(opts, 2, n) }
    named.args.n = n - 1
  end
  return named
end

-- what is measured: exactly one of a function, a command and a pid (a
-- pid or every CPU may be bounded by a command)
local function check_target(o)
  if o.cpus then
    -- perf's -C: counting on these CPUs only, system-wide
    local list = options.cpus(o.cpus, "perfev.stat")
    if o.pid or o.fn then fail("option 'cpus' cannot be used with 'pid' or a function") end
    -- perf's header names the list, unless -a was given too ('system wide')
    if not o.system_wide then o.cpus_label = type(o.cpus) == "string" and o.cpus or table.concat(list, ",") end
    o.cpu_list, o.system_wide = list, true
  end
  if o.system_wide and (o.pid or o.fn) then fail("option 'system_wide' cannot be used with 'pid' or a function") end
  local n = (o.fn and 1 or 0) + (o.command and 1 or 0) + (o.pid and 1 or 0)
  if (o.pid or o.system_wide) and o.command then n = 1 end   -- a command bounds the measurement
  if o.system_wide and not o.command then n = 1 end
  if n ~= 1 then fail("give one of a function ([1] or 'fn'), 'command' and 'pid'") end
  if type(o.command) == "table" then
    if #o.command == 0 then fail("option 'command' is an empty list") end
    for i, w in ipairs(o.command) do
      if type(w) ~= "string" and type(w) ~= "number" then
        fail("option 'command'[%d] must be a string, got %s", i, type(w))
      end
    end
  end
  if o.pid and o.pid <= 0 then fail("option 'pid' must be a process id, got %s", tostring(o.pid)) end
  if o.args then o.nargs = o.args.n or #o.args end
end

-- how it is aggregated and timed
local function check_modes(o)
  if o.aggr then
    if not aggr.MODES[o.aggr] then
      options.unknown("perfev.stat: option 'aggr'", "mode", o.aggr, aggr.MODES,
                      " (global, none, socket, die, core, node, thread)")
    end
    if o.aggr == "global" then o.aggr = nil end
  end
  if o.aggr == "thread" and not o.pid then
    fail("option 'aggr' = 'thread' (perf's --per-thread) is for 'pid' (every thread of it)")
  elseif o.aggr and o.aggr ~= "thread" and not o.system_wide then
    -- perf stat 6.1's words for -A and --per-* without -a
    fail("option 'aggr' = '%s' needs 'system_wide' or 'cpus' (perf: both cgroup and no-aggregation "
         .. "modes only available in system-wide mode)", o.aggr)
  end
  if o.duration_ms and o.duration_ms <= 0 then fail("option 'duration_ms' must be > 0 ms") end
  if o.duration_ms and not (o.pid or o.system_wide) then fail("option 'duration_ms' is for 'pid' or 'system_wide'") end
  o["repeat"] = o["repeat"] or 1
  if o.interval_ms then
    if o.interval_ms < 1 or o.interval_ms ~= o.interval_ms then
      fail("option 'interval_ms' must be >= 1 ms, got %s", tostring(o.interval_ms))
    end
    if o.fn then fail("option 'interval_ms' is for a command or a pid, not a function") end
    if o["repeat"] > 1 then fail("option 'interval_ms' cannot be used with 'repeat'") end
  end
end

-- the options checked (options.check: the caller's line, "did you mean")
-- and normalized into a table of stat's own
local function check(opts)
  local o = options.renamed(positional(opts), RENAMED, "perfev.stat")
  options.check(o, OPTIONS, "perfev.stat")
  check_target(o)
  check_modes(o)
  local ok, entries = pcall(events.parse, o.events)
  if not ok then
    local msg = tostring(entries):gsub("^[^:\n]*:%d+: ", ""):gsub("^perfev[%.%w]*: ", "")
    fail("option 'events': %s", msg)
  end
  o.entries = entries
  return o
end

-- ---- one run ----

local function now_ns() return tonumber(perfev.clock_ns()) end

local function rusage(who)
  local u, s = perfev.rusage(who)
  return tonumber(u) or 0, tonumber(s) or 0
end

-- the counts of one reading (of members: an aggregation group's CPUs or
-- threads; nil: all), with the tool events filled in as the whole run's
local function readings(o, set, tools, members)
  local data = set:read(members)
  for i, e in ipairs(o.entries) do
    if e.tool then
      local v = tools[e.tool] or 0
      data[i] = { count = v, enabled = v, running = v }
    end
  end
  return data
end

local function delta(a, b)   -- b - a, per counter
  local out = {}
  for i, d in ipairs(b) do
    local p = a and a[i] or { count = 0, enabled = 0, running = 0 }
    out[i] = { count = d.count and (d.count - (p.count or 0)), enabled = d.enabled - p.enabled,
               running = d.running - p.running }
  end
  return out
end

-- counter records (what the result and the printers use) from per-run data
local function build(o, set, runs_data, wall_ns)
  local list = {}
  local nruns = #runs_data
  for i, e in ipairs(o.entries) do
    local item = set.items[i]
    local sum, sum_e, sum_r, vals, counted = 0, 0, 0, {}, false
    for r = 1, nruns do
      local d = runs_data[r][i]
      local v = d.count or 0
      vals[r] = v
      sum, sum_e, sum_r = sum + v, sum_e + d.enabled, sum_r + d.running
      if d.count and d.enabled > 0 and d.running > 0 then counted = true end
    end
    local mean = sum / nruns
    local noise, runs
    if nruns > 1 then
      local m2 = 0
      for r = 1, nruns do m2 = m2 + (vals[r] - mean) ^ 2 end
      local sd = math.sqrt(m2 / (nruns - 1) / nruns)
      noise, runs = mean ~= 0 and 100 * sd / mean or 0, vals
    end
    -- every field in the constructor (doc/runtimes.md: LuaJIT's template forwarding)
    local c = { name = e.name .. (item.user_only and ":u" or ""), event = e.name, unit = e.unit,
                scale = e.scale, kind = e.kind, ctx = e.ctx, supported = item.supported,
                counted = item.supported and counted, count = mean, value = mean * e.scale,
                enabled = sum_e / nruns, running = sum_r / nruns, error = item.error,
                noise = noise, runs = runs }
    list[i] = c
    list[c.name] = list[c.name] or c
  end
  metrics.add(list, wall_ns)
  return list
end

-- The interval ending now: its counters, and with an aggregation
-- (run.groups, perf stat -I with -A or --per-*) each group's, from the
-- difference with the group's previous reading (run.prev).
local function new_interval(o, set, res, prev, data, t_ns, interval_ns, run)
  local iv = { index = #res.intervals + 1, time = t_ns }
  iv.counters = build(o, set, { delta(prev, data) }, interval_ns)
  if run and run.groups then
    iv.groups = {}
    for gi, g in ipairs(run.groups) do
      local now = readings(o, set, run.tools, g.members)
      local ivg = {}
      for k, v in pairs(g) do ivg[k] = v end
      ivg.counters = build(o, set, { delta(run.prev[gi], now) }, interval_ns)
      iv.groups[gi] = ivg
      run.prev[gi] = now
    end
  end
  res.intervals[#res.intervals + 1] = iv
  if o.on_interval then o.on_interval(iv, res) end
end

-- Waits until the watched task is gone (wait(ms) returns true), printing
-- intervals on the way. The waits last SLICE_MS at most: the core's poll
-- goes on through EINTR, and Lua code must run for Ctrl-C (lua.c's SIGINT
-- hook) to stop the wait.
local SLICE_MS = 100
local function wait_loop(o, set, res, t0, wait, tools_now, run)
  local prev
  if not o.interval_ms then
    repeat until wait(SLICE_MS)
    return
  end
  local step = o.interval_ms * 1e6
  local k = 1
  while true do
    local left = math.ceil((t0 + k * step - now_ns()) / 1e6)
    local gone = wait(math.min(math.max(left, 0), SLICE_MS))
    local t = now_ns()
    if gone then return prev end
    if t >= t0 + k * step then
      local tl = tools_now(t)
      local data = readings(o, set, tl)
      if run then run.tools = tl end
      new_interval(o, set, res, prev, data, t - t0, step, run)
      prev = data
      k = k + 1
    end
  end
end

local function tools_fn(t0, ru0, who)
  return function(t)
    local u, s = rusage(who)
    return { duration_time = t - t0, user_time = u - ru0[1], system_time = s - ru0[2] }
  end
end

-- Ctrl-C (perfev.interrupt): the counts so far are still printed, as perf stat does.
local interrupted = require("perfev.interrupt").is

local function run_command(o, res)
  local c, msg, status = command.start(o.command)
  if not c then return nil, msg, nil, status end
  local set, omsg, errno, e = counters.open(o.entries, { c.pid },
                                            { inherit = o.inherit ~= false, enable_on_exec = true })
  if not set then
    c:kill()
    return nil, ("event '%s': %s"):format(e.name, omsg), errno, 1
  end
  local u0, s0 = rusage("children")
  local tools = tools_fn(0, { u0, s0 }, "children")
  local t0 = now_ns()
  c:go()
  local ok, prev = pcall(wait_loop, o, set, res, t0, function(ms) return c:wait(ms) end,
                         function(t) local x = tools(t) x.duration_time = t - t0 return x end)
  if not ok then
    if not interrupted(prev) then
      c:kill()
      set:close()
      error(prev, 0)
    end
    res.interrupted, prev = true, nil
    repeat until c:wait(SLICE_MS)    -- the command got the SIGINT too
  end
  local how, code = c:finish()
  local t1 = now_ns()
  local u1, s1 = rusage("children")
  local tl = { duration_time = t1 - t0, user_time = u1 - u0, system_time = s1 - s0 }
  local data = readings(o, set, tl)
  if o.interval_ms and not res.interrupted then new_interval(o, set, res, prev, data, t1 - t0, o.interval_ms * 1e6) end
  res.status, res.how, res.code = command.exit_code(how, code), how, code
  return { set = set, data = data, wall = t1 - t0, user = tl.user_time, sys = tl.system_time }
end

local function run_function(o, res)
  local set, msg, errno, e = counters.open(o.entries, { 0 }, { inherit = o.inherit ~= false })
  if not set then return nil, ("event '%s': %s"):format(e.name, msg), errno, 1 end
  local u0, s0 = rusage("self")
  local t0 = now_ns()
  set:enable()
  local ok, err = pcall(o.fn, unpack(o.args or {}, 1, o.nargs or 0))
  set:disable()
  local t1 = now_ns()
  local u1, s1 = rusage("self")
  if not ok then
    if not interrupted(err) then
      set:close()
      error(err, 0)
    end
    res.interrupted = true
  end
  local tl = { duration_time = t1 - t0, user_time = u1 - u0, system_time = s1 - s0 }
  return { set = set, data = readings(o, set, tl), wall = t1 - t0, user = tl.user_time, sys = tl.system_time }
end

-- What run_pid counts on: an event per online CPU (system_wide), or per
-- thread of the pid, with what the aggregation needs of each (tinfo):
-- targets, tinfo | nil, message, errno, status.
local function pid_targets(o)
  local targets, tinfo = {}, {}
  if o.system_wide then
    for i, cpu in ipairs(o.cpu_list or command.online_cpus() or {}) do
      targets[i] = { pid = -1, cpu = cpu }
      tinfo[i] = { cpu = cpu }
    end
    return targets, tinfo
  end
  targets = command.threads(o.pid)
  if not targets then return nil, ("no process with pid %d"):format(o.pid), ESRCH, 1 end
  for i, tid in ipairs(targets) do
    local f = io.open(("/proc/%d/task/%d/comm"):format(o.pid, tid), "r")
    tinfo[i] = { tid = tid, comm = f and f:read("l") or "" }
    if f then f:close() end
  end
  return targets, tinfo
end

-- perf's tool events of a pid (user_time, system_time: its own counts)
-- -> the events, and tools(t, t0) giving them with duration_time
local function pid_tools(o)
  local toolev = {}
  for _, t in ipairs { "user_time", "system_time" } do
    local ev = o.pid and perfev.open(t, { pid = o.pid })
    if ev then ev:enable() toolev[t] = ev end
  end
  return toolev, function(t, t0)
    local x = { duration_time = t - t0 }
    for k, ev in pairs(toolev) do
      local v = ev:read()
      x[k] = tonumber(v) or 0
    end
    return x
  end
end

-- wait(ms) for run_pid: true when the measurement is over (the duration
-- ended, the command ended, the pid exited)
local function pid_waiter(o, res, c, w, t0)
  local deadline = o.duration_ms and t0 + o.duration_ms * 1e6
  return function(ms)
    if deadline then
      local left = math.ceil((deadline - now_ns()) / 1e6)
      if left <= 0 then return true end
      if ms < 0 or ms > left then ms = left end
    end
    if c then
      if c:wait(ms) then return true end
      return w and command.wait_watch(w, 0) or false
    end
    if o.system_wide then
      -- nothing to watch: sleep on the deadline (a dummy ring's poll)
      if not res.sleeper then res.sleeper = command.watch(0) end
      command.wait_watch(res.sleeper, ms)
      return false
    end
    if not w then return true end
    return command.wait_watch(w, ms)
  end
end

-- A pid (every thread of it), or every CPU (system_wide: an event per
-- online CPU, as perf stat -a), until the process exits, the duration
-- ends, the command given with it ends, or Ctrl-C.
local function run_pid(o, res)
  local targets, tinfo, terrno, tstatus = pid_targets(o)
  if not targets then return nil, tinfo, terrno, tstatus end
  local set, msg, errno, e = counters.open(o.entries, targets,
                                            { inherit = o.inherit ~= false and not o.system_wide })
  if not set then
    if errno == ESRCH then return nil, ("no process with pid %d"):format(o.pid), ESRCH, 1 end
    return nil, ("event '%s': %s"):format(e.name, msg), errno, 1
  end
  local w = o.pid and command.watch(o.pid)
  local c
  if o.command then
    local cmsg, status
    c, cmsg, status = command.start(o.command)
    if not c then
      command.unwatch(w)
      set:close()
      return nil, cmsg, nil, status
    end
  end
  local toolev, tools = pid_tools(o)
  local t0 = now_ns()
  set:enable()
  if c then c:go() end
  -- the aggregation's groups; with -I each interval has their counts too
  local groups = o.aggr and aggr.groups(o.aggr, tinfo) or nil
  local run = groups and o.interval_ms and { groups = groups, prev = {} } or nil
  local ok, prev = pcall(wait_loop, o, set, res, t0, pid_waiter(o, res, c, w, t0),
                         function(t) return tools(t, t0) end, run)
  if not ok then
    if not interrupted(prev) then
      set:close()
      error(prev, 0)
    end
    res.interrupted = true
  end
  set:disable()
  local t1 = now_ns()
  if c then
    local how, code = c:finish()
    res.status = command.exit_code(how, code)
  end
  command.unwatch(w or nil)
  command.unwatch(res.sleeper)
  res.sleeper = nil
  local tl_end = tools(t1, t0)
  local data = readings(o, set, tl_end)
  for _, g in ipairs(groups or {}) do g.data = readings(o, set, tl_end, g.members) end
  for _, ev in pairs(toolev) do ev:close() end
  -- the last, partial interval; none when a duration ended on a tick
  local last = res.intervals[#res.intervals]
  if o.interval_ms and not res.interrupted and (t1 - t0) - (last and last.time or 0) >= 1e6 then
    if run then run.tools = tl_end end
    new_interval(o, set, res, prev, data, t1 - t0, o.interval_ms * 1e6, run)
  end
  return { set = set, data = data, wall = t1 - t0, groups = groups }
end

-- ---- perfev.stat ----

local function label_of(o)
  if o.label then return o.label end
  if o.pid then return tostring(o.pid) end
  if o.cpus_label then return "CPU(s) " .. o.cpus_label end
  if o.system_wide and not o.command then return "system wide" end
  if o.command then
    if type(o.command) == "table" then
      local words = {}
      for i, w in ipairs(o.command) do words[i] = tostring(w) end
      return table.concat(words, " ")
    end
    return o.command
  end
  local info = debug.getinfo(o.fn, "S")
  return ("function at %s:%d"):format(info.short_src, info.linedefined)
end

-- stat(opts) -> result | nil, message, errno, status (errno: the kernel's
-- refusal, nil when there was none; status: the exit status perf stat
-- would give, 127 for a command that cannot be run). See doc/stat.md.
-- A result: printed (the REPL), perf stat's text.
local Result = {}
function Result.__tostring(r)
  options.self(r, Result, "perfev.stat result", "__tostring")
  return format.format(r)
end

function M.stat(opts)
  local o = check(opts)
  local res = { target = o.cpus_label and "cpus" or o.system_wide and "system" or o.pid and "pid"
                         or (o.command and "command" or "function"),
                pid = o.pid, aggr = o.aggr, metrics = o.metrics,
                label = label_of(o), runs = o["repeat"], intervals = {}, interval_ms = o.interval_ms,
                interval = o.interval_ms }
  local runs, walls, last_set, group_runs, groups = {}, {}, nil, {}, nil
  local user, sys = 0, 0
  for r = 1, o["repeat"] do
    local one, msg, errno, status
    if o.pid or o.system_wide then one, msg, errno, status = run_pid(o, res)
    elseif o.command then one, msg, errno, status = run_command(o, res)
    else one, msg, errno, status = run_function(o, res) end
    if not one then
      if last_set then last_set:close() end
      return nil, msg, errno, status
    end
    if last_set then last_set:close() end
    last_set = one.set
    runs[r], walls[r] = one.data, one.wall
    if one.groups then
      groups = one.groups
      for gi, g in ipairs(one.groups) do
        group_runs[gi] = group_runs[gi] or {}
        group_runs[gi][r] = g.data
      end
    end
    user, sys = one.user, one.sys
    if r < o["repeat"] and res.status and res.status ~= 0 and o.command then
      -- perf stat -r goes on after a failing run; so does perfev
      res.failed_runs = (res.failed_runs or 0) + 1
    end
  end
  local n = #walls
  local wsum = 0
  for _, w in ipairs(walls) do wsum = wsum + w end
  local wmean = wsum / n
  local m2 = 0
  for _, w in ipairs(walls) do m2 = m2 + (w - wmean) ^ 2 end
  res.elapsed = wmean / 1e9
  res.elapsed_sd = n > 1 and math.sqrt(m2 / (n - 1) / n) / 1e9 or 0
  res.walltimes = walls
  if n == 1 and o.pid == nil and not o.system_wide and o.interval_ms == nil and user then
    res.user, res.sys = user / 1e9, sys / 1e9
  end
  res.counters = build(o, last_set, runs, wmean)
  if groups then
    -- the counts of each group (a CPU, a core, a socket ... or a thread),
    -- each with its own metrics (perf's per-aggregate shadow stats)
    res.groups = {}
    for gi, g in ipairs(groups) do
      res.groups[gi] = { id = g.id, nr = g.nr, cpu = g.cpu, socket = g.socket, die = g.die, core = g.core,
                         node = g.node, tid = g.tid, comm = g.comm,
                         counters = build(o, last_set, group_runs[gi], wmean) }
    end
  end
  last_set:close()
  -- printed (the REPL), a result is perf stat's text
  return setmetatable(res, Result)
end

M.format = format.format
M.interval = format.interval
M.default_events = events.default
M.text = function(res) return format.format(res, { format = "text" }, "perfev.stat.text") end
M.csv = function(res, sep) return format.format(res, { format = "csv", sep = sep }, "perfev.stat.csv") end
M.json = function(res) return format.format(res, { format = "json" }, "perfev.stat.json") end

return setmetatable(M, { __call = function(_, opts) return M.stat(opts) end })
