-- perfev stat: perf stat's command line over perfev.stat.
--   perfev stat [-e EVENTS] [-r N] [-x SEP | -j] [-I MS] [-p PID | -a | -C CPUS] [-A | --per-*] [-o FILE] -- CMD...
--   perfev stat [options] script.lua [args]     (the script runs in perfev's process)
local stat = require "perfev.stat"
local run = require "perfev.cli.run"

local M = {}

M.summary = "Count events over a command, a Lua script or a process, like perf stat"
M.value_options = { "-e", "--event", "-r", "--repeat", "-x", "--field-separator", "-I",
                    "--interval-print", "-p", "--pid", "-o", "--output", "-C", "--cpu", "-M", "--metrics" }

local positive = run.positive

function M.configure(cmd)
  cmd:option("-e --event", "Event selector, a list in perf's syntax (task-clock,page-faults, "
             .. "{cycles,instructions}:u); repeatable. Default: perf stat's default set.")
     :argname("<events>"):count("*")
  cmd:option("-r --repeat", "Repeat the command N times and print the mean and the relative standard deviation.")
     :argname("<n>"):convert(positive("--repeat"))
  cmd:mutex(
    cmd:option("-x --field-separator", "Print CSV with this separator, in perf stat's field order.")
       :argname("<sep>"),
    cmd:flag("-j --json-output", "Print JSON lines with perf stat's keys.")
  )
  cmd:option("-I --interval-print", "Print the counts every <ms> milliseconds.")
     :argname("<ms>"):convert(positive("--interval-print"))
  cmd:option("-o --output", "Write the counts to this file instead of stderr."):argname("<file>")
  cmd:mutex(
    cmd:option("-p --pid", "Count an existing process (every thread, and the children it starts) "
               .. "until it exits, Ctrl-C, or the command given after -- ends.")
       :argname("<pid>"):convert(positive("--pid")),
    cmd:flag("-a --all-cpus", "Count on every CPU, system-wide (as root), while the command after -- runs, "
             .. "or until Ctrl-C."):target("all_cpus")
  )
  cmd:option("-C --cpu", "Count on these CPUs only (system-wide on them, as root): a list like 0-3,5.")
     :argname("<cpus>")
  cmd:mutex(
    cmd:flag("-A --no-aggr", "Do not aggregate counts across CPUs: one line per CPU (with -a or -C)."),
    cmd:flag("--per-socket", "Aggregate counts per processor socket (with -a or -C)."),
    cmd:flag("--per-die", "Aggregate counts per processor die (with -a or -C)."),
    cmd:flag("--per-core", "Aggregate counts per physical processor core (with -a or -C)."),
    cmd:flag("--per-node", "Aggregate counts per NUMA node (with -a or -C)."),
    cmd:flag("--per-thread", "Aggregate counts per thread (with -p).")
  )
  cmd:option("-M --metrics", "Metric groups, perf's -M: perfev has no metric tables (perf's pmu-events), "
             .. "like perf on this machine (perf list metric: none): counted as if not given.")
     :argname("<metrics>")
  cmd:flag("-i --no-inherit", "Count the command (or the process) alone, not the processes it starts.")
     :target("no_inherit")
  cmd:argument("command", "The command to count (after --), or a Lua script NAME.lua run in this process.")
     :args("*"):target("command_args")
end

local SIGNALS = { [1] = "Hangup", [2] = "Interrupt", [3] = "Quit", [4] = "Illegal instruction",
                  [6] = "Aborted", [7] = "Bus error", [8] = "Floating point exception", [9] = "Killed",
                  [11] = "Segmentation fault", [13] = "Broken pipe", [14] = "Alarm clock", [15] = "Terminated" }

local function fail(fmt, ...)
  io.stderr:write("perfev stat: " .. fmt:format(...) .. "\n")
end

function M.run(args)
  local words = args.command_args or {}
  if #words == 0 and not args.pid and not args.all_cpus and not args.cpu then
    fail("give a command after --, a Lua script, or -p PID (see 'perfev stat --help')")
    return 129
  end
  local out = io.stderr
  if args.output then
    local f, msg = io.open(args.output, "w")
    if not f then fail("cannot write the output: %s", msg) return 1 end
    out = f
  end
  local fmt = { format = args.json_output and "json" or (args.field_separator and "csv" or "text"),
                sep = args.field_separator }
  local opts = { events = #args.event > 0 and table.concat(args.event, ",") or nil,
                 ["repeat"] = args["repeat"], interval_ms = args.interval_print, pid = args.pid,
                 inherit = not args.no_inherit, system_wide = args.all_cpus or nil, cpus = args.cpu,
                 metrics = args.metrics }
  for _, m in ipairs { { "no_aggr", "none" }, { "per_socket", "socket" }, { "per_die", "die" },
                       { "per_core", "core" }, { "per_node", "node" }, { "per_thread", "thread" } } do
    if args[m[1]] then opts.aggr = m[2] end
  end
  if opts.interval_ms then
    opts.on_interval = function(iv, res)
      out:write(stat.interval(res, iv, fmt))
      out:flush()
    end
  end
  local script_status
  if #words > 0 and run.is_script(words) and not args.pid and not args.all_cpus and not args.cpu then
    local args2 = {}
    for i = 2, #words do args2[#args2 + 1] = words[i] end
    local fn, msg = run.script_fn(words[1], args2, "perfev stat")
    if not fn then fail("%s", msg) return 127 end
    opts.fn = function() script_status = fn() end
    opts.label = table.concat(words, " ")
    opts.interval_ms, opts.on_interval = nil, nil
    if args.interval_print then fail("-I is for a command or -p PID, not a Lua script") return 129 end
  elseif #words > 0 then
    opts.command = words
  end
  -- perf's usage errors (status 129), in its words
  if opts.aggr and opts.aggr ~= "thread" and not (args.all_cpus or args.cpu) then
    fail("both cgroup and no-aggregation modes only available in system-wide mode")
    return 129
  end
  if opts.aggr == "thread" and not args.pid then
    fail("--per-thread is for -p PID (perfev counts the threads of a process)")
    return 129
  end
  if args.cpu and not require("perfev.stat.aggr").cpulist(args.cpu) then
    fail("-C: '%s' is not a CPU list (e.g. 0-3,5)", args.cpu)
    return 129
  end
  local ok, res, msg, _, status = pcall(stat.stat, opts)
  if not ok then
    local m = tostring(res)
    local bad_event = run.event_error(m)
    if bad_event then
      fail("%s", bad_event)
      return 129
    end
    fail("%s", (m:gsub("^perfev%.stat: ", "")))
    return 1
  end
  if not res then
    fail("%s", msg)
    return status or 1
  end
  -- like perf (psignal): say which signal ended the command
  if res.how == "signal" then
    io.stderr:write(("%s: %s\n"):format(words[1], SIGNALS[res.code] or ("signal " .. res.code)))
  end
  if not opts.interval_ms then out:write(stat.format(res, fmt)) end
  if out ~= io.stderr then out:close() end
  -- Ctrl-C ends -p PID normally (as perf stat -p); it interrupts a script
  if res.interrupted and res.target == "function" then return 130 end
  if script_status then return script_status end
  return res.status or 0
end

return M
