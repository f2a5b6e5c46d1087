-- Small filesystem helpers for the name modules (sysfs, tracefs): read a
-- file, list a directory. Directory listing uses LuaFileSystem when it is
-- installed, else `ls` through io.popen.
local compat = require "perfev.compat"
local M = {}

local has_lfs, lfs = pcall(require, "lfs")

-- A path or a list that is not a string: refused at the caller's line,
-- naming the function (perfev.options, loaded only then: it needs the core)
local function str(v, fname, name)
  if type(v) ~= "string" then require("perfev.options").arg(v, "string", "perfev.fs." .. fname, name) end
end

-- read(path) -> contents without the trailing newline | nil, message, errno
function M.read(path)
  str(path, "read", "the path")
  local f, msg, errno = io.open(path, "r")
  if not f then return nil, msg, errno end
  local s, rmsg, rerrno = f:read("a")
  f:close()
  if not s then return nil, rmsg, rerrno end
  return (s:gsub("%s+$", ""))
end

local function quote(path)
  return "'" .. path:gsub("'", "'\\''") .. "'"
end

-- dir(path) -> sorted list of entry names (no "." or "..") | nil, message
function M.dir(path)
  str(path, "dir", "the path")
  local list = {}
  if has_lfs then
    local ok, iter, state = pcall(lfs.dir, path)
    if not ok then return nil, tostring(iter) end
    for name in iter, state do
      if name ~= "." and name ~= ".." then list[#list + 1] = name end
    end
  else
    if not M.isdir(path) then return nil, path .. ": not a directory" end
    local p = io.popen("ls -1A " .. quote(path) .. " 2>/dev/null", "r")
    if not p then return nil, "cannot run ls" end
    for name in p:lines() do list[#list + 1] = name end
    p:close()
  end
  table.sort(list)
  return list
end

-- isdir(path) -> boolean
function M.isdir(path)
  str(path, "isdir", "the path")
  if has_lfs then return lfs.attributes(path, "mode") == "directory" end
  local f = io.open(path .. "/.", "r")
  if f then f:close() return true end
  return false
end

-- own_pid() -> this process's pid. Read from /proc/self/stat by this
-- process itself (a child started to ask, e.g. through io.popen, would see
-- its own).
function M.own_pid()
  return compat.tointeger(tonumber(assert(M.read("/proc/self/stat")):match("^(%d+)")))
end

-- ranges("0-3,5,7-8") -> { {0, 3}, {5, 5}, {7, 8} } | nil, message: the
-- kernel's list format (cpulist files, PMU format/ bit ranges), each
-- range ascending; commas or whitespace separate the items.
function M.ranges(s)
  str(s, "ranges", "the list")
  local out = {}
  for item in s:gmatch("[^,%s]+") do
    local lo, hi = item:match("^(%d+)%-(%d+)$")
    if not lo then
      lo = item:match("^(%d+)$")
      hi = lo
    end
    if not lo or tonumber(lo) > tonumber(hi) then
      return nil, ("bad item '%s' in '%s'"):format(item, s)
    end
    out[#out + 1] = { tonumber(lo), tonumber(hi) }
  end
  return out
end

-- cpulist("0-3,5") -> { 0, 1, 2, 3, 5 } | nil, message
function M.cpulist(s)
  str(s, "cpulist", "the list")
  local ranges, err = M.ranges(s)
  if not ranges then return nil, err end
  local cpus = {}
  for _, r in ipairs(ranges) do
    for c = r[1], r[2] do cpus[#cpus + 1] = c end
  end
  return cpus
end

-- exists(path) -> boolean (file or directory)
function M.exists(path)
  str(path, "exists", "the path")
  if has_lfs then return lfs.attributes(path, "mode") ~= nil end
  local f = io.open(path, "r")
  if f then f:close() return true end
  return false
end

return M
