-- perfev.perfmap: the /tmp/perf-PID.map writer, and what perf 6.1 does
-- with the map: it names samples in an anonymous executable mapping
-- ("//anon") from it, and leaves samples no mapping covers [unknown].
local perfev = require "perfev"
local pd = require "perfev.perfdata"
local perfmap = require "perfev.perfmap"
local u = require "spec.support.util"
local P = require "spec.support.perfdata"

describe("perfev.perfmap", function()
  local dir
  setup(function() dir = P.tmpdir() end)
  teardown(function() P.rmdir(dir) end)

  it("writes START SIZE name lines in hex", function()
    local path = dir .. "/a.map"
    local m = assert(perfmap.open(1234, { path = path }))
    assert.equal(1234, m.pid)
    assert(m:add(0x7f0000001000, 0x40, "lua:main@x.lua:1"))
    assert(m:add(0x10, 1, "tiny name with spaces"))
    assert.same({ 0x10, 0x7f0000001040 }, { m:range() })
    assert(m:close())
    assert.same({ "7f0000001000 40 lua:main@x.lua:1", "10 1 tiny name with spaces" }, u.lines(path))
    assert(m:close())   -- twice is harmless
    assert.error_matches(function() m:add(1, 1, "x") end, "closed")
  end)

  it("defaults to /tmp/perf-<this pid>.map, and appends with opts.append", function()
    local m = assert(perfmap.open())
    assert.equal(u.pid(), m.pid)
    assert.equal(("/tmp/perf-%d.map"):format(u.pid()), m.path)
    assert(m:add(0x1000, 0x10, "one"))
    assert(m:close())
    local m2 = assert(perfmap.open(nil, { append = true }))
    assert(m2:add(0x2000, 0x10, "two"))
    assert(m2:close())
    assert.same({ "1000 10 one", "2000 10 two" }, u.lines(m.path))
    assert.is_true(m2:remove())
    assert.is_false(u.exists(m.path))
  end)

  it("interns names at fresh slots from its base, the same address for the same name", function()
    local path = dir .. "/b.map"
    local m = assert(perfmap.open(99, { path = path, base = 0x5000, slot = 8 }))
    finally(function() m:close() end)
    local a, b = m:intern("f"), m:intern("g")
    assert.same({ 0x5000, 0x5008, 0x5000 }, { a, b, m:intern("f") })
    assert(m:flush())
    assert.same({ "5000 8 f", "5008 8 g" }, u.lines(path))
    local r = m:mmap_record()
    assert.same({ "mmap2", 99, 0x5000, 16, "//anon", 5, 0x22 },
                { r.type, r.pid, r.addr, r.len, r.filename, r.prot, r.flags })
    assert.equal(7, m:mmap_record({ time = 7 }).time)
  end)

  it("refuses bad arguments with an error naming them", function()
    assert.error_matches(function() perfmap.open(-3) end, "pid must be a process id")
    assert.error_matches(function() perfmap.open(1, { base = 0 }) end, "option .base. must be a positive integer")
    local m = assert(perfmap.open(1, { path = dir .. "/c.map" }))
    finally(function() m:close() end)
    assert.error_matches(function() m:add(1, 0, "x") end, "size must be a positive integer")
    assert.error_matches(function() m:add(1, 1, "a\nb") end, "without a newline")
    assert.error_matches(function() m:add("1", 1, "x") end, "start must be an integer")
    assert.error_matches(function() m:mmap_record() end, "no lines yet")
    local ok, msg = perfmap.open(1, { path = "/nonexistent/dir/x.map" })
    assert.is_nil(ok)
    assert.truthy(msg:find("No such file", 1, true))
  end)

  describe("read by perf", function()
    if not P.have_perf() then
      pending("the perf tool is not installed (Debian: linux-perf)")
      return
    end
    -- a perf.data file of a made-up process whose samples fall on
    -- interned addresses; anon: with the "//anon" mapping over them
    local PID = 3999999   -- a made-up process (perf reads the file, not /proc)
    local names = { "lua:main@app.lua:1", "lua:update@app.lua:20", "lua:draw@app.lua:40" }
    local function write(path, anon)
      local m = assert(perfmap.open(PID))
      local a = perfev.attr { type = "software", config = "cpu-clock", sample_period = 1000000,
                              sample_type = { "ip", "tid", "time", "period" }, sample_id_all = true,
                              comm = true, mmap2 = true, exclude_kernel = true }
      local w = assert(pd.create(path, a))
      assert(w:write { type = "comm", pid = PID, tid = PID, comm = "game", time = 1 })
      local ips = {}
      for i, n in ipairs(names) do ips[i] = m:intern(n) end
      if anon then assert(w:write(m:mmap_record { time = 2 })) end
      local counts = { 5, 3, 2 }
      local t = 10
      for i, c in ipairs(counts) do
        for _ = 1, c do
          t = t + 1
          assert(w:write { type = "sample", cpumode = "user", ip = ips[i] + 4, pid = PID, tid = PID,
                           time = t, period = 1000000 })
        end
      end
      assert(w:close())
      assert(m:close())
      return m
    end

    local perf = P.perf

    it("names samples in an anonymous executable mapping from the map", function()
      local path = dir .. "/anon.data"
      local m = write(path, true)
      local out, err = perf(("script -F ip,sym,dso -i '%s'"):format(path))
      assert.equal("", err)
      local got = {}
      for sym, dso in out:gmatch("%x+ (%S+) %(([^)]+)%)") do
        got[sym] = (got[sym] or 0) + 1
        assert.equal(m.path, dso)
      end
      assert.same({ [names[1]] = 5, [names[2]] = 3, [names[3]] = 2 }, got)
      local rep, rerr = perf(("report --stdio --sort sym -i '%s'"):format(path))
      assert.equal("", rerr)
      assert.truthy(rep:find("50.00%%%s+%[%.%] lua:main@app%.lua:1"))
      assert.truthy(rep:find("30.00%%%s+%[%.%] lua:update@app%.lua:20"))
      assert.truthy(rep:find("20.00%%%s+%[%.%] lua:draw@app%.lua:40"))
      os.remove(m.path)
    end)

    it("leaves samples [unknown] when no mapping covers them (perf 6.1's rule)", function()
      local path = dir .. "/nomap.data"
      local m = write(path, false)
      local out = perf(("script -F ip,sym -i '%s'"):format(path))
      local n = 0
      for _ in out:gmatch("%[unknown%]") do n = n + 1 end
      assert.equal(10, n)
      for _, name in ipairs(names) do assert.is_nil(out:find(name, 1, true)) end
      os.remove(m.path)
    end)
  end)
end)
