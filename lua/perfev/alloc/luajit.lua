-- perfev.alloc on LuaJIT: count hooks do not run in compiled traces, so
-- the stack of a sampled allocation is taken by jit.profile. The C core's
-- allocator (csrc/allocprof/allocprof.c, mode "signal") sends SIGPROF to this thread
-- when it samples a block (jit.profile's own timer is set too slow to
-- fire); jit.profile stops the VM at its next safe point (the next
-- instruction in the interpreter, the next new line in compiled code) and
-- its callback records the stack there (perfev.profile.jit's collector,
-- the one the CPU profiler's jit engine uses) and gives it the blocks
-- sampled since the last one (ap:attribute).
local core = require "perfev.core"
local jitp = require "perfev.profile.jit"
local interrupt = require "perfev.interrupt"
local cowrap = require "perfev.cowrap"

local M = {}

local NO_TIMER_MS = 3600000

local Engine = {}
Engine.__index = Engine

function M.new(ap)
  local ok, jp = pcall(require, "jit.profile")
  if not ok then error("perfev.alloc: LuaJIT's jit.profile is needed", 0) end
  return setmetatable({ ap = ap, jp = jp }, Engine)
end

-- jp whose callback runs with the allocator's sampling off (the collector's
-- own tables are not the program's) and catches a Ctrl-C raised inside it
-- (LuaJIT calls it unprotected: perfev.profile.jit's `timed`)
local function quiet(jp, ap)
  local function sample(cb, thread, samples, vmstate)
    if ap:closed() then return end
    ap:busy(true)
    cb(thread, samples, vmstate)
  end
  return setmetatable({ start = function(mode, cb)
    return jp.start(mode, function(thread, samples, vmstate)
      local ok, err = pcall(sample, cb, thread, samples, vmstate)
      if not ap:closed() then ap:busy(false) end
      if not ok and not interrupt.is(err) then error(err, 0) end
    end)
  end }, { __index = jp })
end

function Engine:start()
  local ap = self.ap
  local index, n = {}, 0
  self.index = index
  -- (a profiler dropped while running: its core closed by __gc, jit.profile
  -- still on: nothing pending, rather than an error in the callback)
  local function pending()
    if ap:closed() then return 0, 0 end
    return ap:pending(), 0
  end
  self.c = jitp.collector(quiet(self.jp, ap), pending, {
    main = core.profiler_thread(),
    recorded = function(st)
      local i = index[st]
      if not i then
        n = n + 1
        i = n
        index[st] = i
      end
      ap:attribute(i)
    end,
  })
  self.wrapped = cowrap.install(self.c)
  -- SIGPROF ignored under jit.profile, which gives back what it found when
  -- it stops: a signal after that is dropped, not the default (the end)
  self.sigprof = core.signal_ignore(jitp.SIGPROF)
  self.c:start(NO_TIMER_MS)
end

-- stop(r) -> the raw profile: r is the core's read-out (values by the
-- index recorded() gave each stack)
function Engine:stop(r)
  self.c:stop()
  if self.sigprof then self.sigprof:restore() self.sigprof = nil end
  cowrap.restore(self.wrapped)
  local c = self.c:read()
  local stacks = {}
  for _, st in ipairs(c.stacks) do
    local ids = {}
    for i, id in ipairs(st) do ids[i] = id end
    stacks[#stacks + 1] = { ids = ids, values = r.values[self.index[st]] }
  end
  return { frames = c.frames, stacks = stacks, call_names = c.call_names }
end

return M
