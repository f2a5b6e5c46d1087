-- perfev.resty's per-worker sums, outside nginx: the `ngx` API the module
-- uses (a shared dict that counts its writes, ngx.ctx, ngx.var, the
-- timer) stands in, the counts are real (the process's own events). A
-- request's log phase writes nothing to the shared dict: the worker's sums
-- go to it when the timer fires (or serve() answers), one write per
-- series, and the sums there are the requests' counts exactly.

local own_key = require("perfev.resty.labels").is_own_key

-- A lua_shared_dict as ngx_http_lua's behaves for incr/add/get/get_keys,
-- with the number of writes made to series (not to the label values'
-- keys, perfev.resty.labels's); `room` series at most (incr of a new key
-- beyond them: nil, "no memory").
local function fake_dict(room)
  local d = { data = {}, writes = 0, keys = 0, room = room }
  function d.incr(self, key, v, init)
    local series = not own_key(key)
    local old = self.data[key]
    if old == nil and init == nil then return nil, "not found" end
    if series then self.writes = self.writes + 1 end
    if old == nil then
      if series and self.room and self.keys >= self.room then return nil, "no memory" end
      if series then self.keys = self.keys + 1 end
      old = init
    end
    self.data[key] = old + v
    return old + v, nil
  end
  -- no eviction: a full dict says "no memory" (ngx_http_lua's safe_add)
  function d.safe_add(self, key, v)
    if self.data[key] ~= nil then return false, "exists" end
    local series = not own_key(key)
    if series and self.room and self.keys >= self.room then return false, "no memory" end
    if series then self.keys, self.writes = self.keys + 1, self.writes + 1 end
    self.data[key] = v
    return true
  end
  function d.add(self, key, v)
    if self.data[key] ~= nil then return false, "exists" end
    self.data[key] = v
    return true
  end
  function d.get(self, key) return self.data[key] end
  function d.get_keys(self)
    local t = {}
    for k in pairs(self.data) do t[#t + 1] = k end
    return t
  end
  return d
end

describe("perfev.resty's per-worker sums", function()
  local resty = require "perfev.resty"
  local saved, fake, timers, logged

  before_each(function()
    saved = rawget(_G, "ngx")
    timers, logged = {}, {}
    fake = {
      shared = { perfev = fake_dict(), small = fake_dict(55) },
      ctx = {}, var = { uri = "/a" }, ERR = 4,
      timer = { every = function(interval, f) timers[#timers + 1] = { interval = interval, f = f } return true end },
      log = function(_, ...) logged[#logged + 1] = table.concat({ ... }) end,
    }
    rawset(_G, "ngx", fake)
  end)
  after_each(function() rawset(_G, "ngx", saved) end)

  -- one request: start, some work, finish with ngx.var.uri = uri
  local function request(r, uri, work)
    fake.ctx = {}
    fake.var.uri = uri
    assert(r:start())
    local s = 0
    for i = 1, work do s = s + i % 7 end
    return assert(r:finish()), s
  end

  it("adds to the dict on the timer only, one write per series, the sums exact", function()
    local r = assert(resty.new { dict = "perfev" })
    assert.are.equal(1, #timers)
    assert.are.equal(1, timers[1].interval)
    local dict = fake.shared.perfev
    -- at new(): the overflow label's series, made at 0 while there is room
    local made = dict.writes
    assert.are.equal(dict.keys, made)
    local want = { ["/a"] = { 0, 0, 0, 0 }, ["/b"] = { 0, 0, 0, 0 } }
    for i = 1, 200 do
      local uri = i % 4 == 0 and "/b" or "/a"
      local d = request(r, uri, 20000)
      local w = want[uri]
      w[1] = w[1] + 1
      for k, ev in ipairs(resty.DEFAULT_EVENTS) do w[k + 1] = w[k + 1] + d[ev] end
    end
    -- 200 requests: not one write to the dict
    assert.are.equal(made, dict.writes)
    assert.is_true(want["/a"][2] > 0)
    timers[1].f(false)
    -- one write per series: two labels, four counters each (the count and
    -- three events) and the histograms' buckets their requests fell in
    assert.are.equal(dict.keys, dict.writes)
    local counters = 0
    for key in pairs(dict.data) do if key:match("^%d\t") then counters = counters + 1 end end
    assert.are.equal(12, counters)   -- and the overflow's four
    for uri, w in pairs(want) do
      for i = 0, 3 do assert.are.equal(w[i + 1], dict:get(i .. "\t" .. uri) or 0, uri .. " series " .. i) end
    end
    -- nothing new: nothing written; the exposition has the sums
    local writes = dict.writes
    timers[1].f(false)
    assert.are.equal(writes, dict.writes)
    -- a label's later flushes write the series that changed only: the
    -- count, task-clock (page faults and context switches, likely 0), a
    -- bucket of each histogram
    request(r, "/a", 10)
    local text = r:collect()   -- adds this worker's sums first
    assert.is_true(dict.writes <= writes + 7, tostring(dict.writes - writes))
    assert.are.equal(want["/a"][1] + 1, dict:get("0\t/a"))
    assert.matches('\nperfev_request_requests_total{uri="/a"} ' .. (want["/a"][1] + 1) .. "\n", text, 1, true)
    r:close()
  end)

  -- A full dict: ngx_http_lua's incr with an init value evicted other
  -- series to make room, without a word (issue 20: the long-lived
  -- /work/light series gone). Nothing is evicted now: a label the dict
  -- has no room for goes to the overflow label ("other"), and what the
  -- overflow cannot hold waits in the worker; each said once.
  it("a full dict: a label with no room goes to the overflow; nothing evicted, said once", function()
    -- 55 series: the overflow's 52, made at new(), and 3
    local r = assert(resty.new { dict = "small", flush_ms = 5000 })
    assert.are.equal(5, timers[1].interval)
    local want = {}
    local function counted(d)
      want[0] = (want[0] or 0) + 1
      for k, ev in ipairs(resty.DEFAULT_EVENTS) do want[k] = (want[k] or 0) + d[ev] end
    end
    for _ = 1, 3 do counted(request(r, "/a", 1000)) end
    for _ = 1, 2 do counted(request(r, "/b", 1000)) end
    assert(r:flush())
    timers[1].f(false)
    assert.are.equal(1, #logged)
    assert.matches("^perfev.resty: lua_shared_dict 'small' is full: uri '/[ab]' and the new ones after it are "
                   .. "counted under 'other'", logged[1])
    -- every request and every count is in some series
    local dict = fake.shared.small
    local function total(i)
      local sum = 0
      for key, v in pairs(dict.data) do if key:sub(1, #tostring(i) + 1) == i .. "\t" then sum = sum + v end end
      return sum
    end
    for i = 0, 3 do assert.are.equal(want[i], total(i), "series " .. i) end
    assert.is_true(dict:get("0\tother") >= 2)
    -- the labels moved stay under the overflow
    local before = dict:get("0\tother")
    request(r, "/a", 10)
    request(r, "/b", 10)
    assert(r:flush())
    assert.are.equal(before + 2, dict:get("0\tother"))
    assert.are.equal(1, #logged)
    -- the overflow's own series refused (another user of the dict took
    -- its room): they wait in the worker, said once, and arrive whole
    for key in pairs(dict.data) do if key:find("\tother$") then dict.data[key] = nil end end
    dict.keys, dict.room = 0, 0
    request(r, "/c", 10)
    local ok, err = r:flush()
    assert.is_nil(ok)
    assert.matches("no memory", err)
    timers[1].f(false)
    assert.are.equal(2, #logged)
    assert.matches("perfev.resty: cannot add to lua_shared_dict 'small': no memory", logged[2], 1, true)
    dict.room = nil
    assert(r:flush())
    assert.are.equal(1, dict:get("0\tother"))
    r:close()
  end)

  it("flush_ms = 0 writes each request's series at once; a bad flush_ms is returned", function()
    local r = assert(resty.new { dict = "perfev", flush_ms = 0 })
    assert.are.equal(0, #timers)
    request(r, "/a", 1000)
    assert.are.equal(1, fake.shared.perfev:get("0\t/a"))
    r:close()
    for _, bad in ipairs { -1, "1", 0 / 0, math.huge } do
      local inst, msg = resty.new { dict = "perfev", flush_ms = bad }
      assert.is_nil(inst)
      assert.are.equal("perfev.resty: option 'flush_ms' must be a number of milliseconds >= 0", msg)
    end
    local inst, msg = resty.new { dict = "perfev", flush_m = 5 }
    assert.is_nil(inst)
    assert.are.equal("perfev.resty: unknown option 'flush_m' (did you mean 'flush_ms'?)", msg)
  end)

  it("takes 'flush' in seconds, the name of the release before, and says it is deprecated", function()
    local said = {}
    local prev = require("perfev").on_warning(function(m) said[#said + 1] = m end)
    local r = resty.new { dict = "perfev", flush = 5 }
    require("perfev").on_warning(prev)
    assert.truthy(r)
    assert.are.equal(1, #timers)
    assert.are.equal(5, timers[1].interval)   -- ngx.timer.every's seconds
    assert.are.equal(1, #said)
    assert.matches("perfev.resty: option 'flush' is now 'flush_ms' (in ms, not s)", said[1], 1, true)
    r:close()
  end)
end)
