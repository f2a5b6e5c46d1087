-- `perfev profile -p PID --serve ADDR` (lua/perfev/cli/serve.lua) read by a
-- real consumer: Go's `go tool pprof -top -seconds=3` (Debian's golang-go)
-- fetches /debug/pprof/profile over HTTP from the server, which attaches
-- to a running Lua process (a PUC Lua 5.4 workload whose two functions
-- cost 1:3 by construction) for the window; the shares come back; a bad
-- parameter is a 400 with perfev's message, another path a 404; the
-- server ends when the process does.
local shell = require "spec.support.shell"
local u = require "spec.support.util"
local O = require "spec.support.openresty"

local run, eventually, cum = O.run, O.eventually, O.cum

local TARGET = [[
local function spin(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
local function cheap() local r = spin(2500000) return r end
local function dear() local r = spin(7500000) return r end
local deadline = os.time() + tonumber(arg[1])
while os.time() < deadline do cheap() dear() end
]]

describe("perfev profile -p PID --serve, scraped by go tool pprof", function()
  local why
  if not u.is_root() then why = "attaching needs root (ptrace) here" end
  if not why and not shell.have("go") then why = "no go (make deps installs Debian's golang-go)" end
  if not why and not shell.have("curl") then why = "no curl" end
  if not why and not shell.have("lua5.4") then why = "no lua5.4 for the target" end
  if not why and not pcall(require, "socket") then why = "no luasocket (Debian's lua-socket) on this Lua" end
  if why then
    pending(why)
    return
  end

  local dir
  setup(function() dir = shell.tmpdir() end)
  teardown(function() shell.rmdir(dir) end)

  it("serves the Lua stacks of the process at their shares, 400s, 404s, and ends with the process", function()
    local f = assert(io.open(dir .. "/target.lua", "w"))
    f:write(TARGET)
    f:close()
    local target = tonumber(shell.sh(("lua5.4 %s/target.lua 30 >/dev/null 2>&1 & echo $!"):format(dir)):match("%d+"))
    assert(target, "no target")
    local server = tonumber(shell.sh(("%s%s bin/perfev profile -p %d --serve 127.0.0.1:0 2>%s/serve.err "
                                      .. ">/dev/null & echo $!"):format(u.lua_env(), u.lua_interpreter(),
                                                                        target, dir)):match("%d+"))
    local port = eventually(function()
      return (shell.read_file(dir .. "/serve.err") or ""):match("serving http://127%.0%.0%.1:(%d+)/")
    end)
    local ok, err = pcall(function()
      assert(port, shell.read_file(dir .. "/serve.err"))
      local base = "http://127.0.0.1:" .. port
      local out, status = run(("HOME=%s PPROF_TMPDIR=%s go tool pprof -top -seconds=3 %s/debug/pprof/profile")
                              :format(dir, dir, base))
      assert.equal(0, status, out)
      assert.matches("\nType: cpu\n", out)
      assert.matches("\nDuration: 3[.%d]*s,", out)   -- the attach's own measure of its window
      local cheap, dear = cum(out, "cheap"), cum(out, "dear")
      assert.truthy(cheap and dear, out)
      local share = cheap / (cheap + dear)
      print(("\nperfev profile --serve: go tool pprof -top -seconds=3 on a Lua 5.4 process: %s, "
             .. "cheap:dear %.1f%%:%.1f%%")
            :format(out:match("Total samples = [^\n]*") or "?", 100 * share, 100 * (1 - share)))
      assert.is_true(math.abs(share - 0.25) <= 0.07, ("cheap/(cheap+dear) %.3f\n%s"):format(share, out))
      -- perfev's messages for a bad parameter, as perfev.resty's endpoint gives them
      for q, msg in pairs { ["seconds=0"] = "seconds must be an integer from 1 to 300, got '0'",
                            ["seconds=1&freq=abc"] = "freq must be a number, got 'abc'",
                            ["seconds=1&freq=99&period=5"] = "give freq or period, not both",
                            ["seconds=1&event=cpu-clok"] = "unknown event 'cpu-clok' (did you mean 'cpu-clock'?)" } do
        local body = run(("curl -s -w '\\n%%{http_code}' '%s/debug/pprof/profile?%s'"):format(base, q))
        assert.matches("^perfev: .*\n400%s*$", body, nil, false, q)
        assert.matches(msg, body, 1, true, q)
      end
      local body = run(("curl -s -w '\\n%%{http_code}' '%s/debug/pprof/heap'"):format(base))
      assert.matches("\n404%s*$", body)
    end)
    shell.sh("kill " .. target)
    local ended = eventually(function() return not shell.exists("/proc/" .. server) end, 100)
    if not ended then shell.sh("kill " .. server) end
    if not ok then error(err, 0) end
    assert.truthy(ended, "the server still runs after its process ended")
    assert.matches("process %d+ has exited", shell.read_file(dir .. "/serve.err") or "")
  end)
end)
