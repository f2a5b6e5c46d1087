-- bench/resty.lua: what perfev.resty's per-request measurement costs nginx,
-- in requests/s from a load generator (wrk, Debian's `wrk`) against the same
-- nginx configuration with no-op phases, in one run (the ratios are the
-- claim; absolute rates vary from machine to machine, and on a machine
-- shared with other work from one second to the next).
--   make bench                  (or: lua5.4 bench/resty.lua [rounds])
--   PERFEV_BENCH_SECONDS=5      seconds of load per round and configuration
--   PERFEV_BENCH_CONNS=50       wrk's connections (-c); its threads: -t2
--   PERFEV_BENCH_ONLY=a,b       only the configurations whose names hold a or b
--                               (and the first, the base)
--   PERFEV_BENCH_BASE=DIR       also DIR's perfev (another checkout's lua/,
--                               e.g. `git worktree add /tmp/base main`: DIR
--                               /tmp/base/lua) under the same phases, to
--                               compare two revisions in one run
--
-- Each configuration is its own nginx (2 workers, as root, like
-- examples/openresty/run.sh) on 127.0.0.1, serving /work/light (a 1000-step
-- loop: the cheapest request, where a per-request cost shows most); one
-- configuration takes load at a time, the others sit idle. Rounds alternate
-- the order of the configurations; each figure is the median over the
-- rounds. Beside the requests/s, the CPU time the workers took per request
-- (/proc/PID/schedstat): what sets the rate once the CPUs are saturated,
-- and steadier than the rate where other processes share the CPUs.
local B = require "bench.support"
local shell = require "spec.support.shell"

local ROUNDS = tonumber(arg and arg[1]) or tonumber(os.getenv("PERFEV_BENCH_ROUNDS")) or 5
local SECONDS = tonumber(os.getenv("PERFEV_BENCH_SECONDS")) or 5
local CONNS = tonumber(os.getenv("PERFEV_BENCH_CONNS")) or 50
local BASE = os.getenv("PERFEV_BENCH_BASE")
local REPO = shell.trim(B.sh("pwd"))

local NGINX_MODULE = "/usr/lib/nginx/modules/ngx_http_lua_module.so"

-- The configurations: what rewrite_by_lua and log_by_lua run for /work/
-- (init: init_worker_by_lua; lua: the directory of perfev's Lua modules).
local START = 'require("perfev.resty").start()'
local FINISH = [[local ok, err = require("perfev.resty").finish()
                 if not ok then ngx.log(ngx.ERR, err) end]]
local INIT = [[local ok, err = require("perfev.resty").init{ dict = "perfev" }
               if not ok then ngx.log(ngx.ERR, err) end]]
local INIT_NO_HIST = [[local ok, err = require("perfev.resty").init{ dict = "perfev", buckets = false }
                       if not ok then ngx.log(ngx.ERR, err) end]]
-- continuous profiling (pprof_init{ continuous = true }: 49 Hz per worker,
-- folded into the dict every second) beside what the others run
local CONTINUOUS = [[
               local ok2, err2 = require("perfev.resty").pprof_init{ continuous = true }
               if not ok2 then ngx.log(ngx.ERR, err2) end]]
local CONFIGS = {
  { name = "no-op phases", init = INIT, rewrite = "local _ = 1", log = "local _ = 1" },
  { name = "no-op phases + continuous", init = INIT .. CONTINUOUS, rewrite = "local _ = 1", log = "local _ = 1" },
  -- the floor of any per-request count: the two read(2)s of the group,
  -- nothing kept
  { name = "two reads only", init = INIT,
    rewrite = 'local r = require("perfev.resty").default r.g:read(r.t)',
    log = 'local r = require("perfev.resty").default r.g:read(r.t)' },
  { name = "counters", init = INIT_NO_HIST, rewrite = START, log = FINISH, metrics = true },
  { name = "counters + histograms", init = INIT, rewrite = START, log = FINISH, metrics = true },
  -- init{ sample = K }: one request in K measured, every one counted
  { name = "counters + hist., sample = 10", init = INIT:gsub('dict = "perfev"', 'dict = "perfev", sample = 10'),
    rewrite = START, log = FINISH, metrics = true },
  { name = "counters + hist., sample = 100", init = INIT:gsub('dict = "perfev"', 'dict = "perfev", sample = 100'),
    rewrite = START, log = FINISH, metrics = true },
  -- start() notes each request's pprof labels while the profiler runs
  { name = "counters + hist. + continuous", init = INIT .. CONTINUOUS, rewrite = START, log = FINISH,
    metrics = true },
  { name = "counters + hist. + cont., no labels", init = INIT .. CONTINUOUS:gsub("continuous = true",
    "continuous = { labels = false }"), rewrite = START, log = FINISH, metrics = true },
}
-- PERFEV_BENCH_ONLY=a,b: the configurations whose names hold a or b (and the first, the base)
local only = os.getenv("PERFEV_BENCH_ONLY")
if only then
  local kept = { CONFIGS[1] }
  for i = 2, #CONFIGS do
    for w in only:gmatch("[^,]+") do
      if CONFIGS[i].name:find(w, 1, true) then kept[#kept + 1] = CONFIGS[i] break end
    end
  end
  CONFIGS = kept
end
if BASE then
  CONFIGS[#CONFIGS + 1] = { name = "start()/finish() of " .. BASE, init = INIT, rewrite = START, log = FINISH,
                            lua = BASE, metrics = true }
end

local CONF = [[
load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;
worker_processes 2;
error_log logs/error.log warn;
pid logs/nginx.pid;
daemon on;
events { worker_connections 1024; }
http {
    access_log off;
    lua_package_path "${prefix}lua/?.lua;${prefix}lua/?/init.lua;;";
    lua_package_cpath "${prefix}lib/?.so;;";
    lua_shared_dict perfev 1m;
    lua_shared_dict perfev_pprof 4m;
    init_worker_by_lua_block { @INIT@ }
    server {
        listen 127.0.0.1:@PORT@;
        location /work/ {
            rewrite_by_lua_block { @REWRITE@ }
            log_by_lua_block { @LOG@ }
            location = /work/light {
                content_by_lua_block {
                    local x = 0
                    for i = 1, 1000 do x = x + i end
                    ngx.say("light ", x)
                }
            }
        }
        location = /metrics {
            content_by_lua_block { require("perfev.resty").serve() }
        }
        location = /debug/pprof/profile {
            content_by_lua_block { require("perfev.resty").pprof_serve() }
        }
    }
}
]]

local function why_not()
  if not B.have("wrk") then return "no wrk (Debian's wrk: make deps installs it)" end
  if not B.have("nginx") or not shell.exists(NGINX_MODULE) then
    return "no nginx with its lua module (make deps installs nginx and libnginx-mod-http-lua)"
  end
  local out, ok = B.sh("make -s core-luajit 2>&1")
  if not ok then return "make core-luajit failed: " .. out end
  if shell.trim(B.sh("id -u")) ~= "0" then return "not root: the workers run as root to count every event" end
  return nil
end

local why = why_not()
if why then
  print("bench/resty.lua: skipped: " .. why)
  return
end

local dir = B.tmpdir()
local started = {}

local function stop_all()
  for _, c in ipairs(started) do
    B.sh("kill -QUIT " .. c.master .. " 2>/dev/null")
  end
  B.sh("sleep 0.5")
  B.rmdir(dir)
end

-- Starts config c as its own nginx on a free port: c.port, c.master, c.workers.
local function start(c, i)
  local prefix = ("%s/c%d"):format(dir, i)
  B.sh(("mkdir -p %s/logs %s/lib && ln -sfn %s %s/lua && ln -sfn %s/build/luajit/perfev %s/lib/perfev")
       :format(prefix, prefix, B.quote(c.lua or (REPO .. "/lua")), prefix, REPO, prefix))
  for try = 1, 20 do
    local port = 20000 + (os.time() * 13 + i * 7919 + try * 104729) % 40000
    local conf = CONF:gsub("@(%u+)@", { INIT = c.init, PORT = tostring(port), REWRITE = c.rewrite, LOG = c.log })
    local f = assert(io.open(prefix .. "/nginx.conf", "w"))
    f:write(conf)
    f:close()
    local out, ok = B.sh(("nginx -p %s/ -c %s/nginx.conf -g 'user root root;' 2>&1"):format(prefix, prefix))
    if ok then
      B.sh("sleep 0.3")
      c.port, c.prefix = port, prefix
      c.master = tonumber(B.read_file(prefix .. "/logs/nginx.pid"))
      started[#started + 1] = c
      local ws = {}
      for pid in B.sh("ps -o pid= --ppid " .. c.master):gmatch("%d+") do ws[#ws + 1] = pid end
      c.workers = ws
      return true
    end
    if not out:find("Address already in use", 1, true) then return nil, out end
  end
  return nil, "no free port"
end

-- The CPU time the workers of c have run, in ns.
local function cpu_ns(c)
  local s = 0
  for _, w in ipairs(c.workers) do
    s = s + (tonumber((B.read_file("/proc/" .. w .. "/schedstat") or ""):match("^(%d+)")) or 0)
  end
  return s
end

-- One round of load on c: requests/s, requests, worker CPU ns per request.
local function load(c, secs)
  local before = cpu_ns(c)
  local out = B.sh(("wrk -t2 -c%d -d%ds http://127.0.0.1:%d/work/light 2>&1"):format(CONNS, secs, c.port))
  local after = cpu_ns(c)
  local n = tonumber(out:match("(%d+) requests in"))
  local rate = tonumber(out:match("Requests/sec:%s*([%d.]+)"))
  local errs = out:match("Non%-2xx[^\n]*") or out:match("Socket errors:[^\n]*")
  assert(n and rate, "wrk: " .. out)
  return rate, n, (after - before) / n, errs
end

local ok, err = pcall(function()
  for i, c in ipairs(CONFIGS) do
    assert(start(c, i))
    c.rates, c.cpus, c.n = {}, {}, 0
  end
  print(("perfev.resty benchmark: wrk -t2 -c%d, %d s per round, %d rounds, nginx 2 workers, /work/light")
        :format(CONNS, SECONDS, ROUNDS))
  -- warm-up: LuaJIT compiles the phases' traces, the dict fills
  for _, c in ipairs(CONFIGS) do
    local _, n = load(c, 1)
    c.n = c.n + n
  end
  for r = 1, ROUNDS do
    for k = 0, #CONFIGS - 1 do
      local c = CONFIGS[(r + k - 1) % #CONFIGS + 1]
      local rate, n, cpu, errs = load(c, SECONDS)
      c.rates[r], c.cpus[r], c.n = rate, cpu, c.n + n
      if c.init:find("continuous", 1, true) then
        -- what the continuous profiler measured of its own cost over the
        -- round (its samples and folds against the workers' CPU time),
        -- once the workers have folded its last second
        B.sh("sleep 1.2")
        local h = B.sh(("curl -s -D - -o /dev/null 'http://127.0.0.1:%d/debug/pprof/profile?seconds=%d'")
                       :format(c.port, SECONDS))
        c.costs = c.costs or {}
        c.costs[#c.costs + 1] = tonumber(h:match("X%-Perfev%-Overhead: ([%d.]+)%%"))
      end
      if errs then print(("  %s, round %d: %s"):format(c.name, r, errs)) end
    end
  end
  local base = CONFIGS[1]
  local base_rate, base_cpu = B.median(base.rates), B.median(base.cpus)
  for _, c in ipairs(CONFIGS) do
    local rate, cpu = B.median(c.rates), B.median(c.cpus)
    local rs = {}
    for r, v in ipairs(c.rates) do rs[r] = ("%.0f"):format(v) end
    print(("%-34s %8.0f req/s (%+6.1f %%)  worker CPU %6.2f us/request (%+5.2f us)  rounds: %s")
          :format(c.name, rate, 100 * (rate / base_rate - 1), cpu / 1e3, (cpu - base_cpu) / 1e3,
                  table.concat(rs, " ")))
  end
  -- the counts themselves: what /metrics says against what wrk got
  -- (wrk counts the responses it read; a request it dropped at the end of
  -- a round is counted by nginx and not by wrk)
  B.sh("sleep 1.5")
  for _, c in ipairs(CONFIGS) do
    if c.metrics then
      local text = B.sh(("curl -s http://127.0.0.1:%d/metrics"):format(c.port))
      local n = tonumber(text:match('\nperfev_request_requests_total{uri="/work/light"} (%d+)'))
      local m = tonumber(text:match('\nperfev_request_measured_total{uri="/work/light"} (%d+)'))
      print(("%s: /metrics counts %s requests of /work/light (%s measured), wrk %d"):format(c.name, tostring(n),
                                                                                          tostring(m), c.n))
    end
    if c.costs and #c.costs > 0 then
      local cs = {}
      for r, v in ipairs(c.costs) do cs[r] = ("%.2f"):format(v) end
      print(("%s: the continuous profiler's own cost (X-Perfev-Overhead, over each round): median %.2f %% "
             .. "of the workers' CPU time; rounds: %s"):format(c.name, B.median(c.costs), table.concat(cs, " ")))
    end
    local log = B.read_file(c.prefix .. "/logs/error.log") or ""
    if log:find("%[error%]") then print(c.name .. ": error.log: " .. log:sub(1, 500)) end
  end
end)
stop_all()
if not ok then error(err, 0) end
