-- The one options reader of the C core (csrc/util.c): every C function
-- that takes an options table refuses an unknown key and a value of the
-- wrong type the same way, naming the option and listing the others, and
-- echoes at most a bounded part of what the caller gave.
local core = require "perfev.core"
local perfev = require "perfev"

local function err_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "no error")
  return err
end

describe("core options", function()
  local a = perfev.attr { type = "software", config = "cpu-clock", sample_period = 100000,
                          sample_type = { "ip", "tid" } }
  local bytes = core.encode({ type = "comm", pid = 1, tid = 2, comm = "x" }, a)

  local cases = {
    { "perfev.decode", "into, swap, fields and tally", function(o) return core.decode(bytes, a, o) end },
    { "perfev.encode", "swap", function(o) return core.encode({ type = "comm", pid = 1, tid = 2,
                                                                comm = "x" }, a, o) end },
    { "perfev.perfdata_reader", "name, start, size, swap, pipe, seekable, bufsize, max_queue, warnings and mmap",
      function(o) return core.perfdata_reader(io.tmpfile(), o) end },
  }

  for _, c in ipairs(cases) do
    local who, names, call = c[1], c[2], c[3]
    it(who .. " names an unknown option and lists the options", function()
      local err = err_of(call, { nope = true })
      assert.matches(who .. ": unknown option 'nope' (the options are " .. names .. ")", err, 1, true)
    end)
    it(who .. " names the option of the wrong type", function()
      local key = names:match("^[%a_]+")
      local err = err_of(call, { [key] = function() end })
      assert.matches(who .. ": option '" .. key .. "' must be ", err, 1, true)
      assert.matches(", got function", err, 1, true)
    end)
    it(who .. " refuses options that are not a table", function()
      assert.matches(who .. ": the options must be a table, got string", err_of(call, "x"), 1, true)
    end)
  end

  it("an integer option refuses a float, naming it", function()
    local err = err_of(core.perfdata_reader, io.tmpfile(), { bufsize = 1.5 })
    assert.matches("option 'bufsize' must be an integer, got a float", err, 1, true)
  end)

  it("ring methods read their options the same way", function()
    local ev = assert(core.open(perfev.attr { type = "software", config = "cpu-clock",
                                              sample_period = 100000, write_backward = true },
                                0, -1))
    local err = err_of(ev.mmap, ev, 1, { overwrit = true })
    assert.matches("ev:mmap: unknown option 'overwrit' (the options are overwrite)", err, 1, true)
    local ring = assert(ev:mmap(1))
    err = err_of(ring.snapshot, ring, { pause = "yes" })
    assert.matches("ring:snapshot: option 'pause' must be a boolean, got string", err, 1, true)
    ring:close()
    ev:close()
  end)

  it("echoes at most a bounded part of an unknown key", function()
    local key = ("k"):rep(1048576)
    local err = err_of(core.encode, { type = "comm", pid = 1, tid = 2, comm = "x" }, a, { [key] = 1 })
    assert.is_true(#err < 200, #err .. " bytes")
    assert.matches("unknown option 'kkkk.*%.%.%.' %(the options are swap%)", err)
  end)

  it("a second load of the core (a new require) keeps one methods table per class", function()
    local first = package.loaded["perfev.core"]
    package.loaded["perfev.core"] = nil
    local again = require "perfev.core"
    package.loaded["perfev.core"] = first
    local ev = assert(again.open(again.attr { type = "software", config = 1 }, 0, -1))
    assert.equal(again.event_methods, getmetatable(ev).__index)
    assert.equal("function", type(getmetatable(again.attr {}).__methods.clone))
    ev:close()
  end)
end)
