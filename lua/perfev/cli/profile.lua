-- `perfev profile [-e EVENT] [-F FREQ | -c PERIOD] [--native] [-o FILE] script.lua [args...]`:
-- runs a Lua script in this process under perfev.profile and writes the
-- profile in the format the output's name asks for (.svg, .folded,
-- .speedscope.json, .pb.gz, .data, .txt; none or "-": the text report on
-- standard output). The profile is written also when the script raises an
-- error or calls os.exit. A subcommand module of bin/perfev's dispatcher.
-- `perfev profile -p PID [-e EVENT] [-F HZ | -c N] [-d SECONDS] -o FILE`:
-- the Lua stacks of a running process instead (perfev.attach,
-- lua/perfev/attach/init.lua), until the duration, its exit or Ctrl-C.
local M = {}

M.summary = "Profile a Lua script by Lua function on a perf event (flame graphs, pprof, perf.data)"

-- the script and its own options start at the first word that is not one
-- of perfev's (perfev.cli: split_command): `perfev profile app.lua -v`
M.value_options = { "-e", "--event", "-F", "--freq", "-c", "--count", "--max-overhead", "-o", "--output",
                    "-p", "--pid", "-d", "--duration", "--serve" }

local output = require "perfev.profile.output"
local interrupt = require "perfev.interrupt"
local run = require "perfev.cli.run"

function M.configure(cmd)
  cmd:option("-e --event", "The event to sample on (perf's names: cpu-clock, task-clock, "
                           .. "page-faults, context-switches, a tracepoint ...).", "cpu-clock")
  cmd:mutex(
    cmd:option("-F --freq", "Samples per second. Default: 999 for cpu-clock, task-clock and "
                            .. "hardware events."):convert(tonumber),
    cmd:option("-c --count", "Sample every COUNT events (the sample period). Default: 1 for "
                             .. "page faults, context switches, migrations, tracepoints and "
                             .. "breakpoints."):convert(tonumber))
  cmd:option("--max-overhead", "The percent of the CPU time the profiler's own work may take "
                               .. "before it lowers the rate (as the kernel bounds perf record's: "
                               .. "perf_cpu_time_max_percent); 100: no bound.", "25"):convert(tonumber)
  cmd:flag("--native", "Join the C (native) stacks under the Lua frames.")
  cmd:option("-o --output", "Where to write the profile; the format from the name: "
                            .. ".svg, .folded, .speedscope.json, .pb.gz, .data, .txt ('-': text).", "-")
  cmd:option("-p --pid", "Attach to this running process instead of running a script: its "
                         .. "Lua stacks, read while each sample stops it (doc/attach.md). "
                         .. "Default rate: 99 Hz."):convert(tonumber)
  cmd:option("-d --duration", "With -p: stop after this many seconds (default: until the "
                              .. "process exits or Ctrl-C)."):convert(tonumber)
  cmd:option("--serve", "With -p: serve GET /debug/pprof/profile?seconds=N[&event=E][&freq=F|&period=P] "
                        .. "on HOST:PORT (Go's net/http/pprof convention: Parca, Grafana Alloy, go tool "
                        .. "pprof): each scrape attaches for its N seconds and answers gzipped "
                        .. "profile.proto; until the process exits or Ctrl-C.")
  cmd:argument("script", "The Lua script to run."):args("?")
  cmd:argument("args", "Its arguments."):args("*")
end

local function err(msg)
  io.stderr:write("perfev profile: ", msg, "\n")
  return 1
end

-- perfev profile -p PID --serve ADDR: a pprof endpoint that attaches for
-- each scrape (perfev.cli.serve)
local function serve(args)
  if args.duration then return err("-d is for a profile written to -o; with --serve each scrape asks ?seconds=N") end
  if args.output and args.output ~= "-" then return err("--serve answers scrapes: no -o") end
  local pid = args.pid
  local perfev = require "perfev"
  return require("perfev.cli.serve").serve {
    pid = pid, addr = args.serve,
    log = function(line) io.stderr:write("perfev profile: ", line, "\n") io.stderr:flush() end,
    alive = function()
      local f = io.open(("/proc/%d/stat"):format(pid))
      if not f then return false end
      local st = f:read("*l") or ""
      f:close()
      return not st:match("^%d+ %b() [ZX]")        -- a zombie has exited
    end,
    profile = function(w)
      local p, msg = perfev.attach { pid = pid, event = w.event, freq = w.freq, period = w.period,
                                     duration = w.seconds, native = args.native }
      if not p then return nil, (tostring(msg):gsub("^perfev%.attach: ", "")), 500 end
      return p:profile()
    end,
  }
end

-- perfev profile -p PID: the profile of a running process (perfev.attach)
local function attach(args, path, fmt)
  if args.script then
    return err(("-p attaches to a running process: give -p or a script, not both (got %s)"):format(args.script))
  end
  if args.duration and args.duration <= 0 then
    return err("-d must be a number of seconds above 0")
  end
  local ok, p, msg = pcall(require("perfev").attach, { pid = args.pid, event = args.event, freq = args.freq,
                                                       period = args.count,
                                                       duration_ms = args.duration and args.duration * 1000,
                                                       native = args.native })
  if not ok then
    if interrupt.is(p) then return interrupt.STATUS end   -- Ctrl-C before the first sample
    local bad_event = run.event_error(p)
    if bad_event then err(bad_event) return 129 end
    return err((require("perfev.options").strip_where(p):gsub("^perfev%.attach: ", "")))
  end
  if not p then return err((msg:gsub("^perfev%.attach: ", ""))) end
  local wok, wmsg = output.write(p:profile(), path, fmt)
  if not wok then return err(wmsg) end
  local a, pr = p.attach, p:profile()
  io.stderr:write(("perfev profile: process %d (%s, %s): %.0f samples, %.0f dropped, %.0f outside Lua, "
                   .. "%d threads%s%s\n"):format(a.pid, tostring(a.exe), tostring(a.runtime), a.samples,
                                                a.dropped, a.outside, a.threads,
                                                a.ended == "exited" and "; the process exited" or "",
                                                path ~= "-" and (" (%s) written to %s"):format(pr.event, path) or ""))
  -- why samples were dropped: the most frequent reason
  local top, n = nil, 0
  for why, k in pairs(a.reasons or {}) do
    if k > n then top, n = why, k end
  end
  if top then io.stderr:write(("perfev profile: %d of the dropped samples: %s\n"):format(n, top)) end
  return p.interrupted and interrupt.STATUS or 0
end

function M.run(args)
  local path = args.output or "-"
  local fmt, msg = output.format_of(path)
  if not fmt then return err(msg) end
  if args.serve and not args.pid then
    return err("--serve needs -p PID: a script's own profile is not served while it runs (doc/cli.md)")
  end
  if args.pid and args.serve then
    if args.script then return err("-p attaches to a running process: give -p or a script, not both") end
    return serve(args)
  end
  if args.pid then return attach(args, path, fmt) end
  if args.duration then return err("-d is for -p PID (a script runs until its end)") end
  if not args.script then return err("give the script to run, or -p PID to attach to a running process") end
  -- the script: its arg, an os.exit that ends it (not perfev, so that the
  -- profile is written first), its error printed as lua prints it
  local p
  local script
  script, msg = run.script_fn(args.script, args.args or {}, "perfev profile",
                              function(...) return run.profiled(p)(...) end)
  if not script then err(msg) return 127 end   -- as perfev stat and record
  local perfev = require "perfev"
  local ok, errno
  ok, p, msg, errno = pcall(perfev.profile, { event = args.event, freq = args.freq,
                                              period = args.count, native = args.native,
                                              max_overhead = args.max_overhead })
  if not ok then
    -- an unknown event in the library's words, with perf's usage status as
    -- stat and record give it
    local bad_event = run.event_error(p)
    if bad_event then
      err(bad_event)
      return 129
    end
    return err((require("perfev.options").strip_where(p):gsub("^perfev%.profile: ", "")))
  end
  if not p then return err(msg .. (errno and "" or "")) end
  local sok, code = pcall(script)
  if not sok then
    if not interrupt.is(code) then p:close() error(code, 0) end
    code = interrupt.STATUS   -- Ctrl-C: the profile is written, quietly
  end
  local wok, wmsg = output.write(p:profile(), path, fmt)
  p:close()
  if not wok then return err(wmsg) end
  if path ~= "-" then
    local pr = p:profile()
    io.stderr:write(("perfev profile: %.0f samples (%s) written to %s\n"):format(pr.samples, pr.event, path))
  end
  return code
end

return M
