-- A real Prometheus server (Debian's `prometheus`) scraping perfev.resty's
-- /metrics from examples/openresty, every second, on 127.0.0.1, while a
-- load generator (wrk) sends /work/light and /work/split; then its HTTP API
-- is asked what an operator asks: sum(rate(perfev_request_requests_total
-- [1m])) against what wrk counted (within 2 %), and histogram_quantile of
-- the per-request CPU time against what the handlers cost, measured here
-- outside nginx (examples/openresty/handlers.lua's split, in LuaJIT).
local shell = require "spec.support.shell"
local O = require "spec.support.openresty"
local cjson = require "cjson"

local LOAD_SECONDS = 12
local sh, run = O.sh, O.run

-- A free TCP port on 127.0.0.1 (none listening there now).
local function free_port(seed)
  local used = sh("ss -Htln 2>/dev/null")
  for try = 1, 50 do
    local port = 20000 + (seed + try * 7919) % 40000
    if not used:find("127%.0%.0%.1:" .. port .. "%s") and not used:find("%*:" .. port .. "%s") then return port end
  end
  error("no free port")
end

-- query(base, promql, time) -> the API's data.result
local function query(base, promql, time)
  local out = run(("curl -s %s/api/v1/query --data-urlencode %s %s"):format(
    base, shell.quote("query=" .. promql), time and ("--data-urlencode time=" .. time) or ""))
  local ok, doc = pcall(cjson.decode, out)
  assert(ok and doc.status == "success", promql .. ": " .. out)
  return doc.data.result
end

-- The one value of an instant query (nil when the result is empty).
local function value(base, promql, time)
  local r = query(base, promql, time)
  if #r == 0 then return nil end
  assert.are.equal(1, #r, promql)
  return tonumber(r[1].value[2])
end

-- What examples/openresty/handlers.lua's split() costs, in seconds of CPU
-- per call: LuaJIT (nginx's) outside nginx, the median of 5 runs of 30.
local function split_cost()
  local script = [[
    ngx = { say = function() end }
    local h = dofile("examples/openresty/handlers.lua")
    for _ = 1, 10 do h.split() end
    local t = {}
    for r = 1, 5 do
      local c = os.clock()
      for _ = 1, 30 do h.split() end
      t[r] = (os.clock() - c) / 30
    end
    table.sort(t)
    print(("%.9f"):format(t[3]))
  ]]
  local out = run("luajit -e " .. shell.quote(script))
  return assert(tonumber(out:match("[%d.]+")), out)
end

-- The upper bounds of perfev.resty's CPU time buckets around v: the one
-- below it (0 if none) and the one above the bucket above it.
local function around(v)
  local bounds = require("perfev.resty.prom").SECONDS
  local lo, k = 0, 1
  while k <= #bounds and bounds[k] < v do
    lo = bounds[k]
    k = k + 1
  end
  return lo, bounds[k + 1] or math.huge
end

describe("examples/openresty scraped by a real Prometheus server", function()
  local why = O.blocker()
  if not why and not shell.have("prometheus") then why = "no prometheus (make deps installs Debian's prometheus)" end
  if not why and not shell.have("wrk") then why = "no wrk (make deps installs Debian's wrk)" end
  if why then
    pending(why)
    return
  end

  local dir, master, prom_pid, port, prom_port
  setup(function()
    dir = shell.tmpdir()
    sh("mkdir -p " .. dir .. "/nginx " .. dir .. "/tsdb")
    local out
    port, master, out = O.start(dir .. "/nginx")
    assert(master, out)
    assert(O.ready(master, O.EVENTS), "no workers holding their events")
    prom_port = free_port(port + 1)
    O.write(dir .. "/prometheus.yml", ([[
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: perfev
    metrics_path: /metrics
    static_configs:
      - targets: ["127.0.0.1:%d"]
        labels: { node: "example" }
]]):format(port))
    prom_pid = tonumber(sh(("prometheus --config.file=%s/prometheus.yml --storage.tsdb.path=%s/tsdb "
                            .. "--web.listen-address=127.0.0.1:%d > %s/prometheus.log 2>&1 & echo $!")
                           :format(dir, dir, prom_port, dir)):match("%d+"))
  end)

  teardown(function()
    if prom_pid then
      sh("kill " .. prom_pid)
      O.eventually(function() return not shell.exists("/proc/" .. prom_pid) end)
    end
    O.stop(master)
    shell.rmdir(dir)
  end)

  it("counts the requests wrk sent, and the quantiles of their CPU time are the handlers' costs", function()
    local base = "http://127.0.0.1:" .. port
    local api = "http://127.0.0.1:" .. prom_port
    local log = function() return shell.read_file(dir .. "/prometheus.log") or "" end
    -- Prometheus up and scraping perfev: up == 1, the exposition parsed
    assert(O.eventually(function() return run("curl -sf " .. api .. "/-/ready") ~= "" end, 400),
           "Prometheus did not start: " .. log():sub(-2000))
    assert(O.eventually(function() return value(api, 'up{job="perfev"}') == 1 end, 300),
           "Prometheus did not scrape perfev: " .. log():sub(-2000))

    -- a few requests of each location, scraped before the load: the
    -- series exist from there (rate() starts from them)
    for _ = 1, 3 do
      run("curl -s -o /dev/null " .. base .. "/work/light")
      run("curl -s -o /dev/null " .. base .. "/work/split")
    end
    assert(O.eventually(function()
      return value(api, 'sum(perfev_request_requests_total{uri=~"/work/(light|split)"})') == 6
    end, 100), "the warm-up requests did not reach Prometheus")

    -- the load: two wrks at once, each on one location
    local outs = {}
    for _, loc in ipairs { "light", "split" } do
      outs[loc] = dir .. "/wrk-" .. loc .. ".out"
    end
    run(("wrk -t1 -c2 -d%ds %s/work/light > %s & wrk -t1 -c2 -d%ds %s/work/split > %s & wait")
        :format(LOAD_SECONDS, base, outs.light, LOAD_SECONDS, base, outs.split))
    local sent = {}
    for loc, path in pairs(outs) do
      local out = shell.read_file(path) or ""
      sent[loc] = tonumber(out:match("(%d+) requests in"))
      assert(sent[loc] and sent[loc] > 0, out)
      assert.is_nil(out:match("Non%-2xx[^\n]*"), out)
    end

    -- every worker's sums in /metrics (each flushes every second) and
    -- scraped: the total Prometheus has stops moving and is /metrics's
    -- (unchanged over 60 polls, 3 s or more: under load a worker's flush
    -- comes late, and two polls within one second matched a total that
    -- lacked 530 requests)
    local total, still = nil, 0
    assert(O.eventually(function()
      local text = run("curl -s " .. base .. "/metrics")
      local now = (O.metric(text, "perfev_request_requests_total", "/work/light") or 0)
                  + (O.metric(text, "perfev_request_requests_total", "/work/split") or 0)
      if now ~= total then
        total, still = now, 0
        return false
      end
      still = still + 1
      if still < 60 then return false end
      return value(api, 'sum(perfev_request_requests_total{uri=~"/work/(light|split)"})') == total
    end, 800), "Prometheus did not get the last counts")
    -- evaluated at the last scrape (no extrapolation past it); the window
    -- holds every sample since the series began, the warm-up's first
    local at = value(api, 'max(timestamp(perfev_request_requests_total{uri="/work/light"}))')
    local rate = value(api, 'sum(rate(perfev_request_requests_total{uri=~"/work/(light|split)"}[1m]))', at)
    local counted = rate * 60
    local want = sent.light + sent.split + 6
    print(("\nprometheus: wrk sent %d (light %d, split %d) + 6 warm-up; perfev counted %d; "
           .. "sum(rate(perfev_request_requests_total[1m])) * 60 = %.1f (%+.2f %%)")
          :format(sent.light + sent.split, sent.light, sent.split, total, counted, 100 * (counted / want - 1)))
    assert.is_true(math.abs(counted / want - 1) <= 0.02, ("%.1f against %d"):format(counted, want))
    -- perfev's own count is wrk's, but for the requests in flight when wrk
    -- stopped (it does not count them; nginx logs them): 2 per location
    assert.is_true(total >= want and total <= want + 4, ("%d against %d"):format(total, want))

    -- the quantiles of the per-request CPU time, as a dashboard asks them
    local function q(phi, uri)
      return value(api, ('histogram_quantile(%g, sum by (le) (rate(perfev_request_task_clock_seconds_bucket'
                         .. '{uri="%s"}[1m])))'):format(phi, uri), at)
    end
    local cost = split_cost()
    local split50, split99 = q(0.5, "/work/split"), q(0.99, "/work/split")
    local light50, light99 = q(0.5, "/work/light"), q(0.99, "/work/light")
    print(("prometheus: CPU time per request, p50/p99: split %.3f/%.3f ms (its handler alone: %.3f ms), "
           .. "light %.3f/%.3f ms"):format(split50 * 1e3, split99 * 1e3, cost * 1e3, light50 * 1e3, light99 * 1e3))
    -- split's requests cost its handler (and a little of nginx's Lua
    -- around it): its median and its 99th percentile lie in the bucket
    -- that holds the handler's cost or the one above it (the buckets are
    -- 2 to 2.5 times apart: that is the resolution)
    local lo, hi = around(cost)
    assert.is_true(split50 >= lo and split50 <= hi, ("p50 %g not in [%g, %g]"):format(split50, lo, hi))
    assert.is_true(split99 >= lo and split99 <= hi, ("p99 %g not in [%g, %g]"):format(split99, lo, hi))
    -- a light request (a 1000-step loop) costs a hundredth of a split one
    -- or less, nearly all of it nginx's and perfev's: even its 99th
    -- percentile is far below split's median (measured: 0.23 to 0.25 ms,
    -- the top of its bucket, against 3.8 ms; a quarter leaves room for a
    -- bucket more)
    assert.is_true(light99 < split50 / 4, ("light p99 %g, split p50 %g"):format(light99, split50))
    -- the histogram's count is the requests counter, scraped together
    assert.are.equal(value(api, 'perfev_request_requests_total{uri="/work/split"}', at),
                     value(api, 'perfev_request_task_clock_seconds_count{uri="/work/split"}', at))
  end)
end)
