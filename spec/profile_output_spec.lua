-- perfev.profile's outputs, each read back by a consumer this project did
-- not write: perf report / perf script (perf.data with Lua names),
-- go tool pprof (profile.proto), speedscope in headless Chromium (its JSON
-- format and folded stacks), Chromium driving the SVG flame graph's script.
local perfev = require "perfev"
local cjson = require "cjson"
local shell = require "spec.support.shell"

local function spin(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
local function cheap() local r = spin(200000) return r end
local function dear() local r = spin(600000) return r end

local LUA = os.getenv("LUA") or "lua5.4"

-- One profile for the whole file: cheap 25%, dear 75% of cpu-clock.
local p, dir
local function path(name) return dir .. "/" .. name end

-- Runs a check script; returns its output, or calls pending (exit 77).
-- Chromium's wrapper script breaks under check-asan's LD_PRELOAD of libasan,
-- and nothing these scripts start loads perfev's core.
local function tool(cmd)
  local f = assert(io.popen(("unset LD_PRELOAD; LUA=%s %s 2>&1"):format(LUA, cmd)))
  local out = f:read("a")
  local ok, _, code = f:close()
  if code == 77 then return nil, out end
  assert(ok, out)
  return out
end

-- the percentage after "label" on a line of text
local function pct_of(text, pattern)
  for line in text:gmatch("[^\n]+") do
    if line:find(pattern) then
      local v = line:match("([%d.]+)%%")
      if v then return tonumber(v) end
    end
  end
end

describe("perfev.profile outputs", function()
  setup(function()
    dir = shell.tmpdir()
    p = assert(perfev.profile { event = "cpu-clock", period = 250000 })
    p:run(function() for _ = 1, 30 do cheap() dear() end end)
    for _, name in ipairs { "p.folded", "p.txt", "p.speedscope.json", "p.svg", "p.pb.gz", "p.data" } do
      assert(p:write(path(name)))
    end
  end)
  teardown(function()
    p:close()
    shell.rmdir(dir)
  end)

  it("tells the format from the file name, and refuses a name it does not know", function()
    local profile = require "perfev.profile"
    assert.equal("speedscope", profile.format_of("x.speedscope.json"))
    assert.equal("pprof", profile.format_of("a/b.pb.gz"))
    assert.equal("perfdata", profile.format_of("perf.data"))
    assert.is_nil(profile.format_of("x.json"))
    assert.has_error(function() p:write(path("x.bin")) end,
      "perfev.profile: cannot tell the format of '" .. path("x.bin")
      .. "' from its name (.speedscope.json, .svg, .folded, .pb.gz, .data, .txt)")
  end)

  it("folded stacks: 'a;b;c weight' lines summing to the profile's weight", function()
    local total, by = 0, {}
    for line in io.lines(path("p.folded")) do
      local stack, w = line:match("^(.+) (%d+)$")
      assert.truthy(stack, line)
      total = total + tonumber(w)
      local leaf = stack:match("([^;]+)$")
      by[leaf:match("^(%S+)")] = (by[leaf:match("^(%S+)")] or 0) + tonumber(w)
      assert.matches("^fn %(", stack)   -- the profiled function at the root (run's fn)
    end
    local pr = p:profile()
    assert.equal(pr.weight, total)
    assert.is_true(by.spin / total > 0.95)   -- the leaf: spin (the loops around it: little)
  end)

  it("folded stacks open in speedscope (Chromium) #slow", function()
    local out, why = tool("tools/check-speedscope.sh " .. path("p.folded"))
    if not out then pending(why) return end
    assert.matches("opened in speedscope", out)
  end)

  it("speedscope JSON follows the file-format schema and opens in speedscope (Chromium) #slow", function()
    local f = assert(io.open(path("p.speedscope.json")))
    local doc = cjson.decode(f:read("a"))
    f:close()
    assert.equal("https://www.speedscope.app/file-format-schema.json", doc["$schema"])
    local prof = doc.profiles[1]
    assert.equal("sampled", prof.type)
    assert.equal("nanoseconds", prof.unit)
    assert.equal(#prof.samples, #prof.weights)
    local sum = 0
    for i, s in ipairs(prof.samples) do
      sum = sum + prof.weights[i]
      for _, fi in ipairs(s) do assert.truthy(doc.shared.frames[fi + 1]) end
    end
    assert.equal(prof.endValue - prof.startValue, sum)
    local out, why = tool("tools/check-speedscope.sh " .. path("p.speedscope.json") .. " " .. path("ss.png"))
    if not out then pending(why) return end
    assert.matches("opened in speedscope %('perfev profile %(cpu%-clock%) %- speedscope'%)", out)
  end)

  it("the SVG flame graph zooms, searches and has tooltips (Chromium) #slow", function()
    local out, why = tool("tools/check-svg.sh " .. path("p.svg") .. " '^dear '")
    if not out then pending(why) return end
    assert.matches("PASS", out)
    local m = tonumber(out:match("Matched: ([%d.]+)%%"))
    assert.is_true(math.abs(m - 75) <= 5, out)
  end)

  it("pprof: go tool pprof -top reads it, with the shares of the profile #slow", function()
    if not shell.have("go") then pending("no go tool (apt-get install golang-go)") return end
    local out, ok = shell.sh(("HOME=%s GOCACHE=%s/gocache go tool pprof -top %s 2>&1")
                             :format(dir, dir, path("p.pb.gz")))
    assert(ok, out)
    assert.matches("Type: cpu", out)
    -- cum% of cheap and dear (their flat is spin's)
    local cheap_cum = tonumber(out:match("([%d.]+)%%%s+cheap\n"))
    local dear_cum = tonumber(out:match("([%d.]+)%%%s+dear\n"))
    assert.truthy(cheap_cum, out)
    assert.is_true(math.abs(cheap_cum - 25) <= 5, out)
    assert.is_true(math.abs(dear_cum - 75) <= 5, out)
    local spin_flat = tonumber(out:match("([%d.]+)%%%s+[%d.]+%%%s+[%d.]+%a+%s+[%d.]+%%%s+spin\n"))
    assert.is_true(spin_flat > 95, out)
  end)

  it("perf.data: perf report and perf script show the Lua functions", function()
    if not shell.have("perf") then pending("no perf tool") return end
    local out, ok = shell.sh(("perf report -i %s --stdio --children --sort sym 2>/dev/null")
                             :format(path("p.data")))
    assert(ok, out)
    local dear_pct = pct_of(out, "%] dear %(")
    local cheap_pct = pct_of(out, "%] cheap %(")
    assert.truthy(dear_pct, out)
    assert.is_true(math.abs(dear_pct - 75) <= 5, out)
    assert.is_true(math.abs(cheap_pct - 25) <= 5, out)
    local script = shell.sh(("perf script -i %s 2>/dev/null"):format(path("p.data")))
    local n = select(2, script:gsub("cpu%-clock:", ""))
    assert.equal(p:profile().samples, n)                 -- a record per sample
    assert.matches("spin %(.-%)%+0x0 %(/tmp/perf%-%d+%.map%)", script)
    assert.matches("dear %(", script)
  end)

  it("perf.data of a profile without a sample: a file perf reads (no perf map mapping to give)", function()
    local e = assert(perfev.profile { event = "cpu-clock", period = 1000000000 })
    e:run(function() end)
    assert.equal(0, e:profile().samples)
    assert(e:write(path("empty.data")))
    e:close()
    local f = assert(require("perfev.perfdata").open(path("empty.data")))
    local types = {}
    for rec in f:records() do types[#types + 1] = rec.type end
    f:close()
    assert.same({ "comm" }, types)
    if shell.have("perf") then
      local out = shell.sh(("perf report -i %s --stdio 2>&1"):format(path("empty.data")))
      assert.matches("has no samples", out)
    end
  end)

  it("text: per function total and self shares, sorted, with source:line", function()
    local f = assert(io.open(path("p.txt")))
    local text = f:read("a")
    f:close()
    assert.matches("# Samples: %d+  Event count %(nanoseconds%)", text)
    local dear_total = tonumber(text:match("\n%s+([%d.]+)%%%s+[%d.]+%%%s+dear %("))
    assert.is_true(math.abs(dear_total - 75) <= 5, text)
    -- sorted by self: spin first, with all of it, at its loop's line
    local row = text:match("#\n(%s+[^\n]+)")
    local total, self = row:match("^%s+([%d.]+)%%%s+([%d.]+)%%%s+spin %([^)]+:%d+%)%s+%[[^]]+:%d+%]$")
    assert.truthy(total, row)
    assert.is_true(tonumber(self) > 95, row)
  end)
end)
