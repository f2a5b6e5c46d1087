-- perfev.profile under what a user or a busy program does to it (issue 20):
-- its event closed under it. Each case runs in a child Lua: the failure
-- it guards against ends the process.
local u = require "spec.support.util"

-- Runs code in a child Lua; returns its output and whether it exited 0.
local function child(code)
  local tmp = os.tmpname()
  local f = assert(io.open(tmp, "w"))
  f:write(code)
  f:close()
  local out, ok = u.sh(("%s%s %s 2>&1"):format(u.lua_env(), u.lua_interpreter(), tmp))
  os.remove(tmp)
  return out, ok
end

-- A busy loop of about 0.3 s (1.5 s under valgrind), whose samples would
-- come as signals: a signal whose handler is gone ends the process.
local BUSY = [[
local function busy()
  local t0, x = os.clock(), 0
  while os.clock() - t0 < 0.3 do for i = 1, 1e5 do x = x + i % 7 end end
  return x
end
]]

describe("perfev.profile with its event closed under it", function()
  it("p:stop() stops the signal: the process lives on (the handler stays until no signal can come)", function()
    local out, ok = child(BUSY .. [[
local perfev = require "perfev"
local p = perfev.profile { freq = 1000 }
p:start()
busy()
p.engine.ev:close()            -- the event's fd, closed while the profile runs
busy()
print("stop", pcall(p.stop, p))
busy(); busy()                 -- a signal still routed here would end the process
print("survived")
]])
    assert.is_true(ok, out)
    assert.matches("stop\ttrue", out, 1, true)
    assert.matches("survived", out, 1, true)
  end)

  it("closing the event and collecting the profiler without p:stop()", function()
    local out, ok = child(BUSY .. [[
local perfev = require "perfev"
local p = perfev.profile { freq = 1000 }
p:start()
p.engine.ev:close()
busy()
p:stop()
p = nil
collectgarbage(); collectgarbage()
busy(); busy()
print("survived")
]])
    assert.is_true(ok, out)
    assert.matches("survived", out, 1, true)
  end)
end)
