-- examples/openresty for the specs that run it (spec/openresty*_spec.lua):
-- nginx started as doc/openresty.md says (examples/openresty/run.sh) from
-- its own prefix directory on 127.0.0.1 at a free port, and stopped (or a
-- spec's whole site: M.site); shell helpers that work under check-asan;
-- polling; go tool pprof run and read (M.pprof, M.top).
--   local O = require "spec.support.openresty"
local shell = require "spec.support.shell"

local M = {}

M.WORKERS = 2        -- worker_processes in examples/openresty/nginx.conf
M.EVENTS = 3         -- perfev.resty's default group
local WORKERS = M.WORKERS

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

-- Why the example cannot run here, or nil.
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

-- start(prefix[, env]) -> port, master | nil, nil, output: the recipe as
-- doc/openresty.md writes it, `sh examples/openresty/run.sh PORT`, with its
-- prefix directory in `prefix` (NGINX_PREFIX) and env prepended (e.g.
-- "NGINX_USER=nobody"); a free port: nginx itself says when one is taken,
-- another is tried then.
local function start(prefix, env)
  -- workers that are not root traverse the prefix directory
  sh("chmod 755 " .. shell.quote(prefix))
  local seed = tonumber(tostring(prefix):match("%w+$"), 36) or os.time()
  local out, status
  for try = 1, 20 do
    local port = 20000 + (seed + try * 7919) % 40000
    -- a try that found its port taken leaves its bind errors in the log,
    -- which the specs read as the site's: each try starts a log of its own
    os.remove(prefix .. "/logs/error.log")
    out, status = run(("NGINX_PREFIX=%s %s sh examples/openresty/run.sh %d")
                      :format(shell.quote(prefix), env or "", port))
    if status == 0 then
      return port, tonumber(shell.read_file(prefix .. "/logs/nginx.pid")), out
    end
    if not out:find("Address already in use", 1, true) then break end
  end
  return nil, nil, out
end

-- stop(master): nginx stopped, waited for (its workers close their events)
local function stop(master)
  if not master then return end
  sh("kill -QUIT " .. master)
  eventually(function() return not shell.exists("/proc/" .. master) end)
  if shell.exists("/proc/" .. master) then sh("kill -KILL " .. master) end
end

-- The workers of `master` once each holds its group of `events` perf fds.
local function ready(master, events)
  return eventually(function()
    local t = workers(master)
    if #t ~= WORKERS then return nil end
    for _, w in ipairs(t) do if perf_fds(w) ~= events then return nil end end
    return t
  end)
end

-- The value of metric{uri="uri"} in an exposition text.
local function metric(text, name, uri)
  local v = text:match("\n" .. name .. '{uri="' .. uri:gsub("%p", "%%%0") .. '"} (%S+)')
  return tonumber(v)
end

-- /metrics once it counts n requests of uri (each worker adds its sums to
-- the dict every second, the one answering its own first), or as it is
-- after 3 s.
local function metrics_with(base, uri, n)
  local text
  eventually(function()
    text = run("curl -s " .. base .. "/metrics")
    return (metric(text, "perfev_request_requests_total", uri) or 0) >= n
  end, 60)
  return text
end

-- site{ conf =, edits =, fds = } -> site: nginx started for a spec in a
-- directory of its own (site.dir: nginx/ the prefix, home/ go's home),
-- from examples/openresty/nginx.conf, or `conf` (a configuration's text,
-- with the example's `listen 127.0.0.1:8080;`), each of `edits` ({ pattern,
-- replacement } of string.gsub) changing it exactly once; once each worker
-- holds `fds` perf fds (default M.EVENTS, its group of counters). Raises
-- when it cannot. site.port, site.master, site.base (http://127.0.0.1:PORT);
-- site:stop() stops nginx and removes the directory.
local function site(opts)
  opts = opts or {}
  local dir = shell.tmpdir()
  sh("mkdir -p " .. dir .. "/nginx " .. dir .. "/home")
  local s = { dir = dir }
  function s.stop()
    stop(s.master)
    shell.rmdir(dir)
  end
  local env
  if opts.conf or opts.edits then
    local conf = opts.conf or assert(shell.read_file("examples/openresty/nginx.conf"))
    for _, e in ipairs(opts.edits or {}) do
      local n
      conf, n = conf:gsub(e[1], e[2])
      if n ~= 1 then
        s.stop()
        error(("the configuration has %d places for '%s', not 1"):format(n, e[1]), 2)
      end
    end
    write(dir .. "/nginx.conf", conf)
    env = "NGINX_CONF=" .. dir .. "/nginx.conf"
  end
  local out
  s.port, s.master, out = start(dir .. "/nginx", env)
  if not s.master then
    s.stop()
    error(out, 2)
  end
  if not ready(s.master, opts.fds or M.EVENTS) then
    local log = shell.read_file(dir .. "/nginx/logs/error.log") or ""
    s.stop()
    error("no workers holding their events: " .. log:sub(-1500), 2)
  end
  s.base = "http://127.0.0.1:" .. s.port
  return s
end

-- pprof(home, args[, before]) -> output, status: go tool pprof with its
-- home (where it saves the profiles it fetches) in `home`, after `before`
-- (commands started in the background, waited for after it).
local function pprof(home, args, before)
  return run(("%sHOME=%s PPROF_TMPDIR=%s go tool pprof %s 2>&1; s=$?; wait; (exit $s)")
             :format(before or "", home, home, args))
end

-- top(text) -> { [name] = { flat =, cum = } }: go tool pprof -top's lines,
-- in ms for times, counts otherwise.
local function top(text)
  local scale = { ns = 1e-6, us = 1e-3, ["\194\181s"] = 1e-3, ms = 1, s = 1e3, [""] = 1 }
  local function num(v)
    local n, unit = v:match("^([%d.]+)(%D*)$")
    return n and scale[unit] and tonumber(n) * scale[unit]
  end
  local t = {}
  for line in text:gmatch("[^\n]+") do
    local flat, cum, name = line:match("^%s*(%S+)%s+%S+%%%s+%S+%%%s+(%S+)%s+%S+%%%s+(.-)%s*$")
    if flat and num(flat) and num(cum) then t[name] = { flat = num(flat), cum = num(cum) } end
  end
  return t
end

-- cum(text, name) -> go tool pprof -top's cum of `name` (ms) | nil
local function cum(text, name)
  local f = top(text)[name]
  return f and f.cum
end

M.sh = sh
M.run = run
M.write = write
M.fds = fds
M.perf_fds = perf_fds
M.workers = workers
M.eventually = eventually
M.blocker = blocker
M.start = start
M.stop = stop
M.ready = ready
M.metric = metric
M.metrics_with = metrics_with
M.site = site
M.pprof = pprof
M.top = top
M.cum = cum

return M
