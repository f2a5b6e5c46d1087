-- perfev.resty's per-request histograms and its bound on label values,
-- outside nginx (the `ngx` API it uses stands in; the counts are the
-- process's own, from the kernel): each request lands in the bucket its
-- counts say, the exposition passes `promtool check metrics` (Prometheus's
-- own linter), with sample = K one request in K is measured and stands
-- for K, URIs with ids collapse to one label, and past max_labels
-- values the requests go to one overflow series, across workers too.
local shell = require "spec.support.shell"
local prom = require "perfev.resty.prom"
local labels = require "perfev.resty.labels"

-- A lua_shared_dict for incr/add/safe_add/get/get_keys.
local function fake_dict()
  local d = { data = {} }
  function d.incr(self, key, v, init)
    local old = self.data[key]
    if old == nil then
      if init == nil then return nil, "not found" end
      old = init
    end
    self.data[key] = old + v
    return old + v, nil
  end
  function d.add(self, key, v)
    if self.data[key] ~= nil then return false, "exists" end
    self.data[key] = v
    return true
  end
  d.safe_add = d.add   -- (never full: nothing to evict)
  function d.get(self, key) return self.data[key] end
  function d.get_keys(self)
    local t = {}
    for k in pairs(self.data) do t[#t + 1] = k end
    return t
  end
  return d
end

-- The samples of an exposition text: { [name] = { [labels] = value } }.
local function parse(text)
  local t = {}
  for line in text:gmatch("[^\n]+") do
    if not line:match("^#") then
      local name, lab, value = line:match("^([%w_:]+)(%b{}) (%S+)$")
      assert(name, line)
      t[name] = t[name] or {}
      t[name][lab] = tonumber(value) or value
    end
  end
  return t
end

local function promtool(text)
  if not shell.have("promtool") then return end
  local out, ok = shell.sh(("printf '%%s' %s | promtool check metrics 2>&1"):format(shell.quote(text)))
  assert(ok, out)
end

describe("perfev.resty's histograms", function()
  local resty = require "perfev.resty"
  local saved, fake

  before_each(function()
    saved = rawget(_G, "ngx")
    fake = { shared = { perfev = fake_dict() }, ctx = {}, var = { uri = "/" }, ERR = 4, log = function() end,
             timer = { every = function() return true end } }
    rawset(_G, "ngx", fake)
  end)
  after_each(function() rawset(_G, "ngx", saved) end)

  local function request(r, uri, work, pages)
    fake.ctx = {}
    fake.var.uri = uri
    assert(r:start())
    local s = 0
    for i = 1, work do s = s + i % 7 end
    -- fresh memory: page faults
    local keep = pages > 0 and string.rep("x", pages * 4096) or ""
    local d = assert(r:finish())
    local copy = {}
    for k, v in pairs(d) do copy[k] = v end
    return copy, s + #keep
  end

  -- the bucket index of v among the upper bounds (in the kernel's unit)
  local function bucket(bounds, v)
    for b, ub in ipairs(bounds) do if v <= ub then return b end end
    return #bounds + 1
  end

  for _, mode in ipairs { "worker", "dict" } do
    it("puts each request in the bucket of its counts, cumulative, _count and _sum agreeing (" .. mode .. ")",
       function()
      local r = assert(resty.new { dict = mode == "dict" and "perfev" or nil })
      -- 60 requests from ~20 us to ~20 ms of CPU, some faulting pages in
      local seen = { ["task-clock"] = {}, ["page-faults"] = {}, ["context-switches"] = {} }
      local n = 0
      for i = 1, 60 do
        local d = request(r, "/work/" .. (i % 2 == 0 and "a" or "b"), math.floor(2000 * 1.12 ^ i),
                          i % 5 == 0 and 64 or 0)
        if i % 2 == 0 then
          n = n + 1
          for ev, list in pairs(seen) do list[#list + 1] = d[ev] end
        end
      end
      local text = r:collect()
      r:close()
      promtool(text)
      local m = parse(text)
      local bounds = {
        ["task-clock"] = { "perfev_request_task_clock_seconds", prom.SECONDS, 1e9 },
        ["page-faults"] = { "perfev_request_page_faults", prom.COUNTS, 1 },
        ["context-switches"] = { "perfev_request_context_switches", prom.COUNTS, 1 },
      }
      local spread = 0
      for ev, b in pairs(bounds) do
        local name, list, div = b[1], b[2], b[3]
        local ub = {}
        for k, v in ipairs(list) do ub[k] = math.floor(v * div + 0.5) end
        local want, sum = {}, 0
        for _, v in ipairs(seen[ev]) do
          local k = bucket(ub, v)
          want[k] = (want[k] or 0) + 1
          sum = sum + v
        end
        local c, used = 0, 0
        for k = 1, #list + 1 do
          c = c + (want[k] or 0)
          if want[k] then used = used + 1 end
          local le = k <= #list and prom.number(list[k]) or "+Inf"
          assert.are.equal(c, m[name .. "_bucket"]['{uri="/work/a",le="' .. le .. '"}'], ev .. " le " .. le)
        end
        if ev == "task-clock" then spread = used end
        assert.are.equal(n, m[name .. "_count"]['{uri="/work/a"}'])
        assert.are.equal(sum / div, m[name .. "_sum"]['{uri="/work/a"}'])
        assert.are.equal(m[name .. "_total"]['{uri="/work/a"}'], m[name .. "_sum"]['{uri="/work/a"}'])
      end
      assert.are.equal(n, m.perfev_request_requests_total['{uri="/work/a"}'])
      -- the requests' CPU times spread over several buckets (a real test of
      -- the bucketing, not all in one)
      assert.is_true(spread >= 4, "task-clock buckets used: " .. spread)
    end)
  end

  it("takes buckets by event name in the metric's unit, or none", function()
    local r = assert(resty.new { buckets = { ["task-clock"] = { 0.001, 0.5 }, ["page-faults"] = false } })
    request(r, "/x", 1000, 0)
    local text = r:collect()
    r:close()
    promtool(text)
    local m = parse(text)
    assert.are.equal(1, m.perfev_request_task_clock_seconds_bucket['{uri="/x",le="0.001"}'])
    assert.are.equal(1, m.perfev_request_task_clock_seconds_bucket['{uri="/x",le="+Inf"}'])
    assert.is_nil(m.perfev_request_page_faults_bucket)
    assert.is_not_nil(m.perfev_request_context_switches_bucket)
    assert.is_not_nil(m.perfev_request_page_faults_total)
    r = assert(resty.new { buckets = false })
    request(r, "/x", 10, 0)
    text = r:collect()
    r:close()
    assert.is_nil(text:find("_bucket", 1, true))
    for _, case in ipairs {
      { 1, "option 'buckets' must be false or a table of upper bounds by event name" },
      { { ["task-clok"] = { 1 } }, "option 'buckets': 'task-clok' is not one of the events" },
      { { ["task-clock"] = { 2, 1 } }, "option 'buckets': 'task-clock' must be a list of ascending numbers, or false" },
      { { ["task-clock"] = {} }, "option 'buckets': 'task-clock' must be a list of ascending numbers, or false" },
    } do
      local inst, err = resty.new { buckets = case[1] }
      assert.is_nil(inst)
      assert.are.equal("perfev.resty: " .. case[2], err)
    end
  end)

  it("measures one request in K with sample = K, counting every one, its sums and buckets K times", function()
    local K = 3
    local r = assert(resty.new { dict = "perfev", sample = K })
    local sum, measured = 0, 0
    for i = 1, 10 * K do
      fake.ctx = {}
      fake.var.uri = "/s"
      assert(r:start())
      local s = 0
      for j = 1, 3000 * (i % 4 + 1) do s = s + j % 7 end
      local d = assert(r:finish(), s)
      if d ~= true then
        measured = measured + 1
        sum = sum + d["task-clock"]
      end
    end
    local text = r:collect()
    r:close()
    promtool(text)
    local m = parse(text)
    -- one in each run of K, every one counted
    assert.are.equal(10, measured)
    assert.are.equal(10 * K, m.perfev_request_requests_total['{uri="/s"}'])
    assert.are.equal(10, m.perfev_request_measured_total['{uri="/s"}'])
    assert.are.equal(10 * K, m.perfev_request_task_clock_seconds_count['{uri="/s"}'])
    assert.are.equal(10 * K, m.perfev_request_task_clock_seconds_bucket['{uri="/s",le="+Inf"}'])
    assert.are.equal(K * sum / 1e9, m.perfev_request_task_clock_seconds_total['{uri="/s"}'])
    assert.matches("estimated: one request in 3 measured", text, 1, true)
    for _, bad in ipairs { 0, 1.5, "2", 2 ^ 31 } do
      local inst, err = resty.new { sample = bad }
      assert.is_nil(inst)
      assert.are.equal("perfev.resty: option 'sample' must be an integer from 1 (every request) to 2^31 - 1 "
                       .. "(one request in that many)", err)
    end
  end)
end)

describe("perfev.resty's label values", function()
  local resty = require "perfev.resty"
  local saved, fake

  before_each(function()
    saved = rawget(_G, "ngx")
    fake = { shared = { perfev = fake_dict() }, ctx = {}, var = { uri = "/" }, ERR = 4, log = function() end,
             timer = { every = function() return true end } }
    rawset(_G, "ngx", fake)
  end)
  after_each(function() rawset(_G, "ngx", saved) end)

  local function request(r, uri)
    fake.ctx = {}
    fake.var.uri = uri
    assert(r:start())
    assert(r:finish())
  end

  it("collapse path segments that are ids by default, and nothing else", function()
    local cases = {
      ["/users/1234/orders/9f86d081884c7d65"] = "/users/:id/orders/:id",
      ["/item/123e4567-e89b-12d3-a456-426614174000"] = "/item/:id",
      ["/v2/users/42"] = "/v2/users/:id",
      ["/work/light"] = "/work/light",
      ["/deadbeefcafe/settings"] = "/deadbeefcafe/settings",   -- no digit: a word
      ["/abc12/x"] = "/abc12/x",                               -- hex with a digit, but short
      ["/"] = "/",
    }
    for raw, want in pairs(cases) do assert.are.equal(want, labels.collapse_ids(raw), raw) end
    local r = assert(resty.new {})
    for i = 1, 30 do request(r, "/users/" .. (1000 + i) .. "/orders/" .. i) end
    local m = parse(r:collect())
    r:close()
    assert.are.same({ ['{uri="/users/:id/orders/:id"}'] = 30 }, m.perfev_request_requests_total)
  end)

  it("take a rule of patterns or a function, or none", function()
    local r = assert(resty.new { collapse = { { "^/static/.*", "/static/*" } } })
    request(r, "/static/a.css")
    request(r, "/static/img/b.png")
    request(r, "/users/12")
    local m = parse(r:collect())
    r:close()
    assert.are.same({ ['{uri="/static/*"}'] = 2, ['{uri="/users/12"}'] = 1 }, m.perfev_request_requests_total)
    r = assert(resty.new { collapse = false })
    request(r, "/users/12")
    assert.are.same({ ['{uri="/users/12"}'] = 1 }, parse(r:collect()).perfev_request_requests_total)
    r:close()
    r = assert(resty.new { collapse = function(uri) return (uri:match("^/[^/]*")) end })
    request(r, "/users/12")
    request(r, "/users/13")
    assert.are.same({ ['{uri="/users"}'] = 2 }, parse(r:collect()).perfev_request_requests_total)
    r:close()
    for _, case in ipairs {
      { { collapse = 3 }, "option 'collapse' must be false, a function or a list of { pattern, replacement }" },
      { { collapse = { "x" } }, "option 'collapse': entry 1 must be { pattern, replacement }" },
      { { collapse = { { "%", "" } } }, "option 'collapse': entry 1: " },
      { { max_labels = 0 }, "option 'max_labels' must be a positive integer" },
      { { overflow = 1 }, "option 'overflow' must be a string" },
    } do
      local inst, err = resty.new(case[1])
      assert.is_nil(inst)
      assert.are.equal("perfev.resty: " .. case[2], err:sub(1, #case[2] + 14))
    end
  end)

  it("are at most max_labels, the rest in the overflow series, the requests all counted", function()
    local r = assert(resty.new { max_labels = 3, collapse = false })
    for i = 1, 10 do
      for _ = 1, i do request(r, "/p" .. i) end
    end
    local text = r:collect()
    r:close()
    promtool(text)
    local m = parse(text)
    -- the first three values seen, and "other" with the 55 - 6 others
    assert.are.same({ ['{uri="/p1"}'] = 1, ['{uri="/p2"}'] = 2, ['{uri="/p3"}'] = 3, ['{uri="other"}'] = 49 },
                    m.perfev_request_requests_total)
    assert.are.equal(49, m.perfev_request_task_clock_seconds_count['{uri="other"}'])
  end)

  it("are bounded across the workers sharing a dict", function()
    -- two workers: two instances on one dict, each its own sums
    local a = assert(resty.new { dict = "perfev", max_labels = 4, overflow = "(more)" })
    local b = assert(resty.new { dict = "perfev", max_labels = 4, overflow = "(more)" })
    for i = 1, 6 do
      request(a, "/a" .. i)
      request(b, "/b" .. i)
      request(b, "/a" .. i)
    end
    assert(a:flush())
    local m = parse(b:collect())
    a:close()
    b:close()
    local n, total = 0, 0
    for lab, v in pairs(m.perfev_request_requests_total) do
      n = n + 1
      total = total + v
      assert.is_truthy(lab:match('^{uri="/[ab]%d"}$') or lab == '{uri="(more)"}', lab)
    end
    assert.are.equal(5, n)   -- 4 values and the overflow
    assert.are.equal(18, total)
    -- a value one worker admitted is the same series in the other
    assert.are.equal(2, m.perfev_request_requests_total['{uri="/a1"}'])
  end)
end)
