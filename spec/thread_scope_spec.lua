-- What pid = 0 counts: the calling *thread*, not the process
-- (perf_event_open(2): "pid == 0 and cpu == -1: the calling process/thread
-- on any CPU" -- a task is a thread). doc/embedding.md shows the ways to
-- count a whole process or each worker thread; this spec runs each one
-- against CPU time burnt on another pthread (spec/helper/threads.c).
local perfev = require "perfev"
local th = require "threads"
local util = require "spec.support.util"
local shell = require "spec.support.shell"

local BURN_MS = 200
local MS = 1e6   -- task-clock counts nanoseconds

-- task-clock of ev across fn(), in ms.
local function measure_ms(ev, fn)
  ev:reset()
  ev:enable()
  fn()
  ev:disable()
  return (ev:read()) / MS
end

-- The tids of this process, from /proc/PID/task (not /proc/self: the
-- listing would be ls's own).
local function tids()
  local out = shell.sh("ls /proc/" .. util.pid() .. "/task")
  local t = {}
  for tid in out:gmatch("%d+") do t[#t + 1] = tonumber(tid) end
  return t
end

describe("thread scope", function()
  it("pid = 0 counts the calling thread: a burn on another pthread is not counted #valgrind_differs", function()
    local ev = assert(perfev.open("task-clock"))
    local other = measure_ms(ev, function() th.start(BURN_MS):go() end)
    local own = measure_ms(ev, function() th.burn(BURN_MS) end)
    ev:close()
    assert.is_true(other < BURN_MS * 0.2, ("another thread's %d ms burn counted %.1f ms"):format(BURN_MS, other))
    assert.is_true(own >= BURN_MS * 0.8, ("the calling thread's %d ms burn counted %.1f ms"):format(BURN_MS, own))
  end)

  it("inherit = true, opened before the thread starts, counts the whole process", function()
    local ev = assert(perfev.open{ type = "software", config = "task-clock", inherit = true })
    -- the thread is created after the open: it inherits the counter, and
    -- its count joins the parent's when it exits (joined by go())
    local whole = measure_ms(ev, function() th.start(BURN_MS):go() end)
    ev:close()
    assert.is_true(whole >= BURN_MS * 0.8, ("an inherited counter saw %.1f ms of a %d ms burn"):format(whole, BURN_MS))
  end)

  it("one event per thread from /proc/PID/task counts each worker thread", function()
    local worker = th.start(BURN_MS)          -- parked: it shows in /proc/PID/task
    local evs, found = {}, false
    for _, tid in ipairs(tids()) do
      local ev = perfev.open("task-clock", { pid = tid })
      if ev then                              -- a thread may exit meanwhile
        evs[tid] = ev
        ev:enable()
      end
      found = found or tid == worker:tid()
    end
    assert.is_true(found, "the worker's tid is in /proc/PID/task")
    assert.is_not_nil(evs[worker:tid()])
    worker:go()
    local total, mine = 0, 0
    for tid, ev in pairs(evs) do
      ev:disable()
      local ms = (ev:read() or 0) / MS
      total = total + ms
      if tid == worker:tid() then mine = ms end
      ev:close()
    end
    assert.is_true(mine >= BURN_MS * 0.8, ("the worker's own event saw %.1f ms of %d"):format(mine, BURN_MS))
    assert.is_true(total >= mine)
  end)
end)
