-- `perfev report`: perf report --stdio for a perf.data file (perf's or
-- perfev's). The command's dispatcher (perfev.cli) calls M.configure on
-- its argparse command, then M.run with the parsed arguments.
--
--   perfev report [-i FILE] [-s KEYS] [-F FIELDS] [-n] [--show-total-period] [--stdio]
--                 [--children | --no-children] [-g CALLCHAIN] [-G] [--percent-limit P] [--kallsyms FILE]
--                 [--max-stack N]
local M = {}

M.summary = "Read a perf.data file and show the profile, as perf report --stdio"

function M.configure(cmd)
  cmd:option("-i --input", "Input file name (as perf report).", "perf.data")
  cmd:option("-s --sort", "Sort by keys, comma-separated: comm, dso, symbol, pid, cpu "
             .. "(perf's names, prefixes allowed). Default: comm,dso,symbol.")
  cmd:option("-F --fields", "Output fields, comma-separated: overhead, overhead_children, sample, "
             .. "period and sort keys (perf's -F; without --sort they are the sort keys too).")
  cmd:flag("-n --show-nr-samples", "Show a column with the number of samples.")
  cmd:flag("--show-total-period", "Show a column with the sum of periods.")
  cmd:flag("--stdio", "Use the stdio interface (the only one; accepted as perf's).")
  cmd:option("-g --call-graph", "Call graphs drawn under each row, perf's -g: "
             .. "print_type,threshold[,print_limit],order,sort_key,value (graph,0.5,caller,function,percent "
             .. "with children, callee without); print_type: graph, fractal, flat, folded, none.")
  cmd:flag("-G --inverted", "Caller-based call graphs (perf's --inverted: -g caller).")
  cmd:flag("--children", "Accumulate callchains of children (default when the samples have callchains).")
  cmd:flag("--no-children", "Do not accumulate callchains: one overhead column.")
  cmd:option("--percent-limit", "Do not show entries under that percent.")
     :convert(function(s)
       local n = tonumber(s)
       if not n then return nil, ("--percent-limit: '%s' is not a number"):format(s) end
       return n
     end)
  cmd:option("--kallsyms", "kallsyms pathname (default /proc/kallsyms).")
  cmd:option("--max-stack", "Maximum callchain depth considered (default 127).")
     :convert(function(s)
       local n = tonumber(s)
       if not n or n < 0 or n ~= math.floor(n) then
         return nil, ("--max-stack: '%s' is not a whole number"):format(s)
       end
       return n
     end)
  return cmd
end

local function fail(msg)
  -- a message the core raised while the library read (a record cut by
  -- the end of the file) is located inside the library: not the user's
  msg = require("perfev.options").strip(tostring(msg))
  msg = msg:gsub("^perfev%.perfdata: ", ""):gsub("^perfev%.report: ", ""):gsub("\n.*", "")
  local path, rest = msg:match("^([^:]+): (.*)$")
  if path and rest:sub(1, #path + 2) == path .. ": " then msg = rest end   -- "x: x: No such file"
  io.stderr:write("perfev report: ", msg, "\n")
  return 1
end

-- LuaJIT: the command's machine code in areas of 256 KB (LuaJIT's
-- default: 32 KB). A report compiles a few hundred traces, and each is
-- written into its area between two mprotect calls, which took ~100 us
-- each on the 2-core development VM in 32 KB areas and ~12 us in 256 KB
-- ones (strace -c): on a -g file of 5k samples, 0.4 s of system time
-- against 0.13 s, on one of 739, 0.28 s against 0.08 s. Only the
-- report command's process (perfev.report in another program is left
-- to that program's settings; stat, record and profile run the user's
-- script, whose JIT is theirs).
local function jit_areas()
  local jit = rawget(_G, "jit")
  if jit and jit.opt and jit.opt.start then pcall(jit.opt.start, "sizemcode=256") end
end

-- M.run(args) -> exit code
function M.run(args)
  jit_areas()
  local report = require "perfev.report"
  if args.children and args.no_children then
    return fail("--children and --no-children exclude each other")
  end
  local children
  if args.children then children = true elseif args.no_children then children = false end
  local input = args.input or "perf.data"
  local ok, rep, msg = pcall(report.open, input, {
    sort = args.sort, fields = args.fields, show_nr_samples = args.show_nr_samples or nil,
    show_total_period = args.show_total_period or nil, children = children, percent_limit = args.percent_limit,
    kallsyms = args.kallsyms, max_stack = args.max_stack,
    callchain = args.inverted and ((args.call_graph and args.call_graph .. "," or "") .. "caller") or args.call_graph,
  })
  if not ok then return fail(rep) end
  if not rep then return fail(msg) end
  local wok, werr = io.stdout:write(rep:format())
  if not wok then return fail(werr) end
  return 0
end

return M
