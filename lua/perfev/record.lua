-- perfev.record: sample a Lua function in this process, a command, or a
-- running process, and stream the records into a perf.data file that perf
-- report and perf script read, like `perf record`. See
-- doc/perfdata-write.md.
--
--   local perfev = require "perfev"
--   local r = assert(perfev.record { output = "perf.data", callchain = true,
--                                    fn = function() work() end })
--   print(r.samples, r.lost, r.output)      -- then: perf report -i perf.data
--
-- The sampling is perfev.sampler's (an event per CPU, side-band records);
-- the file gets, first, the records perf synthesizes for what existed
-- before the events were opened (the kernel's text, the process's threads
-- and executable mappings from /proc), then every record of the rings,
-- drained batch by batch, each batch followed by a finished_round record.
local sampler = require "perfev.sampler"
local writer = require "perfev.perfdata.writer"
local synth = require "perfev.perfdata.synth"
local fs = require "perfev.fs"
local options = require "perfev.options"
local core = require "perfev.core"
local compat = require "perfev.compat"
local interrupt = require "perfev.interrupt"
local parse = require "perfev.parse"
local terms = require "perfev.parse.terms"

local M = {}

local DEFAULT_FREQ = 4000          -- perf record's default
local DEFAULT_PAGES = 128          -- per CPU: 512 KiB, perf's default for root
local DRAIN_EVERY = 1000000        -- Lua VM instructions between drains while fn runs
local POLL_MS = 100

local OPTIONS = {
  output = "string|file", pipe = "boolean", event = "spec", events = "table", freq = "integer",
  period = "integer", callchain = "boolean|string", sample_type = "string|table", fn = "function",
  args = "table", command = "string", pid = "integer", duration_ms = "integer",
  pages = "integer", cpus = "cpus", attr = "table", kernel = "boolean",
  drain_every = "any", features = "table", build_ids = "boolean", mmap_data = "boolean",
}

local function fail(fmt, ...)
  options.raise("perfev.record: " .. fmt:format(...))
end

M.DEFAULT_FREQ = DEFAULT_FREQ

-- perfev.record.call_graph(v) -> the call graph perf record's --call-graph
-- names (-g: "fp") | nil, perf's message. v: true ("fp"), "fp", "dwarf"
-- (the user stack copied into each sample, 8192 bytes, for perf to unwind
-- with the sample's registers), "dwarf,SIZE", "lbr", "no" or false.
-- Returns { mode, sample_type = the bits to add, fields = the other attr
-- fields, mmap_data }: the fields the event grammar's call-graph= term sets
-- (perfev.parse.terms), which are perf record's.
function M.call_graph(v)
  if v == nil or v == false then v = "no" elseif v == true then v = "fp" end
  if type(v) ~= "string" then return nil, "expects true, false or a mode (fp, dwarf[,size], lbr, no)" end
  local mode, size = v:match("^([^,]*),(.*)$")
  mode = mode or v
  if not parse.CALLGRAPH[mode] then
    return nil, ("unknown call-graph mode '%s' (fp, dwarf[,size], lbr, no)"):format(v)
  end
  local ev = { _cg = mode }
  if size then
    if mode ~= "dwarf" then return nil, ("no more arguments needed for call-graph mode %s"):format(mode) end
    local n = tonumber(size)
    if not n or n ~= math.floor(n) or n <= 0 or n + 7 - (n + 7) % 8 > parse.STACK_SIZE_MAX then
      return nil, ("incorrect stack dump size (max %d): %s"):format(parse.STACK_SIZE_MAX, size)
    end
    ev._stack = n
  end
  terms.callchain(ev, 1)
  local cg = { mode = mode, sample_type = ev.sample_type or 0, mmap_data = ev.mmap_data, fields = {} }
  for _, k in ipairs { "exclude_callchain_user", "sample_regs_user", "sample_stack_user", "branch_sample_type" } do
    cg.fields[k] = ev[k]
  end
  return cg
end

local function mask_of(st)
  if st == nil then return 0 end
  if options.is_integer(st) then return st end
  return options.call(core.attr, { sample_type = st }).sample_type
end

-- A spec with the record's call graph, unless it has its own (a
-- call-graph= term, or the callchain bit): as in perf record, the event's
-- own term wins over --call-graph. An event string becomes its parsed
-- table(s).
local function with_call_graph(s, cg, out)
  if type(s) == "string" then
    for _, t in ipairs(parse.list(s)) do with_call_graph(t, cg, out) end
    return
  end
  local own
  if type(s) == "table" then
    own = s.terms and s.terms["call-graph"] ~= nil
    local t = {}
    for k, v in pairs(s) do t[k] = v end
    s = t
  else
    s = options.call(core.attr, s)
  end
  local st = mask_of(s.sample_type)
  if not (own or compat.btest(st, core.SAMPLE.CALLCHAIN)) then
    s.sample_type = compat.bor(st, cg.sample_type)
    for k, v in pairs(cg.fields) do
      if k == "branch_sample_type" then v = compat.bor(mask_of(s[k]), v) end
      s[k] = v
    end
  end
  out[#out + 1] = s
end

local function check(opts)
  if opts == nil then fail("expects a table of options (output, event, fn | command | pid ...)") end
  options.check(opts, OPTIONS, "perfev.record")
  local n = (opts.fn and 1 or 0) + (opts.command and 1 or 0) + (opts.pid and 1 or 0)
  if n ~= 1 then fail("give exactly one of 'fn', 'command' and 'pid'") end
  if opts.pid and not opts.duration_ms then fail("option 'pid' needs 'duration_ms'") end
  if opts.duration_ms and opts.duration_ms <= 0 then fail("option 'duration_ms' must be > 0") end
  if opts.period and opts.freq then fail("give 'period' or 'freq', not both") end
  if opts.callchain ~= nil then
    local cg, msg = M.call_graph(opts.callchain)
    if not cg then fail("option 'callchain': %s", msg) end
  end
  local d = opts.drain_every
  if d ~= nil and d ~= false and (not options.is_integer(d) or d <= 0) then
    fail("option 'drain_every' must be a positive integer or false")
  end
end

-- The sampler's options for a recording.
local function sampler_opts(opts)
  local so = { events = opts.events, cpus = opts.cpus, attr = opts.attr,
               pages = opts.pages or DEFAULT_PAGES, period = opts.period,
               comm = true, comm_exec = true, task = true, mmap2 = true,
               mmap_data = opts.mmap_data }
  if not opts.events then so.event = opts.event or "cpu-clock" end
  local cg = opts.callchain ~= nil and M.call_graph(opts.callchain)
  if cg and cg.mode ~= "no" then
    local specs = {}
    for _, e in ipairs(so.events or { so.event }) do with_call_graph(e, cg, specs) end
    if #specs == 1 then so.event = specs[1] else so.event, so.events = nil, specs end
    if so.mmap_data == nil then so.mmap_data = cg.mmap_data end
  end
  -- perf record's -F default leaves an event whose spec has a period (a
  -- tracepoint: 1) as it is
  so.freq, so.default_freq = opts.freq, DEFAULT_FREQ
  local st = { "ip", "tid", "time", "period" }
  if opts.sample_type then
    local extra = opts.sample_type
    if type(extra) == "string" then extra = { extra } end
    if type(extra) ~= "table" then fail("option 'sample_type' must be a name or a list of names") end
    for _, k in ipairs(extra) do st[#st + 1] = k end
  end
  so.sample_type = st
  if opts.command then so.command = opts.command
  elseif opts.pid then so.pid = opts.pid
  else so.pid = 0 end
  return so
end

-- Writes what the rings hold, then a finished_round: the next batch holds
-- nothing older than this one's newest record but what the rings had not
-- yet received, which perf's rule allows for one round.
local function drain(s, w)
  local n = 0
  for rec in s:records() do
    local ok, msg, errno = w:write(rec)
    if not ok then return nil, msg, errno end
    n = n + 1
  end
  if n == 0 then return true end
  return w:round()
end

-- A recording (r: opts, the sampler s, the writer w, the kernel's
-- records, the summary; r.ok, r.err, r.eno: the first write or drain that
-- failed). Ctrl-C anywhere in it (perfev.interrupt) ends it: what was
-- recorded is written; a command got the SIGINT too and is waited for.

-- What existed before the events: the kernel, a process already running.
local function write_existing(r)
  local pre = { r.kernel }
  if not r.opts.command then
    for _, rec in ipairs(synth.process(r.opts.pid or fs.own_pid(), { data = r.opts.mmap_data })) do
      pre[#pre + 1] = rec
    end
  end
  for _, rec in ipairs(pre) do
    r.ok, r.err, r.eno = r.w:write(rec)
    if not r.ok then return false end
  end
  return true
end

-- fn called with its args, the rings drained every drain_every VM
-- instructions meanwhile; its results in the summary
local function run_fn(r)
  local opts = r.opts
  local every = opts.drain_every == nil and DRAIN_EVERY or opts.drain_every
  local hook, mask, count = debug.gethook()
  if every then
    debug.sethook(function()
      if r.ok then r.ok, r.err, r.eno = drain(r.s, r.w) end
    end, "", every)
  end
  local res = compat.table_pack(pcall(opts.fn, compat.table_unpack(opts.args or {})))
  debug.sethook(hook, mask, count)
  if not res[1] then error(res[2], 0) end
  r.summary.results = compat.table_pack(compat.table_unpack(res, 2, res.n))
end

-- a command or a pid: drained until it ends or duration_ms is over (the
-- wall clock: CLOCK_MONOTONIC, which no clock change moves)
local function run_until(r)
  local deadline = r.opts.duration_ms and core.clock_ns() + r.opts.duration_ms * 1000000
  repeat
    local _, hup = r.s:poll(POLL_MS)
    if r.ok then r.ok, r.err, r.eno = drain(r.s, r.w) end
    local late = deadline and core.clock_ns() >= deadline
  until hup or late or not r.ok
end

local function recording(r)
  if not write_existing(r) then return end
  if r.opts.fn or r.opts.pid then
    r.ok, r.err, r.eno = r.s:enable()
    if not r.ok then return end
  end
  if r.opts.fn then return run_fn(r) end
  run_until(r)
end

-- The end of a recording (pcall's rok, rerr): the last drain, the
-- command's exit and output, the file closed -> summary | nil, msg, errno
local function finish(r, rok, rerr)
  local s, w, cmd_out = r.s, r.w, r.cmd_out
  s:disable()
  if not rok and not interrupt.is(rerr) then
    if r.ok then drain(s, w) end
    s:close()
    w:close()
    if cmd_out then os.remove(cmd_out) end
    error(rerr, 0)
  end
  local summary = r.summary
  summary.interrupted = not rok or nil
  if r.ok then r.ok, r.err, r.eno = drain(s, w) end
  if not r.ok then
    s:close()
    w:close()
    if cmd_out then os.remove(cmd_out) end
    return nil, r.err, r.eno
  end
  summary.lost = s:lost()
  if r.opts.command then
    local eok, how, code = s:wait()
    summary.exit = { ok = eok, how = how, code = code }
    local f = io.open(cmd_out, "rb")
    if f then summary.stdout = f:read("a"); f:close() end
    os.remove(cmd_out)
  end
  s:close()
  local st, cerr, ceno = w:close()
  if not st then return nil, cerr, ceno end
  summary.samples, summary.records, summary.bytes = st.samples, st.records, st.bytes
  summary.types = st.types
  return summary
end

-- perfev.record(opts) -> summary | nil, message, errno
-- opts: output ("perf.data"; a path, "-" or a file handle), pipe, event or
-- events, freq (4000) or period, callchain (true or a call graph mode: see
-- M.call_graph; an event's own call-graph= term wins), sample_type (added names),
-- exactly one of fn (with args), command or pid (with duration_ms),
-- pages (128 per CPU), cpus, attr, kernel, drain_every, features,
-- build_ids, mmap_data. Ctrl-C (perfev.interrupt) ends the recording: what
-- was recorded is written and the summary has interrupted = true.
function M.record(opts)
  check(opts)
  local so = sampler_opts(opts)
  local output = opts.output or "perf.data"
  -- the kernel's text, read (/proc/kallsyms: ~150 ms here) before a
  -- command starts: a command started first runs unrecorded meanwhile, and
  -- the ring overflows before the first drain
  local kernel = opts.kernel ~= false and synth.kernel() or nil
  local cmd_out
  if opts.command then
    -- the command's output goes to a file: a pipe nobody reads while the
    -- recording runs would stop the command once full
    cmd_out = os.tmpname()
    so.command = ("{ %s\n} > '%s'"):format(opts.command, cmd_out)
  end
  local s, msg, errno = sampler(so)
  if not s then
    if cmd_out then os.remove(cmd_out) end
    return nil, msg, errno
  end
  local w
  w, msg, errno = writer.create(output, s, { pipe = opts.pipe, features = opts.features,
                                             build_ids = opts.build_ids, rounds = "manual" })
  if not w then
    s:close()
    if cmd_out then os.remove(cmd_out) end
    return nil, msg, errno
  end
  local r = { opts = opts, s = s, w = w, kernel = kernel, cmd_out = cmd_out, ok = true,
              summary = { output = type(output) == "string" and output or nil, pid = s.pid } }
  local rok, rerr = pcall(recording, r)
  return finish(r, rok, rerr)
end

setmetatable(M, { __call = function(_, opts) return M.record(opts) end })

return M
