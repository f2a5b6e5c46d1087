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
local perfev = require "perfev"
local options = require "perfev.options"
local fs = require "perfev.fs"

-- ngx_lua's API. Outside nginx (a plain Lua) a call that needs it says so,
-- rather than "attempt to index a nil value (global 'ngx')".
local ngx = rawget(_G, "ngx") or setmetatable({}, { __index = function(_, k)
  options.raisef("perfev.resty: ngx.%s is not there: perfev.resty runs inside nginx, with ngx_lua "
                 .. "(OpenResty, or nginx's lua module), not in a plain Lua", tostring(k))
end })

local _M = { _VERSION = "0.1.0" }
local mt = { __index = _M }

_M.DEFAULT_EVENTS = { "task-clock", "page-faults", "context-switches" }

-- How an event shows in Prometheus: metric name (before _total), help, and
-- the divisor from the kernel's unit to the metric's base unit (a division:
-- 208765965 / 1e9 is the double nearest 0.208765965, 208765965 * 1e-9 is not).
local METRICS = {
  ["task-clock"] = { "task_clock_seconds", "CPU time the requests ran on their worker (task-clock)", 1e9 },
  ["cpu-clock"] = { "cpu_clock_seconds", "CPU time the requests ran on their worker (cpu-clock)", 1e9 },
  ["page-faults"] = { "page_faults", "Page faults taken while the requests ran", 1 },
  ["context-switches"] = { "context_switches", "Context switches of the worker while the requests ran", 1 },
  ["cpu-migrations"] = { "cpu_migrations", "CPU migrations of the worker while the requests ran", 1 },
}

local function metric_of(ev)
  local m = METRICS[ev]
  if m then return m[1], m[2], m[3] end
  return (ev:gsub("[^%w_]", "_")), "perf event " .. ev .. " counted while the requests ran", 1
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

local OPTIONS = { events = "table", dict = "string", prefix = "string", label = "function" }

-- resty.new{ events =, dict =, prefix =, label = } -> instance | nil, err
--   events  perf event names (default task-clock, page-faults, context-switches)
--   dict    a lua_shared_dict name: the sums of every worker (default: this
--           worker's own sums only)
--   prefix  of the metric names (default "perfev_request_")
--   label   function(ngx) -> the label value of the current request
--           (default: ngx.var.uri)
-- Call it in init_worker_by_lua*: the events belong to the worker calling it.
function _M.new(opts)
  opts = opts or {}
  if type(opts) ~= "table" then return nil, "perfev.resty: options must be a table" end
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
  -- a bad event name raises in perfev.group: here it is returned, as every
  -- lua-resty call does
  local ok, g, err = pcall(perfev.group, events)
  if not ok then return nil, "perfev.resty: " .. options.strip_where(g) end
  if not g then return nil, "perfev.resty: " .. tostring(err) end
  g:enable()
  local self = setmetatable({
    g = g, n = #events, events = events, t = g:read(), delta = {},
    dict = dict, dict_name = opts.dict, sums = {}, labels = {},
    prefix = opts.prefix or "perfev_request_", label = opts.label,
  }, mt)
  self.scopes, self.user_only = scopes(g, events)
  if #self.user_only > 0 then log_user_only(self.user_only) end
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

-- Before the content phase (rewrite_by_lua*, access_by_lua*).
function _M.start(self)
  self = self_or_default(self)
  if not self then return nil, "perfev.resty: init() was not called in init_worker_by_lua" end
  local t = self.t
  local ok, err = self.g:read(t)
  if not ok then return nil, "perfev.resty: " .. tostring(err) end
  local start = {}
  for i = 1, self.n do start[i] = t[i] end
  ngx.ctx.perfev_start = start
  return true
end

local function add(self, key, v)
  if self.dict then
    local _, err = self.dict:incr(key, v, 0)
    if err then return nil, err end
  else
    self.sums[key] = (self.sums[key] or 0) + v
  end
  return true
end

-- In log_by_lua*: adds this request's counts to its label. Returns the
-- table of its counts by event name (reused by the next call).
function _M.finish(self, label)
  if type(self) ~= "table" then self, label = nil, self end
  self = self_or_default(self)
  if not self then return nil, "perfev.resty: init() was not called in init_worker_by_lua" end
  local start = ngx.ctx.perfev_start
  if not start then return nil, "perfev.resty: start() did not run for this request" end
  ngx.ctx.perfev_start = nil
  local t = self.t
  local ok, err = self.g:read(t)
  if not ok then return nil, "perfev.resty: " .. tostring(err) end
  label = label or (self.label and self.label(ngx)) or ngx.var.uri or ""
  local delta = self.delta
  for i = 1, self.n do
    local d = (t[i] or 0) - (start[i] or 0)
    delta[self.events[i]] = d
    ok, err = add(self, i .. "\t" .. label, d)
    if not ok then return nil, "perfev.resty: " .. tostring(err) end
  end
  ok, err = add(self, "0\t" .. label, 1)
  if not ok then return nil, "perfev.resty: " .. tostring(err) end
  return delta
end

-- A label value in the exposition format: \ " and newline escaped.
local function escape(s)
  return (s:gsub("[\\\"\n]", { ["\\"] = "\\\\", ['"'] = '\\"', ["\n"] = "\\n" }))
end

-- A sample value as Prometheus's clients print it: an integer as one, a
-- float in the shortest form that reads back as the same double (0.543968089,
-- not 0.54396808900000004), NaN and infinities as the format spells them.
local function number(v)
  if v ~= v then return "NaN" end
  if v == math.huge then return "+Inf" end
  if v == -math.huge then return "-Inf" end
  if v == math.floor(v) and v > -2 ^ 53 and v < 2 ^ 53 then return ("%.0f"):format(v) end
  for digits = 15, 16 do
    local s = ("%." .. digits .. "g"):format(v)
    if tonumber(s) == v then return s end
  end
  return ("%.17g"):format(v)
end

-- The sums as { [index] = { [label] = value } }, index 0 the request count.
local function sums(self)
  local by = {}
  local function put(key, v)
    local i, label = key:match("^(%d+)\t(.*)$")
    if i then
      i = tonumber(i)
      by[i] = by[i] or {}
      by[i][label] = v
    end
  end
  if self.dict then
    for _, key in ipairs(self.dict:get_keys(0)) do
      local v = self.dict:get(key)
      if v then put(key, v) end
    end
  else
    for key, v in pairs(self.sums) do put(key, v) end
  end
  return by
end

-- The metrics in the Prometheus text exposition format (version 0.0.4).
function _M.collect(self)
  self = self_or_default(self)
  if not self then return nil, "perfev.resty: init() was not called in init_worker_by_lua" end
  local by, out = sums(self), {}
  local function family(name, help, values, divisor)
    out[#out + 1] = ("# HELP %s %s\n# TYPE %s counter\n"):format(name, help, name)
    local labels = {}
    for label in pairs(values or {}) do labels[#labels + 1] = label end
    table.sort(labels)
    for _, label in ipairs(labels) do
      out[#out + 1] = ('%s{uri="%s"} %s\n'):format(name, escape(label), number(values[label] / divisor))
    end
  end
  family(self.prefix .. "requests_total", "Requests measured by perfev", by[0], 1)
  for i, ev in ipairs(self.events) do
    local name, help, divisor = metric_of(ev)
    family(self.prefix .. name .. "_total", help, by[i], divisor)
  end
  -- what each event counts in this worker: scope="user" when the kernel
  -- refused counting in the kernel (error.log says so at init)
  local info = self.prefix .. "event_info"
  out[#out + 1] = ("# HELP %s What each event counts: scope user,kernel, or user only (the kernel refused "
                   .. "more: doc/openresty.md, Permissions)\n# TYPE %s gauge\n"):format(info, info)
  for _, ev in ipairs(self.events) do
    if self.scopes[ev] then
      out[#out + 1] = ('%s{event="%s",scope="%s"} 1\n'):format(info, escape(ev), self.scopes[ev])
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

-- tostring(inst): what a REPL or an error log shows of an instance:
-- perfev.resty (task-clock, page-faults; 2 labels; dict perfev) or closed.
function mt.__tostring(self)
  local labels = 0
  for key in pairs(self.sums) do if key:match("^0\t") then labels = labels + 1 end end
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
