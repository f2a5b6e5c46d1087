-- perfev list [FILTER]: the events of this machine, like perf list.
local M = {}

M.summary = "List the events this machine can count, like perf list"

function M.configure(cmd)
  cmd:argument("filter", "A kind (hw, sw, cache, tool, pmu, tracepoint), a glob (sched:*) or a substring.")
     :args("?")
end

function M.run(args)
  local perfev = require "perfev"
  local list = perfev.list(args.filter)
  if #list == 0 and args.filter then
    -- the library's words ("no event matches 'x' (did you mean 'y'?)")
    io.stderr:write((tostring(list):gsub("^perfev%.list:", "perfev list:")), "\n")
    return 1
  end
  io.stdout:write(list:format())
  return 0
end

return M
