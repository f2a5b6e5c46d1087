-- Shell and file helpers in plain Lua (no C helper module), shared by the
-- specs (through spec.support.util and spec.support.perfdata) and by the
-- benchmarks, which run without the spec helpers on their path.
--   local shell = require "spec.support.shell"
local M = {}

-- Output of a shell command, and whether it succeeded.
function M.sh(cmd)
  local p = assert(io.popen(cmd, "r"))
  local out = p:read("a")
  local okay = p:close()
  return out, okay == true
end

-- Whether a command is on PATH.
function M.have(cmd)
  return select(2, M.sh("command -v '" .. cmd .. "' >/dev/null 2>&1"))
end

function M.trim(s) return (s:gsub("%s+$", "")) end

-- s quoted for sh.
function M.quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

function M.read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- The size of a file in bytes, or nil when it cannot be opened.
function M.size(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local n = f:seek("end")
  f:close()
  return n
end

function M.exists(path)
  local f = io.open(path, "r")
  if f then f:close() end
  return f ~= nil
end

-- The lines of a file, as a list.
function M.lines(path)
  local t = {}
  for line in io.lines(path) do t[#t + 1] = line end
  return t
end

-- A new directory under /tmp, which rmdir removes (and nothing else).
function M.tmpdir()
  local d = M.trim(M.sh("mktemp -d /tmp/perfev-test.XXXXXX"))
  assert(d ~= "", "mktemp failed")
  return d
end

function M.rmdir(d)
  if d and d:match("^/tmp/perfev%-test%.") then M.sh("rm -rf " .. M.quote(d)) end
end

return M
