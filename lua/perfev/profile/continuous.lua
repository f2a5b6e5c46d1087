-- Continuous mode of /debug/pprof/profile (perfev.profile.scrape): every
-- worker profiles itself all the time at a low rate (49 Hz of cpu-clock by
-- default: the range perf-based continuous profilers use, 19 to 100 Hz),
-- and every second folds what it took into the perfev_pprof dict under
-- that second's slot, the keys living `keep` seconds (60 by default; the
-- dict's ttl removes them). A scrape for N seconds sums the slots of the
-- last N seconds and answers at once, without a window of its own.
--
--   init_worker_by_lua_block { require("perfev.resty").pprof_init{ continuous = true } }
--   init_worker_by_lua_block { require("perfev.resty").pprof_init{ continuous = { freq = 19, keep = 120 } } }
--   ... continuous = { labels = false }: no uri / trace_id labels, nothing done per request
--
-- One profiler per worker: while a /profile session takes requests the
-- worker's continuous profiler is closed (its last samples folded), and
-- opened again once the session is complete.
--
-- The dict's keys: "c<slot>\t<stack>[\t<labels>]" (the weight summed over
-- the workers), "n<slot>" (the samples), "k<slot>" and "u<slot>" (the
-- profiler's cost and the workers' CPU time, ns), and "c_event", "c_unit",
-- "c_freq", "c_period", "c_keep" (what the workers profile). A slot holds
-- at most freq x workers distinct stacks (one per sample at worst): the
-- dict holds at most keep x freq x workers stack keys, each the size of
-- its stack's folded text and labels plus the dict's own ~100 bytes
-- (doc/openresty.md, Continuous mode).
-- luacheck: globals ngx
local resty = require "perfev.profile.resty"
local folded = require "perfev.profile.folded"
local options = require "perfev.options"
local tags = require "perfev.resty.tags"
local core = require "perfev.core"

local M = {}

M.FREQ, M.KEEP, M.SLOT = 49, 60, 1

-- this worker's continuous profiler: { p, cfg, failed }
local worker = {}

-- config(c) -> { event, freq, period, keep } | nil, message
function M.config(c)
  if c == true then c = {} end
  if type(c) ~= "table" then return nil, "option 'continuous' must be true or a table" end
  for k in pairs(c) do
    if k ~= "event" and k ~= "freq" and k ~= "period" and k ~= "keep" and k ~= "labels" then
      return nil, ("option 'continuous' has no field '%s' (event, freq, period, keep, labels)"):format(tostring(k))
    end
  end
  local keep = c.keep or M.KEEP
  if type(keep) ~= "number" or keep < 1 or keep ~= math.floor(keep) then
    return nil, "continuous.keep must be a whole number of seconds >= 1"
  end
  if c.freq and c.period then return nil, "continuous: give freq or period, not both" end
  if c.labels ~= nil and type(c.labels) ~= "boolean" then return nil, "continuous.labels must be true or false" end
  return { event = c.event or "cpu-clock", freq = c.freq or (not c.period and M.FREQ) or nil,
           period = c.period, keep = keep, labels = c.labels ~= false }
end

local function slot_now() return math.floor(ngx.now() / M.SLOT) end

local thread_ns = function() return core.clock_ns("thread_cputime_id") end

-- The samples since the last fold added to the dict under this second's
-- slot; with what the profiler cost this worker meanwhile ("k<slot>": its
-- samples, as its budget measures them, and this fold, in CPU time) and
-- the worker's CPU time ("u<slot>"), in ns: the overhead a scrape reports.
local function fold(d, p)
  -- no sample since the last fold (an idle worker): nothing to add
  local c = p.engine and p.engine.c
  if c and c.samples == 0 then return true end
  local t0 = thread_ns()
  local pr = p:take()
  local slot, ttl = slot_now(), worker.cfg.keep + 2 * M.SLOT
  local cost, cpu = (pr.cost or 0) - (worker.cost or 0), (pr.cpu or 0) - (worker.cpu or 0)
  worker.cost, worker.cpu = pr.cost or 0, pr.cpu or 0
  for _, t in ipairs(folded.fold(pr, true)) do
    local key = ("c%.0f\t%s%s"):format(slot, t.key, t.tags and ("\t" .. t.tags) or "")
    local _, err = d:incr(key, t.weight, 0, ttl)
    if err then return nil, err end
  end
  if pr.samples > 0 then d:incr(("n%.0f"):format(slot), pr.samples, 0, ttl) end
  d:incr(("u%.0f"):format(slot), cpu, 0, ttl)
  d:incr(("k%.0f"):format(slot), cost + (thread_ns() - t0), 0, ttl)
  return true
end

-- close(d): this worker's continuous profiler folded and closed.
local function close(d)
  local p = worker.p
  if not p then return end
  worker.p = nil
  tags.stop()
  pcall(fold, d, p)
  pcall(p.close, p)
end
M.close = close

local function session_running()
  local s = ngx.shared[resty.DICT]
  return s and s:get("sid") and (s:get("done") or 0) < (s:get("want") or 0)
end

local function open(d)
  local cfg = worker.cfg
  local p, err = resty.open { event = cfg.event, freq = cfg.freq, period = cfg.period }
  local ok
  if p then
    -- the samples' pprof labels: a cost on every request perfev.resty
    -- measures (labels = false: none)
    local on, why = false, nil
    if cfg.labels then on, why = tags.start() end
    if on then p.engine.tag = tags.of
    elseif cfg.labels and not worker.said then
      worker.said = true
      ngx.log(ngx.WARN, "perfev.resty: continuous profile without pprof labels: ", why)
    end
    ok, err = pcall(p.start, p)
    if not ok then pcall(p.close, p) tags.stop() end
  end
  if not p or not ok then
    if not worker.failed then
      worker.failed = true
      ngx.log(ngx.ERR, "perfev.resty: the continuous profiler: ", options.strip_where(tostring(err)))
    end
    return
  end
  worker.p, worker.failed, worker.cost, worker.cpu = p, nil, 0, 0
  p.namer = require("perfev.profile.naming").namer()   -- each source read once, not at every fold
  d:set("c_event", cfg.event)
  d:set("c_unit", p.unit)
  d:set("c_freq", p.freq or false)
  d:set("c_period", p.period or false)
  d:set("c_keep", cfg.keep)
end

-- Every second in each worker: fold, or (re)open when nothing else
-- profiles this worker.
local function tick(premature, d)
  if premature then return close(d) end
  if session_running() then return close(d) end
  if not worker.p then
    resty.release()                     -- a complete /profile session's profiler, if this worker holds one
    return open(d)
  end
  local ok, done, err = pcall(fold, d, worker.p)
  if not ok then err = options.strip_where(tostring(done)) end
  if not ok or not done then
    ngx.log(ngx.ERR, "perfev.resty: continuous profile into the dict: ", tostring(err))
  end
end

-- init(d, c) -> true | nil, message (in init_worker_by_lua*, through
-- perfev.resty.pprof_init{ continuous = c }).
function M.init(d, c)
  local cfg, err = M.config(c)
  if not cfg then return nil, "perfev.resty: " .. err end
  worker.cfg = cfg
  local ok
  ok, err = ngx.timer.every(M.SLOT, tick, d)
  if not ok then return nil, "perfev.resty: " .. tostring(err) end
  -- at once, not in a second (a timer: the cosocket-free context)
  ngx.timer.at(0, tick, d)
  return true
end

function M.enabled() return worker.cfg ~= nil end

-- This worker's profiler is wanted by a /profile session: closed now.
function M.yield(d)
  if worker.p then close(d) end
end

-- The sum of the last `seconds` seconds' slots: a profile (perfev.profile.folded's) | nil, message.
function M.summed(d, seconds)
  local keep = d:get("c_keep") or (worker.cfg and worker.cfg.keep) or M.KEEP
  if seconds > keep then
    return nil, ("seconds must be at most %d: the continuous profile keeps the last %d s"):format(keep, keep)
  end
  local now = slot_now()
  local from = now - math.floor(seconds / M.SLOT)
  local lines, sums = {}, { n = 0, k = 0, u = 0 }
  for _, k in ipairs(d:get_keys(0)) do
    local slot, rest = k:match("^c(%d+)\t(.*)$")
    slot = tonumber(slot)
    if slot and slot > from then
      lines[#lines + 1] = ("%s %.0f"):format(rest, d:get(k) or 0)
    else
      local what
      what, slot = k:match("^([nku])(%d+)$")
      slot = tonumber(slot)
      if slot and slot > from then sums[what] = sums[what] + (d:get(k) or 0) end
    end
  end
  local samples = sums.n
  table.sort(lines)
  local p = folded.decode(table.concat(lines, "\n"), {
    event = d:get("c_event"), unit = d:get("c_unit"), samples = samples,
    name = ("%s, continuous, the last %.0f s"):format(tostring(d:get("c_event")), seconds) })
  p.freq, p.period = d:get("c_freq") or nil, d:get("c_period") or nil
  p.time = (from + 1) * M.SLOT
  p.duration = seconds * 1e9
  -- the profiler's share of the workers' CPU time over those seconds
  p.overhead = sums.u > 0 and sums.k / sums.u or nil
  return p
end

return M
