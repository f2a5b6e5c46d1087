-- perfev.attach on nginx workers running ngx_http_lua (examples/openresty),
-- under load from a load generator (wrk): `perfev profile -p WORKER -d 5`
-- names the example's handler functions at their known shares (/work/split:
-- cheap 1 : dear 3), wrk sees no failed request, and the worker's fds and
-- RSS are as before once perfev detached.
local shell = require "spec.support.shell"
local O = require "spec.support.openresty"

local LUA = os.getenv("LUA") or "lua5.4"
local ENV = require("spec.support.util").lua_env()

local function rss_kb(pid)
  local s = shell.read_file("/proc/" .. pid .. "/status") or ""
  return tonumber(s:match("VmRSS:%s*(%d+)"))
end

describe("perfev profile -p an nginx worker", function()
  local prefix, master, port

  setup(function()
    prefix = shell.tmpdir()
  end)
  teardown(function()
    O.stop(master)
    shell.rmdir(prefix)
  end)

  it("names the handlers at their shares under load; nothing fails; fds and RSS unchanged", function()
    local why = O.blocker() or (not shell.have("wrk") and "wrk is not installed (make deps installs it)")
      or (shell.trim(shell.sh("id -u")) ~= "0" and "not root: nginx's workers run as root here")
    if why then
      pending(why)
      return
    end
    local out
    port, master, out = O.start(prefix)
    assert(port, out)
    local workers = assert(O.ready(master, O.EVENTS), "the workers did not open their events")
    local base = "http://127.0.0.1:" .. port
    -- warm: each worker has compiled the handlers before it is measured
    O.sh(("wrk -t1 -c4 -d1s %s/work/split > /dev/null 2>&1"):format(base))
    local fds0, rss0 = {}, {}
    for _, w in ipairs(workers) do fds0[w], rss0[w] = O.fds(w), rss_kb(w) end

    local wrk_out = prefix .. "/wrk.txt"
    O.sh(("(wrk -t2 -c8 -d8s %s/work/split > %s 2>&1 &)"):format(base, wrk_out))
    O.sh("sleep 1")
    -- both workers at once, as folded stacks (nginx may give all the
    -- connections to one of them: their sum is split's), and one as text
    local folded = { prefix .. "/worker1.folded", prefix .. "/worker2.folded" }
    local report = prefix .. "/worker.txt"
    local perfev = ENV .. LUA .. " bin/perfev profile -d 5"
    local cmd = ("%s -p %d -o %s 2>%s/err1 & %s -p %d -o %s 2>%s/err2; wait; %s -p %d -d 1 -o %s 2>%s/err3")
      :format(perfev, workers[1], folded[1], prefix, perfev, workers[2], folded[2], prefix,
              perfev, workers[2], report, prefix)
    shell.sh(cmd)    -- (not O.sh: under check-asan perfev runs the ASan core, preloaded)
    O.eventually(function() return (shell.read_file(wrk_out) or ""):find("Requests/sec") end, 200)

    -- wrk: every request answered 200
    local w = shell.read_file(wrk_out) or ""
    assert.matches("Requests/sec", w)
    assert.not_matches("Non%-2xx", w)
    assert.not_matches("Socket errors", w)

    -- the worker's profile: split's cheap and dear at 1:3 of their sum
    local cheap, dear, all = 0, 0, 0
    for _, file in ipairs(folded) do
      for _, l in ipairs(shell.lines(file)) do
        local n = tonumber(l:match(" (%d+)$"))
        all = all + n
        if l:match(";split %(.-handlers%.lua:%d+%);") then
          if l:match(";cheap %(") then cheap = cheap + n end
          if l:match(";dear %(") then dear = dear + n end
        end
      end
    end
    assert.is_true(all > 0, (shell.read_file(prefix .. "/err1") or "") .. (shell.read_file(prefix .. "/err2") or ""))
    local share = cheap / (cheap + dear)
    print(("attach_openresty_spec: workers %d, %d: cheap %.1f %%, dear %.1f %% of split (%d%% of the weight)")
      :format(workers[1], workers[2], 100 * share, 100 * (1 - share), math.floor(100 * (cheap + dear) / all)))
    assert.is_true(math.abs(share - 0.25) <= 0.05, ("cheap %.3f of split"):format(share))
    local txt = shell.read_file(report) or ""
    assert.matches("Attached to process " .. workers[2] .. " %(/usr/sbin/nginx, LuaJIT 2%.1", txt)

    -- after: the same fds, RSS within 1 MiB (what perfev wrote lives in perfev)
    for _, wk in ipairs(workers) do
      -- the load's connections close as nginx reads their end: waited for
      O.eventually(function() return O.fds(wk) == fds0[wk] end, 60)
      assert.equal(fds0[wk], O.fds(wk), "worker " .. wk .. "'s fds: "
                   .. O.sh("ls -l /proc/" .. wk .. "/fd | sed 's/.* -> //' | sort | uniq -c | tr '\\n' ' '"))
      local rss = rss_kb(wk)
      assert.is_true(math.abs(rss - rss0[wk]) < 1024, ("worker %d RSS %d -> %d kB"):format(wk, rss0[wk], rss))
      assert.is_nil((shell.read_file("/proc/" .. wk .. "/status") or ""):match("TracerPid:%s*[1-9]"))
    end
  end)
end)
