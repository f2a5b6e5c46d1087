-- perfev.resty's init{ sample = K } in a real nginx (2 workers, the core
-- built against LuaJIT): every request is counted, one in K measured. Two
-- instances watch the same requests: the default one with sample = 4, and
-- one measuring every request (its own dict and prefix), started inside
-- it. After wrk's load on /work/spin and /work/light:
--   * requests_total of each uri equals the access log's count of it,
--     exactly, in both instances;
--   * measured_total is one in K: each worker measures one request of each
--     run of K, so the workers' total is within 1 per worker of
--     requests / K;
--   * the sampled task-clock sum of /work/spin (a loop of 200,000 steps)
--     is K times what its measured requests counted, which the log phase
--     adds up from finish()'s results; and those requests, as the full
--     instance counted them, times K, are within a stated tolerance of
--     the full instance's sum of all: the load of /work/spin runs alone
--     first, so that its measured requests are one in K to within a run
--     per worker, and the tolerance comes from the spread of its requests'
--     CPU time, which the log phase adds up too (sum, sum of squares);
--   * the histograms' _count, from the measured requests counted K times
--     each, is K x measured_total.
local shell = require "spec.support.shell"
local O = require "spec.support.openresty"

local run = O.run
local K = 4

local CONF = [[
load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;
worker_processes 2;
error_log logs/error.log warn;
pid logs/nginx.pid;
daemon on;
events { worker_connections 256; }
http {
    log_format uri '$uri';
    access_log logs/access.log uri;
    lua_package_path "${prefix}lua/?.lua;${prefix}lua/?/init.lua;;";
    lua_package_cpath "${prefix}lib/?.so;;";
    lua_shared_dict perfev 1m;
    lua_shared_dict perfev_full 1m;
    lua_shared_dict spread 64k;
    init_worker_by_lua_block {
        local resty = require "perfev.resty"
        local ok, err = resty.init{ dict = "perfev", sample = @K@ }
        if not ok then ngx.log(ngx.ERR, err) end
        local full
        full, err = resty.new{ dict = "perfev_full", prefix = "full_" }
        if not full then ngx.log(ngx.ERR, err) end
        package.loaded["spec.full"] = full
    }
    server {
        listen 127.0.0.1:8080;
        location /work/ {
            rewrite_by_lua_block {
                local ok, err = require("perfev.resty").start()
                if not ok then ngx.log(ngx.ERR, err) end
                ok, err = package.loaded["spec.full"]:start()
                if not ok then ngx.log(ngx.ERR, err) end
            }
            log_by_lua_block {
                local d, err = package.loaded["spec.full"]:finish()
                if not d then ngx.log(ngx.ERR, err) end
                local s, uri = ngx.shared.spread, ngx.var.uri
                local inner = type(d) == "table" and d["task-clock"]
                if inner then
                    local ms = inner / 1e6
                    s:incr(uri .. " n", 1, 0)
                    s:incr(uri .. " sum", ms, 0)
                    s:incr(uri .. " sq", ms * ms, 0)
                end
                local o
                o, err = require("perfev.resty").finish()
                if not o then ngx.log(ngx.ERR, err) end
                -- a request the sampled instance measured: its count, and
                -- the full instance's of the same request
                if type(o) == "table" and inner then
                    s:incr(uri .. " own", o["task-clock"], 0)
                    s:incr(uri .. " inner", inner, 0)
                end
            }
            location = /work/spin {
                content_by_lua_block {
                    local x = 0
                    for i = 1, 200000 do x = x + i % 7 end
                    ngx.say("spin ", x)
                }
            }
            location = /work/light {
                content_by_lua_block {
                    local x = 0
                    for i = 1, 1000 do x = x + i end
                    ngx.say("light ", x)
                }
            }
        }
        location = /metrics {
            access_log off;
            content_by_lua_block { require("perfev.resty").serve() }
        }
        location = /spread {
            access_log off;
            content_by_lua_block {
                local s, u = ngx.shared.spread, ngx.var.arg_uri
                ngx.say(s:get(u .. " n"), " ", s:get(u .. " sum"), " ", s:get(u .. " sq"), " ",
                        s:get(u .. " own"), " ", s:get(u .. " inner"))
            }
        }
        location = /full {
            access_log off;
            content_by_lua_block { package.loaded["spec.full"]:serve() }
        }
    }
}
]]

describe("perfev.resty's init{ sample = K } in nginx", function()
  local why = O.blocker()
  if not why and not shell.have("wrk") then why = "no wrk (make deps installs Debian's wrk)" end
  if why then
    pending(why)
    return
  end

  local site
  setup(function()
    -- each worker: two groups of the default events
    site = O.site { conf = CONF:gsub("@K@", tostring(K)), fds = 2 * O.EVENTS }
  end)

  teardown(function()
    if site then site.stop() end
  end)

  -- the access log's requests by uri
  local function logged()
    local n = {}
    for uri in (shell.read_file(site.dir .. "/nginx/logs/access.log") or ""):gmatch("[^\n]+") do
      n[uri] = (n[uri] or 0) + 1
    end
    return n
  end

  it("counts every request, measures one in K, and estimates the sums from them", function()
    local base = site.base
    -- /work/spin alone, then /work/light
    run(("wrk -t1 -c2 -d5s %s/work/spin > %s/wrk-spin.out 2>&1"):format(base, site.dir))
    -- its requests in flight when wrk stopped are logged too: the count
    -- once it stays the same 50 ms apart
    local during
    O.eventually(function()
      local n = logged()["/work/spin"] or 0
      local same = n == during
      during = n
      return same
    end, 40)
    run(("wrk -t1 -c2 -d2s %s/work/light > %s/wrk-light.out 2>&1"):format(base, site.dir))
    local log = logged()
    local spins, lights = log["/work/spin"] or 0, log["/work/light"] or 0
    assert.equal(during, spins)
    assert.is_true(spins >= 400 and lights >= 400, ("too few requests: %d spin, %d light"):format(spins, lights))
    -- both instances' metrics once every worker has added its sums (each
    -- second), or as they are after 3 s
    local function m(t, name, uri) return O.metric(t, name, uri) end
    local text, full
    O.eventually(function()
      text, full = run("curl -s " .. base .. "/metrics"), run("curl -s " .. base .. "/full")
      for uri, n in pairs { ["/work/spin"] = spins, ["/work/light"] = lights } do
        if m(text, "perfev_request_requests_total", uri) ~= n or m(full, "full_requests_total", uri) ~= n then
          return false
        end
      end
      return true
    end, 60)
    local measured_all = 0
    for uri, n in pairs { ["/work/spin"] = spins, ["/work/light"] = lights } do
      assert.equal(n, m(text, "perfev_request_requests_total", uri), uri .. "\n" .. text)
      assert.equal(n, m(full, "full_requests_total", uri), uri .. "\n" .. full)
      assert.equal(n, m(full, "full_measured_total", uri), uri .. "\n" .. full)
      local measured = m(text, "perfev_request_measured_total", uri)
      measured_all = measured_all + measured
      -- each measured request counts K in the histogram
      assert.equal(K * measured, m(text, "perfev_request_task_clock_seconds_count", uri), uri)
      assert.equal(n, m(full, "full_task_clock_seconds_count", uri), uri)
    end
    -- one in each run of K per worker: within one per worker of the total / K
    local total = spins + lights
    assert.is_true(math.abs(measured_all - total / K) <= O.WORKERS,
                   ("%d measured of %d requests, K = %d"):format(measured_all, total, K))
    -- the sampled sum: K x the measured requests' own counts
    local sn, sum, sq, own, inner = run(("curl -s '%s/spread?uri=/work/spin'"):format(base))
                                    :match("(%S+) (%S+) (%S+) (%S+) (%S+)")
    sn, sum, sq, own, inner = tonumber(sn), tonumber(sum), tonumber(sq), tonumber(own), tonumber(inner)
    assert.equal(spins, sn)
    local est = m(text, "perfev_request_task_clock_seconds_total", "/work/spin")
    assert.is_true(math.abs(est - K * own / 1e9) <= 1e-9 * est, ("%s against %d x %d ns"):format(est, K, own))
    -- the estimate from those requests against the sum of all, both as the
    -- full instance counted them: K x the sum of the M measured, one drawn
    -- in each run of K; M is n / K to within a run per worker at each end
    -- of the load (2 x workers x K / n of the sum), and the mean of M
    -- requests drawn is off the mean of all by about cv / sqrt(M) (cv: the
    -- spread of a request's CPU time, measured); allowed: both, the second
    -- at 4 standard deviations
    local mean = sum / sn
    local cv = math.sqrt(math.max(0, sq / sn - mean * mean)) / mean
    local ms = m(text, "perfev_request_measured_total", "/work/spin")
    local exact = m(full, "full_task_clock_seconds_total", "/work/spin")
    local drawn = K * inner / 1e9
    local tol = 4 * cv / math.sqrt(ms) + 2 * O.WORKERS * K / spins
    print(("\nopenresty sample = %d: %d requests (%d spin, %d light), %d measured (%.4f); /work/spin task-clock: "
           .. "estimate %.4f s (%.4f s counted by the full instance), every request %.4f s (%+.2f %%, allowed "
           .. "%.1f %%: cv %.3f)"):format(K, total, spins, lights, measured_all, measured_all / total, est, drawn,
                                          exact, 100 * (drawn / exact - 1), 100 * tol, cv))
    assert.is_true(math.abs(drawn / exact - 1) <= tol, ("estimate %s, every request %s"):format(drawn, exact))
    assert.matches("# HELP perfev_request_task_clock_seconds_total [^\n]*estimated: one request in " .. K, text)
    local errors = shell.read_file(site.dir .. "/nginx/logs/error.log") or ""
    assert.is_nil(errors:find("%[error%]") or errors:find("stack traceback"), errors)
  end)
end)
