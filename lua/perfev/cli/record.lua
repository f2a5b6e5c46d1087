-- perfev record: perf record's command line over perfev.record -- sample a
-- command or a running process into a perf.data file; a Lua script runs in
-- this process under perfev.profile, whose perf.data names its Lua
-- functions (through the perf map).
--   perfev record [-e EVENT] [-F FREQ | -c PERIOD] [-g | --call-graph MODE] [-o FILE] -- CMD...
--   perfev record [options] script.lua [args]
--   perfev record [options] -p PID -- sleep SECONDS
local run = require "perfev.cli.run"
local interrupt = require "perfev.interrupt"

local M = {}

M.summary = "Sample a command, a Lua script or a process into perf.data, like perf record"
M.value_options = { "-e", "--event", "-F", "--freq", "-c", "--count", "-o", "--output", "-p", "--pid",
                    "--call-graph" }

local positive = run.positive

-- --call-graph MODE, checked as perfev.record checks its callchain option
local function call_graph(s)
  local cg, msg = require("perfev.record").call_graph(s)
  if not cg then return nil, "option '--call-graph': " .. msg end
  return s
end

function M.configure(cmd)
  cmd:option("-e --event", "Event to sample (default cpu-clock); repeatable, or a list a,b.")
     :argname("<event>"):count("*")
  cmd:mutex(
    cmd:option("-F --freq", "Sample at this frequency (Hz; default 4000)."):argname("<hz>")
       :convert(positive("--freq")),
    cmd:option("-c --count", "Sample once every <n> events (the sample period)."):argname("<n>")
       :convert(positive("--count"))
  )
  cmd:flag("-g", "Record call chains (frame pointers: --call-graph fp)."):target("callgraph")
  cmd:option("--call-graph", "Record call chains: fp (frame pointers), dwarf[,size] (a copy of the "
             .. "user stack, 8192 bytes, that perf report unwinds), lbr, or no.")
     :argname("<mode>"):convert(call_graph)
  cmd:option("-o --output", "The perf.data file to write (an old one is kept as <file>.old).", "perf.data")
     :argname("<file>")
  cmd:option("-p --pid", "Sample an existing process; give the duration as: -- sleep SECONDS.")
     :argname("<pid>"):convert(positive("--pid"))
  cmd:argument("command", "The command to sample (after --), or a Lua script NAME.lua run in this process "
               .. "and recorded by Lua function (as 'perfev profile -o FILE.data').")
     :args("*"):target("command_args")
end

local function fail(fmt, ...)
  io.stderr:write("perfev record: " .. fmt:format(...) .. "\n")
end

-- As perf record does: a non-empty output file is kept as FILE.old (which
-- it replaces). -> true | nil, message
local function keep_old(path)
  if path == "-" then return true end
  local f = io.open(path, "rb")
  if not f then return true end
  local size = f:seek("end")
  f:close()
  if not size or size == 0 then return true end
  local ok, msg = os.rename(path, path .. ".old")
  if not ok then return nil, ("cannot keep the old %s: %s"):format(path, msg) end
  return true
end

local function summary(bytes, output, samples, lost)
  io.stderr:write(("[ perfev record: Captured and wrote %.3f MB %s (%.0f samples) ]\n")
    :format((bytes or 0) / 1048576, output or "", samples or 0))
  if (lost or 0) > 0 then
    io.stderr:write(("[ perfev record: %.0f samples lost ]\n"):format(lost))
  end
end

-- A Lua script: perfev.profile's samples, by Lua function, written as
-- perf.data (perfev.profile.perfdata). perfev.record's native samples of
-- this process would be the interpreter's C code, not the script's. The
-- Lua stacks are the call graph: recorded with or without -g.
local function record_script(args, evs, words)
  if #evs > 1 then
    fail("a Lua script is recorded on one event, got %d (record them one at a time)", #evs)
    return 129
  end
  local cg = args.call_graph
  if cg and cg ~= "fp" and cg ~= "no" then
    fail("a Lua script is recorded with its Lua stacks; --call-graph %s unwinds native code: "
         .. "record the interpreter instead (perfev record --call-graph %s -- lua %s)", cg, cg, words[1])
    return 129
  end
  local rest = {}
  for i = 2, #words do rest[#rest + 1] = words[i] end
  local p
  local fn, msg = run.script_fn(words[1], rest, "perfev record",
                                function(...) return run.profiled(p)(...) end)
  if not fn then fail("%s", msg) return 127 end
  local event = evs[1] or "cpu-clock"
  -- perf record's -F default leaves an event with a period of its own (a
  -- tracepoint: 1) as it is
  local period, freq = args.count, args.freq
  if not period and not freq then
    if type(event) == "table" and event.sample_period then period = event.sample_period
    else freq = require("perfev.record").DEFAULT_FREQ end
  end
  local perr
  p, perr = require("perfev").profile { event = event, freq = freq, period = period }
  if not p then fail("%s", perr) return 1 end
  local kok, kmsg = keep_old(args.output)
  if not kok then p:close() fail("%s", kmsg) return 1 end
  local ok, status = pcall(fn)
  local wok, wmsg = p:write(args.output, "perfdata")
  local prof = p:profile()
  p:close()
  if not wok then fail("%s", wmsg) return 1 end
  local f = io.open(args.output, "rb")
  summary(f and f:seek("end"), args.output, prof.samples, prof.lost)
  if f then f:close() end
  if not ok then error(status, 0) end
  return status
end

-- -p PID -- sleep N: the recording's duration in ms
local function sleep_ms(words)
  if #words == 2 and words[1] == "sleep" then
    local s = tonumber(words[2])
    if s and s > 0 then return math.floor(s * 1000 + 0.5) end
  end
  return nil
end

function M.run(args)
  local perfev = require "perfev"
  local words = args.command_args or {}
  local opts = { output = args.output, freq = args.freq, period = args.count,
                 callchain = args.call_graph or args.callgraph or nil }
  local evs = {}
  for _, e in ipairs(args.event) do
    local ok, list = pcall(perfev.parse_list, e)
    if not ok then
      fail("%s", run.event_error(list) or tostring(list))
      return 129
    end
    for _, t in ipairs(list) do evs[#evs + 1] = t end
  end
  if #evs == 1 then opts.event = evs[1] elseif #evs > 1 then opts.events = evs end
  local status = 0
  if args.pid then
    local ms = sleep_ms(words)
    if not ms then fail("with -p PID, give the duration as: -- sleep SECONDS") return 129 end
    opts.pid, opts.duration_ms = args.pid, ms
  elseif #words == 0 then
    fail("give a command after --, a Lua script, or -p PID (see 'perfev record --help')")
    return 129
  elseif run.is_script(words) then
    return record_script(args, evs, words)
  else
    local path, msg, st = run.find(words[1])
    if not path then fail("%s", msg) return st end
    opts.command = "exec " .. run.join(words)
  end
  local kok, kmsg = keep_old(args.output)
  if not kok then fail("%s", kmsg) return 1 end
  local r, msg = perfev.record(opts)
  if not r then fail("%s", msg) return 1 end
  if r.stdout then io.stdout:write(r.stdout) end
  if r.exit then
    local how, code = r.exit.how, r.exit.code
    if how == "signal" then status = 128 + code elseif type(code) == "number" then status = code end
  end
  summary(r.bytes, r.output, r.samples, r.lost)
  if r.interrupted then return interrupt.STATUS end
  return status
end

return M
