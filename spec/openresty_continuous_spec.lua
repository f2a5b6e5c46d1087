-- /debug/pprof/profile in continuous mode (perfev.resty.pprof_init{
-- continuous = true }, lua/perfev/profile/continuous.lua): examples/openresty
-- with that one change, every worker profiling itself at 49 Hz. A scrape
-- answers from what the workers folded over the last N seconds: taken after
-- the load has stopped, it still holds the load's stacks (a window of its
-- own would hold none), at their shares (go tool pprof), with their labels;
-- another rate, or more seconds than the dict keeps, is a 400; a /profile
-- session takes the workers' profilers and gives them back.
local shell = require "spec.support.shell"
local O = require "spec.support.openresty"

local sh, run = O.sh, O.run

describe("examples/openresty's /debug/pprof/profile in continuous mode", function()
  local why = O.blocker()
  if not why and not shell.have("go") then why = "no go (make deps installs Debian's golang-go)" end
  if not why and not shell.have("wrk") then why = "no wrk (make deps installs Debian's wrk)" end
  if why then
    pending(why)
    return
  end

  local site, dir, base
  setup(function()
    -- examples/openresty with pprof_init{ continuous = true }; each worker:
    -- its group of counters, and its profiler's event (and the budget's
    -- copy of its fd)
    site = O.site { edits = { { 'require%("perfev%.resty"%)%.pprof_init%(%)',
                                'require("perfev.resty").pprof_init{ continuous = true }' } },
                    fds = O.EVENTS + 2 }
    dir, base = site.dir, site.base
  end)

  teardown(function()
    if site then site.stop() end
  end)

  local function pprof(args) return O.pprof(dir .. "/home", args) end
  local cum = O.cum

  local function get(q)
    local out = run(("curl -s -D %s/h -w '\\n%%{http_code}' '%s/%s'"):format(dir, base, q))
    local body, code = out:match("^(.*)\n(%d+)%s*$")
    return body, code, shell.read_file(dir .. "/h") or ""
  end

  it("answers from the last N seconds, at the functions' shares, with labels, after the load has gone", function()
    local id = "0af7651916cd43dd8448eb211c80319c"
    run(("wrk -t1 -c2 -d8s -H 'traceparent: 00-%s-b7ad6b7169203331-01' %s/work/split > %s/wrk-split.out 2>&1 & "
         .. "wrk -t1 -c1 -d8s %s/work/light > /dev/null 2>&1 & wait"):format(id, base, dir, base))
    sh("sleep 1.5")                 -- the workers have folded their last second; no load now
    local saved = dir .. "/c.pb.gz"
    local _, code, headers = get("debug/pprof/profile?seconds=11")
    assert.equal("200", code, headers)
    run(("curl -s -o %s '%s/debug/pprof/profile?seconds=11'"):format(saved, base))
    assert.matches("\nX%-Perfev%-Mode: continuous\r\n", headers)
    local out, status = pprof("-top " .. saved)
    assert.equal(0, status, out)
    assert.matches("\nType: cpu\n", out)
    assert.matches("\nDuration: 11s,", out)
    local cheap, dear = cum(out, "cheap"), cum(out, "dear")
    assert.truthy(cheap and dear, out)
    local share = cheap / (cheap + dear)
    local keys = tonumber(headers:match("X%-Perfev%-Dict%-Keys: (%d+)"))
    local free = tonumber(headers:match("X%-Perfev%-Dict%-Free: (%d+)"))
    local overhead = headers:match("X%-Perfev%-Overhead: ([%d.]+)%%")
    print(("\nopenresty continuous: 8 s of wrk on /work/split and /work/light, scraped 1.5 s later for 11 s: "
           .. "%s, cheap:dear %.1f%%:%.1f%%; the dict: %s keys, %s bytes free of 4 MiB; the profiler's "
           .. "cost: %s%% of the workers' CPU time")
          :format(out:match("Total samples = [^\n]*") or "?", 100 * share, 100 * (1 - share), tostring(keys),
                  tostring(free), tostring(overhead)))
    -- the profiler measured its own cost (its samples and folds, against
    -- the workers' CPU time): some, and less than all of it
    assert.is_true(tonumber(overhead) > 0 and tonumber(overhead) < 100, headers)
    -- at 49 Hz the samples are few where the machine is busy (each is
    -- 1/49 s): the share is held within 4 standard deviations of its
    -- count's binomial spread, and 8 points at least
    local n = (cheap + dear) / (1000 / 49)
    local bound = math.max(0.08, 4 * math.sqrt(0.25 * 0.75 / n))
    assert.is_true(math.abs(share - 0.25) <= bound,
                   ("cheap/(cheap+dear) %.3f of %.0f samples, bound %.3f\n%s"):format(share, n, bound, out))
    -- the bound: at most 49 Hz x 2 workers stack keys per second kept (60),
    -- and a key of samples per second, and 5 of what the workers profile
    assert.is_true(keys <= 60 * (49 * O.WORKERS + 1) + 5, tostring(keys))
    local tags = pprof("-tags " .. saved)
    assert.matches("%): /work/split\n", tags)
    assert.matches("%): " .. id .. "\n", tags)
    -- another rate than the workers', more seconds than the dict keeps: 400s
    local body
    body, code = get("debug/pprof/profile?seconds=2&freq=99")
    assert.equal("400", code, body)
    assert.matches("the workers profile continuously cpu-clock at 49 Hz", body, 1, true)
    body, code = get("debug/pprof/profile?seconds=61")
    assert.equal("400", code, body)
    assert.matches("seconds must be at most 60: the continuous profile keeps the last 60 s", body, 1, true)
    local log = shell.read_file(dir .. "/nginx/logs/error.log") or ""
    assert.is_nil(log:find("%[error%]") or log:find("stack traceback"), log)
  end)

  it("gives the workers' profilers to a /profile session and takes them back once it is complete", function()
    local body, code = get("profile?n=20&loc=/work/split")
    assert.equal("200", code, body)
    run(("wrk -t2 -c4 -d2s %s/work/split"):format(base))
    assert(O.eventually(function() return run("curl -s " .. base .. "/profile"):find("(complete)", 1, true) end))
    assert.matches("20 of 20 requests", run("curl -s " .. base .. "/profile"))
    -- the continuous profilers again: samples of a load after the session
    sh("sleep 1.5")
    run(("wrk -t1 -c2 -d3s %s/work/split"):format(base))
    sh("sleep 1.5")
    local _, _, headers = get("debug/pprof/profile?seconds=3")
    local samples = tonumber(headers:match("X%-Perfev%-Samples: (%d+)"))
    assert.is_true((samples or 0) > 0, headers)
    local log = shell.read_file(dir .. "/nginx/logs/error.log") or ""
    assert.is_nil(log:find("%[error%]") or log:find("stack traceback"), log)
  end)
end)
