-- perfev.sampler: a sampling session over a task and the children it
-- forks, or over a command started for the purpose, like `perf record -p`
-- and `perf record -- CMD`. One event per CPU (per event spec) with
-- pid set and inherit: the kernel refuses to mmap an inherited per-task
-- event opened with cpu == -1, so per-CPU events are the way to follow
-- children through a ring buffer. See doc/sampler.md.
local core = require "perfev.core"
local spec = require "perfev.spec"
local open = require "perfev.open"
local fs = require "perfev.fs"
local options = require "perfev.options"
local compat = require "perfev.compat"

local M = {}

local S = {}           -- session methods
S.__index = S

local SAMPLE = core.SAMPLE
-- The sample_type bits that make the sample_id_all trailer of a non-sample
-- record (csrc/record/layout.h's PERFEV_TRAILER_BITS).
local TRAILER_BITS = compat.bor(SAMPLE.TID, SAMPLE.TIME, SAMPLE.ID, SAMPLE.STREAM_ID, SAMPLE.CPU,
                                SAMPLE.IDENTIFIER)
local DEFAULT_SAMPLE_TYPE = { "ip", "tid", "time", "period" }
local DEFAULT_FREQ = 1000       -- Hz, when neither the spec nor opts give a period
local DEFAULT_PAGES = 32        -- data pages per CPU ring
local POLL_SLICE_MS = 10        -- see S:poll
local POLL_MAX_MS = 2147483647  -- poll(2)'s int timeout, as ring:poll

-- Options of perfev.sampler, with the type each takes; anything else is a
-- mistake (a misspelt side-band name would otherwise be silently ignored).
local OPTIONS = {
  event = "spec", events = "table", pid = "integer", command = "string", cpus = "cpus",
  period = "integer", freq = "integer", default_freq = "integer", sample_type = "mask", inherit = "boolean",
  pages = "integer", attr = "table", sample_id_all = "boolean", task = "boolean",
}
-- Side-band records: asked of the first event only, or every event of a
-- CPU would write its own copy of each record.
local SIDEBAND = { "comm", "comm_exec", "task", "mmap", "mmap2", "mmap_data", "build_id",
                   "context_switch", "namespaces", "cgroup", "ksymbol", "bpf_event", "text_poke" }
for _, k in ipairs(SIDEBAND) do OPTIONS[k] = OPTIONS[k] or "boolean" end

-- Records that concern the event rather than a task: never filtered out
-- when following a command (their trailer names whichever task was
-- running, and losses must never be silent).
local EVENT_RECORDS = { lost = true, lost_samples = true, throttle = true, unthrottle = true }

local function fail(fmt, ...)
  options.raise("perfev.sampler: " .. fmt:format(...))
end

-- ---- CPUs ----

-- "0-3,5,7-8" (the kernel's cpulist format) -> { 0, 1, 2, 3, 5, 7, 8 }
function M.parse_cpulist(s)
  if type(s) ~= "string" then
    options.raisef("perfev.sampler.parse_cpulist: expects a string, got %s", options.describe(s))
  end
  local cpus, err = fs.cpulist(s)
  if not cpus then options.raise("perfev.sampler.parse_cpulist: " .. err) end
  return cpus
end

-- The online CPUs, from /sys/devices/system/cpu/online.
function M.online_cpus()
  local f, msg, errno = io.open("/sys/devices/system/cpu/online", "r")
  if not f then return nil, "perfev.sampler: cannot read the online CPUs: " .. msg, errno end
  local s = f:read("a")
  f:close()
  return M.parse_cpulist(s)
end

-- ---- options ----

local function is_pow2(n)
  while n > 1 and n % 2 == 0 do n = n / 2 end
  return n == 1
end

local function check_options(opts)
  options.check(opts, OPTIONS, "perfev.sampler")
  if opts.event and opts.events then fail("give 'event' or 'events', not both") end
  if opts.pid and opts.command then fail("give 'pid' or 'command', not both") end
  if opts.command and opts.inherit == false then
    fail("option 'inherit' cannot be false with 'command': the command inherits the events")
  end
  if opts.period and opts.freq then fail("give 'period' or 'freq', not both") end
  for _, k in ipairs { "period", "freq", "default_freq" } do
    if opts[k] and opts[k] <= 0 then fail("option '%s' must be > 0, got %.0f", k, opts[k]) end
  end
  if opts.pid and opts.pid < -1 then fail("option 'pid' must be >= -1, got %.0f", opts.pid) end
  if opts.pages and not is_pow2(opts.pages) then
    fail("option 'pages': the number of data pages per CPU must be a power of two, got %.0f", opts.pages)
  end
  if opts.events and #opts.events == 0 then fail("option 'events' is an empty list") end
  for i, e in ipairs(opts.events or {}) do
    if not options.fits(e, "spec") then
      fail("option 'events'[%d] must be %s, got %s", i, options.what("spec"), options.describe(e))
    end
  end
end

local function mask_of(st)
  if options.is_integer(st) then return st end
  return options.call(core.attr, { sample_type = st }).sample_type
end

-- The attr of event spec i, with the sampler's settings. Built before
-- anything is opened, so that a mistake raises with nothing to clean up.
local function build_attr(s, i, nspecs, opts, mode)
  local a, name, t = spec.attr(s, "perfev.sampler")   -- a copy: the caller's attr is never changed
  for k, v in pairs(opts.attr or {}) do options.call(function() a[k] = v end) end
  if opts.freq then
    a.freq, a.sample_freq = true, opts.freq
  elseif opts.period then
    a.freq, a.sample_period = false, opts.period
  elseif a.sample_period == 0 then       -- a tracepoint's spec samples every hit (period 1)
    a.freq, a.sample_freq = true, opts.default_freq or DEFAULT_FREQ
  end
  -- the spec's own bits (a tracepoint's RAW|TIME|CPU|PERIOD, a term's
  -- CALLCHAIN) are added to the sampler's, as perf record does
  local st = compat.bor(mask_of(opts.sample_type or DEFAULT_SAMPLE_TYPE), a.sample_type)
  -- following a command filters by pid and orders by time; several
  -- events of one ring are told apart by their id
  if mode == "command" then st = compat.bor(st, SAMPLE.TID, SAMPLE.TIME) end
  if nspecs > 1 then st = compat.bor(st, SAMPLE.IDENTIFIER) end
  a.sample_type = st
  a.disabled = true
  a.inherit = opts.inherit
  a.enable_on_exec = mode == "command"
  if i == 1 then
    for _, k in ipairs(SIDEBAND) do
      if opts[k] ~= nil then a[k] = opts[k] end
    end
  end
  -- the kernel writes mmap records only while some event has mmap or
  -- mmap_data set (it counts those bits alone), and writes them in the
  -- mmap2 form whenever mmap2 is set: mmap2 alone would get nothing
  if a.mmap2 ~= 0 then a.mmap = true end
  -- every event alike: the events of a ring must agree on it
  if opts.sample_id_all ~= nil then a.sample_id_all = opts.sample_id_all
  else a.sample_id_all = true end
  if mode == "command" then a.sample_id_all = true end
  return a, name, t or {}
end

-- ---- opening ----

local function close_all(self)
  for _, r in ipairs(self.rings) do r:close() end
  for _, ev in ipairs(self.events) do ev:close() end
  if self.watch then
    local ev = self.watch:event()
    self.watch:close()
    ev:close()
  end
  self.watch = nil
end

-- One event per spec on each CPU; the first event of a CPU owns its ring
-- and the others write into it (ring:add).
-- perfev.open's rules (lua/perfev/open.lua): one `how` per spec, so that
-- a fallback taken on the first CPU (which stays in the attr) is recorded
-- on the spec's events on every CPU.
local function open_events(self, attrs, hows, pid, pages)
  for k, cpu in ipairs(self.cpus) do
    local ring
    for i, a in ipairs(attrs) do
      local how = hows[i]
      how.pid, how.cpu = pid, cpu
      local ev, msg, errno = open.event(a, how)
      if not ev then return nil, ("%s (event '%s', cpu %d)"):format(msg, how.name, cpu), errno end
      self.events[#self.events + 1] = ev
      self.by_spec[i][k] = ev
      local ok
      if i == 1 then
        ring, msg, errno = ev:mmap(pages)
        ok = ring ~= nil
        self.rings[k] = ring
      else
        ok, msg, errno = ring:add(ev)
      end
      if not ok then return nil, ("%s (event '%s', cpu %d)"):format(msg, how.name, cpu), errno end
    end
  end
  return true
end

-- A dummy event on this process catches the fork that creates the
-- command's process: its pid, and the fork record itself.
local function start_command(self, cmd, sample_type)
  local me = self.me
  -- (user-space only: it counts nothing, and perf_event_paranoid 2 refuses
  -- an unprivileged user anything else). Its fork record's trailer is the
  -- events' (the bits of it alone: a dummy takes no samples, and REGS_USER
  -- without the events' sample_regs_user would be EINVAL)
  local a = core.attr { type = "software", config = core.SW.DUMMY, task = true, sample_id_all = true,
                        sample_type = compat.band(sample_type, TRAILER_BITS), disabled = true,
                        exclude_kernel = true, exclude_hv = true }
  local dummy, msg, errno = core.open(a, 0, -1)
  if not dummy then return nil, msg, errno end
  local dring
  dring, msg, errno = dummy:mmap(1)
  if not dring then dummy:close(); return nil, msg, errno end
  dummy:enable()
  local p, perr = io.popen(cmd, "r")
  dummy:disable()
  local forks, child = {}, nil
  for rec in dring:records() do
    if rec.type == "fork" and rec.ppid == me and not child then
      child = rec.pid
      forks[#forks + 1] = rec
    end
  end
  dring:close(); dummy:close()
  if not p then return nil, "perfev.sampler: cannot start the command: " .. tostring(perr), 0 end
  self.stdout = p
  if not child then
    return nil, "perfev.sampler: no fork record for the command's process (was the ring full?)", 0
  end
  self.pid = child
  self.followed = { [child] = true }
  if self.want_task then self.pending = forks end
  -- a per-task event on the child alone: poll() reports POLLHUP on its
  -- ring when the process exits
  local w = core.attr { type = "software", config = core.SW.DUMMY, disabled = true,
                        exclude_kernel = true, exclude_hv = true }
  local wev
  wev, msg, errno = core.open(w, child, -1)
  if not wev then
    if errno == core.ERRNO.ESRCH then self.gone = true; return true end
    return nil, msg, errno
  end
  local wring
  wring, msg, errno = wev:mmap(0)
  if not wring then wev:close(); return nil, msg, errno end
  self.watch = wring
  return true
end

-- perfev.sampler(opts) -> session | nil, message, errno
function M.new(opts)
  opts = opts or {}
  check_options(opts)
  local mode = opts.command and "command" or (opts.pid == -1 and "cpu-wide" or "task")
  local specs = opts.events or { opts.event or "cpu-clock" }
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  if o.inherit == nil then o.inherit = mode ~= "cpu-wide" end
  local attrs, names, hows = {}, {}, {}
  for i, s in ipairs(specs) do
    local t
    attrs[i], names[i], t = build_attr(s, i, #specs, o, mode)
    hows[i] = { name = names[i], user_fallback = type(s) == "string", precise_max = t.precise_max }
  end
  local cpus = opts.cpus and options.cpus(opts.cpus, "perfev.sampler")
  if not cpus then
    local msg, errno
    cpus, msg, errno = M.online_cpus()
    if not cpus then return nil, msg, errno end
  end
  local self = setmetatable({
    cpus = cpus, events = {}, rings = {}, by_spec = {}, names = names, mode = mode,
    command = opts.command, pid = opts.pid or 0, maps = {}, proc_maps = {}, me = fs.own_pid(),
    has_time = compat.btest(attrs[1].sample_type, SAMPLE.TIME),
    want_task = opts.task == true,
  }, S)
  for i = 1, #specs do self.by_spec[i] = {} end
  local ok, msg, errno = open_events(self, attrs, hows, mode == "command" and 0 or self.pid,
                                     opts.pages or DEFAULT_PAGES)
  if ok and mode == "command" then
    ok, msg, errno = start_command(self, opts.command, attrs[1].sample_type)
    if not ok and self.stdout then self.stdout:close(); self.stdout = nil end
  end
  if not ok then
    close_all(self)
    return nil, msg, errno
  end
  if self.pid == 0 then self.pid = self.me end
  return self
end

setmetatable(M, { __call = function(_, opts) return M.new(opts) end })

-- ---- the session ----

local function check_open(self, method)
  options.self(self, S, "perfev.sampler", method)
  if self.is_closed then options.raise("perfev.sampler: attempt to use a closed session") end
end

local function each_event(self, method)
  check_open(self, method)
  for _, ev in ipairs(self.events) do
    local ok, msg, errno = ev[method](ev)
    if not ok then return nil, msg, errno end
  end
  return true
end

-- s:enable() / s:disable(): every event on every CPU, and (the ioctls act
-- on inherited events too) every copy in the children.
function S:enable() return each_event(self, "enable") end
function S:disable() return each_event(self, "disable") end

-- Whether rec belongs to what the session follows: the command's process
-- and the processes it forks (learnt from fork records, in time order).
local function keep(self, rec)
  local f = self.followed
  if not f or EVENT_RECORDS[rec.type] then return true end
  if rec.type == "fork" and f[rec.ppid] then f[rec.pid] = true end
  local pid = rec.pid
  return pid == nil or f[pid] == true
end

-- The address spaces s:resolve uses: mmap/mmap2 records by pid; an exec
-- starts afresh, a fork copies its parent's.
local function track(self, rec)
  local t, maps = rec.type, self.maps
  if t == "mmap" or t == "mmap2" then
    local m = maps[rec.pid]
    if not m then m = {}; maps[rec.pid] = m end
    m[#m + 1] = rec
  elseif t == "comm" and rec.comm_exec then
    maps[rec.pid] = {}
  elseif t == "fork" and rec.pid ~= rec.ppid and maps[rec.ppid] then
    local parent = maps[rec.ppid]
    maps[rec.pid] = table.move(parent, 1, #parent, 1, {})
  end
end

-- s:records() -> iterator over the records every ring holds now, merged in
-- time order (by sample time, or the sample_id_all trailer's; a record
-- without a time keeps its place after the one before it in its ring),
-- else CPU by CPU. rec.cpu is set from the ring when the record has none,
-- rec.event to the event that wrote it.
function S:records()
  check_open(self, "records")
  local recs, times, n = {}, {}, 0
  local function take(rec, cpu, ev, last)
    if rec.cpu == nil then rec.cpu = cpu end
    if rec.event == nil then rec.event = ev end
    n = n + 1
    recs[n] = rec
    local t = rec.time or last
    times[n] = t
    return t
  end
  if self.pending then
    for _, rec in ipairs(self.pending) do take(rec, nil, nil, 0) end
    self.pending = nil
  end
  for k, ring in ipairs(self.rings) do
    local last, cpu, ev = 0, self.cpus[k], self.by_spec[1][k]
    for rec in ring:records() do last = take(rec, cpu, ev, last) end
  end
  local order = {}
  for i = 1, n do order[i] = i end
  if self.has_time then
    table.sort(order, function(a, b)
      local ta, tb = times[a], times[b]
      if ta ~= tb then return compat.ult(ta, tb) end
      return a < b
    end)
  end
  local i = 0
  return function()
    while i < n do
      i = i + 1
      local rec = recs[order[i]]
      if keep(self, rec) then
        track(self, rec)
        return rec
      end
    end
    return nil
  end
end

-- Whether the followed process is gone: a command's process (its watch
-- event), or the task every ring's event followed.
local function hung_up(self, ring_hups)
  if self.mode == "command" then
    if self.gone then return true end
    if not self.watch then return false end
    local _, hup = self.watch:poll(0)
    return hup == true
  end
  return ring_hups
end

-- Every ring without waiting: readable, hup | nil, message, errno.
local function poll_now(self)
  if self.pending and #self.pending > 0 then return true, hung_up(self, false) end
  local readable, all_hup = false, #self.rings > 0
  for _, r in ipairs(self.rings) do
    local rd, hup, errno = r:poll(0)
    if rd == nil then return nil, hup, errno end
    readable = readable or rd
    all_hup = all_hup and hup
  end
  return readable, hung_up(self, all_hup)
end

-- s:poll([ms = -1]) -> readable, hup | nil, message, errno.
-- readable: some ring holds records; hup: the followed process has exited
-- (a command's process; in pid mode the task and every child). ms 0 never
-- blocks, -1 waits without limit. With several rings the wait sleeps on
-- one fd (the command's watch, or the first ring) in slices of 10 ms and
-- looks at every ring between slices: data on another CPU's ring is seen
-- within a slice.
function S:poll(ms)
  check_open(self, "poll")
  if ms == nil then ms = -1 end
  -- ring:poll's rule: poll(2) takes an int of milliseconds
  if not options.is_integer(ms) or ms < -1 or ms > POLL_MAX_MS then
    fail("poll takes milliseconds (0..%.0f), or -1 to wait without limit; got %s", POLL_MAX_MS,
         options.describe(ms))
  end
  if #self.rings == 1 and self.mode ~= "command" then return self.rings[1]:poll(ms) end
  local readable, hup, errno = poll_now(self)
  if readable == nil or readable or hup or ms == 0 then return readable, hup, errno end
  local left = ms
  while ms < 0 or left > 0 do
    local slice = (ms >= 0 and left < POLL_SLICE_MS) and left or POLL_SLICE_MS
    local waiter = self.watch or self.rings[1]
    local rd, msg, err = waiter:poll(slice)
    if rd == nil then return nil, msg, err end
    left = left - slice
    readable, hup, errno = poll_now(self)
    if readable == nil or readable or hup then return readable, hup, errno end
  end
  return false, false
end

-- s:lost() -> samples the kernel reported lost on every ring so far
function S:lost()
  check_open(self, "lost")
  local n = 0
  for _, r in ipairs(self.rings) do n = n + r:lost() end
  return n
end

-- s:read() -> { [i] = count, [name] = count }: each event's count summed
-- over the CPUs (inherited copies fold into it as children exit); false
-- when the event never ran.
function S:read()
  check_open(self, "read")
  local out = {}
  for i, evs in ipairs(self.by_spec) do
    local sum = false
    for _, ev in ipairs(evs) do
      local v, msg, errno = ev:read()
      if v == nil then return nil, msg, errno end
      if v then sum = (sum or 0) + v end
    end
    out[i] = sum
    out[self.names[i]] = sum
  end
  return out
end

-- /proc/PID/maps as mmap-like rows, for mappings made before the session;
-- an unnamed one is "//anon", as the kernel names it in mmap2 records (a
-- JIT's machine code: LuaJIT's traces).
local function proc_maps(self, pid)
  local m = self.proc_maps[pid]
  if m ~= nil then return m end
  m = false
  local f = io.open("/proc/" .. pid .. "/maps", "r")
  if f then
    m = {}
    for line in f:lines() do
      local lo, hi, off, path = line:match("^(%x+)-(%x+) %S+ (%x+) %S+ %S+%s*(.*)$")
      if lo then
        if path == "" then path = "//anon" end
        local addr = compat.hex64(lo)   -- exact on every runtime (the vsyscall page)
        m[#m + 1] = { addr = addr, len = compat.sub(compat.hex64(hi), addr), pgoff = compat.hex64(off),
                      filename = path }
      end
    end
    f:close()
  end
  self.proc_maps[pid] = m
  return m
end

local ult, sub = compat.fast.ult, compat.fast.sub   -- s:resolve checked ip; the maps' values are integers
local function find(list, ip)
  for i = #list, 1, -1 do   -- the newest mapping wins
    local m = list[i]
    if not ult(ip, m.addr) and ult(sub(ip, m.addr), m.len) then return m end
  end
  return nil
end

-- s:resolve(pid, ip) -> filename, file_offset, mapping | nil: the mapping
-- ip fell in, from the mmap/mmap2 records iterated so far, else from
-- /proc/PID/maps while the process lives.
function S:resolve(pid, ip)
  check_open(self, "resolve")
  options.arg(pid, "integer", "perfev.sampler: resolve", "pid")
  options.arg(ip, "integer", "perfev.sampler: resolve", "ip")
  if pid == 0 then pid = self.me end
  local m = self.maps[pid] and find(self.maps[pid], ip)
  if not m then
    local pm = proc_maps(self, pid)
    m = pm and find(pm, ip)
  end
  if not m then return nil end
  return m.filename, compat.add(compat.sub(ip, m.addr), m.pgoff), m
end

-- s:pids() -> the followed pids seen so far (a command's process and its
-- descendants), sorted; nil when the session is not following a command.
function S:pids()
  options.self(self, S, "perfev.sampler", "pids")
  if not self.followed then return nil end
  local out = {}
  for pid in pairs(self.followed) do out[#out + 1] = pid end
  table.sort(out)
  return out
end

-- s:wait() -> ok, how, code, output: the command's remaining output, then
-- its exit status as Lua 5.3's io.popen close gives it, on every runtime
-- (LuaJIT's close does not give it): read from /proc while the process is
-- a zombie, as perf stat's command runner does.
function S:wait()
  options.self(self, S, "perfev.sampler", "wait")
  if not self.stdout then fail("wait() is for a session started with 'command'") end
  local p = self.stdout
  self.stdout = nil
  local out = p:read("a")
  local command = require "perfev.stat.command"   -- (it requires perfev: not at load time)
  local status = self.pid and command.zombie_status(self.pid, self.watch)
  local ok, how, code = p:close()
  if status then
    how, code = command.decode_status(status)
    ok = (how == "exit" and code == 0) or nil
  end
  return ok, how, code, out
end

-- s:close(): every ring, then every event. A command still running is
-- left to run (its pipe is closed with the session's stdout handle).
function S:close()
  options.self(self, S, "perfev.sampler", "close")
  if self.is_closed then return true end
  close_all(self)
  self.is_closed = true
  return true
end

function S:closed()
  options.self(self, S, "perfev.sampler", "closed")
  return self.is_closed == true
end

S.__close = S.close

function S:__tostring()
  options.self(self, S, "perfev.sampler", "__tostring")
  return ("perfev.sampler(%s %s, %d CPUs%s)"):format(self.mode, self.command or tostring(self.pid),
                                                    #self.cpus, self.is_closed and ", closed" or "")
end

return M
