-- perfev.resty.tags (the pprof labels of nginx samples) outside nginx: the
-- W3C traceparent parser, and labelled stacks through the folded form the
-- dicts keep and into profile.proto (spec/openresty_pprof_spec.lua checks
-- them in nginx with go tool pprof -tags and -tagfocus).
local tags = require "perfev.resty.tags"
local folded = require "perfev.profile.folded"
local pprof = require "perfev.profile.pprof"

describe("perfev.resty.tags", function()
  it("takes the trace id of a valid W3C traceparent, none of an invalid one", function()
    local id = "4bf92f3577b34da6a3ce929d0e0e4736"
    assert.equal(id, tags.trace_id("00-" .. id .. "-00f067aa0ba902b7-01"))
    assert.equal(id, tags.trace_id("00-" .. id .. "-00f067aa0ba902b7-00"))
    -- a later version may add fields after the flags
    assert.equal(id, tags.trace_id("01-" .. id .. "-00f067aa0ba902b7-01-what-comes"))
    for _, bad in ipairs {
      "00-" .. id:sub(2) .. "-00f067aa0ba902b7-01",          -- 31 digits
      "00-" .. id:upper() .. "-00f067aa0ba902b7-01",         -- upper case
      "00-" .. ("0"):rep(32) .. "-00f067aa0ba902b7-01",      -- the invalid id
      "ff-" .. id .. "-00f067aa0ba902b7-01",                 -- version ff
      "00-" .. id .. "-00f067aa0ba902b-01",                  -- parent id of 15
      "00-" .. id .. "-00f067aa0ba902b7-01-extra",           -- version 00 has no more
      "", "garbage", id } do
      assert.is_nil(tags.trace_id(bad), bad)
    end
    assert.is_nil(tags.trace_id(nil))
    assert.is_nil(tags.trace_id({ "00-" .. id .. "-00f067aa0ba902b7-01" }))   -- the header given twice
  end)

  it("keeps labelled stacks apart through the folded form and writes them as pprof labels", function()
    local text = table.concat({
      "main chunk (a.lua);work (a.lua:3)\turi\2/x\1trace_id\2abc 30",
      "main chunk (a.lua);work (a.lua:3)\turi\2/y 20",
      "main chunk (a.lua);work (a.lua:3) 10",
    }, "\n")
    local p = folded.decode(text, { event = "cpu-clock", unit = "nanoseconds" })
    assert.equal(3, #p.stacks)
    local by = {}
    for _, s in ipairs(p.stacks) do by[s.tags or ""] = s.weight end
    assert.same({ ["uri\2/x\1trace_id\2abc"] = 30, ["uri\2/y"] = 20, [""] = 10 }, by)
    -- folded text has no labels: merged there; kept apart for the dicts
    assert.equal("main chunk (a.lua);work (a.lua:3) 60\n", folded.encode(p))
    local kept = folded.fold(p, true)
    assert.equal(3, #kept)
    assert.equal("uri\2/x\1trace_id\2abc", kept[1].tags)
    -- profile.proto: each sample's labels (Sample.label = 3: Label key = 1, str = 2)
    local proto = pprof.proto(p)
    for _, s in ipairs { "uri", "/x", "/y", "trace_id", "abc" } do
      assert.truthy(proto:find(s, 1, true), s)
    end
  end)
end)
