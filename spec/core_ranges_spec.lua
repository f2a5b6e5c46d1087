-- Integers the kernel narrows to an int (pid, cpu, group fd, ioctl
-- arguments, clock ids) are range-checked and refused by name rather than
-- wrapped (pid = P + 2^32 used to count process P, cpu = maxinteger became
-- -1), and messages echo at most a bounded part of the caller's input.
local core = require "perfev.core"
local compat = require "perfev.compat"

local function err_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "no error")
  return err
end

describe("core integer arguments", function()
  local a = core.attr { type = "software", config = 1 }   -- task-clock

  it("core.open refuses a pid, cpu or group fd outside a 32-bit int, naming it", function()
    local self = assert(core.open(a, 0, -1))
    for _, c in ipairs {
      { "pid", { 2 ^ 32 + 1, -1 } }, { "pid", { compat.mininteger, -1 } },
      { "cpu", { 0, compat.maxinteger } }, { "cpu", { 0, 2 ^ 32 - 1 } },
      { "group fd", { 0, -1, self:fileno() + 2 ^ 32 } },
    } do
      local err = err_of(core.open, a, compat.table_unpack(c[2]))
      assert.matches("perfev.open: " .. c[1] .. " %-?%d+ is out of range", err)
    end
    self:close()
  end)

  it("ev:refresh and ev:set_bpf refuse an argument outside an int", function()
    local ev = assert(core.open(a, 0, -1))
    assert.matches("ev:refresh: argument 9223372036854775807 is out of range",
                   err_of(ev.refresh, ev, compat.maxinteger), 1, true)
    assert.matches("ev:set_bpf: argument", err_of(ev.set_bpf, ev, 2 ^ 33), 1, true)
    ev:close()
  end)

  it("clock_ns refuses a clock id outside an int instead of reading CLOCK_REALTIME", function()
    assert.matches("perfev.clock_ns: clock id -9223372036854775808 is out of range",
                   err_of(core.clock_ns, compat.mininteger), 1, true)
    assert.is_true(core.clock_ns(1) > 0)   -- CLOCK_MONOTONIC by number still works
  end)
end)

describe("core messages", function()
  local big = ("x"):rep(1048576)
  for _, c in ipairs {
    { "unknown attr field", function() return core.attr { [big] = 1 } end },
    { "bad attr name", function() return core.attr { sample_type = big } end },
    { "unknown flag", function() return core.open(core.attr {}, 0, -1, nil, { big }) end },
    { "unknown clock", function() return core.clock_ns(big) end },
  } do
    it("echo a bounded part of the input: " .. c[1], function()
      local err = err_of(c[2])
      assert.is_true(#err < 300, #err .. " bytes")
      assert.matches("xxx%.%.%.", err)
    end)
  end
end)

describe("core attr strings", function()
  local function uprobe_type()
    local f = io.open("/sys/bus/event_source/devices/uprobe/type")
    local t = f and tonumber(f:read("l"))
    if f then f:close() end
    return t
  end

  it("an attr from bytes owns no uprobe_path until one is set; opening it is a clear error", function()
    local t = uprobe_type()
    if not t then
      pending("no uprobe PMU on this kernel (/sys/bus/event_source/devices/uprobe)")
      return
    end
    local a = core.attr { type = t, uprobe_path = "/bin/true", probe_offset = 0 }
    local b = core.attr_from_bytes(a:bytes())
    assert.is_number(b.uprobe_path)   -- an address, not a string it holds
    local ok, err = pcall(core.open, b, -1, 0)
    assert.is_false(ok)
    assert.matches("uprobe_path is an address it holds no string for", err, 1, true)
    b.uprobe_path = "/bin/true"
    assert.equal("/bin/true", b.uprobe_path)
    ok, err = pcall(core.open, b, -1, 0)   -- the kernel may refuse offset 0: not our error
    assert.is_true(ok, err)
    if err then err:close() end
  end)

  it("config1 of an attr from bytes of another type is a number, opened as it is", function()
    local a = core.attr { type = "software", config = 1, config1 = 5 }
    local b = core.attr_from_bytes(a:bytes())
    assert.equal(5, b.config1)
    local ev = assert(core.open(b, 0, -1))
    ev:close()
  end)
end)

describe("core messages name the field", function()
  it("set_attrs names the entry and field instead of 'bad argument #-1'", function()
    local r = core.perfdata_reader(io.tmpfile(), {})
    for _, c in ipairs {
      { { { attr = 1 } }, "attrs[1].attr must be a perfev.attr, got number" },
      { { 5 }, "attrs[1] must be a table" },
      { { { attr = core.attr {}, ids = { "x" } } }, "attrs[1].ids[1] must be an integer, got string" },
    } do
      local ok, err = pcall(r.set_attrs, r, c[1])
      assert.is_false(ok)
      assert.matches(c[2], err, 1, true)
      assert.is_nil(err:find("#-1", 1, true))
    end
    r:close()
  end)
end)
