-- GNU build ids (the NT_GNU_BUILD_ID note) of the files a perf.data file
-- maps, for its build_id feature: perf report checks a file on disk against
-- the id recorded, and finds the right one in ~/.debug when it changed.
--
--   local buildid = require "perfev.perfdata.buildid"
--   local id = buildid.of_file("/usr/bin/lua5.4")     -- raw bytes | nil, why
--   local kid = buildid.of_kernel()                   -- /sys/kernel/notes
local elf = require "perfev.elf"
local compat = require "perfev.compat"

local M = {}

-- The build id of an ELF file: raw bytes, or nil and why not.
M.of_file = elf.build_id

-- true when this machine is big-endian (the kernel's notes are in its order)
local function native_be()
  if compat.fast.pack then return compat.fast.pack("=I2", 1):byte(1) == 0 end
  local ok, ffi = pcall(require, "ffi")
  return ok and ffi.abi("be") or false
end

-- The running kernel's build id, from /sys/kernel/notes.
function M.of_kernel()
  local f = io.open("/sys/kernel/notes", "rb")
  if not f then return nil, "/sys/kernel/notes cannot be read" end
  local s = f:read("a") or ""
  f:close()
  local id = elf.parse_notes(s, native_be())
  if not id then return nil, "/sys/kernel/notes holds no GNU build id" end
  return id
end

return M
