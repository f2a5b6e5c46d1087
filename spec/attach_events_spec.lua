-- perfev.attach with events counted at a boundary of user code as the
-- clock: page-faults and context-switches. A running Lua process (this
-- process's interpreter: lua5.4, lua5.3 or luajit, read by the real
-- readers) whose two functions fault or switch 1:3 gives them 25 % / 75 %
-- +- 5 % by sample weight (the count of the event on the thread since its
-- previous sample).
local perfev = require "perfev"
local util = require "spec.support.util"
local shell = require "spec.support.shell"

-- f1 and f3 do the event once and three times as much, in turn:
--   faults: a fresh string of 256 KiB / 768 KiB (over the allocator's mmap
--     threshold, set in the environment for glibc; LuaJIT's own allocator
--     maps any block over 128 KiB), unlike any before it (LuaJIT interns
--     strings: the same text again is no new string): its pages are new at
--     each call, and given back when the collector frees it
--   switches: 20 / 60 sleeps of 1 ms (a voluntary switch each): many
--     periods a call, so that a sample's weight, the switches since the
--     one before, seldom straddles two calls (at 1 / 3 sleeps a call the
--     fixed period locked onto the round: f1 came out at 14 % under ASan)
local TARGET = [[
local mode = arg[1]
local h = require "bphelper"
local S = 256 * 1024
local n = 0
local function f1()
  n = n + 1
  if mode == "faults" then return #(string.rep("x", S) .. n) end
  for _ = 1, 20 do h.sleep_ms(1) end
  return 0
end
local function f3()
  n = n + 1
  if mode == "faults" then return #(string.rep("x", 3 * S) .. n) end
  for _ = 1, 60 do h.sleep_ms(1) end
  return 0
end
io.write(("ready %d %d\n"):format(debug.getinfo(f1, "S").linedefined, debug.getinfo(f3, "S").linedefined))
io.flush()
local x = 0
while true do x = x + f1() + f3() end
]]

local function start(mode)
  local script, out = os.tmpname(), os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(TARGET)
  f:close()
  -- (not under check-asan's preload: the target is not what it checks, and
  -- its terabytes of shadow memory are not scanned for Lua states)
  local env = "env -u LD_PRELOAD MALLOC_MMAP_THRESHOLD_=131072 "
  local pid = tonumber(shell.trim(shell.sh(("%s%s%s %s %s > %s 2>&1 & echo $!")
    :format(env, util.lua_env(), util.lua_interpreter(), script, mode, out))))
  local l1, l3
  local t0 = os.time()
  repeat
    os.execute("sleep 0.05")
    l1, l3 = (shell.read_file(out) or ""):match("ready (%d+) (%d+)")
  until l1 or os.time() - t0 > 20
  return pid, tonumber(l1), tonumber(l3), function()
    os.execute("kill -9 " .. pid .. " 2>/dev/null")
    os.remove(script)
    os.remove(out)
  end
end

-- the weight of the stacks in f1 and in f3 (the function a stack passes through)
local function shares(p, l1, l3)
  local raw = p.raw
  local w = { [l1] = 0, [l3] = 0 }
  for _, s in ipairs(raw.stacks) do
    for i = #s, 1, -1 do
      local fr = raw.frames[s[i]]
      if fr.what == "Lua" and w[fr.linedefined] then
        w[fr.linedefined] = w[fr.linedefined] + s.weight
        break
      end
    end
  end
  return w[l1], w[l3]
end

describe("perfev.attach on page-faults and context-switches", function()
  if not util.is_root() then
    it("needs root (ptrace of another process)", function() print("attach_events_spec: not root: skipped") end)
    return
  end
  if not util.h then
    it("needs the spec helper (make spec-helpers)", function() print("attach_events_spec: no bphelper: skipped") end)
    return
  end

  for _, case in ipairs {
    { mode = "faults", event = "page-faults", period = 16 },
    { mode = "switches", event = "context-switches", period = 3 },
  } do
    it(("%s: two functions doing it 1:3 give 25 %% / 75 %% by sample weight"):format(case.event), function()
      local pid, l1, l3, stop = start(case.mode)
      finally(stop)
      assert(l1, "the target did not start")
      local n = 0
      local p = assert(perfev.attach { pid = pid, event = case.event, period = case.period, duration_ms = 60000,
                                       on_sample = function() n = n + 1 return n >= 800 end })
      local a = p.attach
      local w1, w3 = shares(p, l1, l3)
      local share = w1 / (w1 + w3)
      print(("\n  attach %s: f1 %.1f%% of %d (f1 + f3), %d samples, %d dropped, %d outside Lua")
            :format(case.event, 100 * share, w1 + w3, a.samples, a.dropped, a.outside))
      assert.is_true(a.samples >= 800, "samples: " .. a.samples)
      assert.is_true(a.stacks >= 0.9 * a.samples, ("%d stacks of %d samples"):format(a.stacks, a.samples))
      assert.is_true(math.abs(share - 0.25) <= 0.05, ("f1's share %.3f"):format(share))
    end)
  end
end)
