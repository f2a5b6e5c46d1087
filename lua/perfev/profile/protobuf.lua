-- The few protocol-buffer encodings profile.proto needs: varints, packed
-- varints, length-delimited strings and messages. Arithmetic only (no
-- bitwise operators): the same code on Lua 5.3, 5.4 and LuaJIT; values are
-- non-negative and below 2^53.
local M = {}

local char, floor = string.char, math.floor

-- varint(v) -> bytes
function M.varint(v)
  if v < 0 or v ~= floor(v) then error("protobuf: a varint here is a non-negative integer, got " .. v, 2) end
  local t = {}
  repeat
    local b = v % 128
    v = floor(v / 128)
    t[#t + 1] = char(v > 0 and b + 128 or b)
  until v == 0
  return table.concat(t)
end

local function key(field, wire)
  return M.varint(field * 8 + wire)
end

-- A message under construction: a list of byte strings.
local Msg = {}
Msg.__index = Msg

function M.message() return setmetatable({}, Msg) end

-- m:uint(field, v): a varint field (skipped when v is 0, proto3's default)
function Msg:uint(field, v)
  if v and v ~= 0 then
    self[#self + 1] = key(field, 0)
    self[#self + 1] = M.varint(v)
  end
  return self
end

-- m:bytes(field, s): a length-delimited field (a string, or a message's bytes)
function Msg:bytes(field, s)
  if type(s) == "table" then s = s:encode() end
  self[#self + 1] = key(field, 2)
  self[#self + 1] = M.varint(#s)
  self[#self + 1] = s
  return self
end

-- m:packed(field, list): a packed repeated varint field
function Msg:packed(field, list)
  if #list == 0 then return self end
  local t = {}
  for i, v in ipairs(list) do t[i] = M.varint(v) end
  return self:bytes(field, table.concat(t))
end

function Msg:encode() return table.concat(self) end

return M
