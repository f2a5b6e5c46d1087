-- Nothing leaks: every fd is closed by close, __close or __gc, also when an
-- error is raised half way. The 100k loops are tagged #slow (left out of
-- the valgrind run).
local core = require "perfev.core"
local perfev = require "perfev"
local u = require "spec.support.util"
local tbc = require "spec.support.tbc"

local N = 100000

local function attr()
  return core.attr { type = "software", config = core.SW.TASK_CLOCK, disabled = true }
end

local function full_gc()
  collectgarbage()
  collectgarbage()
end

describe("resources", function()
  local before
  before_each(function()
    full_gc()
    before = u.fd_count()
  end)

  it("100k open/close cycles leave the fd count unchanged #slow", function()
    local a = attr()
    for i = 1, N do
      local ev, msg = core.open(a, 0, -1)
      if not ev then error(("open %d failed: %s"):format(i, msg)) end
      ev:close()
    end
    assert.equal(before, u.fd_count())
  end)

  it("100k events dropped to the GC leave the fd count unchanged #slow", function()
    local a = attr()
    for i = 1, N do
      local ev, msg = core.open(a, 0, -1)
      if not ev then error(("open %d failed (the GC did not keep up?): %s"):format(i, msg)) end
    end
    full_gc()
    assert.equal(before, u.fd_count())
  end)

  -- The collector does not count fds: with a low fd limit, dropped events
  -- run out of fds before it runs; open then collects and tries again.
  it("events dropped to the GC under `ulimit -n 64` do not run out of fds", function()
    local out = u.run_lua([[
      local core = require "perfev.core"
      local a = core.attr { type = "software", config = 1, disabled = true }
      local keep = {}
      for i = 1, 20000 do
        local ev, msg = core.open(a, 0, -1)
        if not ev then print("open " .. i .. " failed: " .. msg) os.exit(1) end
        if i % 1000 == 0 then keep[#keep + 1] = string.rep("x", 1000) .. i end
      end
      print("ok")
    ]], "ulimit -n 64")
    assert.equal("ok\n", out)
  end)

  it("100k events in <close> variables leave the fd count unchanged #slow", function()
    if not tbc.available then pending(tbc.reason) return end
    local highest = tbc.run([[
      local core, a, N, assert = ...
      local highest = 0
      for _ = 1, N do
        local ev <close> = assert(core.open(a, 0, -1))
        highest = math.max(highest, ev:fileno())
      end
      return highest
    ]], core, attr(), N, assert)
    assert.equal(before, u.fd_count())
    assert.is_true(highest <= before + 10, "fds piled up: highest " .. highest)
  end)

  it("100k perfev.open events dropped to the GC #slow", function()
    for _ = 1, N do assert(perfev.open("page-faults")) end
    full_gc()
    assert.equal(before, u.fd_count())
  end)

  it("a perf.data file iterated without a name for it stays open through GCs, then closes", function()
    local pd = require "perfev.perfdata"
    local path = "spec/fixtures/perfdata/small.data"
    local want = 0
    local f = assert(pd.open(path))
    for _ in f:records() do want = want + 1 end
    f:close()
    assert.is_true(want > 10)
    for _, opts in ipairs { { order = "file" }, { order = "time" }, { order = "time", types = { "sample" } } } do
      local n, expect = 0, want
      if opts.types then
        expect = 0
        local g = assert(pd.open(path))
        for _ in g:records(opts) do expect = expect + 1 end
        g:close()
      end
      for _ in assert(pd.open(path)):records(opts) do
        n = n + 1
        full_gc()
      end
      assert.equal(expect, n)
    end
    full_gc()
    assert.equal(before, u.fd_count())
  end)

  it("groups closed, dropped to the GC and in <close> release every member", function()
    for _ = 1, 300 do
      local g = assert(perfev.group { "task-clock", "page-faults", "context-switches" })
      g:close()
    end
    for _ = 1, 300 do assert(perfev.group { "task-clock", "page-faults" }) end
    full_gc()
    if tbc.available then
      tbc.run([[
        local perfev, assert = ...
        for _ = 1, 300 do
          local g <close> = assert(perfev.group { "task-clock", "page-faults" })
          assert.is_true(g:read().time_enabled >= 0)
        end
      ]], perfev, assert)
    end
    assert.equal(before, u.fd_count())
  end)

  it("events closed by an error half way through a <close> scope", function()
    if not tbc.available then pending(tbc.reason) return end
    for _ = 1, 300 do
      local ok = pcall(tbc.run, [[
        local core, attr = ...
        local ev <close> = assert(core.open(attr(), 0, -1))
        ev:enable()
        error("half way")
      ]], core, attr)
      assert.is_false(ok)
    end
    assert.equal(before, u.fd_count())
  end)

  it("refused opens and raised argument errors leave no fd behind", function()
    for _ = 1, 300 do
      assert.is_nil(core.open(attr(), -1, -1))                    -- EINVAL
      local hw = core.open(core.attr { type = "hardware" }, 0, -1)   -- ENOENT without a PMU
      if hw then hw:close() end
      assert.is_false(pcall(core.open, attr(), 0, -1, nil, { "nosuch" }))
      assert.is_false(pcall(core.open, core.attr { size = 8 }, 0, -1))
      assert.is_nil(core.open(attr(), "/nonexistent", 0, nil, { "pid_cgroup" }))
      -- a group whose last member fails closes the members it opened
      assert.is_nil(perfev.group { "task-clock", "page-faults",
                                   { type = "tracepoint", config = 0x7ffffff0 } })
    end
    full_gc()
    assert.equal(before, u.fd_count())
  end)

  it("a pid_cgroup open closes its cgroup directory fd", function()
    local ok = core.open(attr(), "/sys/fs/cgroup", 0, nil, { "pid_cgroup" })
    if ok then ok:close() end   -- opens or not depending on the cgroup setup
    for _ = 1, 100 do
      local ev = core.open(attr(), "/sys/fs/cgroup", 0, nil, { "pid_cgroup" })
      if ev then ev:close() end
    end
    assert.equal(before, u.fd_count())
  end)
end)
