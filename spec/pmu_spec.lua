-- PMU events from sysfs: fixture trees (spec/fixtures/sysfs) modelled on an
-- Intel core PMU, an AMD core PMU and uncore PMUs, and this machine's sysfs.
local pmu = require "perfev.pmu"
local parse = require "perfev.parse"
local compat = require "perfev.compat"

local ROOT = "spec/fixtures/sysfs/devices"
local OPT = { sysfs = ROOT }

local function p(s) return parse.parse(s, OPT) end

local function fails(pattern, s)
  local ok, err = pcall(parse.parse, s, OPT)
  assert.is_false(ok, "accepted: " .. s)
  assert.matches(pattern, err, 1, true)
  return err
end

describe("perfev.pmu", function()
  it("lists and reads the PMUs of a sysfs root", function()
    assert.same({ "amdcpu", "broken", "cpu", "power", "software", "uncore_imc_0", "uncore_imc_1" },
                pmu.names(ROOT))
    local cpu = assert(pmu.get("cpu", ROOT))
    assert.equal(4, cpu.type)
    assert.same({ field = "config", ranges = { { 24, 31 } }, bits = 8 }, cpu.formats.cmask)
    assert.same({ field = "config1", ranges = { { 0, 15 } }, bits = 16 }, cpu.formats.ldlat)
    assert.equal("event=0xcd,umask=0x1,ldlat=3", cpu.events["mem-loads"].terms)
    assert.equal(4, cpu.events["topdown-total-slots"].scale)
    assert.is_nil(pmu.get("broken", ROOT))      -- no type file
    assert.is_nil(pmu.get("nope", ROOT))
    assert.is_nil(pmu.get("../devices/cpu", ROOT))
  end)

  it("parses format bit ranges, split ones included", function()
    assert.same({ field = "config", ranges = { { 0, 7 }, { 32, 35 } }, bits = 12 },
                pmu.parse_format("config:0-7,32-35"))
    assert.same({ field = "config1", ranges = { { 1, 1 }, { 6, 10 }, { 44, 44 } }, bits = 7 },
                pmu.parse_format("config1:1,6-10,44"))
    assert.is_nil(pmu.parse_format("config:7-0"))
    assert.is_nil(pmu.parse_format("bogus:0-7"))
  end)

  it("places a value's bits into the ranges, low bits first", function()
    local amd = assert(pmu.get("amdcpu", ROOT))
    local fields = {}
    assert(pmu.set_term(amd, "event", 0x28f, fields))
    assert.equal(compat.bor(0x8f, compat.lshift(0x2, 32)), fields.config)
    local ok, err = pmu.set_term(amd, "umask", 0x100, {})
    assert.is_nil(ok)
    assert.matches("maximum is 255", err, 1, true)
  end)

  it("matches uncore PMUs by short name, prefix and glob", function()
    local function names(list)
      local out = {}
      for i, x in ipairs(list) do out[i] = x.name end
      return out
    end
    assert.same({ "uncore_imc_0", "uncore_imc_1" }, names(pmu.match("imc", ROOT)))
    assert.same({ "uncore_imc_1" }, names(pmu.match("imc_1", ROOT)))
    assert.same({ "uncore_imc_0", "uncore_imc_1" }, names(pmu.match("*imc*", ROOT)))
    assert.same({ "cpu" }, names(pmu.match("cpu", ROOT)))
    assert.same({}, names(pmu.match("c*", ROOT)))      -- globs are for uncore PMUs only
  end)
end)

describe("perfev.parse on PMU events (fixture sysfs)", function()
  it("maps format terms through their bit ranges", function()
    local t = p("cpu/event=0x3c,umask=0x1,cmask=2,inv,edge/")
    assert.equal(4, t.type)
    assert.equal(compat.bor(0x3c, compat.lshift(0x1, 8), compat.lshift(2, 24), compat.lshift(1, 23), compat.lshift(1,
        18)), t.config)
    assert.equal("cpu", t.pmu)
    assert.equal("cpu/event=0x3c,umask=0x1,cmask=2,inv,edge/", t.name)
    t = p("cpu/event=0xcd,umask=1,ldlat=3,fe_thres=0xfff/")
    assert.equal(0x1cd, t.config)
    assert.equal(3, t.config1)
    assert.equal(0xfff, t.config2)
    assert.equal(-1, p("cpu/offcore_rsp=0xffffffffffffffff/").config1)
  end)

  it("expands events/ aliases, bare or with terms and modifiers", function()
    local t = p("cpu/mem-loads/")
    assert.equal(0x1cd, t.config)
    assert.equal(3, t.config1)
    t = p("cpu/cycles-ct/u")
    assert.equal(compat.bor(0x3c, compat.lshift(3, 32)), t.config)
    assert.is_true(t.exclude_kernel and t.exclude_hv and t.exclude_guest)
    assert.is_false(t.exclude_user)
    t = p("cpu/MEM-STORES/")                    -- aliases match case-insensitively
    assert.equal(0x82d0, t.config)
    t = p("mem-loads:pp")                       -- a bare alias: found in every PMU
    assert.equal(4, t.type)
    assert.equal(2, t.precise_ip)
    assert.equal(4, p("cpu/topdown-total-slots/").scale)
  end)

  it("built-in terms: config*, raw, name, period, freq", function()
    local t = p("cpu/config=0x1234,config1=5,config2=6,config3=7/")
    assert.same({ 0x1234, 5, 6, 7 }, { t.config, t.config1, t.config2, t.config3 })
    assert.equal(0x1a8, p("cpu/r1a8/").config)
    assert.equal(0x1a8, p("cpu/r0x1a8/").config)
    t = p("cpu/event=0xa8,umask=0x1,name=LSD.UOPS_CYCLES,cmask=0x1/")
    assert.equal("LSD.UOPS_CYCLES", t.name)
    assert.equal(compat.bor(0xa8, compat.lshift(1, 8), compat.lshift(1, 24)), t.config)
    assert.equal("LSD.UOPS_CYCLES:cmask=0x1", p("cpu/event=0xa8,name='LSD.UOPS_CYCLES:cmask=0x1'/").name)
    assert.equal(100003, p("cpu/cpu-cycles,period=100003/").sample_period)
    t = p("cpu/cpu-cycles,freq=4000/")
    assert.equal(4000, t.sample_freq)
    assert.is_true(t.freq)
    assert.equal(1, p("cpu/event=0x3c,percore/").terms.percore)
  end)

  it("fills a ? parameter from the user's terms, and asks for it otherwise", function()
    assert.equal(0x5cd, p("cpu/mem-any-param,umask=5/").config)
    fails("term 'umask' needs a value", "cpu/mem-any-param/")
  end)

  it("uncore PMUs: one event per matching PMU, with scale and unit", function()
    local list = p("imc/cas_count_read/")
    assert.equal(2, #list)
    assert.same({ 14, 15 }, { list[1].type, list[2].type })
    for _, t in ipairs(list) do
      assert.equal(0x304, t.config)
      assert.equal("MiB", t.unit)
      assert.equal(6.103515625e-5, t.scale)
    end
    assert.equal("uncore_imc_1/cas_count_read/", list[2].name)
    assert.equal(15, p("uncore_imc_1/cas_count_write/").type)
    assert.equal(2, #p("*imc*/clockticks/"))
    local e = p("power/energy-pkg/")
    assert.equal("Joules", e.unit)
    assert.equal(11, e.type)
  end)

  it("errors name the term, the PMU and the position", function()
    local err = fails("unknown term 'foo' for PMU 'cpu'", "cpu/event=1,foo=1/")
    assert.matches("at position 13$", err)
    assert.matches("cmask", err, 1, true)            -- lists the valid terms
    fails("value too big for format 'umask', maximum is 255 at position 11", "cpu/umask=0x100/")
    fails("unknown PMU 'nope'", "nope/event=1/")
    fails("expected ',' or '/' in the terms", "cpu/event=1")
    fails("expected a number for 'event'", "cpu/event=abc/")
    fails("unknown PMU 'broken'", "broken/event=1/")
  end)

  it("perfev.list shows the fixture PMU events with scale and unit", function()
    local list = require("perfev.list").list("pmu", { sysfs = ROOT, probe = false })
    local byname = {}
    for _, r in ipairs(list) do byname[r.name] = r end
    assert.is_not_nil(byname["cpu/mem-loads/"])
    assert.equal("Joules", byname["power/energy-pkg/"].unit)
    assert.matches("power/energy-pkg/", tostring(list), 1, true)
  end)
end)

describe("perfev.parse on this machine's sysfs", function()
  local dir = "/sys/bus/event_source/devices"
  local function type_of(name)
    local f = io.open(dir .. "/" .. name .. "/type")
    if not f then return nil end
    local v = tonumber(f:read("a"))
    f:close()
    return v
  end

  it("software PMU by name", function()
    local t = parse.parse("software/config=3/")
    assert.equal(type_of("software"), t.type)
    assert.equal(3, t.config)
  end)

  it("msr/tsc/ opens and counts (perf's exclude_guest fallback)", function()
    if not type_of("msr") then
      pending("no msr PMU on this machine (" .. dir .. "/msr)")
      return
    end
    assert.equal(type_of("msr"), parse.parse("msr/tsc/").type)
    local perfev = require "perfev"
    local ev = assert(perfev.open("msr/tsc/"))
    ev:enable()
    for _ = 1, 1e5 do end
    ev:disable()
    assert.is_true(ev:read() > 0)
    ev:close()
  end)

  it("uprobe format terms", function()
    if not type_of("uprobe") then
      pending("no uprobe PMU on this machine")
      return
    end
    local t = parse.parse("uprobe/retprobe=1,ref_ctr_offset=5/")
    assert.equal(type_of("uprobe"), t.type)
    assert.equal(compat.bor(1, compat.lshift(5, 32)), t.config)
  end)
end)

describe("perfev.parse on a hybrid machine (fixture modelled on Alder Lake)", function()
  local HROOT = "spec/fixtures/sysfs-hybrid/devices"
  local function h(s) return parse.list(s, { sysfs = HROOT }) end
  local function pick(list, ...)
    local out = {}
    for i, t in ipairs(list) do
      local row = {}
      for j, k in ipairs { ... } do row[j] = t[k] end
      out[i] = row
    end
    return out
  end

  it("finds the hybrid core PMUs as perf 6.1 does (cpu_* with a cpus file)", function()
    local cores = pmu.hybrid(HROOT)
    assert.same({ { "cpu_core", 4, "0-15" }, { "cpu_atom", 10, "16-23" } },
                { { cores[1].name, cores[1].type, cores[1].cpus }, { cores[2].name, cores[2].type, cores[2].cpus } })
    assert.same({}, pmu.hybrid(ROOT))            -- an Intel `cpu` PMU is not hybrid
  end)

  it("a hardware event becomes one event per core PMU, the PMU type in config's high 32 bits", function()
    assert.same({ { 0, compat.lshift(4, 32), "cpu_core", "cpu_core/cpu-cycles/" },
                  { 0, compat.lshift(10, 32), "cpu_atom", "cpu_atom/cpu-cycles/" } },
                pick(h("cycles"), "type", "config", "pmu", "name"))
    assert.same({ { 0, compat.bor(compat.lshift(4, 32), 1), true, "cpu_core/instructions:u/" },
                  { 0, compat.bor(compat.lshift(10, 32), 1), true, "cpu_atom/instructions:u/" } },
                pick(h("instructions:u"), "type", "config", "exclude_kernel", "name"))
    -- cache events too; raw events take the PMU's type
    assert.same({ { 3, compat.bor(compat.lshift(4, 32), 0x10000) }, { 3, compat.bor(compat.lshift(10, 32), 0x10000) } },
                pick(h("L1-dcache-load-misses"), "type", "config"))
    assert.same({ { 4, 0x1a8 }, { 10, 0x1a8 } }, pick(h("r1a8:k"), "type", "config"))
    -- software events are not per PMU
    assert.same({ { 1, 3 } }, pick(h("cs"), "type", "config"))
  end)

  it("cpu_core/cycles/: a single generic term means that PMU's event alone", function()
    assert.same({ { 0, compat.lshift(4, 32), "cpu_core/cycles/" } }, pick(h("cpu_core/cycles/"), "type", "config",
        "name"))
    assert.same({ { 0, compat.bor(compat.lshift(10, 32), 1), true, "cpu_atom/instructions/k" } },
                pick(h("cpu_atom/instructions/k"), "type", "config", "exclude_user", "name"))
    assert.same({ { 3, compat.bor(compat.lshift(4, 32), 2) } }, pick(h("cpu_core/LLC-loads/"), "type", "config"))
    assert.same({ { 10, 0x1a8 } }, pick(h("cpu_atom/r1a8/"), "type", "config"))
    -- format terms and the PMU's own aliases stay PMU events of its type
    assert.same({ { 4, 0x3c } }, pick(h("cpu_core/event=0x3c/"), "type", "config"))
    assert.same({ { 4, 0x13c } }, pick(h("cpu_core/event=0x3c,umask=1/"), "type", "config"))
    assert.same({ { 10, 0x5d0, 3 } }, pick(h("cpu_atom/mem-loads/"), "type", "config", "config1"))
    assert.same({ { 4, 0x1cd, 3 } }, pick(h("cpu_core/mem-loads/"), "type", "config", "config1"))
  end)

  it("groups and lists expand each member", function()
    local l = h("{cycles,instructions}:k")
    assert.equal(4, #l)
    for _, t in ipairs(l) do
      assert.equal(1, t.group)
      assert.is_true(t.exclude_user)
    end
    assert.same({ "cpu_core/cpu-cycles:k/", "cpu_atom/cpu-cycles:k/" }, { l[1].name, l[2].name })
    assert.equal(3, #h("cycles,cs"))
  end)
end)
