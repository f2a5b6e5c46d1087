-- perfev record: perf record's command line over perfev.record -- sample a
-- command, a Lua script (in this process, with Lua function names through
-- the perf map) or a running process into a perf.data file.
--   perfev record [-e EVENT] [-F FREQ | -c PERIOD] [-g] [-o FILE] -- CMD...
--   perfev record [options] script.lua [args]
--   perfev record [options] -p PID -- sleep SECONDS
local run = require "perfev.cli.run"
local interrupt = require "perfev.interrupt"

local M = {}

M.summary = "Sample a command, a Lua script or a process into perf.data, like perf record"
M.value_options = { "-e", "--event", "-F", "--freq", "-c", "--count", "-o", "--output", "-p", "--pid" }

local positive = run.positive

function M.configure(cmd)
  cmd:option("-e --event", "Event to sample (default cpu-clock); repeatable, or a list a,b.")
     :argname("<event>"):count("*")
  cmd:mutex(
    cmd:option("-F --freq", "Sample at this frequency (Hz; default 4000)."):argname("<hz>")
       :convert(positive("--freq")),
    cmd:option("-c --count", "Sample once every <n> events (the sample period)."):argname("<n>")
       :convert(positive("--count"))
  )
  cmd:flag("-g", "Record call chains."):target("callgraph")
  cmd:option("-o --output", "The perf.data file to write.", "perf.data"):argname("<file>")
  cmd:option("-p --pid", "Sample an existing process; give the duration as: -- sleep SECONDS.")
     :argname("<pid>"):convert(positive("--pid"))
  cmd:argument("command", "The command to sample (after --), or a Lua script NAME.lua run in this process.")
     :args("*"):target("command_args")
end

local function fail(fmt, ...)
  io.stderr:write("perfev record: " .. fmt:format(...) .. "\n")
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
                 callchain = args.callgraph or nil }
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
    local rest = {}
    for i = 2, #words do rest[#rest + 1] = words[i] end
    local fn, msg = run.script_fn(words[1], rest, "perfev record")
    if not fn then fail("%s", msg) return 127 end
    opts.fn = function() status = fn() end
  else
    local path, msg, st = run.find(words[1])
    if not path then fail("%s", msg) return st end
    opts.command = "exec " .. run.join(words)
  end
  local r, msg = perfev.record(opts)
  if not r then fail("%s", msg) return 1 end
  if r.stdout then io.stdout:write(r.stdout) end
  if r.exit then
    local how, code = r.exit.how, r.exit.code
    if how == "signal" then status = 128 + code elseif type(code) == "number" then status = code end
  end
  io.stderr:write(("[ perfev record: Captured and wrote %.3f MB %s (%.0f samples) ]\n")
    :format((r.bytes or 0) / 1048576, r.output or "", r.samples or 0))
  if (r.lost or 0) > 0 then
    io.stderr:write(("[ perfev record: %.0f samples lost ]\n"):format(r.lost))
  end
  if r.interrupted then return interrupt.STATUS end
  return status
end

return M
