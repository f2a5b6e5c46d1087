-- Small filesystem helpers for the name modules (sysfs, tracefs): read a
-- file, list a directory. Directory listing uses LuaFileSystem when it is
-- installed, else `ls` through io.popen.
local M = {}

local has_lfs, lfs = pcall(require, "lfs")

-- read(path) -> contents without the trailing newline | nil, message, errno
function M.read(path)
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
  if has_lfs then return lfs.attributes(path, "mode") == "directory" end
  local f = io.open(path .. "/.", "r")
  if f then f:close() return true end
  return false
end

-- own_pid() -> this process's pid. Read from /proc/self/stat by this
-- process itself (a child started to ask, e.g. through io.popen, would see
-- its own).
function M.own_pid()
  return math.tointeger(tonumber(assert(M.read("/proc/self/stat")):match("^(%d+)")))
end

-- exists(path) -> boolean (file or directory)
function M.exists(path)
  if has_lfs then return lfs.attributes(path, "mode") ~= nil end
  local f = io.open(path, "r")
  if f then f:close() return true end
  return false
end

return M
