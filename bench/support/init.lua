-- What the benchmarks share (in a directory, so that `make bench`, which
-- runs every bench/*.lua, does not run it). The shell and
-- perf-tool helpers are the specs' own (spec/support/shell.lua and
-- spec/support/perfdata.lua, plain Lua), re-exported here.
--   local B = require "bench.support"
local shell = require "spec.support.shell"
local P = require "spec.support.perfdata"
local compat = require "perfev.compat"

local M = {}

M.sh, M.have, M.quote, M.read_file = shell.sh, shell.have, shell.quote, shell.read_file
M.have_perf, M.tmpdir, M.rmdir = P.have_perf, P.tmpdir, P.rmdir

-- The median of a list of numbers (the list is left as it was).
function M.median(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  return s[compat.idiv(#s + 1, 2)]
end

return M
