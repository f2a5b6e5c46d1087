-- GNU build ids (the NT_GNU_BUILD_ID note) of the files a perf.data file
-- maps, for its build_id feature: perf report checks a file on disk against
-- the id recorded, and finds the right one in ~/.debug when it changed.
--
--   local buildid = require "perfev.perfdata.buildid"
--   local id = buildid.of_file("/usr/bin/lua5.4")     -- raw bytes | nil, why
--   local kid = buildid.of_kernel()                   -- /sys/kernel/notes
local elf = require "perfev.elf"

local M = {}

local SHT_NOTE = 7
local NT_GNU_BUILD_ID = 3

-- The build id among the notes in s (byte order e), or nil.
function M.parse_notes(s, e)
  local pos = 1
  while pos + 12 <= #s + 1 do
    local namesz, descsz, ntype = string.unpack(e .. "I4I4I4", s, pos)
    local name_at = pos + 12
    local desc_at = name_at + ((namesz + 3) & ~3)
    local next_at = desc_at + ((descsz + 3) & ~3)
    if next_at > #s + 1 then return nil end
    if ntype == NT_GNU_BUILD_ID and s:sub(name_at, name_at + namesz - 1) == "GNU\0" then
      return s:sub(desc_at, desc_at + descsz - 1)
    end
    pos = next_at
  end
  return nil
end

-- The build id of an ELF file: raw bytes, or nil and why not.
function M.of_file(path)
  local e, msg = elf.open(path)
  if not e then return nil, msg end
  local f = io.open(path, "rb")
  if not f then return nil, path .. ": cannot be opened" end
  for _, sec in ipairs(e.sections) do
    if sec.type == SHT_NOTE and sec.size > 0 and sec.size < 65536 and f:seek("set", sec.offset) then
      local id = M.parse_notes(f:read(sec.size) or "", e.order)
      if id then
        f:close()
        return id
      end
    end
  end
  f:close()
  return nil, path .. ": no GNU build id note"
end

-- The running kernel's build id, from /sys/kernel/notes.
function M.of_kernel()
  local f = io.open("/sys/kernel/notes", "rb")
  if not f then return nil, "/sys/kernel/notes cannot be read" end
  local s = f:read("a") or ""
  f:close()
  local id = M.parse_notes(s, "=")
  if not id then return nil, "/sys/kernel/notes holds no GNU build id" end
  return id
end

return M
