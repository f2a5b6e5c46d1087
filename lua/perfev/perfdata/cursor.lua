-- A bounds-checked cursor over a byte string in a file's byte order, for
-- the parts of perf.data read in Lua (header, attrs, features). A read past
-- the end raises { perfdata = message }, which the caller turns into its
-- own error naming the section.
local compat = require "perfev.compat"
local unpack = compat.fast.unpack

local Cursor = {}
Cursor.__index = Cursor

local M = {}

-- s: the bytes; endian: "<" or ">"; what: the section, for messages.
function M.new(s, endian, what)
  return setmetatable({ s = s, pos = 1, e = endian, what = what }, Cursor)
end

local function fail(c, n, field)
  error({ perfdata = ("%s: %s needs %d bytes at offset %d, %d left")
                     :format(c.what, field or "data", n, c.pos - 1, #c.s - c.pos + 1) }, 0)
end

function Cursor:fail(msg)
  error({ perfdata = self.what .. ": " .. msg }, 0)
end

function Cursor:left() return #self.s - self.pos + 1 end

function Cursor:need(n, field)
  if n < 0 or n > self:left() then fail(self, n, field) end
end

function Cursor:u32(field)
  self:need(4, field)
  local v = unpack(self.e .. "I4", self.s, self.pos)
  self.pos = self.pos + 4
  return v
end

function Cursor:u64(field)
  self:need(8, field)
  local v = unpack(self.e .. "i8", self.s, self.pos)
  self.pos = self.pos + 8
  return v
end

function Cursor:bytes(n, field)
  self:need(n, field)
  local v = self.s:sub(self.pos, self.pos + n - 1)
  self.pos = self.pos + n
  return v
end

-- struct perf_header_string: u32 len, then len bytes, NUL-terminated
-- (and padded); the string ends at its first NUL.
function Cursor:str(field)
  local n = self:u32(field)
  local s = self:bytes(n, field)
  return (s:gsub("%z.*$", ""))
end

-- struct perf_header_string_list: u32 nr, then nr strings.
function Cursor:strlist(field)
  local n = self:u32(field)
  if n > compat.idiv(self:left(), 4) then fail(self, n * 4, field) end
  local t = {}
  for i = 1, n do t[i] = self:str(field) end
  return t
end

-- A count of items of `each` bytes that the rest must hold.
function Cursor:count(n, each, field)
  if n < 0 or n > compat.idiv(self:left(), each) then fail(self, n * each, field) end
  return n
end

return M
