-- examples/openresty for real: Debian's nginx with libnginx-mod-http-lua
-- (OpenResty's ngx_http_lua on LuaJIT) runs examples/openresty/nginx.conf
-- from its own prefix directory on 127.0.0.1 at a free port, takes 1000
-- requests, and serves perfev.resty's metrics, which promtool (Prometheus's
-- own parser and linter) checks. Whichever runtime runs the suite, nginx
-- loads the core built against LuaJIT (make core-luajit).
local shell = require "spec.support.shell"

local REQUESTS = 1000
local CLIENTS = 4
local WORKERS = 2        -- worker_processes in nginx.conf
local EVENTS = 3         -- perfev.resty's default group

local REPO = assert(os.getenv("PWD"))
local NGINX = "/usr/sbin/nginx"
local MODULE = "/usr/lib/nginx/modules/ngx_http_lua_module.so"

-- Output and exit status of a shell command (the status from the shell:
-- LuaJIT's popen:close() does not report it).
-- Nothing this spec starts loads the ASan core (nginx runs the LuaJIT
-- build): its commands run without check-asan's LD_PRELOAD of libasan,
-- under which curl and ps hang at start (a deadlock in setlocale).
local function sh(cmd) return shell.sh("unset LD_PRELOAD; " .. cmd) end

local function run(cmd)
  local out = sh(cmd .. " 2>&1; echo \"exit=$?\"")
  local status = tonumber(out:match("exit=(%d+)%s*$"))
  return (out:gsub("exit=%d+%s*$", "")), status
end

local function write(path, s)
  local f = assert(io.open(path, "w"))
  f:write(s)
  f:close()
end

local function fds(pid)
  local out = sh("ls /proc/" .. pid .. "/fd 2>/dev/null")
  local n = 0
  for _ in out:gmatch("%d+") do n = n + 1 end
  return n
end

local function perf_fds(pid)
  local out = sh("ls -l /proc/" .. pid .. "/fd 2>/dev/null")
  local n = 0
  for _ in out:gmatch("perf_event") do n = n + 1 end
  return n
end

local function workers(master)
  local out = sh("ps -o pid= --ppid " .. master)
  local t = {}
  for pid in out:gmatch("%d+") do t[#t + 1] = tonumber(pid) end
  table.sort(t)
  return t
end

-- Polls cond() up to `tries` times, 50 ms apart; returns its last result.
local function eventually(cond, tries)
  local r
  for _ = 1, tries or 100 do
    r = cond()
    if r then return r end
    sh("sleep 0.05")
  end
  return r
end

-- The value of metric{uri="uri"} in an exposition text.
local function metric(text, name, uri)
  local v = text:match("\n" .. name .. '{uri="' .. uri:gsub("%p", "%%%0") .. '"} (%S+)')
  return tonumber(v)
end

-- Why this spec cannot run here, or nil.
local function blocker()
  if not shell.exists(NGINX) or not shell.exists(MODULE) then
    return "nginx with libnginx-mod-http-lua is not installed (make deps installs them)"
  end
  local out, status = run("make -s core-luajit")
  if status ~= 0 then
    return "the C core does not build on LuaJIT yet (make core-luajit): "
           .. (out:match("[^\n]*error[^\n]*") or out:sub(1, 300))
  end
  out, status = run("luajit -e \"package.path='lua/?.lua;lua/?/init.lua;'..package.path "
                    .. "package.cpath='build/luajit/?.so;'..package.cpath require 'perfev.resty'\"")
  if status ~= 0 then
    return "perfev's Lua layer does not load on LuaJIT yet: " .. (out:match("[^\n]+") or out)
  end
  return nil
end

describe("examples/openresty: perfev.resty in nginx", function()
  local why = blocker()
  if why then
    pending(why)
    return
  end

  local prefix, port, master
  setup(function()
    prefix = shell.tmpdir()
    local out, status = run(("mkdir -p %s/logs %s/lib && ln -s %s/lua %s/lua && ln -s %s/build/luajit/perfev %s"
                             .. " && ln -s %s/examples/openresty %s/app")
      :format(prefix, prefix, REPO, prefix, REPO, prefix .. "/lib/perfev", REPO, prefix))
    assert(status == 0, out)
    local conf = assert(shell.read_file(REPO .. "/examples/openresty/nginx.conf"))
    assert(select(2, conf:gsub("listen 127%.0%.0%.1:8080;", "")) == 1, "nginx.conf has one listen 127.0.0.1:8080")
    -- a free port: nginx itself says when one is taken; try another then
    local seed = tonumber(tostring(prefix):match("%w+$"), 36) or os.time()
    for try = 1, 20 do
      port = 20000 + (seed + try * 7919) % 40000
      write(prefix .. "/nginx.conf", (conf:gsub("listen 127%.0%.0%.1:8080;", "listen 127.0.0.1:" .. port .. ";")))
      -- as root the workers would switch to nobody, to whom this machine's
      -- perf_event_paranoid may refuse kernel-side counts (doc/openresty.md)
      out, status = run(("%s -p %s -c %s/nginx.conf -g 'user root;'"):format(NGINX, prefix, prefix))
      if status == 0 or not out:find("Address already in use", 1, true) then break end
    end
    assert(status == 0, out)
    master = tonumber(eventually(function() return shell.read_file(prefix .. "/logs/nginx.pid") end))
    assert(master, "nginx wrote no pid file")
  end)

  teardown(function()
    if master then
      sh("kill -QUIT " .. master)
      eventually(function() return not shell.exists("/proc/" .. master) end)
      if shell.exists("/proc/" .. master) then sh("kill -KILL " .. master) end
    end
    shell.rmdir(prefix)
  end)

  it("serves 1000 requests with no error, constant fds per worker, and counts that grow with the work", function()
    -- every worker has run init_worker_by_lua and holds its group
    local ws = eventually(function()
      local t = workers(master)
      if #t ~= WORKERS then return nil end
      for _, w in ipairs(t) do if perf_fds(w) ~= EVENTS then return nil end end
      return t
    end)
    assert(ws, "nginx did not start " .. WORKERS .. " workers holding " .. EVENTS .. " perf fds each: "
           .. (shell.read_file(prefix .. "/logs/error.log") or ""))
    local before = {}
    for _, w in ipairs(ws) do before[w] = fds(w) end

    -- CLIENTS curls in parallel, each REQUESTS / CLIENTS requests on one
    -- keep-alive connection, light and heavy in turn
    local base = "http://127.0.0.1:" .. port
    local cmds = {}
    for c = 1, CLIENTS do
      local lines = {}
      for i = 1, REQUESTS / CLIENTS do
        lines[#lines + 1] = ('url = "%s/work/%s"\noutput = "/dev/null"'):format(base, i % 2 == 0 and "heavy" or "light")
      end
      write(("%s/client%d.cfg"):format(prefix, c), table.concat(lines, "\n") .. "\n")
      cmds[c] = ("curl -s -K %s/client%d.cfg -w '%%{http_code}\\n' > %s/client%d.out &")
        :format(prefix, c, prefix, c)
    end
    run(table.concat(cmds, " ") .. " wait")
    local codes = {}
    for c = 1, CLIENTS do
      for code in (shell.read_file(("%s/client%d.out"):format(prefix, c)) or ""):gmatch("%d+") do
        codes[code] = (codes[code] or 0) + 1
      end
    end
    assert.are.same({ ["200"] = REQUESTS }, codes)

    -- the same workers, each back to its fds once the connections closed
    assert.are.same(ws, workers(master))
    local after = eventually(function()
      local t = {}
      for _, w in ipairs(ws) do
        t[w] = fds(w)
        if t[w] ~= before[w] then return nil end
      end
      return t
    end) or (function()
      local t = {}
      for _, w in ipairs(ws) do t[w] = fds(w) end
      return t
    end)()
    assert.are.same(before, after)

    local text, status = run("curl -s " .. base .. "/metrics")
    assert.are.equal(0, status)
    if shell.have("promtool") then
      local out, lint = run(("printf '%%s' %s | promtool check metrics"):format(shell.quote(text)))
      assert.are.equal(0, lint, out)
    end
    local P = "perfev_request_"
    local n_light, n_heavy = metric(text, P .. "requests_total", "/work/light"),
                             metric(text, P .. "requests_total", "/work/heavy")
    assert.are.equal(REQUESTS / 2, n_light, text)
    assert.are.equal(REQUESTS / 2, n_heavy, text)
    local function avg(name, uri, n) return metric(text, P .. name, uri) / n end
    local cpu_l, cpu_h = avg("task_clock_seconds_total", "/work/light", n_light),
                         avg("task_clock_seconds_total", "/work/heavy", n_heavy)
    local pf_l, pf_h = avg("page_faults_total", "/work/light", n_light),
                       avg("page_faults_total", "/work/heavy", n_heavy)
    local cs_l, cs_h = avg("context_switches_total", "/work/light", n_light),
                       avg("context_switches_total", "/work/heavy", n_heavy)
    assert.is_true(cpu_h > 2 * cpu_l, ("task-clock per request: heavy %g s, light %g s"):format(cpu_h, cpu_l))
    -- heavy maps a fresh 4 MiB string (fewer faults than its 1024 pages
    -- when the kernel backs it with huge pages)
    assert.is_true(pf_h >= 10 and pf_h > 10 * pf_l, ("page faults per request: heavy %g, light %g"):format(pf_h, pf_l))
    -- heavy sleeps 1 ms: its worker blocks at least once
    assert.is_true(cs_h >= 1 and cs_h > cs_l, ("context switches per request: heavy %g, light %g"):format(cs_h, cs_l))

    local log = shell.read_file(prefix .. "/logs/error.log") or ""
    assert.is_nil(log:match("%[error%][^\n]*") or log:match("%[crit%][^\n]*") or log:match("%[alert%][^\n]*"))

    local fd_text = {}
    for _, w in ipairs(ws) do fd_text[#fd_text + 1] = ("%d: %d -> %d"):format(w, before[w], after[w]) end
    print(("\nopenresty: %d requests, 0 errors, fds per worker %s; per request light/heavy: "
           .. "task-clock %.3f/%.3f ms, page faults %.1f/%.1f, context switches %.2f/%.2f")
          :format(REQUESTS, table.concat(fd_text, ", "), cpu_l * 1e3, cpu_h * 1e3, pf_l, pf_h, cs_l, cs_h))
  end)

  it("profiles the next N requests of a location by Lua function, summed over the workers", function()
    local N = 200
    local base = "http://127.0.0.1:" .. port
    local out, status = run(("curl -s '%s/profile?n=%d&loc=/work/split'"):format(base, N))
    assert.equal(0, status)
    assert.matches("of " .. N .. " requests of /work/split profiled on cpu%-clock", out)
    -- two clients in parallel (both workers take requests), and requests
    -- of another location meanwhile, which are not taken
    local cmds = {}
    for c = 1, 2 do
      local lines = {}
      for _ = 1, N / 2 do
        lines[#lines + 1] = ('url = "%s/work/split"\noutput = "/dev/null"'):format(base)
        lines[#lines + 1] = ('url = "%s/work/light"\noutput = "/dev/null"'):format(base)
      end
      write(("%s/split%d.cfg"):format(prefix, c), table.concat(lines, "\n") .. "\n")
      cmds[c] = ("curl -s -K %s/split%d.cfg -w '%%{http_code}\\n' > %s/split%d.out &"):format(prefix, c, prefix, c)
    end
    run(table.concat(cmds, " ") .. " wait")
    for c = 1, 2 do
      local codes = shell.read_file(("%s/split%d.out"):format(prefix, c)) or ""
      assert.equal(N, select(2, codes:gsub("200", "")), codes)
    end
    -- the log phases of the last requests may still run: poll the status
    local st = eventually(function()
      local s = run("curl -s " .. base .. "/profile")
      return s:find("(complete)", 1, true) and s
    end)
    assert.truthy(st, "the session did not complete: " .. run("curl -s " .. base .. "/profile"))
    assert.matches(N .. " of " .. N .. " requests of /work/split", st)

    -- the folded stacks: the handler's functions, named, costing 1:3
    local folded = run("curl -s '" .. base .. "/profile?format=folded'")
    local cheap, dear, all, other_loc = 0, 0, 0, 0
    for line in folded:gmatch("[^\n]+") do
      local stack, w = line:match("^(.*) (%d+)$")
      w = tonumber(w)
      all = all + w
      if stack:match(";cheap %([^)]*app/handlers%.lua:%d+%)") then cheap = cheap + w end
      if stack:match(";dear %([^)]*app/handlers%.lua:%d+%)") then dear = dear + w end
      if stack:match("light") then other_loc = other_loc + w end
    end
    local share = cheap / (cheap + dear)
    print(("\nopenresty profile: %d requests of /work/split, cheap:dear %.1f%%:%.1f%%, %.1f%% of the weight in them")
          :format(N, 100 * share, 100 * (1 - share), 100 * (cheap + dear) / all))
    assert.is_true(math.abs(share - 0.25) <= 0.05, ("cheap/(cheap+dear): %.3f"):format(share))
    assert.is_true((cheap + dear) / all >= 0.5, ("%.3f"):format((cheap + dear) / all))
    assert.equal(0, other_loc)
    assert.matches("main chunk %(content_by_lua%(nginx%.conf:%d+%)%);split %(", folded)

    -- the same profile as speedscope JSON, and the text report
    local json = run("curl -s '" .. base .. "/profile?format=speedscope'")
    local doc = require("cjson").decode(json)
    assert.equal("https://www.speedscope.app/file-format-schema.json", doc["$schema"])
    local names = {}
    for _, f in ipairs(doc.shared.frames) do names[f.name:match("^(%S+)")] = true end
    assert.is_true(names.cheap and names.dear and names.split or false)
    local text = run("curl -s '" .. base .. "/profile?format=text'")
    assert.matches("# perfev profile: Lua functions on event 'cpu%-clock'", text)
    local log = shell.read_file(prefix .. "/logs/error.log") or ""
    assert.is_nil(log:match("%[error%][^\n]*") or log:match("%[crit%][^\n]*") or log:match("%[alert%][^\n]*"))
  end)
end)
