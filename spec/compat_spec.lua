-- perfev.compat on the runtime running the suite (make test LUA=lua5.4,
-- lua5.3, luajit): 64-bit values above 2^53 stay exact on every one.
local C = require "perfev.compat"

-- Big values built without 64-bit literals (LuaJIT would round them).
local TOP = C.lshift(1, 63)                              -- 0x8000000000000000
local CONFIG = C.bor(TOP, 1)                             -- 0x8000000000000001
local KADDR = C.bor(C.lshift(0xffffffff, 32), 0x81000000) -- a kernel address
local ALL = C.bnot(0)                                    -- 0xffffffffffffffff

local function bytes(s) return { s:byte(1, -1) } end

describe("perfev.compat", function()
  it("names the runtime", function()
    assert.is_string(C.runtime)
    assert.are.equal(type(rawget(_G, "jit")) == "table", C.luajit)
  end)

  it("keeps values above 2^53 exact through bit operations", function()
    assert.are.equal("8000000000000001", C.hex(CONFIG))
    assert.are.equal("ffffffff81000000", C.hex(KADDR))
    assert.are.equal("ffffffffffffffff", C.hex(ALL))
    assert.are.equal("8000000000000000", C.hex(C.band(CONFIG, C.bnot(1))))
    assert.are.equal(0x7effffff, C.bxor(KADDR, ALL))
    assert.are.equal("7fffffff81000000", C.hex(C.bxor(KADDR, TOP)))
    assert.are.equal("ffffffff", C.hex(C.rshift(KADDR, 32)))
    assert.are.equal(1, C.rshift(CONFIG, 63))
    assert.are.equal("1", C.hex(C.band(CONFIG, 1)))
    assert.are.equal("ffffffff81000007", C.hex(C.bor(KADDR, 1, 2, 4)))
    assert.are.equal(0x0f, C.band(0xff, 0x3f, 0x1f, 0x0f))
    assert.is_true(C.btest(CONFIG, 1))
    assert.is_false(C.btest(CONFIG, 2))
    -- the neighbour of 2^63 is a different value (a double would merge them)
    assert.are_not.equal(C.hex(TOP), C.hex(CONFIG))
  end)

  it("gives a 64-bit value whose signed value is within 2^53 as a number, as 5.3+ do", function()
    -- a kernel address is a small negative number as a signed integer
    assert.are.equal("number", type(KADDR))
    assert.are.equal(-2130706432, KADDR)
    assert.are.equal(-1, ALL)
    assert.are.equal("-2130706432", C.tostring(KADDR))
  end)

  it("gives small results as plain numbers on every runtime", function()
    assert.are.equal("number", type(C.band(CONFIG, 0xff)))
    assert.are.equal(0xf0, C.band(0xff, 0xf0))
    assert.are.equal(0xffffffff, C.bor(0xffff0000, 0xffff))   -- unsigned, not -1
    assert.are.equal(2 ^ 40, C.lshift(1, 40))
    assert.are.equal(3, C.idiv(7, 2))
    assert.are.equal(-4, C.idiv(-7, 2))
  end)

  it("compares and prints 64-bit values as unsigned", function()
    assert.is_true(C.ult(1, KADDR))
    assert.is_true(C.ult(KADDR, ALL))
    assert.is_false(C.ult(ALL, KADDR))
    assert.is_true(C.ult(5, 6))
    assert.are.equal("18446744073709551615", C.udec(ALL))
    assert.are.equal("9223372036854775809", C.udec(CONFIG))
    assert.are.equal("18446744071578845184", C.udec(KADDR))
    assert.are.equal("42", C.udec(42))
    assert.are.equal("-5", C.tostring(-5))
    assert.are.equal("9007199254740993", C.udec(C.bor(C.lshift(1, 53), 1)))   -- 2^53 + 1
  end)

  it("checks integers", function()
    assert.is_true(C.isinteger(3))
    assert.is_true(C.isinteger(CONFIG))
    assert.is_false(C.isinteger("3"))
    assert.is_false(C.isinteger(1.5))
    assert.are.equal(3, C.tointeger(3))
    assert.is_nil(C.tointeger(1.5))
    assert.is_nil(C.tointeger("x"))
  end)

  it("reads 64-bit constants from their text, exactly", function()
    assert.are.equal(C.hex(KADDR), C.hex(C.hex64("0xffffffff81000000")))
    assert.are.equal("18446744073709551615", C.udec(C.dec64("18446744073709551615")))
    assert.are.equal("9007199254740993", C.udec(C.dec64("9007199254740993")))
    assert.are.equal(16, C.hex64("0x10"))
    assert.are.equal(C.hex(KADDR), C.hex(C.hex64("ffffffff81000000")))   -- as /proc/PID/maps prints it
    assert.has_error(function() C.hex64("0xfg") end, "perfev.compat.hex64: not a hexadecimal constant: 0xfg")
    assert.are.equal("7fffffffffffffff", C.hex(C.maxinteger))
    assert.are.equal("8000000000000000", C.hex(C.mininteger))
    assert.are.equal("integer", C.math_type(3))
    assert.are.equal("integer", C.math_type(CONFIG))
    assert.are.equal("float", C.math_type(0.5))
    assert.is_nil(C.math_type("3"))
  end)

  it("parses unsigned decimal and hex text within 64 bits, as strtoull", function()
    assert.are.equal("18446744073709551615", C.udec(C.parse_u64("18446744073709551615")))
    assert.are.equal("ffffffffffffffff", C.hex(C.parse_u64("0xffffffffffffffff")))
    assert.are.equal("9007199254740993", C.udec(C.parse_u64("9007199254740993")))
    assert.are.equal(1, C.parse_u64("0x00000000000000000001"))
    assert.are.equal(0, C.parse_u64("000"))
    assert.is_nil(C.parse_u64("18446744073709551616"))
    assert.is_nil(C.parse_u64("0x10000000000000000"))
    assert.is_nil(C.parse_u64("-1"))
    assert.is_nil(C.parse_u64("1e3"))
  end)

  it("adds, subtracts and multiplies modulo 2^64, as Lua 5.3's integers", function()
    assert.are.equal(12, C.mul(3, 4))
    assert.are.equal(-2, C.sub(5, 7))
    -- 94906267^2 = 2^53 + 261134297 (odd): exact, where a double product rounds
    assert.are.equal("9007199515875289", C.udec(C.mul(94906267, 94906267)))
    assert.are.equal("4611686018427387904", C.udec(C.mul(2 ^ 31, 2 ^ 31)))
    assert.are.equal(0, C.mul(C.lshift(1, 40), C.lshift(1, 40)))       -- wraps
    assert.are.equal("8000000000000000", C.hex(C.add(C.maxinteger, 1)))
    assert.are.equal(C.hex(KADDR), C.hex(C.add(C.sub(KADDR, 5), 5)))
    assert.are.equal("9007199254740993", C.udec(C.add(2 ^ 53, 1)))
    assert.has_error(function() C.mul(1.5, 2) end, "perfev.compat.mul: expects two integers, got 1.5 and 2")
  end)

  it("gives 64-bit table keys value semantics", function()
    local t = {}
    t[C.key(C.bor(TOP, 1))] = "config"
    assert.are.equal("config", t[C.key(CONFIG)])
    t[C.key(7)] = "seven"
    assert.are.equal("seven", t[7])
  end)

  describe("pack and unpack", function()
    it("reads 64-bit fields above 2^53 exactly, in both byte orders", function()
      local le = "\0\0\0\129\255\255\255\255"
      local v, nxt = C.unpack("<I8", le)
      assert.are.equal("ffffffff81000000", C.hex(v))
      assert.are.equal(9, nxt)
      assert.are.equal("ffffffff81000000", C.hex((C.unpack(">I8", le:reverse()))))
      assert.are.equal("8000000000000001", C.hex((C.unpack("<i8", "\1\0\0\0\0\0\0\128"))))
      assert.are.equal(-1, (C.unpack("<i8", ("\255"):rep(8))))
      assert.are.equal(4096, (C.unpack("<I8", "\0\16\0\0\0\0\0\0")))
    end)

    it("writes them back byte for byte", function()
      assert.are.same({ 0, 0, 0, 129, 255, 255, 255, 255 }, bytes(C.pack("<I8", KADDR)))
      assert.are.same({ 128, 0, 0, 0, 0, 0, 0, 1 }, bytes(C.pack(">I8", CONFIG)))
      assert.are.same({ 255, 255, 255, 255, 255, 255, 255, 255 }, bytes(C.pack("<i8", -1)))
      local s = C.pack("<I4I2I1i8", 0xdeadbeef, 0xbeef, 7, KADDR)
      assert.are.equal(15, #s)
      local a, b, c, d, nxt = C.unpack("<I4I2I1i8", s)
      assert.are.equal(0xdeadbeef, a)
      assert.are.equal(0xbeef, b)
      assert.are.equal(7, c)
      assert.are.equal("ffffffff81000000", C.hex(d))
      assert.are.equal(16, nxt)
    end)

    it("reads signed small fields, floats and strings", function()
      assert.are.equal(-2, (C.unpack("<i2", "\254\255")))
      assert.are.equal(65534, (C.unpack("<I2", "\254\255")))
      assert.are.equal(1.5, (C.unpack("<d", C.pack("<d", 1.5))))
      assert.are.equal(0.25, (C.unpack(">f", C.pack(">f", 0.25))))
      local s = C.pack("<s4zc4", "abc", "zed", "xy")
      assert.are.equal(4 + 3 + 4 + 4, #s)
      local a, b, c = C.unpack("<s4zc4", s)
      assert.are.equal("abc", a)
      assert.are.equal("zed", b)
      assert.are.equal("xy\0\0", c)
      assert.are.equal(14, C.packsize("<I4I2i8"))
    end)

    it("refuses out-of-range values as string.pack does", function()
      assert.has_error(function() C.pack("<I2", 70000) end)
      assert.has_error(function() C.pack("<I1", -1) end)
      assert.has_error(function() C.unpack("<I8", "short") end)
    end)
  end)

  describe("on LuaJIT", function()
    if not C.luajit then
      pending("LuaJIT only: this runtime (" .. C.runtime .. ") has 64-bit integers, no cdata")
      return
    end
    it("returns values beyond +-2^53 as uint64_t cdata and takes them back", function()
      local ffi = require "ffi"
      assert.are.equal("cdata", type(CONFIG))
      assert.is_true(ffi.istype("uint64_t", CONFIG))
      assert.are.equal("cdata", type(C.bxor(KADDR, TOP)))   -- 0x7fffffff81000000
      assert.are.equal("8000000000000001", C.hex(C.u64(CONFIG)))
      assert.are.equal("number", type(C.normalize(C.u64(5))))
    end)

    it("refuses a double above 2^53, which may already be rounded", function()
      assert.has_error(function() C.band(2 ^ 60 + 1, 1) end)
      assert.has_error(function() C.pack("<I8", 2 ^ 60) end)
      assert.is_nil(C.u64(2 ^ 60))
    end)
  end)

  it("refuses PUC Lua 5.1 at require time, naming the supported runtimes", function()
    local shell = require "spec.support.shell"
    if not shell.have("lua5.1") then
      pending("lua5.1 is not installed here")
      return
    end
    -- the exit status as text: LuaJIT's popen:close() does not report it
    local out = shell.sh("lua5.1 -e 'package.path=\"lua/?.lua;\"..package.path require \"perfev.compat\"' 2>&1;"
      .. " echo \"exit=$?\"")
    assert.matches("exit=1", out, 1, true)
    assert.matches("perfev supports Lua 5.3, Lua 5.4 and LuaJIT 2.1", out, 1, true)
    assert.matches("this is Lua 5.1", out, 1, true)
    -- and so does require "perfev", before it looks for its C core
    out = shell.sh("lua5.1 -e 'package.path=\"lua/?.lua;lua/?/init.lua;\"..package.path require \"perfev\"' 2>&1;"
      .. " echo \"exit=$?\"")
    assert.matches("exit=1", out, 1, true)
    assert.matches("perfev supports Lua 5.3, Lua 5.4 and LuaJIT 2.1", out, 1, true)
  end)
end)
