-- examples/openresty for real: Debian's nginx with libnginx-mod-http-lua
-- (OpenResty's ngx_http_lua on LuaJIT) runs examples/openresty/nginx.conf,
-- started as doc/openresty.md says (examples/openresty/run.sh) from its
-- own prefix directory on 127.0.0.1 at a free port, takes 1000 requests,
-- and serves perfev.resty's metrics, which promtool (Prometheus's own
-- parser and linter) checks; bad /profile parameters are 400s; with the
-- workers as nobody, perf_event_paranoid 2 and 1 (set, then restored). The
-- exposition's values are checked outside nginx too. Whichever runtime
-- runs the suite, nginx loads the core built against LuaJIT (make
-- core-luajit).
local shell = require "spec.support.shell"
local O = require "spec.support.openresty"

local REQUESTS = 1000
local CLIENTS = 4
local WORKERS, EVENTS = O.WORKERS, O.EVENTS
local sh, run, write, fds, workers, eventually = O.sh, O.run, O.write, O.fds, O.workers, O.eventually
local blocker, start, stop, ready, metric, metrics_with = O.blocker, O.start, O.stop, O.ready, O.metric,
                                                          O.metrics_with

-- The sample lines of an exposition text: { name, labels, value string }.
local function samples(text)
  local t = {}
  for line in text:gmatch("[^\n]+") do
    if not line:match("^#") then
      local name, labels, value = line:match("^([%w_:]+)(%b{}) (%S+)$")
      t[#t + 1] = { name = name, labels = labels, value = value, line = line }
    end
  end
  return t
end

-- Whether a sample's value is in the shortest form that reads back as the
-- same double (as Prometheus's clients print it): an error message or nil.
local function not_shortest(sm)
  local v = tonumber(sm.value)
  if not v then return "not a number: " .. sm.line end
  for d = 1, 17 do
    local short = ("%." .. d .. "g"):format(v)
    if tonumber(short) == v then
      if #short < #sm.value then return sm.line .. ": " .. short .. " is shorter" end
      return nil
    end
  end
  return nil
end

-- The log lines at [error] or worse in an error.log, or nil.
local function errors(log)
  local t = {}
  for line in log:gmatch("[^\n]+") do
    if line:match("%[error%]") or line:match("%[crit%]") or line:match("%[alert%]") or line:match("%[emerg%]")
       or line:match("stack traceback") then
      t[#t + 1] = line
    end
  end
  return #t > 0 and table.concat(t, "\n") or nil
end

describe("perfev.resty's exposition values", function()
  -- outside nginx: an instance with this worker's own sums
  local resty = require "perfev.resty"

  it("are printed in the shortest form that reads back as the same double, seconds divided exactly", function()
    local r = assert(resty.new {})
    -- nanoseconds whose product with 1e-9 is not the double nearest the
    -- decimal (208765965), and one where it is (543968089, issue 19's)
    local ns = { ["/a"] = 208765965, ["/b"] = 543968089, ["/c"] = 1, ["/d"] = 123456789012345,
                 ["/e"] = 3000000000 }
    -- a worker's sums of a label: the request count, then each event's
    -- (perfev.resty.series)
    for uri, v in pairs(ns) do
      local acc = require("perfev.resty.series").acc(r.layout)
      acc[1], acc[2], acc[3] = 1, v, v % 1000
      r.sums[uri] = acc
    end
    local text = r:collect()
    r:close()
    local want = { ["/a"] = "0.208765965", ["/b"] = "0.543968089", ["/c"] = "1e-09",
                   ["/d"] = "123456.789012345", ["/e"] = "3" }
    for uri, v in pairs(ns) do
      local got = text:match('\nperfev_request_task_clock_seconds_total{uri="' .. uri .. '"} (%S+)')
      assert.are.equal(want[uri], got, text)
      assert.are.equal(v / 1e9, tonumber(got))
    end
    for _, sm in ipairs(samples(text)) do assert.is_nil(not_shortest(sm)) end
    if shell.have("promtool") then
      local out, lint = run(("printf '%%s' %s | promtool check metrics"):format(shell.quote(text)))
      assert.are.equal(0, lint, out)
    end
  end)

  it("says what each event counts, and returns a bad event name rather than raising", function()
    local r = assert(resty.new {})
    local text = r:collect()
    r:close()
    for _, ev in ipairs(resty.DEFAULT_EVENTS) do
      assert.matches('\nperfev_request_event_info{event="' .. ev:gsub("%p", "%%%0") .. '",scope="user,kernel"} 1\n',
                     text, nil, false)
    end
    local inst, err = resty.new { events = { "task-clok" } }
    assert.is_nil(inst)
    assert.matches("^perfev%.resty: .*unknown event 'task%-clok' %(did you mean 'task%-clock'%?%)", err)
  end)
end)

describe("examples/openresty: perfev.resty in nginx", function()
  local why = blocker()
  if why then
    pending(why)
    return
  end

  local prefix, port, master
  setup(function()
    prefix = shell.tmpdir()
    local out
    port, master, out = start(prefix)
    assert(master, out)
  end)

  teardown(function()
    stop(master)
    shell.rmdir(prefix)
  end)

  it("serves 1000 requests with no error, constant fds per worker, and counts that grow with the work", function()
    -- every worker has run init_worker_by_lua and holds its group; run.sh
    -- started as root runs them as root, where every event counts
    local ws = ready(master, EVENTS)
    assert(ws, "nginx did not start " .. WORKERS .. " workers holding " .. EVENTS .. " perf fds each: "
           .. (shell.read_file(prefix .. "/logs/error.log") or ""))
    for _, w in ipairs(ws) do assert.are.equal("root", shell.trim(sh("ps -o user= -p " .. w))) end
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

    -- each worker adds its sums to the dict every second (flush), and
    -- the one answering /metrics its own first: every request is there
    -- within a second on a quiet machine
    local text, status
    eventually(function()
      text, status = run("curl -s " .. base .. "/metrics")
      local n = (metric(text, "perfev_request_requests_total", "/work/light") or 0)
                + (metric(text, "perfev_request_requests_total", "/work/heavy") or 0)
      return n >= REQUESTS
    end, 300)   -- 15 s or more: under load a worker's flush comes late
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

    -- every event counts in the kernel too, and each value is printed in
    -- its shortest form (seconds: nanoseconds / 1e9, no float noise)
    for _, ev in ipairs { "task-clock", "page-faults", "context-switches" } do
      assert.matches('\n' .. P .. 'event_info{event="' .. ev:gsub("%p", "%%%0") .. '",scope="user,kernel"} 1\n',
                     text, nil, false)
    end
    for _, sm in ipairs(samples(text)) do
      assert.is_nil(not_shortest(sm))
      if sm.name:match("seconds_total$") then
        assert.is_true(#sm.value <= 16, sm.line)   -- < 1e6 s, in ns: at most 15 digits and a point
      end
    end

    local log = shell.read_file(prefix .. "/logs/error.log") or ""
    assert.is_nil(errors(log))

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
    -- the paths as the files are: lua_package_path's ${prefix}app/ (nginx's
    -- prefix ends with a slash), no openresty//app/
    assert.matches(";cheap %(" .. prefix:gsub("%p", "%%%0") .. "/app/handlers%.lua:%d+%)", folded)
    assert.is_nil(folded:find("//", 1, true), folded)

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
    assert.is_nil(errors(log))
  end)

  it("answers every bad /profile parameter with a 400 and perfev's message, never a 500", function()
    local base = "http://127.0.0.1:" .. port
    local cases = {
      { "n=10&loc=/work/split&event=cpu-clok", "unknown event 'cpu-clok' (did you mean 'cpu-clock'?)" },
      { "n=10&loc=/work/split&event=", "expected an event" },
      { "n=10&loc=/work/split&event=cpu-clock:u:x", "unexpected ':'" },
      { "n=10&loc=/work/split&freq=-5", "option 'freq' must be a positive integer" },
      { "n=10&loc=/work/split&freq=1.5", "option 'freq' must be a positive integer" },
      { "n=10&loc=/work/split&period=0", "option 'period' must be a positive integer" },
      { "n=10&loc=/work/split&freq=abc", "freq must be a number, got 'abc'" },
      { "n=10&loc=/work/split&freq=99&period=5", "give freq or period, not both" },
      { "n=10&loc=/work/split&event=cpu-clock&event=task-clock", "event is given more than once" },
      { "n&loc=/work/split", "n needs a value" },
      { "n=0&loc=/work/split", "n must be a positive integer" },
      { "n=10&loc=work", "loc must be a path" },
      { "format=flame", "format must be folded, speedscope, svg or text" },
    }
    for _, c in ipairs(cases) do
      local out = run(("curl -s -w '\\n%%{http_code}' '%s/profile?%s'"):format(base, c[1]))
      local body, code = out:match("^(.*)\n(%d+)%s*$")
      assert.are.equal("400", code, c[1] .. ": " .. out)
      assert.matches("^perfev%.resty: ", body, nil, false, c[1])
      assert.matches(c[2], body, 1, true, c[1])
    end
    local log = shell.read_file(prefix .. "/logs/error.log") or ""
    assert.is_nil(errors(log))
  end)
end)

-- The workers as an unprivileged user: kernel.perf_event_paranoid decides.
-- At 2 the events fall back to user space only, which error.log and the
-- event_info gauge say; at 1 every event counts. The level is set for the
-- test and restored after it, whatever happens.
describe("examples/openresty with workers as nobody", function()
  local why = blocker()
  local PARANOID = "/proc/sys/kernel/perf_event_paranoid"
  local saved = shell.trim(shell.read_file(PARANOID) or "")
  if not why and select(2, run("echo '" .. saved .. "' > " .. PARANOID)) ~= 0 then
    why = "cannot write " .. PARANOID .. " here (not root, or a container)"
  end
  if why then
    pending(why)
    return
  end

  -- body(base, prefix, master) with nginx started as NGINX_USER=nobody at
  -- perf_event_paranoid `level`; nginx stopped and the level restored after
  local function with_nobody(level, body)
    local prefix = shell.tmpdir()
    local master
    local ok, err = pcall(function()
      local _, st = run("echo " .. level .. " > " .. PARANOID)
      assert.are.equal(0, st)
      local port, out
      port, master, out = start(prefix, "NGINX_USER=nobody")
      assert(master, out)
      assert.matches("workers as nobody", out, 1, true)
      local ws = ready(master, EVENTS)
      assert(ws, "no workers holding their events: " .. (shell.read_file(prefix .. "/logs/error.log") or ""))
      for _, w in ipairs(ws) do assert.are.equal("nobody", shell.trim(sh("ps -o user= -p " .. w))) end
      local base = "http://127.0.0.1:" .. port
      for _ = 1, 10 do run("curl -s -o /dev/null " .. base .. "/work/heavy") end
      body(base, prefix)
    end)
    stop(master)
    run("echo " .. saved .. " > " .. PARANOID)
    shell.rmdir(prefix)
    assert.are.equal(saved, shell.trim(shell.read_file(PARANOID) or ""))
    if not ok then error(err, 0) end
  end

  it("at perf_event_paranoid 2: counts user space only, and says so in error.log and /metrics", function()
    with_nobody(2, function(base, prefix)
      local log = shell.read_file(prefix .. "/logs/error.log") or ""
      local said = 0
      for line in log:gmatch("[^\n]+") do
        if line:find("[error]", 1, true) and line:find("perfev.resty: task-clock, page-faults, context-switches "
                                                       .. "count user space only", 1, true) then
          assert.matches("uid 65534 (nobody), at kernel.perf_event_paranoid 2", line, 1, true)
          assert.matches("user root;", line, 1, true)
          said = said + 1
        end
      end
      assert.are.equal(WORKERS, said, log)   -- once per worker
      local text = metrics_with(base, "/work/heavy", 10)
      for _, ev in ipairs { "task-clock", "page-faults", "context-switches" } do
        assert.matches('\nperfev_request_event_info{event="' .. ev:gsub("%p", "%%%0") .. '",scope="user"} 1\n',
                       text, nil, false)
      end
      -- what the scope means: the sleeping requests' context switches count 0
      assert.are.equal(10, metric(text, "perfev_request_requests_total", "/work/heavy"), text)
      assert.are.equal(0, metric(text, "perfev_request_context_switches_total", "/work/heavy"), text)
      assert.is_true(metric(text, "perfev_request_task_clock_seconds_total", "/work/heavy") > 0, text)
      -- a profile session: opened, or a 400 with the kernel's refusal
      local out = run(("curl -s -w '\\n%%{http_code}' '%s/profile?n=1&loc=/work/split'"):format(base))
      local body, code = out:match("^(.*)\n(%d+)%s*$")
      assert.is_true(code == "200" or code == "400" and body:find("perf_event_paranoid is 2", 1, true) ~= nil, out)
    end)
  end)

  it("at perf_event_paranoid 1: every event counts, and nothing is logged", function()
    with_nobody(1, function(base, prefix)
      local log = shell.read_file(prefix .. "/logs/error.log") or ""
      assert.is_nil(errors(log))
      local text = metrics_with(base, "/work/heavy", 10)
      for _, ev in ipairs { "task-clock", "page-faults", "context-switches" } do
        assert.matches('\nperfev_request_event_info{event="' .. ev:gsub("%p", "%%%0") .. '",scope="user,kernel"} 1\n',
                       text, nil, false)
      end
      assert.is_true(metric(text, "perfev_request_context_switches_total", "/work/heavy") >= 10, text)
    end)
  end)
end)
