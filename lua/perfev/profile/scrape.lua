-- perfev.profile for scrapers in OpenResty: GET /debug/pprof/profile?seconds=N
-- (Go's net/http/pprof convention, what Parca, Grafana Alloy's
-- pyroscope.scrape and go tool pprof ask) profiles the Lua stacks of every
-- worker for N seconds and answers a gzipped profile.proto. perfev.resty
-- exposes it; doc/openresty.md and examples/openresty/nginx.conf show it:
--
--   lua_shared_dict perfev_pprof 4m;
--   init_worker_by_lua_block { require("perfev.resty").pprof_init() }
--   location = /debug/pprof/profile { content_by_lua_block { require("perfev.resty").pprof_serve() } }
--
--   go tool pprof -top -seconds=5 http://127.0.0.1:8080/debug/pprof/profile
--
-- The window lives in the shared dict: its id, event, rate and end, how many
-- workers joined it and how many folded their stacks, and the stacks,
-- summed there. The worker answering the scrape writes the window and
-- sleeps (ngx.sleep) for its length; every worker's timer (pprof_init,
-- every 50 ms) sees the new window, starts its own perfev.profile (one per
-- worker: jit.profile is one sampler per VM) and, at the window's end,
-- stops it and adds its folded stacks to the dict; the answering worker
-- waits for the workers that joined, then encodes the sum. One window at a
-- time: a scrape while one runs, or while a /profile session takes
-- requests (the same one profiler per worker), is a 409; a bad parameter a
-- 400. Functions return true, or nil and a message: nothing raises on a
-- request path. Samples carry pprof labels (uri, trace_id) where
-- perfev.resty.tags finds their request. pprof_init{ continuous = true }:
-- no windows, the workers profile all the time (perfev.profile.continuous).
-- ngx_lua's API; outside nginx a call that needs it says so (perfev.resty.ngx)
local ngx = rawget(_G, "ngx") or require "perfev.resty.ngx"
local resty = require "perfev.profile.resty"
local pprof = require "perfev.profile.pprof"
local options = require "perfev.options"
local continuous = require "perfev.profile.continuous"
local tags = require "perfev.resty.tags"

local M = {}

M.DICT = "perfev_pprof"
M.SECONDS, M.MAX_SECONDS = 30, 300      -- Go's default; a bound
M.POLL = 0.05                           -- seconds between two looks at the dict
M.WAIT = 3                              -- seconds the answer waits for late workers

-- this worker's part of the window: { wid, p }
local worker = {}

-- busy(d) -> why no window can start now | nil
local function busy(d)
  local wid = d:get("running")
  if wid then
    return ("a profile of %.0f s is being taken (until %s): one at a time, ask again then")
           :format(d:get("seconds") or 0, ngx.http_time(math.floor((d:get("until") or 0) + 0.5)))
  end
  local s = ngx.shared[resty.DICT]
  if s and s:get("sid") and (s:get("done") or 0) < (s:get("want") or 0) then
    return ("a /profile session takes requests (%.0f of %.0f done): one profiler per worker, "
            .. "ask again once it is complete"):format(s:get("done") or 0, s:get("want") or 0)
  end
  return nil
end

-- running(opts) -> why a /profile session cannot start now | nil
function M.running(opts)
  local d = ngx.shared[(type(opts) == "table" and opts.pprof_dict) or M.DICT]
  local wid = d and d:get("running")
  if not wid then return nil end
  return ("a /debug/pprof/profile window runs (until %s): one profiler per worker, ask again then")
         :format(ngx.http_time(math.floor((d:get("until") or 0) + 0.5)))
end

-- This worker's window ends: its stacks are added to the dict's.
local function stop(_, d, wid)
  local p = worker.p
  if not p or worker.wid ~= wid then return end
  worker.p = nil
  tags.stop()
  local ok, err = pcall(function()
    p:stop()
    if d:get("wid") == wid then
      assert(resty.fold(d, p:profile()))
    end
  end)
  pcall(p.close, p)
  if d:get("wid") == wid then d:incr("folded", 1, 0) end
  if not ok then
    err = options.strip_where(err)
    d:add("err", err)
    ngx.log(ngx.ERR, "perfev.resty: ", err)
  end
end

-- Starts this worker's part of a new window, if there is one.
local function look(premature, d)
  if premature then
    if worker.p then stop(true, d, worker.wid) end
    return
  end
  local wid = d:get("wid")
  if not wid or wid == worker.wid then return end
  worker.wid = wid
  local left = (d:get("until") or 0) - ngx.now()
  if not d:get("running") or left <= 0 then return end
  resty.release()                       -- a finished /profile session's profiler
  local freq, period = d:get("freq"), d:get("period")
  local p, err = resty.open { event = d:get("event"), freq = freq or nil, period = period or nil }
  local ok
  if p then
    -- its samples labelled by request (uri, trace_id) where this LuaJIT
    -- lets the sampler find the request (perfev.resty.tags)
    if tags.start() then p.engine.tag = tags.of end
    ok, err = pcall(p.start, p)
    if not ok then pcall(p.close, p) tags.stop() end
  end
  if not p or not ok then
    err = options.strip_where(err)
    d:add("err", err)
    ngx.log(ngx.ERR, "perfev.resty: ", err)
    return
  end
  worker.p = p
  d:incr("joined", 1, 0)
  ok, err = ngx.timer.at(left, stop, d, wid)
  if not ok then
    stop(false, d, wid)
    ngx.log(ngx.ERR, "perfev.resty: a window's end timer: ", err)
  end
end

-- init([{ dict =, continuous = }]) -> true | nil, message. In
-- init_worker_by_lua*: this worker looks for new windows every M.POLL
-- seconds; or, with continuous (true or { event, freq | period, keep }),
-- profiles itself all the time and keeps the last `keep` seconds in the
-- dict (perfev.profile.continuous).
function M.init(opts)
  local d, err = resty.dict(opts, M.DICT)
  if not d then return nil, err end
  if type(opts) == "table" and opts.continuous then return continuous.init(d, opts.continuous) end
  local ok
  ok, err = ngx.timer.every(M.POLL, look, d)
  if not ok then return nil, "perfev.resty: " .. tostring(err) end
  return true
end

-- The window's arguments, checked: { seconds, event, freq, period } | nil,
-- message (perfev profile -p PID --serve checks its scrapes with it too).
local function window_args(query)
  local t, msg = resty.args(query, { "seconds", "event", "freq", "period" })
  if not t then return nil, msg end
  local s = M.SECONDS
  if t.seconds then s = tonumber(t.seconds) end
  if not s or s < 1 or s > M.MAX_SECONDS or s ~= math.floor(s) then
    return nil, ("seconds must be an integer from 1 to %d, got '%s'"):format(M.MAX_SECONDS, tostring(t.seconds))
  end
  t.seconds = s
  return resty.rate(t)
end
M.window_args = window_args

local function answer(status, msg)
  ngx.status = status
  ngx.header["Content-Type"] = "text/plain; charset=utf-8"
  ngx.say("perfev.resty: ", msg)
end

-- A new window in the dict: the last one's stacks dropped.
local function new_window(d, args, p)
  for _, k in ipairs(d:get_keys(0)) do
    if k ~= "running" and k ~= "wid" and not k:find("^[cnku]%d") and not k:find("^c_") then d:delete(k) end
  end
  local now = ngx.now()
  for k, v in pairs { event = args.event, unit = p.unit, freq = p.freq or false, period = p.period or false,
                      seconds = args.seconds, start = now, ["until"] = now + args.seconds,
                      joined = 0, folded = 0, samples = 0 } do
    local ok, err = d:set(k, v)
    if not ok then return nil, err end
  end
  return d:incr("wid", 1, 0)
end

-- The window: started, waited for, summed. -> profile.proto gzipped | nil, message
local function take(d, args, wid)
  look(false, d)                          -- this worker at once, not at its next look
  ngx.sleep(args.seconds)
  local waited = 0
  while (d:get("folded") or 0) < (d:get("joined") or 0) and waited < M.WAIT do
    ngx.sleep(0.02)
    waited = waited + 0.02
  end
  if d:get("wid") ~= wid then return nil, "another window replaced this one" end
  if (d:get("joined") or 0) == 0 then
    return nil, "no worker could profile: " .. tostring(d:get("err") or "see error.log")
  end
  local pr = resty.summed(d, ("%s over %.0f s, %.0f workers"):format(args.event, args.seconds, d:get("folded") or 0))
  pr.time = math.floor(d:get("start"))
  pr.duration = args.seconds * 1e9
  return pprof.encode(pr)
end

-- content_by_lua* of /debug/pprof/profile: ?seconds=N (default 30, at most
-- 300) [&event=E] [&freq=F | &period=P]; answers after N seconds.
-- The answer: gzipped profile.proto, Go's headers, and how it was made.
local function send(body, workers, samples, extra)
  ngx.header["Content-Type"] = "application/octet-stream"
  ngx.header["Content-Disposition"] = 'attachment; filename="profile"'
  if workers then ngx.header["X-Perfev-Workers"] = ("%.0f"):format(workers) end
  ngx.header["X-Perfev-Samples"] = ("%.0f"):format(samples or 0)
  for k, v in pairs(extra or {}) do ngx.header[k] = v end
  ngx.print(body)
end

-- Continuous mode: the last N seconds from the dict, at once. Another
-- event or rate than the workers profile is a 400.
local function serve_continuous(d, args)
  for _, k in ipairs { "event", "freq", "period" } do
    local have = d:get("c_" .. k)
    if args.asked[k] and tostring(args[k]) ~= tostring(have) then
      return answer(400, ("the workers profile continuously %s at %s: ask without event, freq and period, "
                          .. "or with those (got %s=%s)"):format(tostring(d:get("c_event")),
        d:get("c_freq") and (d:get("c_freq") .. " Hz") or ("period " .. tostring(d:get("c_period"))),
        k, tostring(args.asked[k])))
    end
  end
  if not d:get("c_event") then return answer(503, "the continuous profiler has not started yet (see error.log)") end
  local ok, pr, err = pcall(continuous.summed, d, args.seconds)
  if not ok then err, pr = options.strip_where(pr), nil end
  if not pr then return answer(400, err) end
  local body
  ok, body = pcall(pprof.encode, pr)
  if not ok then return answer(500, options.strip_where(body)) end
  send(body, nil, pr.samples, { ["X-Perfev-Mode"] = "continuous",
                                ["X-Perfev-Overhead"] = pr.overhead and ("%.3f%%"):format(100 * pr.overhead) or nil,
                                ["X-Perfev-Dict-Keys"] = ("%.0f"):format(#d:get_keys(0)),
                                ["X-Perfev-Dict-Free"] = d.free_space and ("%.0f"):format(d:free_space()) or nil })
end

function M.serve(opts)
  local d, err = resty.dict(opts, M.DICT)
  if not d then return answer(500, err) end
  local query = ngx.req.get_uri_args()
  local args, msg = window_args(query)
  if not args then return answer(400, msg) end
  if continuous.enabled() then
    args.asked = { event = query.event, freq = query.freq, period = query.period }
    return serve_continuous(d, args)
  end
  -- the event and rate must open here: the error now, not in a timer
  local p, warnings = resty.open { event = args.event, freq = args.freq, period = args.period }
  if not p then return answer(400, warnings) end
  p:close()
  local why = busy(d)
  if why then return answer(409, why) end
  local ok
  ok, err = d:add("running", true, args.seconds + M.WAIT + 5)   -- expires should this worker die
  if not ok then
    return answer(409, err == "exists" and busy(d) or ("the dict: " .. tostring(err)))
  end
  local wid, body
  wid, err = new_window(d, args, p)
  if wid then
    ok, body, err = pcall(take, d, args, wid)
    if not ok then err, body = options.strip_where(body), nil end
  end
  d:delete("running")
  if not body then
    ngx.log(ngx.ERR, "perfev.resty: ", err)
    return answer(500, err)
  end
  send(body, d:get("folded") or 0, d:get("samples") or 0)
end

return M
