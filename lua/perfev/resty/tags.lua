-- perfev.resty.tags: the pprof labels of the samples a worker's profiler
-- takes in nginx: the request's `uri` (the label value its Prometheus
-- series go under: perfev.resty.labels) and, where it carries a W3C
-- `traceparent` header, its `trace_id`.
--
-- A sample names the Lua thread it stopped (jit.profile's callback, run on
-- a thread of its own); ngx_lua runs each phase of a request on a thread
-- whose exdata (OpenResty's LuaJIT: lua_getexdata) is the request, the
-- pointer ngx.* calls themselves find the request by. So: perfev.resty's
-- start() (rewrite or access phase) notes the request's tags under that
-- pointer, the sampler reads the pointer of the thread it stopped and
-- looks them up, finish() (log phase) forgets them. Only while this
-- worker's profiler takes tags (M.on): nothing is done per request
-- otherwise. Where the LuaJIT is not OpenResty's (no exdata), M.usable()
-- says why and the samples go untagged.
-- luacheck: globals ngx
local M = {}

M.MAX = 1024           -- requests noted at once per worker (a leak bound: one never logged)

-- the requests in flight that were noted: request (thread.exdata's
-- pointer, a cdata made anew by each call, as a number: the same request
-- is the same key) -> tags; and the tags string of each uri label, made
-- once
local byreq, count = {}, 0
local of_label, labels = {}, 0
local ffi, exdata, getexdata
local why_not

local function load()
  if ffi or why_not then return not why_not end
  local ok, f = pcall(require, "ffi")
  if not ok then why_not = "no ffi (not LuaJIT)" return false end
  local e
  ok, e = pcall(require, "thread.exdata")
  if not ok then why_not = "no thread.exdata (the LuaJIT is not OpenResty's)" return false end
  ok = pcall(f.cdef, "void *lua_getexdata(void *L);")
  local sym
  if ok then ok, sym = pcall(function() return f.C.lua_getexdata end) end
  if not ok then why_not = "no lua_getexdata in this process" return false end
  ffi, exdata, getexdata = f, e, sym
  return true
end

-- usable() -> true | false, why
function M.usable()
  if load() then return true end
  return false, why_not
end

M.on = false

local function address(p)
  return tonumber(ffi.cast("uintptr_t", p))
end

-- trace_id(traceparent) -> the trace id (32 lowercase hex digits) | nil:
-- version-traceid-parentid-flags (W3C Trace Context, level 1); an all-zero
-- id, version ff or a malformed header give none.
function M.trace_id(tp)
  if type(tp) ~= "string" then return nil end
  local ver, id, parent = tp:match("^(%x%x)%-(%x+)%-(%x+)%-%x%x")
  if not ver or ver == "ff" or #id ~= 32 or #parent ~= 16 then return nil end
  if id:find("[A-F]") or parent:find("[A-F]") or id == ("0"):rep(32) then return nil end
  if ver == "00" and #tp ~= 55 then return nil end
  return id
end

-- note(label): the current request's tags, under its request pointer
-- (rewrite or access phase; label: its uri label value).
function M.note(label)
  if not M.on or not load() then return end
  local p = exdata()
  if p == nil then return end
  local r = address(p)
  local tags = of_label[label]
  if not tags then
    tags = "uri\2" .. label
    labels = labels + 1
    if labels > M.MAX then of_label, labels = {}, 1 end
    of_label[label] = tags
  end
  local tp = ngx.var.http_traceparent
  if tp then
    local id = M.trace_id(tp)
    if id then tags = tags .. "\1trace_id\2" .. id end
  end
  if not byreq[r] then
    count = count + 1
    if count > M.MAX then byreq, count = {}, 1 end
  end
  byreq[r] = tags
end

-- forget(): the current request is over (log phase).
function M.forget()
  if count == 0 then return end
  local p = exdata and exdata()
  local r = p ~= nil and address(p)
  if r and byreq[r] then
    byreq[r] = nil
    count = count - 1
  end
end

-- of(thread) -> the tags of the request that thread runs | nil (the
-- sampler's callback, a few times a second: the thread's request by its
-- address, looked for among the requests in flight).
function M.of(thread)
  if count == 0 then return nil end
  local addr = tonumber(tostring(thread):match("0x(%x+)"), 16)
  if not addr then return nil end
  local want = address(getexdata(ffi.cast("void *", addr)))
  if want == 0 then return nil end
  return byreq[want]
end

-- start(): this worker's profiler takes tags from now on (true), or why
-- not (false, message).
function M.start()
  local ok, why = M.usable()
  M.on = ok
  return ok, why
end

function M.stop()
  M.on = false
  byreq, count = {}, 0
end

return M
