-- perfev.profile in OpenResty: profile the next N requests of a location,
-- in every worker, and fetch the profile (folded stacks, speedscope JSON,
-- SVG flame graph, text) summed over the workers. perfev.resty exposes it;
-- doc/openresty.md and examples/openresty/nginx.conf show it whole:
--
--   lua_shared_dict perfev_profile 4m;
--   location /work/ {
--     rewrite_by_lua_block { require("perfev.resty").profile_start() }
--     log_by_lua_block     { require("perfev.resty").profile_finish() }
--   }
--   location = /profile { content_by_lua_block { require("perfev.resty").profile_serve() } }
--
--   curl '127.0.0.1:8080/profile?n=100&loc=/work/split'     # the next 100 requests of /work/split
--   curl '127.0.0.1:8080/profile'                           # how many are done
--   curl '127.0.0.1:8080/profile?format=folded'             # or speedscope, svg, text
--
-- The session lives in the shared dict: the location, the event, how many
-- requests are left to take (every worker takes one with an atomic incr)
-- and the folded stacks, whose weights the workers add up there. A worker
-- runs one perfev.profile while requests it took are in flight (a request
-- that yields shares its worker with others meanwhile: their work lands in
-- the profile too, as in perfev.resty's counts); when the last one is
-- logged, it folds its profile into the dict. Functions return true, or
-- nil and a message: nothing raises on a request path.
-- ngx_lua's API; outside nginx a call that needs it says so (perfev.resty.ngx)
local ngx = rawget(_G, "ngx") or require "perfev.resty.ngx"
local perfev = require "perfev"
local options = require "perfev.options"
local folded = require "perfev.profile.folded"
local output = require "perfev.profile.output"

local M = {}

M.DICT = "perfev_profile"
M.FORMATS = { folded = "text/plain", speedscope = "application/json", svg = "image/svg+xml",
              text = "text/plain" }

-- this worker's profiler: { p, inflight, taken, sid }
local worker = { inflight = 0, taken = 0 }

local function dict(opts, default)
  local name = (type(opts) == "table" and opts.dict) or default or M.DICT
  local d = ngx.shared[name]
  if not d then return nil, "perfev.resty: no lua_shared_dict named '" .. tostring(name) .. "'" end
  return d
end

-- open(o) -> perfev.profile(o), warnings | nil, message. What perfev.profile
-- raises for a mistake (an unknown event, with its "did you mean", a bad
-- rate) comes back as its message, without the position: nothing raises on
-- a request path. Its warnings (a rate above the kernel's limit) go to
-- error.log and come back in a list.
local function open(o)
  local warnings = {}
  local previous = perfev.on_warning(function(m) warnings[#warnings + 1] = m end)
  local ok, p, err = pcall(perfev.profile, o)
  perfev.on_warning(previous)
  for _, m in ipairs(warnings) do ngx.log(ngx.WARN, "perfev: ", m) end
  if not ok then return nil, options.strip_where(p) end
  if not p then return nil, tostring(err) end
  return p, warnings
end

M.open, M.dict = open, dict

-- param(args, name) -> the query argument's string | nil | false, message
-- (given twice, or without a value)
local function param(args, name)
  local v = args[name]
  if type(v) == "table" then return false, name .. " is given more than once" end
  if v == true then return false, name .. " needs a value (" .. name .. "=...)" end
  return v
end

-- args(query, names) -> { name = string } | nil, message: the query
-- arguments named, each at most once and with a value.
function M.args(query, names)
  local t = {}
  for _, name in ipairs(names) do
    local v, msg = param(query, name)
    if v == false then return nil, msg end
    t[name] = v
  end
  return t
end

-- rate(t) -> t | nil, message: t.freq and t.period as numbers (perfev.profile
-- checks them further), at most one of them; t.event cpu-clock by default.
function M.rate(t)
  for _, name in ipairs { "freq", "period" } do
    if t[name] ~= nil then
      local v = tonumber(t[name])
      if not v then return nil, ("%s must be a number, got '%s'"):format(name, t[name]) end
      t[name] = v
    end
  end
  if t.freq and t.period then return nil, "give freq or period, not both" end
  t.event = t.event or "cpu-clock"
  return t
end

-- The arguments of a new session, checked: { n, loc, event, freq, period }
-- | nil, message.
local function session_args(args)
  local t, msg = M.args(args, { "n", "loc", "event", "freq", "period" })
  if not t then return nil, msg end
  local n = tonumber(t.n)
  if not n or n < 1 or n ~= math.floor(n) then
    return nil, "n must be a positive integer, got " .. (t.n and ("'" .. t.n .. "'") or "none")
  end
  t.n = n
  if not t.loc or t.loc:sub(1, 1) ~= "/" then return nil, "loc must be a path (/...)" end
  return M.rate(t)
end

-- new_session(d, args) -> sid, warnings | nil, message: a new session (the
-- stacks of the last one are dropped).
local function new_session(d, query)
  local args, msg = session_args(query)
  if not args then return nil, msg end
  local n, event, freq, period = args.n, args.event, args.freq, args.period
  -- the event and rate must open here: the error now, not in a request
  local p, err = open { event = event, freq = freq, period = period }
  if not p then return nil, err end
  local warnings = err
  local unit = p.unit
  freq, period = p.freq, p.period      -- the default rate when neither was given
  p:close()
  local sid = (d:get("sid") or 0) + 1
  d:flush_all()
  d:flush_expired()
  local ok
  for k, v in pairs { sid = sid, loc = args.loc, event = event, want = n, left = n, done = 0,
                      samples = 0, unit = unit, freq = freq or false, period = period or false } do
    ok, err = d:set(k, v)
    if not ok then return nil, err end
  end
  return sid, warnings
end

local function close_worker()
  local p = worker.p
  worker.p, worker.inflight, worker.taken = nil, 0, 0
  if p then pcall(p.close, p) end
end

-- In rewrite_by_lua* or access_by_lua* of the locations that may be
-- profiled: takes this request when a session wants requests of its
-- location, and starts (or resumes) this worker's profiler. The profiler
-- runs from the worker's first request of a session to its last, paused
-- while none of its requests is in flight: the sampling clock goes on, so
-- that the requests are sampled at every point of their run (a clock
-- restarted at each short request would always fire at the same point).
function M.start(opts)
  local d, err = dict(opts)
  if not d then return nil, err end
  local sid = d:get("sid")
  if worker.p and worker.sid ~= sid then close_worker() end   -- a session ended or began
  local loc = d:get("loc")
  if not loc or ngx.var.uri:sub(1, #loc) ~= loc then return true end
  if (d:get("left") or 0) <= 0 then return true end
  local left = d:incr("left", -1)
  if not left or left < 0 then return true end       -- another worker took the last one
  local p = worker.p
  if not p then
    -- one profiler per worker: the continuous one gives way to the session
    local scrape_d = ngx.shared[(type(opts) == "table" and opts.pprof_dict) or "perfev_pprof"]
    if scrape_d then require("perfev.profile.continuous").yield(scrape_d) end
    local freq, period = d:get("freq"), d:get("period")
    local msg
    p, msg = open { event = d:get("event"), freq = freq or nil, period = period or nil }
    if not p then
      d:incr("left", 1)
      return nil, "perfev.resty: " .. tostring(msg)
    end
    local ok, e = pcall(p.start, p)
    if not ok then
      p:close()
      d:incr("left", 1)
      return nil, tostring(e)
    end
    worker.p, worker.sid, worker.taken, worker.inflight = p, sid, 0, 0
  elseif worker.inflight == 0 then
    p:resume()
  end
  worker.inflight = worker.inflight + 1
  ngx.ctx.perfev_profiled = sid
  return true
end

-- Adds a profile's folded stacks to the session's.
local function fold_into(d, pr, taken, sid)
  if d:get("sid") ~= sid then return true end         -- a new session began meanwhile
  local ok, err = M.fold(d, pr)
  if not ok then return nil, err end
  d:incr("done", taken, 0)
  return true
end

-- In log_by_lua*: a profiled request is over. When none of this worker's
-- is in flight any more, the profiler pauses and its samples so far are
-- added to the session's stacks; once the session has no request left to
-- take, it stops.
function M.finish(opts)
  local sid = ngx.ctx.perfev_profiled
  if not sid then return true end
  ngx.ctx.perfev_profiled = nil
  local d, err = dict(opts)
  if not d then return nil, err end
  local p = worker.p
  if not p or worker.sid ~= sid then return true end
  worker.inflight = worker.inflight - 1
  worker.taken = worker.taken + 1
  if worker.inflight > 0 then return true end
  local ok, pr = pcall(function() return p:pause():take() end)
  if not ok then
    close_worker()
    return nil, tostring(pr)
  end
  local taken = worker.taken
  worker.taken = 0
  if (d:get("left") or 0) <= 0 then close_worker() end
  return fold_into(d, pr, taken, sid)
end

-- release([opts]): this worker's profiler closed when the session it ran
-- for wants no more requests (or was replaced) and none of its requests is
-- in flight: a worker whose last request ended while another worker took
-- the session's last one keeps it open otherwise, and one profiler runs
-- per worker (perfev.profile.scrape's windows ask for it).
function M.release(opts)
  if not worker.p or worker.inflight > 0 then return true end
  local d = dict(opts)
  if d and d:get("sid") == worker.sid and (d:get("left") or 0) > 0 then return true end
  close_worker()
  return true
end

-- The session's profile, summed over the workers.
function M.profile(opts)
  local d, err = dict(opts)
  if not d then return nil, err end
  return M.summed(d, ("%s: %.0f requests of %s"):format(tostring(d:get("event")), d:get("done") or 0,
                                                        tostring(d:get("loc"))))
end

-- summed(d, name) -> the profile of the folded stacks a dict holds (keys
-- "s\t" .. stack), its event, unit, samples, freq and period.
function M.summed(d, name)
  local lines = {}
  for _, k in ipairs(d:get_keys(0)) do
    local stack = k:match("^s\t(.*)$")
    if stack then lines[#lines + 1] = ("%s %.0f"):format(stack, d:get(k) or 0) end
  end
  table.sort(lines)
  local p = folded.decode(table.concat(lines, "\n"), {
    event = d:get("event"), unit = d:get("unit"), samples = d:get("samples"), name = name })
  p.freq, p.period = d:get("freq") or nil, d:get("period") or nil
  return p
end

-- fold(d, pr) -> true | nil, message: a profile's folded stacks added to a
-- dict's (keys "s\t" .. stack, and "\t" .. its pprof labels where it has
-- some), its samples to "samples".
function M.fold(d, pr)
  for _, t in ipairs(folded.fold(pr, true)) do
    local _, err = d:incr("s\t" .. t.key .. (t.tags and ("\t" .. t.tags) or ""), t.weight, 0)
    if err then return nil, "perfev.resty: " .. err end
  end
  d:incr("samples", pr.samples, 0)
  return true
end

-- The status line of the session.
local function status(d)
  if not d:get("sid") then return "no profile: GET ?n=N&loc=/path[&event=E][&freq=F|&period=P] starts one\n" end
  return ("session %.0f: %.0f of %.0f requests of %s profiled on %s, %.0f samples%s\n"):format(
    d:get("sid"), d:get("done") or 0, d:get("want") or 0, d:get("loc") or "?", d:get("event") or "?",
    d:get("samples") or 0, (d:get("done") or 0) >= (d:get("want") or 0) and " (complete)" or "")
end

-- content_by_lua* of the control location:
--   ?n=N&loc=/path[&event=E][&freq=F | &period=P]  profile the next N requests of /path
--   ?format=folded | speedscope | svg | text        the profile so far, summed over the workers
--   (nothing)                                      the session's status
-- Headers X-Perfev-Done and X-Perfev-Want say how many requests are in it.
function M.serve(opts)
  local d, err = dict(opts)
  if not d then
    ngx.status = 500
    ngx.say(err)
    return
  end
  local args = ngx.req.get_uri_args()
  if args.n or args.loc then
    local why = require("perfev.profile.scrape").running(opts)
    if why then
      ngx.status = 409
      ngx.header["Content-Type"] = "text/plain"
      ngx.say("perfev.resty: ", why)
      return
    end
    local sid, msg = new_session(d, args)
    if not sid then
      ngx.status = 400
      ngx.header["Content-Type"] = "text/plain"
      ngx.say("perfev.resty: ", msg)
      return
    end
    ngx.header["Content-Type"] = "text/plain"
    ngx.print(status(d))
    for _, w in ipairs(msg) do ngx.say("perfev: warning: ", w) end
    return
  end
  ngx.header["X-Perfev-Done"] = ("%.0f"):format(d:get("done") or 0)
  ngx.header["X-Perfev-Want"] = ("%.0f"):format(d:get("want") or 0)
  local fmt = args.format
  if not fmt then
    ngx.header["Content-Type"] = "text/plain"
    ngx.print(status(d))
    return
  end
  if not M.FORMATS[fmt] then
    ngx.status = 400
    ngx.say("perfev.resty: format must be folded, speedscope, svg or text")
    return
  end
  local ok, text = pcall(function() return output.format(assert(M.profile(opts)), fmt) end)
  if not ok then
    ngx.log(ngx.ERR, "perfev.resty: ", text)
    ngx.status = 500
    ngx.say("perfev.resty: ", options.strip_where(text))
    return
  end
  ngx.header["Content-Type"] = M.FORMATS[fmt]
  ngx.print(text)
end

return M
