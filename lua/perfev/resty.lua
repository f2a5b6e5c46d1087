-- perfev.resty: per-request perf counters for OpenResty / ngx_http_lua, in
-- the lua-resty style (functions return nil, err; nothing raises on a
-- request path), exposed in the Prometheus text exposition format.
-- doc/openresty.md and examples/openresty/nginx.conf show it whole:
--
--   init_worker_by_lua_block { assert(require("perfev.resty").init{ dict = "perfev" }) }
--   rewrite_by_lua_block     { require("perfev.resty").start() }
--   log_by_lua_block         { require("perfev.resty").finish() }
--   location = /metrics { content_by_lua_block { require("perfev.resty").serve() } }
--
-- Each worker opens one group of software events on itself (pid = 0: the
-- worker's thread, which runs every request of that worker). start() reads
-- the group before the content phase, finish() reads it in the log phase
-- and adds the difference to the request's label (the URI by default). A
-- request that yields (I/O, ngx.sleep) shares its worker with the requests
-- that run meanwhile, and their work lands in its difference too: the sums
-- stay exact, a single request's share is exact only when it runs alone.
--
-- A request measured costs two read(2)s of the group (in the kernel: most
-- of the cost, doc/openresty.md, What it costs) and a few table updates: the
-- sums are kept per worker in Lua tables and added to the shared dict on a
-- timer (every `flush_ms`, default 1000 ms; at the worker's exit too), not
-- per request (a dict write takes the dict's lock, shared by every worker,
-- and one was taken per series per request). /metrics serves the dict after
-- adding its own worker's sums: the other workers' last `flush_ms` may
-- be missing from it, never lost (doc/openresty.md, What it costs).
-- With init{ sample = K } one request in K is measured (one drawn at random
-- in each run of K requests of a worker): every request is counted, a
-- measured one stands for K in the sums and the buckets, and
-- measured_total says how many were (doc/openresty.md, Measuring one
-- request in K).
local perfev = require "perfev"
local options = require "perfev.options"
local fs = require "perfev.fs"
local label_values = require "perfev.resty.labels"
local prom = require "perfev.resty.prom"
local series = require "perfev.resty.series"
local tags = require "perfev.resty.tags"

-- ngx_lua's API; outside nginx a call that needs it says so (perfev.resty.ngx)
local ngx = rawget(_G, "ngx") or require "perfev.resty.ngx"

-- The request a phase runs for, as a key that costs no allocation: in
-- OpenResty's LuaJIT the thread's exdata (thread.exdata), the pointer
-- ngx_lua finds the request by, as a number (the same in the rewrite and
-- the log phase); elsewhere, or outside a request, ngx.ctx (a table made
-- per request).
local exdata, ffi
do
  local ok, e = pcall(require, "thread.exdata")
  local okf, f = pcall(require, "ffi")
  if ok and type(e) == "function" and okf then exdata, ffi = e, f end
end
local function request_key()
  local p = exdata and exdata()
  if p ~= nil then return tonumber(ffi.cast("uintptr_t", p)) end
  return ngx.ctx
end

-- requests started and not finished, kept per instance (a request whose
-- log phase never runs, e.g. a subrequest's, is dropped past this many)
local PENDING_MAX = 4096

local _M = { _VERSION = "0.1.0" }
local mt = { __index = _M }

_M.DEFAULT_EVENTS = { "task-clock", "page-faults", "context-switches" }

-- How an event shows in Prometheus: metric name (the counter's before
-- _total, the histogram's whole), the counter's help, the histogram's, and
-- the divisor from the kernel's unit to the metric's base unit (a division:
-- 208765965 / 1e9 is the double nearest 0.208765965, 208765965 * 1e-9 is not).
local METRICS = {
  ["task-clock"] = { "task_clock_seconds", "CPU time the requests ran on their worker (task-clock)",
                     "CPU time of a request on its worker (task-clock)", 1e9 },
  ["cpu-clock"] = { "cpu_clock_seconds", "CPU time the requests ran on their worker (cpu-clock)",
                    "CPU time of a request on its worker (cpu-clock)", 1e9 },
  ["page-faults"] = { "page_faults", "Page faults taken while the requests ran",
                      "Page faults taken while a request ran", 1 },
  ["context-switches"] = { "context_switches", "Context switches of the worker while the requests ran",
                           "Context switches of the worker while a request ran", 1 },
  ["cpu-migrations"] = { "cpu_migrations", "CPU migrations of the worker while the requests ran",
                         "CPU migrations of the worker while a request ran", 1 },
}

local function metric_of(ev)
  local m = METRICS[ev]
  if m then return m[1], m[2], m[3], m[4] end
  return (ev:gsub("[^%w_]", "_")), "perf event " .. ev .. " counted while the requests ran",
         "perf event " .. ev .. " counted while a request ran", 1
end

-- What each kernel member of the group counts: "user,kernel", "user" or
-- "kernel" (its attr's exclude_user / exclude_kernel), by event name; and
-- the events that count user space only because the kernel refused more
-- (perfev.open's exclude_kernel fallback, taken as perf stat takes it).
local function scopes(g, events)
  local by, fell = {}, {}
  local function on(v) return v == 0 or v == false end
  for _, i in ipairs(g.kernel) do
    local ev = g.list[i]
    local a = ev:attr()
    local where = {}
    if on(a.exclude_user) then where[#where + 1] = "user" end
    if on(a.exclude_kernel) then where[#where + 1] = "kernel" end
    by[events[i]] = table.concat(where, ",")
    if (ev:data().fallback or ""):find("exclude_kernel", 1, true) then fell[#fell + 1] = events[i] end
  end
  return by, fell
end

-- The fallback changes what is measured (context switches, which happen
-- in the kernel, count 0): said once per worker in error.log, at ngx.ERR
-- (nginx's default error_log level), with who the worker is and what to do.
local function log_user_only(names)
  local log = rawget(_G, "ngx") and ngx.log
  if not log then return end
  local uid = (fs.read("/proc/self/status") or ""):match("\nUid:%s*(%d+)") or "?"
  local user = "?"
  for name, id in (fs.read("/etc/passwd") or ""):gmatch("([^:\n]*):[^:\n]*:(%d+):[^\n]*") do
    if id == uid then
      user = name
      break
    end
  end
  local level = (fs.read("/proc/sys/kernel/perf_event_paranoid") or "?"):match("%-?%d+") or "?"
  log(ngx.ERR, ("perfev.resty: %s count user space only (the kernel refused counting in the kernel to this "
                .. "worker, uid %s (%s), at kernel.perf_event_paranoid %s): what happens in the kernel, context "
                .. "switches among it, counts 0; run the workers as root (user root;), or lower the level to 1 "
                .. "(sysctl -w kernel.perf_event_paranoid=1), or ask for user space only (task-clock:u, ...) "
                .. "(doc/openresty.md, Permissions)"):format(table.concat(names, ", "), uid, user, level))
end

-- The position of the request measured in the next run of `sample`
-- requests (a Park-Miller step: 16807 * seed stays below 2^53, exact in a
-- double on every runtime).
local function draw(self)
  local x = self.seed * 16807 % 2147483647
  self.seed = x
  self.pick = x % self.sample
  self.seen = 0
end

-- the known options (flush_ms, buckets, collapse, max_labels and overflow
-- are checked where they are used, with what each must be)
local OPTIONS = { events = "table", dict = "string", prefix = "string", label = "function",
                  flush_ms = "any", buckets = "any", collapse = "any", max_labels = "any", overflow = "any",
                  sample = "any" }
-- the name of the release before: every duration is in ms, and says so
local RENAMED = { flush = { "flush_ms", convert = function(s) return s * 1000 end, note = " (in ms, not s)" } }

-- resty.new{ events =, dict =, prefix =, label =, flush_ms =, sample = } -> instance | nil, err
--   events  perf event names (default task-clock, page-faults, context-switches)
--   dict    a lua_shared_dict name: the sums of every worker (default: this
--           worker's own sums only)
--   prefix  of the metric names (default "perfev_request_")
--   label   function(ngx) -> the label value of the current request
--           (default: ngx.var.uri)
--   flush_ms milliseconds between two additions of this worker's sums to
--           the dict (default 1000; 0: every request, as a dict write per
--           series); 'flush' in seconds is its deprecated name
--   sample  K: measure one request in K (default 1: every request); every
--           request is counted in requests_total, a measured one stands
--           for K in the sums and the histograms' buckets (estimates),
--           measured_total counts those measured
--   buckets the histograms' upper bounds by event name, in the metric's
--           unit (seconds, counts); false: no histograms (perfev.resty.series)
--   collapse, max_labels, overflow: how label values are kept few
--           (perfev.resty.labels: ids collapsed to :id, at most 100 values,
--           the rest under "other")
-- Call it in init_worker_by_lua*: the events belong to the worker calling it.
function _M.new(opts)
  opts = opts or {}
  if type(opts) ~= "table" then return nil, "perfev.resty: options must be a table" end
  local renamed, rwhy = pcall(options.renamed, opts, RENAMED, "perfev.resty")
  if not renamed then return nil, options.strip_where(rwhy) end
  opts = rwhy
  local known, why = pcall(options.check, opts, OPTIONS, "perfev.resty")
  if not known then return nil, options.strip_where(why) end
  local events = opts.events or _M.DEFAULT_EVENTS
  if type(events) ~= "table" or #events == 0 then return nil, "perfev.resty: option 'events' must be a list" end
  local dict
  if opts.dict ~= nil then
    dict = ngx.shared[opts.dict]
    if not dict then return nil, "perfev.resty: no lua_shared_dict named '" .. tostring(opts.dict) .. "'" end
  end
  if opts.label ~= nil and type(opts.label) ~= "function" then
    return nil, "perfev.resty: option 'label' must be a function"
  end
  local flush = opts.flush_ms
  if flush == nil then flush = 1000 end
  if type(flush) ~= "number" or flush < 0 or flush ~= flush or flush == math.huge then
    return nil, "perfev.resty: option 'flush_ms' must be a number of milliseconds >= 0"
  end
  flush = flush / 1000   -- seconds, as ngx.timer takes them
  local sample = opts.sample
  if sample == nil then sample = 1 end
  if type(sample) ~= "number" or sample < 1 or sample ~= math.floor(sample) or sample >= 2 ^ 31 then
    return nil, "perfev.resty: option 'sample' must be an integer from 1 (every request) to 2^31 - 1 "
                .. "(one request in that many)"
  end
  local divisors = {}
  for i, ev in ipairs(events) do divisors[i] = select(4, metric_of(tostring(ev))) end
  local layout, lerr = series.layout(events, divisors, opts.buckets, sample > 1)
  if not layout then return nil, "perfev.resty: " .. lerr end
  local names, nerr = label_values.new { collapse = opts.collapse, max_labels = opts.max_labels,
                                   overflow = opts.overflow, dict = dict }
  if not names then return nil, "perfev.resty: " .. nerr end
  -- a bad event name raises in perfev.group: here it is returned, as every
  -- lua-resty call does
  local ok, g, err = pcall(perfev.group, events)
  if not ok then return nil, "perfev.resty: " .. options.strip_where(g) end
  if not g then return nil, "perfev.resty: " .. tostring(err) end
  g:enable()
  local self = setmetatable({
    g = g, n = #events, events = events, t = g:read(), delta = {},
    dict = dict, dict_name = opts.dict, sums = {}, pool = {}, flush_every = flush,
    prefix = opts.prefix or "perfev_request_", label = opts.label,
    layout = layout, names = names,
    -- started requests by request_key(); the sampling: one request in
    -- `sample`, at position `pick` of the current run of them (0-based),
    -- `seen` of the run gone by, `seed` a Park-Miller generator's state
    -- (the worker's own: math.random's sequence stays the application's)
    pending = setmetatable({}, { __mode = "k" }), npending = 0,
    sample = sample, seen = 0, pick = 0, seed = 1,
  }, mt)
  if sample > 1 then
    local pid = ngx.worker and ngx.worker.pid and ngx.worker.pid() or 0
    self.seed = (pid * 7919 + math.floor((ngx.now and ngx.now() or os.time()) * 1000)) % 2147483646 + 1
    draw(self)
  end
  if dict then
    -- the overflow label's series made now, at 0, while the dict has room:
    -- the labels the dict turns away later are counted there
    local keys, overflow = layout.keys, names.overflow
    for pos = 1, layout.width do
      local okr, rerr = dict:safe_add(keys[pos] .. overflow, 0)
      if not okr and rerr ~= "exists" then
        g:close()
        return nil, ("perfev.resty: lua_shared_dict '%s' has no room for the %d series of label '%s': %s"):format(
          opts.dict, layout.width, overflow, tostring(rerr))
      end
    end
  end
  self.scopes, self.user_only = scopes(g, events)
  if #self.user_only > 0 then log_user_only(self.user_only) end
  if dict and flush > 0 then
    -- called at the worker's exit too (premature): its last sums are kept
    local ok_t, terr = ngx.timer.every(flush, function() self:flush() end)
    if not ok_t then
      g:close()
      return nil, "perfev.resty: cannot start the flush timer: " .. tostring(terr)
    end
  end
  return self
end

-- The default instance of this worker, made by init().
function _M.init(opts)
  local inst, err = _M.new(opts)
  if not inst then return nil, err end
  _M.default = inst
  return inst
end

local function self_or_default(self)
  if getmetatable(self) == mt then return self end
  return _M.default
end

-- Before the content phase (rewrite_by_lua*, access_by_lua*): the group's
-- counts now, kept for finish() under the request (an array from this
-- worker's pool: no garbage). With sample = K, only for one request in K.
function _M.start(self)
  if getmetatable(self) ~= mt then self = _M.default end
  if not self then return nil, "perfev.resty: init() was not called in init_worker_by_lua" end
  -- a profiler takes pprof labels in this worker: this request's, now
  -- (perfev.resty.tags), measured or not
  if tags.on then tags.note(self.names:get((self.label and self.label(ngx)) or ngx.var.uri or "")) end
  if self.sample > 1 then
    local seen = self.seen
    local measure = seen == self.pick
    if seen + 1 == self.sample then draw(self) else self.seen = seen + 1 end
    if not measure then
      -- not measured: nothing of an earlier request under the same key
      -- (one whose log phase never ran); nothing to look for when no
      -- request is pending, the common case
      if self.npending > 0 then
        local key = request_key()
        if self.pending[key] then
          self.pending[key] = nil
          self.npending = self.npending - 1
        end
      end
      return true
    end
  end
  local key = request_key()
  local pending = self.pending
  local t = self.t
  local ok, err = self.g:read(t)
  if not ok then return nil, "perfev.resty: " .. tostring(err) end
  local start = pending[key]
  if not start then
    local pool = self.pool
    local n = #pool
    if n > 0 then
      start = pool[n]
      pool[n] = nil
    else
      start = {}
    end
    if self.npending >= PENDING_MAX then
      -- requests whose log phase never ran: forgotten
      pending = setmetatable({}, { __mode = "k" })
      self.pending, self.npending = pending, 0
    end
    pending[key] = start
    self.npending = self.npending + 1
  end
  for i = 1, self.n do start[i] = t[i] or 0 end
  return true
end

-- This worker's sums of one label into the dict, each series by one
-- incr, zeroed once added (a series at 0 is written the first time only:
-- it shows as 0). Nothing is evicted for it (series.incr): when the dict
-- has no room for a label's series, what is left of its sums goes to the
-- overflow label's, and its later requests too (labels:refuse), said once
-- per worker in error.log; the overflow's own series the dict refused stay
-- in the worker, for the next flush, said once too. Returns true, or nil,
-- err and whether the label was moved to the overflow.
local function flush_label(self, label, acc)
  local dict, keys = self.dict, self.layout.keys
  -- the counters' series (requests, sums) all the first time
  local all = not acc.written and self.layout.counters or 0
  for pos = 1, self.layout.width do
    local v = acc[pos]
    if v ~= 0 or pos <= all then
      local _, err = series.incr(dict, keys[pos] .. label, v)
      if err then
        local overflow = self.names.overflow
        if err == "no memory" and label ~= overflow then
          if not self.overflowed then
            self.overflowed = true
            ngx.log(ngx.ERR, "perfev.resty: lua_shared_dict '", tostring(self.dict_name), "' is full: uri '", label,
                    "' and the new ones after it are counted under '", overflow, "' (make the dict larger or ",
                    "max_labels smaller)")
          end
          self.names:refuse(label)
          return nil, err, true
        end
        if not self.flush_failed then
          self.flush_failed = true
          ngx.log(ngx.ERR, "perfev.resty: cannot add to lua_shared_dict '", tostring(self.dict_name), "': ", err,
                  " (its sums wait in the worker until it has room: make it larger)")
        end
        return nil, err
      end
      acc[pos] = 0
    end
  end
  acc.written = true
  return true
end

-- The sums of a label the dict had no room for, added to the overflow
-- label's (those of its series already written stay where they are).
local function to_overflow(self, label)
  local acc, overflow = self.sums[label], self.names.overflow
  self.sums[label] = nil
  local to = self.sums[overflow]
  if not to then
    to = series.acc(self.layout)
    self.sums[overflow] = to
  end
  for pos = 1, self.layout.width do to[pos] = to[pos] + acc[pos] end
  return overflow, to
end

-- inst:flush(): adds this worker's sums to the dict now (the timer calls
-- it every `flush` seconds, serve() before it answers). true, or nil, err
-- when the dict refused a series (it is kept for the next flush).
function _M.flush(self)
  self = self_or_default(self)
  if not self then return nil, "perfev.resty: init() was not called in init_worker_by_lua" end
  if not self.dict then return true end
  local ok, err = true, nil
  local moved = {}
  for label, acc in pairs(self.sums) do
    local done, e, full = flush_label(self, label, acc)
    if full then moved[#moved + 1] = label elseif not done then ok, err = nil, e end
  end
  if #moved > 0 then
    for _, label in ipairs(moved) do to_overflow(self, label) end
    local overflow = self.names.overflow
    local done, e = flush_label(self, overflow, self.sums[overflow])
    if not done then ok, err = nil, e end
  end
  if ok then self.flush_failed = nil end
  return ok, err and "perfev.resty: " .. err
end

-- In log_by_lua*: counts this request under its label and, when start()
-- measured it, adds its counts. Returns the table of its counts by event
-- name (reused by the next call); with sample = K, true for a request not
-- measured.
function _M.finish(self, label)
  if type(self) ~= "table" then self, label = nil, self end
  if getmetatable(self) ~= mt then self = _M.default end
  if not self then return nil, "perfev.resty: init() was not called in init_worker_by_lua" end
  -- measured: start() kept its counts under the request (with sample = K,
  -- nothing is kept when no request is pending)
  local start
  if self.npending > 0 or self.sample == 1 then
    local key = request_key()
    local pending = self.pending
    start = pending[key]
    if start then
      pending[key] = nil
      self.npending = self.npending - 1
    end
  end
  if not start and self.sample == 1 then
    return nil, "perfev.resty: start() did not run for this request"
  end
  local t = self.t
  if start then
    local ok, err = self.g:read(t)
    if not ok then return nil, "perfev.resty: " .. tostring(err) end
  end
  if tags.on then tags.forget() end
  label = self.names:get(label or (self.label and self.label(ngx)) or ngx.var.uri or "")
  local acc = self.sums[label]
  if not acc then
    acc = series.acc(self.layout)
    self.sums[label] = acc
  end
  local result = true
  if start then
    series.add(self.layout, acc, t, start, self.delta, self.events, self.sample)
    local pool = self.pool
    if #pool < 256 then pool[#pool + 1] = start end
    result = self.delta
  else
    acc[1] = acc[1] + 1
  end
  if self.dict and self.flush_every == 0 then
    local ok, err, full = flush_label(self, label, acc)
    if full then
      label, acc = to_overflow(self, label)
      ok, err = flush_label(self, label, acc)
    end
    if not ok then return nil, "perfev.resty: " .. tostring(err) end
  end
  return result
end

-- The metrics in the Prometheus text exposition format (version 0.0.4):
-- per label, the requests and each event's sum (counters), and each
-- event's histogram over the requests.
function _M.collect(self)
  self = self_or_default(self)
  if not self then return nil, "perfev.resty: init() was not called in init_worker_by_lua" end
  -- this worker's own sums are in the dict now; the others' are at most
  -- one flush interval behind
  self:flush()
  local counts, hist = series.read(self.layout, self.dict, self.sums)
  local out = {}
  prom.counter(out, self.prefix .. "requests_total", "Requests counted by perfev", counts[0], 1, "uri")
  -- with sample = 1 every request counted is measured
  prom.counter(out, self.prefix .. "measured_total", ("Requests whose events were measured (sample = %d: one in %d; "
               .. "the sums and buckets count each %d times)"):format(self.sample, self.sample, self.sample),
               self.layout.measured and counts.m or counts[0], 1, "uri")
  local est = self.sample > 1 and (" (estimated: one request in %d measured)"):format(self.sample) or ""
  for i, ev in ipairs(self.events) do
    local name, help, _, divisor = metric_of(ev)
    prom.counter(out, self.prefix .. name .. "_total", help .. est, counts[i], divisor, "uri")
  end
  for i, ev in ipairs(self.events) do
    local h = self.layout.hist[i]
    if h then
      local name, _, help, divisor = metric_of(ev)
      prom.histogram(out, self.prefix .. name, help .. est, { bounds = h.bounds, le = h.le, by = hist[i] },
                     counts[i], divisor, "uri")
    end
  end
  -- what each event counts in this worker: scope="user" when the kernel
  -- refused counting in the kernel (error.log says so at init)
  local info = self.prefix .. "event_info"
  out[#out + 1] = ("# HELP %s What each event counts: scope user,kernel, or user only (the kernel refused "
                   .. "more: doc/openresty.md, Permissions)\n# TYPE %s gauge\n"):format(info, info)
  for _, ev in ipairs(self.events) do
    if self.scopes[ev] then
      out[#out + 1] = ('%s{event="%s",scope="%s"} 1\n'):format(info, prom.escape(ev), self.scopes[ev])
    end
  end
  return table.concat(out)
end

-- content_by_lua*: answers with the metrics.
function _M.serve(self)
  local text, err = _M.collect(self)
  if not text then
    ngx.status = 500
    ngx.say(err)
    return
  end
  ngx.header["Content-Type"] = "text/plain; version=0.0.4; charset=utf-8"
  ngx.print(text)
end

-- Profiling the next N requests of a location by Lua function (perfev.profile
-- in each worker, the folded stacks summed in a lua_shared_dict):
-- lua/perfev/profile/resty.lua, doc/openresty.md.
--   rewrite_by_lua*/access_by_lua*: profile_start([{ dict = }])
--   log_by_lua*:                    profile_finish([{ dict = }])
--   control location:               profile_serve([{ dict = }]) (?n=N&loc=/path, ?format=...)
for name, f in pairs { profile_start = "start", profile_finish = "finish", profile_serve = "serve",
                       profile = "profile" } do
  _M[name] = function(opts) return require("perfev.profile.resty")[f](opts) end
end

-- The Lua stacks of every worker over N seconds, gzipped profile.proto
-- (Go's net/http/pprof convention, scraped by Parca and Grafana Alloy):
-- lua/perfev/profile/scrape.lua, doc/openresty.md.
--   init_worker_by_lua*:              pprof_init([{ dict =, continuous = }])   (default dict perfev_pprof;
--                                     continuous: true or { event, freq | period, keep }: continuous mode)
--   location = /debug/pprof/profile: pprof_serve([{ dict = }]) (?seconds=N[&event=E][&freq=F|&period=P])
for name, f in pairs { pprof_init = "init", pprof_serve = "serve" } do
  _M[name] = function(opts) return require("perfev.profile.scrape")[f](opts) end
end

-- tostring(inst): what a REPL or an error log shows of an instance:
-- perfev.resty (task-clock, page-faults; 2 labels; dict perfev) or closed.
function mt.__tostring(self)
  options.self(self, mt, "perfev.resty", "__tostring")
  local labels = 0
  for _ in pairs(self.sums) do labels = labels + 1 end
  local where = self.dict and ("dict %s"):format(self.dict_name or "?")
                or ("%d labels in this worker"):format(labels)
  local user = #self.user_only > 0 and ("; user space only: " .. table.concat(self.user_only, ", ")) or ""
  return ("perfev.resty (%s; %s%s)%s"):format(table.concat(self.events, ", "), where, user,
                                              self.g and "" or " closed")
end

-- Closes this instance's events (a worker's are closed when it exits).
function _M.close(self)
  self = self_or_default(self)
  if self and self.g then
    self.g:close()
    self.g = nil
  end
end

return _M
