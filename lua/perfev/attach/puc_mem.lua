-- perfev.attach.puc_mem: little-endian fields out of a byte string read
-- from the target, the same on Lua 5.3, 5.4 and LuaJIT (no string.unpack
-- needed). Offsets are 0-based, as in the struct layouts. A pointer is a
-- plain number: user-space addresses are below 2^47, so a word whose top
-- 17 bits are not all zero is no pointer and reads as nil.
local M = {}

local byte = string.byte

function M.u8(s, o) return byte(s, o + 1) end

function M.u16(s, o)
  local a, b = byte(s, o + 1, o + 2)
  return a + b * 256
end

function M.u32(s, o)
  local a, b, c, d = byte(s, o + 1, o + 4)
  return a + b * 256 + c * 65536 + d * 16777216
end

function M.i32(s, o)
  local v = M.u32(s, o)
  if v >= 2147483648 then v = v - 4294967296 end
  return v
end

-- the 64-bit word at o as a user-space pointer (0 for NULL), or nil
function M.ptr(s, o)
  local a, b, c, d, e, f, g, h = byte(s, o + 1, o + 8)
  if not h or g ~= 0 or h ~= 0 or f >= 128 then return nil end
  return a + b * 256 + c * 65536 + d * 16777216 + (e + f * 256) * 4294967296
end

-- On Lua 5.3+, string.unpack decodes a field in one call (the readers of
-- a sample decode many).
local unpack = rawget(string, "unpack")
if unpack then
  function M.u16(s, o) return (unpack("<I2", s, o + 1)) end
  function M.u32(s, o) return (unpack("<I4", s, o + 1)) end
  function M.i32(s, o) return (unpack("<i4", s, o + 1)) end
  function M.ptr(s, o)
    local v = unpack("<i8", s, o + 1)
    if v < 0 or v >= 0x800000000000 then return nil end
    return v
  end
end

-- the signed byte at o (5.4's line deltas)
function M.i8(s, o)
  local v = byte(s, o + 1)
  if v >= 128 then v = v - 256 end
  return v
end

return M
