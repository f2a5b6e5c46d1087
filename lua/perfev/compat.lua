-- perfev.compat: the one module through which perfev's Lua code runs the
-- same on Lua 5.3, Lua 5.4 and LuaJIT 2.1 (Debian's luajit, OpenResty's
-- luajit2). It refuses PUC Lua 5.1 and 5.2 when it is loaded.
--
-- 64-bit values follow the C core's rule (doc/runtimes.md): on Lua 5.3+
-- they are integers (a u64 above 2^63 reads as negative); on LuaJIT a value
-- whose signed 64-bit value is within +-2^53 is a number (so
-- 0xffffffff81000000 is -2130706432 on every runtime), any other a uint64_t
-- cdata of the same bits, so nothing is ever rounded. Every function here
-- takes either form and returns the same rule's form.
--
--   band bor bxor bnot lshift rshift btest   64-bit bit operations
--                           (band, bor and bxor take two or more values)
--   idiv(a, b)              floor division (a // b)
--   ult(a, b)               unsigned a < b (math.ult)
--   isinteger(v)            an exact integer (math.type(v) == "integer")
--   math_type(v)            math.type: "integer" for an exact integer on LuaJIT
--   tointeger(v)            v as an exact integer, or nil (math.tointeger)
--   maxinteger, mininteger  the int64 limits (int64_t cdata on LuaJIT)
--   hex64(s), dec64(s)      a 64-bit constant from its text, exact everywhere
--                           (LuaJIT would round the literal 0xffffffff81000000);
--                           hex64 takes the digits with or without 0x, as
--                           /proc/PID/maps and /proc/kallsyms print them
--   parse_u64(s)            the value of an unsigned decimal or 0x-hex text
--                           when it fits in 64 bits, else nil (strtoull's range)
--   add, sub, mul           integer arithmetic wrapping modulo 2^64, as Lua
--                           5.3's integers (exact on LuaJIT beyond 2^53)
--   u64(v)                  v as a 64-bit value (uint64_t cdata on LuaJIT)
--   hex(v), udec(v)         exact unsigned hexadecimal / decimal text
--   tostring(v)             exact decimal text (signed, as the value is held)
--   normalize(v)            a 64-bit cdata back to a number when exact
--   key(v)                  a table key with value semantics (cdata keys
--                           are compared by identity on LuaJIT)
--   pack, unpack, packsize  string.pack & co. (integers, floats, strings)
--   table_unpack, table_pack, rawlen
--
-- Each of these refuses a wrong value at its caller's line naming the
-- function ("perfev.compat.band: expects integers, got boolean true and
-- 1"), the standard library's aliases too ("perfev.compat.unpack:
-- argument #2: data string too short").
--
-- compat.fast (internal: perfev's own per-record code, which passes the
-- integers and formats it made; not part of the API): band, bor, bxor (two
-- operands), bnot, lshift, rshift, btest, idiv, ult, add, sub, mul, pack,
-- unpack, packsize without those checks. On Lua 5.3+ they are the
-- operators and string.pack & co. themselves (a wrong value raises Lua's
-- own error); on LuaJIT the same functions as above.
local M = {}

local floor = math.floor

M.luajit = type(rawget(_G, "jit")) == "table"
if not M.luajit and (_VERSION == "Lua 5.1" or _VERSION == "Lua 5.2") then
  error("perfev supports Lua 5.3, Lua 5.4 and LuaJIT 2.1 (Debian's luajit, OpenResty's luajit2); "
        .. "this is " .. _VERSION, 0)
end
M.runtime = M.luajit and rawget(_G, "jit").version or _VERSION

M.table_unpack = table.unpack or rawget(_G, "unpack")
M.table_pack = table.pack or function(...) return { n = select("#", ...), ... } end

local EXACT = 2 ^ 53

-- A caller's wrong value, raised at its line naming the function
-- (perfev.options places it; loaded here only then: it needs this module).
local function refuse(name, fmt, ...)
  require("perfev.options").raisef("perfev.compat.%s: " .. fmt, name, ...)
end
local function kind(v)
  if type(v) == "number" then return tostring(v) end
  if type(v) == "boolean" then return "boolean " .. tostring(v) end
  return type(v)
end

local native_rawlen = rawget(_G, "rawlen")
function M.rawlen(v)
  if type(v) ~= "table" and type(v) ~= "string" then
    refuse("rawlen", "expects a table or a string, got %s", kind(v))
  end
  if native_rawlen then return native_rawlen(v) end
  return #v
end

-- A standard library function's refusal ("bad argument #2 to 'unpack'
-- (data string too short)", from inside a C function: no position) said
-- as perfev says it: "argument #2: data string too short".
local function plain(msg)
  msg = tostring(msg):gsub("^[^:\n]*:%d+: ", ""):gsub("^perfev%.compat[%.%w_]*: ", "")
  local n, why = msg:match("^bad argument #(%d+) to '[^']*' %((.*)%)$")
  if n then return ("argument #%s: %s"):format(n, why) end
  return msg
end

-- checked(name, f) -> f, its refusals raised at the caller's line naming
-- perfev.compat.name (f's own checks are the standard library's: a pcall)
local function checked(name, f)
  local function pass(ok, ...)
    if ok then return ... end
    refuse(name, "%s", plain((...)))
  end
  return function(...) return pass(pcall(f, ...)) end
end

local function is_int(v) return type(v) == "number" and v == floor(v) and v - 1 ~= v end

-- finish(M) -> M, its public functions of the standard library's (or
-- LuaJIT's stand-ins for them) checked; compat.fast keeps the unchecked ones.
local unpack_values = M.table_unpack
local function finish(m)
  m.pack, m.unpack, m.packsize = checked("pack", m.fast.pack), checked("unpack", m.fast.unpack),
                                 checked("packsize", m.fast.packsize)
  m.table_unpack = function(t, i, j)
    if type(t) ~= "table" then refuse("table_unpack", "expects a table, got %s", kind(t)) end
    if (i ~= nil and not is_int(i)) or (j ~= nil and not is_int(j)) then
      refuse("table_unpack", "the positions must be integers, got %s and %s", kind(i), kind(j))
    end
    if (j or #t) - (i or 1) >= 1e6 then refuse("table_unpack", "too many values: %s to %s", kind(i), kind(j)) end
    return unpack_values(t, i, j)
  end
  return m
end

-- f(a, b) extended to f(a, b, c, ...) (associative operations).
local function variadic(f)
  return function(a, b, c, ...)
    if c == nil then return f(a, b) end
    local r = f(f(a, b), c)
    for i = 1, select("#", ...) do r = f(r, (select(i, ...))) end
    return r
  end
end

-- The digits of a hex constant ("0x" optional) / a decimal one, or an
-- error at the caller's caller.
local function hex_digits(s)
  local h = type(s) == "string" and (s:match("^0[xX](%x+)$") or s:match("^(%x+)$"))
  if not h then refuse("hex64", "not a hexadecimal constant: %s", type(s) == "string" and s:sub(1, 40) or kind(s)) end
  return h
end
local function dec_digits(s)
  if type(s) ~= "string" or not s:match("^%d+$") then
    refuse("dec64", "not a decimal constant: %s", type(s) == "string" and s:sub(1, 40) or kind(s))
  end
  return s
end

-- parse_u64(text) -> the value of "123" or "0x7b" when it fits in 64 bits
-- (as strtoull reads it), else nil; nil for any other text.
local U64_MAX_DEC = "18446744073709551615"
function M.parse_u64(text)
  if type(text) ~= "string" then return nil end
  local hex = text:match("^0[xX](%x+)$")
  if hex then
    if #hex:gsub("^0+", "") > 16 then return nil end
    return M.hex64(hex)
  end
  if not text:match("^%d+$") then return nil end
  local d = text:gsub("^0+", "")
  if #d > #U64_MAX_DEC or (#d == #U64_MAX_DEC and d > U64_MAX_DEC) then return nil end
  return M.dec64(d == "" and "0" or d)
end

if not M.luajit then
  -- Lua 5.3+: the native operators, compiled here so that LuaJIT never
  -- parses them. F: the unchecked ones (compat.fast); each checked one
  -- (what a caller gets as compat.band ...) takes two integers straight to
  -- its operator and anything else to slow() below, which converts an
  -- integral float (as Lua does) or refuses naming the function (issue 20:
  -- "attempt to perform bitwise operation on a boolean value" from inside
  -- this module). One call level each: the checks cost two math.type calls.
  local mtype, toint = math.type, math.tointeger
  local function slow(name, f, a, b, c, ...)
    local ia, ib = type(a) == "number" and toint(a), type(b) == "number" and toint(b)
    if ia and ib then
      local r = f(ia, ib)
      if c == nil then return r end
      local rest = M.table_pack(c, ...)
      for i = 1, rest.n do
        local v = rest[i]
        local iv = type(v) == "number" and toint(v)
        if not iv then refuse(name, "expects integers, got %s as operand %d", kind(v), i + 2) end
        r = f(r, iv)
      end
      return r
    end
    refuse(name, "expects integers, got %s and %s", kind(a), kind(b))
  end
  local F, C = assert(load([[
    local mtype, slow = ...
    local F, C = {}, {}
    F.band = function(a, b) return a & b end
    F.bor = function(a, b) return a | b end
    F.bxor = function(a, b) return a ~ b end
    F.bnot = function(a) return ~a end
    F.lshift = function(a, n) return a << n end
    F.rshift = function(a, n) return a >> n end
    F.idiv = function(a, b) return a // b end
    F.btest = function(a, b) return a & b ~= 0 end
    F.add = function(a, b) return a + b end
    F.sub = function(a, b) return a - b end
    F.mul = function(a, b) return a * b end
    local band, bor, bxor, lshift, rshift, btest = F.band, F.bor, F.bxor, F.lshift, F.rshift, F.btest
    C.band = function(a, b, c, ...)
      if c == nil and mtype(a) == "integer" and mtype(b) == "integer" then return a & b end
      return slow("band", band, a, b, c, ...)
    end
    C.bor = function(a, b, c, ...)
      if c == nil and mtype(a) == "integer" and mtype(b) == "integer" then return a | b end
      return slow("bor", bor, a, b, c, ...)
    end
    C.bxor = function(a, b, c, ...)
      if c == nil and mtype(a) == "integer" and mtype(b) == "integer" then return a ~ b end
      return slow("bxor", bxor, a, b, c, ...)
    end
    C.lshift = function(a, n)
      if mtype(a) == "integer" and mtype(n) == "integer" then return a << n end
      return slow("lshift", lshift, a, n)
    end
    C.rshift = function(a, n)
      if mtype(a) == "integer" and mtype(n) == "integer" then return a >> n end
      return slow("rshift", rshift, a, n)
    end
    C.btest = function(a, b)
      if mtype(a) == "integer" and mtype(b) == "integer" then return a & b ~= 0 end
      return slow("btest", btest, a, b)
    end
    return F, C
  ]], "=perfev.compat"))(mtype, slow)
  M.band, M.bor, M.bxor, M.lshift, M.rshift, M.btest = C.band, C.bor, C.bxor, C.lshift, C.rshift, C.btest
  local bnot, idiv, idiv_int = F.bnot, F.idiv, function(a, b) return slow("idiv", F.idiv, a, b) end
  M.bnot = function(a)
    if mtype(a) == "integer" or toint(a) then return bnot(a) end
    refuse("bnot", "expects an integer, got %s", kind(a))
  end
  M.idiv = function(a, b)
    if b == 0 and mtype(a) == "integer" and mtype(b) == "integer" then refuse("idiv", "division by zero") end
    if type(a) == "number" and type(b) == "number" then return idiv(a, b) end   -- floats too, as // does
    return idiv_int(a, b)
  end
  M.ult = function(a, b)
    if mtype(a) == "integer" and mtype(b) == "integer" then return math.ult(a, b) end
    refuse("ult", "expects integers, got %s and %s", kind(a), kind(b))
  end
  M.isinteger = function(v) return math.type(v) == "integer" end
  M.math_type = math.type
  M.tointeger = math.tointeger
  M.maxinteger, M.mininteger = math.maxinteger, math.mininteger
  -- the text's 64 bits as an integer (above 2^63: negative, as a u64 reads;
  -- tonumber with a base wraps modulo 2^64)
  M.hex64 = function(s) return tonumber(hex_digits(s), 16) end
  M.dec64 = function(s)
    local v = math.tointeger(tonumber(dec_digits(s)))
    if v then return v end
    -- above 2^63 - 1: wrap as the u64 it is
    local r = 0
    for d in s:gmatch("%d") do r = r * 10 + tonumber(d) end
    return r
  end
  -- integers wrap; an integral float counts as its integer (as on
  -- LuaJIT), any other operand is refused
  local function int2(f, name)
    return function(a, b)
      local ia, ib = math.tointeger(a), math.tointeger(b)
      if not ia or not ib then
        refuse(name, "expects two integers, got %s and %s", kind(a), kind(b))
      end
      return f(ia, ib)
    end
  end
  local add, sub, mul = F.add, F.sub, F.mul
  M.add, M.sub, M.mul = int2(add, "add"), int2(sub, "sub"), int2(mul, "mul")
  M.u64 = function(v) return M.tointeger(v) end
  M.hex = function(v)
    if mtype(v) ~= "integer" and not toint(v) then refuse("hex", "expects an integer, got %s", kind(v)) end
    return ("%x"):format(v)
  end
  M.tostring = function(v)
    if math.type(v) == "float" then return ("%.0f"):format(v) end
    return tostring(v)
  end
  -- Unsigned decimal: a negative integer is a u64 above 2^63.
  local udiv10 = assert(load("return function(v) return (v >> 1) // 5 end", "=perfev.compat"))()
  M.udec = function(v)
    if math.type(v) == "float" then v = math.tointeger(v) end
    if mtype(v) ~= "integer" then refuse("udec", "expects an integer, got %s", kind(v)) end
    if v >= 0 then return tostring(v) end
    local q = udiv10(v)
    return tostring(q) .. tostring(v - q * 10)
  end
  M.key = function(v) return v end
  M.normalize = function(v) return v end
  F.ult = math.ult
  F.pack, F.unpack, F.packsize = string.pack, string.unpack, string.packsize
  M.fast = F
  return finish(M)
end

-- ---- LuaJIT ----
local ffi = require "ffi"
local bit = require "bit"
local u64_t, i64_t = ffi.typeof("uint64_t"), ffi.typeof("int64_t")
local istype, cast = ffi.istype, ffi.cast
local tonum = tonumber

local function is64(v) return type(v) == "cdata" and (istype(u64_t, v) or istype(i64_t, v)) end

-- A cdata result back to the rule's form: a number when exact.
local I_EXACT, I_NEXACT = i64_t(2 ^ 53), i64_t(-2 ^ 53)
local function norm(v)
  local s = i64_t(v)
  if s >= I_NEXACT and s <= I_EXACT then return tonum(s) end
  return u64_t(v)
end
M.normalize = function(v) if is64(v) then return norm(v) end return v end

local function exact_number(v)
  return type(v) == "number" and v == floor(v) and v >= -EXACT and v <= EXACT
end

-- v as a uint64_t cdata, or an error naming what it is.
-- (name: the function the caller called, for the refusal)
local function to64(v, name)
  if type(v) == "number" then
    if exact_number(v) then return u64_t(i64_t(v)) end
    refuse(name or "u64", "%s is not an exact integer (above 2^53 a double may already be "
           .. "rounded: write it as a uint64_t, e.g. 0x8000000000000001ULL)", tostring(v))
  end
  if is64(v) then return u64_t(v) end
  refuse(name or "u64", "expects an integer, got %s", kind(v))
end

local function small(v) return type(v) == "number" and v >= 0 and v < 4294967296 and v == floor(v) end
local U32 = 4294967296

function M.band(a, b)
  if small(a) and small(b) then return bit.band(a, b) % U32 end
  return norm(bit.band(to64(a, "band"), to64(b, "band")))
end
function M.bor(a, b)
  if small(a) and small(b) then return bit.bor(a, b) % U32 end
  return norm(bit.bor(to64(a, "bor"), to64(b, "bor")))
end
function M.bxor(a, b)
  if small(a) and small(b) then return bit.bxor(a, b) % U32 end
  return norm(bit.bxor(to64(a, "bxor"), to64(b, "bxor")))
end
function M.bnot(a) return norm(bit.bnot(to64(a, "bnot"))) end
local function shift_count(n, name)
  if type(n) ~= "number" or n ~= floor(n) then refuse(name, "the count must be an integer, got %s", kind(n)) end
end
function M.lshift(a, n)
  shift_count(n, "lshift")
  if n >= 64 or n <= -64 then return 0 end
  if n < 0 then return M.rshift(a, -n) end
  return norm(bit.lshift(to64(a, "lshift"), n))
end
function M.rshift(a, n)
  shift_count(n, "rshift")
  if n >= 64 or n <= -64 then return 0 end
  if n < 0 then return M.lshift(a, -n) end
  return norm(bit.rshift(to64(a, "rshift"), n))
end
function M.btest(a, b) return M.band(a, b) ~= 0 end
-- compat.fast: the two-operand band, bor and bxor (their checks are the
-- conversions they need: compat.fast is these functions themselves)
local F = { band = M.band, bor = M.bor, bxor = M.bxor, btest = M.btest, bnot = M.bnot, lshift = M.lshift,
            rshift = M.rshift }
M.fast = F
M.band, M.bor, M.bxor = variadic(M.band), variadic(M.bor), variadic(M.bxor)

function M.idiv(a, b)
  if type(a) == "number" and type(b) == "number" then return floor(a / b) end
  -- 64-bit: as signed when either side is negative, as Lua 5.3's // does
  local sa, sb = i64_t(to64(a, "idiv")), i64_t(to64(b, "idiv"))
  if sb == 0 then refuse("idiv", "division by zero") end
  local q = sa / sb
  if (sa % sb ~= 0) and ((sa < 0) ~= (sb < 0)) then q = q - 1 end
  return norm(q)
end

function M.ult(a, b)
  if type(a) == "number" and type(b) == "number" and a >= 0 and b >= 0 then return a < b end
  return to64(a, "ult") < to64(b, "ult")
end

function M.isinteger(v) return exact_number(v) or is64(v) end
function M.tointeger(v)
  if type(v) == "string" then v = tonum(v) end
  if exact_number(v) then return v end
  if is64(v) then return norm(v) end
  return nil
end
function M.u64(v)
  if type(v) == "number" and not exact_number(v) then return nil end
  return to64(v, "u64")
end

function M.math_type(v)
  if type(v) == "number" then
    if exact_number(v) then return "integer" end
    return "float"
  end
  if is64(v) then return "integer" end
  return nil
end
M.maxinteger = bit.bnot(bit.lshift(i64_t(1), 63))
M.mininteger = bit.lshift(i64_t(1), 63)

-- The exact 64-bit value of a constant's text: a number when exact, else
-- a uint64_t cdata.
local function digits64(s, base)
  local v = u64_t(0)
  for d in s:gmatch("%w") do v = v * base + tonum(d, 16) end
  return norm(v)
end
function M.hex64(s) return digits64(hex_digits(s), 16) end
function M.dec64(s) return digits64(dec_digits(s), 10) end

-- Integer arithmetic modulo 2^64: numbers while the result is exact, the
-- 64-bit cdata arithmetic (which wraps) beyond.
local function arith(name, op, exact)
  return function(a, b)
    if exact_number(a) and exact_number(b) then
      local r = exact(a, b)
      if r > -EXACT and r < EXACT then return r end   -- strictly: 2^53 + 1 rounds to 2^53
    end
    if not (exact_number(a) or is64(a)) or not (exact_number(b) or is64(b)) then
      refuse(name, "expects two integers, got %s and %s", kind(a), kind(b))
    end
    local ua, ub = to64(a, name), to64(b, name)
    return norm(op(ua, ub))
  end
end
M.add = arith("add", function(a, b) return a + b end, function(a, b) return a + b end)
M.sub = arith("sub", function(a, b) return a - b end, function(a, b) return a - b end)
M.mul = arith("mul", function(a, b) return a * b end, function(a, b) return a * b end)

function M.hex(v)
  if type(v) == "number" then
    if v >= 0 then return ("%x"):format(v) end
  end
  local s = bit.tohex(to64(v, "hex"), 16):gsub("^0+", "")
  return s == "" and "0" or s
end
function M.tostring(v)
  if type(v) == "number" then return ("%.0f"):format(v) end
  return (tostring(v):gsub("U?LL$", ""))
end
function M.udec(v)
  if type(v) == "number" and v >= 0 then return ("%.0f"):format(v) end
  return (tostring(to64(v, "udec")):gsub("ULL$", ""))
end
function M.key(v)
  if type(v) == "cdata" then return M.tostring(v) end
  return v
end

-- ---- string.pack/unpack for LuaJIT: the formats perfev uses ----
-- Options: < > = ! (endianness; no alignment), b B h H i[n] I[n] l L j J T
-- (integers, n in 1..8), f d n (floats), s[n] z c[n] (strings), x (a
-- padding byte), spaces.
local LITTLE = ffi.abi("le")
local SIZES = { b = 1, B = 1, h = 2, H = 2, l = 8, L = 8, j = 8, J = 8, T = 8, i = 4, I = 4 }
local u8p = ffi.typeof("const uint8_t *")
local P = {
  [1] = ffi.typeof("const uint8_t *"), [2] = ffi.typeof("const uint16_t *"),
  [4] = ffi.typeof("const uint32_t *"), [8] = ffi.typeof("const uint64_t *"),
}
local buf = ffi.new("union { uint64_t u; int64_t i; double d; float f; uint8_t b[8]; }")

local parsed = {}

local function parse(fmt)
  local items = parsed[fmt]
  if items then return items end
  items = {}
  local little, pos = LITTLE, 1
  while pos <= #fmt do
    local c = fmt:sub(pos, pos)
    local n = fmt:match("^%d+", pos + 1)
    pos = pos + 1 + (n and #n or 0)
    n = n and tonum(n)
    if c == "<" then little = true
    elseif c == ">" then little = false
    elseif c == "=" then little = LITTLE
    elseif c == "!" or c == " " then
      little = little -- no alignment: perfev's formats are packed
    elseif SIZES[c] then
      local size = (c == "i" or c == "I") and n or SIZES[c]
      if size < 1 or size > 8 or size == 7 then
        error("perfev.compat: integral size (" .. size .. ") out of limits [1,8] (7 is not supported)", 3)
      end
      items[#items + 1] = { k = "int", size = size, signed = c:lower() == c,
                            little = little }
    elseif c == "f" or c == "d" or c == "n" then
      items[#items + 1] = { k = c == "f" and "f" or "d", size = c == "f" and 4 or 8, little = little }
    elseif c == "s" then items[#items + 1] = { k = "s", size = n or 8, little = little }
    elseif c == "z" then items[#items + 1] = { k = "z" }
    elseif c == "c" then
      if not n then error("perfev.compat: missing size for format option 'c'", 3) end
      items[#items + 1] = { k = "c", size = n }
    elseif c == "x" then items[#items + 1] = { k = "x", size = 1 }
    else error("perfev.compat: invalid format option '" .. c .. "'", 3) end
  end
  parsed[fmt] = items
  return items
end

-- The unsigned integer of `size` bytes at p (0-based), in that byte order.
local function read_uint(s, p, size, little)
  if size == 8 or size == 4 or size == 2 or size == 1 then
    local v = cast(P[size], cast(u8p, s) + p)[0]
    if little ~= LITTLE and size > 1 then
      if size == 8 then v = bit.bswap(v)
      elseif size == 4 then v = bit.bswap(v) % U32
      else v = bit.rshift(bit.bswap(v), 16) end
    end
    return v
  end
  local v = 0
  for i = size, 1, -1 do
    local b = s:byte(p + (little and i or size - i + 1))
    v = v * 256 + b
  end
  return v
end

-- (LuaJIT: perfev's own; their wrong arguments refused as string.pack's)
local function check_fmt(fmt, name)
  if type(fmt) ~= "string" then refuse(name, "the format must be a string, got %s", kind(fmt)) end
end

function M.unpack(fmt, s, init)
  check_fmt(fmt, "unpack")
  if type(s) ~= "string" then refuse("unpack", "the data must be a string, got %s", kind(s)) end
  if init ~= nil and (type(init) ~= "number" or init ~= floor(init)) then
    refuse("unpack", "the position must be an integer, got %s", kind(init))
  end
  local items = parse(fmt)
  local pos = init or 1
  if pos < 0 then pos = #s + pos + 1 end
  local out, n = {}, 0
  for i = 1, #items do
    local it = items[i]
    local k, size = it.k, it.size
    if k == "z" then
      local e = s:find("\0", pos, true)
      if not e then error("perfev.compat: unfinished string for format 'z'", 2) end
      n = n + 1; out[n] = s:sub(pos, e - 1); pos = e + 1
    else
      if pos - 1 + (size or 0) > #s then error("perfev.compat: data string too short", 2) end
      if k == "int" then
        local v = read_uint(s, pos - 1, size, it.little)
        if size == 8 then
          if it.signed then v = i64_t(v) end
          v = norm(v)
        elseif it.signed and v >= 2 ^ (8 * size - 1) then
          v = v - 2 ^ (8 * size)
        end
        n = n + 1; out[n] = v; pos = pos + size
      elseif k == "f" or k == "d" then
        local raw = s:sub(pos, pos + size - 1)
        if it.little ~= LITTLE then raw = raw:reverse() end
        ffi.copy(buf.b, raw, size)
        n = n + 1; out[n] = k == "f" and tonum(buf.f) or tonum(buf.d); pos = pos + size
      elseif k == "s" then
        local len = read_uint(s, pos - 1, size, it.little)
        len = tonum(len)
        pos = pos + size
        if pos - 1 + len > #s then error("perfev.compat: data string too short", 2) end
        n = n + 1; out[n] = s:sub(pos, pos + len - 1); pos = pos + len
      elseif k == "c" then
        n = n + 1; out[n] = s:sub(pos, pos + size - 1); pos = pos + size
      else -- x
        pos = pos + 1
      end
    end
  end
  n = n + 1; out[n] = pos
  return unpack_values(out, 1, n)
end

local function int_bytes(v, size, signed, little, argn)
  local w
  if type(v) == "number" then
    if not exact_number(v) then
      error(("bad argument #%d to 'pack' (number has no exact integer representation%s)")
            :format(argn, math.abs(v) > EXACT and v == floor(v) and ": above 2^53 use a uint64_t cdata" or ""), 3)
    end
    w = i64_t(v)
  elseif is64(v) then
    w = i64_t(v)
  else
    error(("bad argument #%d to 'pack' (number expected, got %s)"):format(argn, type(v)), 3)
  end
  if size < 8 then
    local lim = 2 ^ (8 * size)
    local x = tonum(w)
    if signed and (x < -lim / 2 or x >= lim / 2) then
      error(("bad argument #%d to 'pack' (integer overflow)"):format(argn), 3)
    elseif not signed and (x < 0 or x >= lim) then
      error(("bad argument #%d to 'pack' (unsigned overflow)"):format(argn), 3)
    end
  end
  buf.i = w
  local raw = ffi.string(buf.b, 8)
  if LITTLE then raw = raw:sub(1, size) else raw = raw:sub(9 - size) end
  if little ~= LITTLE then raw = raw:reverse() end
  return raw
end

function M.pack(fmt, ...)
  check_fmt(fmt, "pack")
  local items = parse(fmt)
  local parts, argn = {}, 0
  for i = 1, #items do
    local it = items[i]
    local k = it.k
    if k == "x" then parts[i] = "\0"
    else
      argn = argn + 1
      local v = select(argn, ...)
      if k == "int" then
        parts[i] = int_bytes(v, it.size, it.signed, it.little, argn + 1)
      elseif k == "f" or k == "d" then
        if type(v) ~= "number" then error(("bad argument #%d to 'pack' (number expected)"):format(argn + 1), 2) end
        if k == "f" then buf.f = v else buf.d = v end
        local raw = ffi.string(buf.b, it.size)
        parts[i] = it.little ~= LITTLE and raw:reverse() or raw
      elseif k == "s" then
        if type(v) ~= "string" then error(("bad argument #%d to 'pack' (string expected)"):format(argn + 1), 2) end
        parts[i] = int_bytes(#v, it.size, false, it.little, argn + 1) .. v
      elseif k == "z" then
        if type(v) ~= "string" or v:find("\0", 1, true) then
          error(("bad argument #%d to 'pack' (string contains zeros)"):format(argn + 1), 2)
        end
        parts[i] = v .. "\0"
      else -- c
        if type(v) ~= "string" or #v > it.size then
          error(("bad argument #%d to 'pack' (string longer than given size)"):format(argn + 1), 2)
        end
        parts[i] = v .. ("\0"):rep(it.size - #v)
      end
    end
  end
  return table.concat(parts)
end

function M.packsize(fmt)
  check_fmt(fmt, "packsize")
  local total = 0
  for _, it in ipairs(parse(fmt)) do
    if it.k == "s" or it.k == "z" then error("perfev.compat: variable-length format", 2) end
    total = total + it.size
  end
  return total
end

F.idiv, F.ult, F.add, F.sub, F.mul = M.idiv, M.ult, M.add, M.sub, M.mul
F.pack, F.unpack, F.packsize = M.pack, M.unpack, M.packsize
return finish(M)
