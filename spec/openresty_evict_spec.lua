-- perfev.resty under a flood of distinct URIs with a lua_shared_dict too
-- small for its max_labels (issue 20, item 5): Debian's nginx with
-- ngx_http_lua runs examples/openresty/nginx.conf, with max_labels = 3000
-- (its 1 MB dict holds ~900 labels' series) and an access log, and wrk
-- sends a distinct URI per request after the long-lived /work/light
-- series. ngx_http_lua's incr with an init value made room by evicting
-- other series: /work/light's were gone, /metrics summed a third of the
-- requests, and nothing was logged. Now nothing is evicted: the labels the
-- dict cannot hold go to the overflow label ("other"), the access log's
-- requests are all in some series, /work/light's exactly, and error.log
-- says the dict is full.
local shell = require "spec.support.shell"
local O = require "spec.support.openresty"

local sh, run, eventually, metric = O.sh, O.run, O.eventually, O.metric

-- nginx as examples/openresty/run.sh starts it (its prefix directory
-- linked to the repo), the example's config changed by `edits`
local function start(prefix, edits)
  local repo = shell.trim(run("pwd"))
  sh(("mkdir -p %s/logs %s/lib && chmod 755 %s"):format(prefix, prefix, prefix))
  sh(("ln -sfn %s/lua %s/lua && ln -sfn %s/examples/openresty %s/app && ln -sfn %s/build/luajit/perfev %s/lib/perfev")
     :format(repo, prefix, repo, prefix, repo, prefix))
  local conf = assert(shell.read_file("examples/openresty/nginx.conf"))
  for _, e in ipairs(edits) do
    local n
    conf, n = conf:gsub(e[1], e[2])
    assert(n == 1, e[1])
  end
  local seed = tonumber(tostring(prefix):match("%w+$"), 36) or os.time()
  for try = 1, 20 do
    local port = 20000 + (seed + try * 7919) % 40000
    local f = assert(io.open(prefix .. "/nginx.conf", "w"))
    f:write((conf:gsub("listen 127%.0%.0%.1:8080;", "listen 127.0.0.1:" .. port .. ";")))
    f:close()
    local out, status = run(("nginx -p %s -c %s/nginx.conf -g 'user root root;' 2>&1"):format(prefix, prefix))
    if status == 0 then
      local master = eventually(function() return tonumber(shell.read_file(prefix .. "/logs/nginx.pid") or "") end)
      return port, master
    end
    if not out:find("Address already in use", 1, true) then error(out) end
  end
  error("no free port")
end

describe("perfev.resty with its dict too small for its labels", function()
  local why = O.blocker()
  if not why and not shell.have("wrk") then why = "wrk is not installed (apt-get install wrk)" end
  if not why and run("id -u") ~= "0\n" then why = "starts nginx's workers as root (run as root)" end
  if why then
    pending(why)
    return
  end

  it("evicts no series: every request is in one, the long-lived one exactly, and error.log says so", function()
    local prefix = shell.tmpdir()
    local port, master = start(prefix, {
      { 'dict = "perfev",', 'dict = "perfev", max_labels = 3000,' },
      { "access_log off;", "access_log logs/access.log;" },
    })
    local base = "http://127.0.0.1:" .. port
    local ok, err = pcall(function()
      assert.truthy(O.ready(master, O.EVENTS), "the workers did not open their events")
      run(("wrk -t1 -c4 -d2s %s/work/light"):format(base))
      local script = prefix .. "/uniq.lua"
      local f = assert(io.open(script, "w"))
      f:write([[
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/work/u" .. n .. "q" .. tostring(wrk.thread):gsub("%W", ""))
end
]])
      f:close()
      run(("wrk -t2 -c20 -d5s -s %s %s/"):format(script, base))
      -- what nginx served, from its access log
      local light, all = 0, 0
      local function served()
        light, all = 0, 0
        for line in (shell.read_file(prefix .. "/logs/access.log") or ""):gmatch("[^\n]+") do
          if line:find('"GET /work/', 1, true) then all = all + 1 end
          if line:find('"GET /work/light ', 1, true) then light = light + 1 end
        end
      end
      -- /metrics once the workers' sums are flushed (every second)
      local text, sum, labels
      eventually(function()
        served()
        text = run("curl -s " .. base .. "/metrics")
        sum, labels = 0, 0
        for v in text:gmatch('\nperfev_request_requests_total{uri="[^"]*"} (%d+)') do
          sum, labels = sum + tonumber(v), labels + 1
        end
        return sum == all
      end, 100)
      assert.truthy(light > 100, "light " .. light)
      assert.truthy(all - light > 5000, "distinct " .. (all - light))
      -- was: /work/light gone, 1,062 series summing to 29,767 of 49,191
      assert.are.equal(light, metric(text, "perfev_request_requests_total", "/work/light"))
      assert.are.equal(all, sum)
      assert.truthy(labels < 3000, labels .. " labels")
      assert.truthy(metric(text, "perfev_request_requests_total", "other") > 0)
      local log = shell.read_file(prefix .. "/logs/error.log") or ""
      assert.matches("perfev.resty: lua_shared_dict 'perfev' is full: uri '/work/u[^']*' and the new ones after it "
                     .. "are counted under 'other'", log)
      assert.is_nil(log:find("cannot add to lua_shared_dict", 1, true), log:sub(-2000))
    end)
    O.stop(master)
    shell.rmdir(prefix)
    assert(ok, err)
  end)
end)
