-- perfev.parse: perf's event grammar in Lua (no perf needed; the comparison
-- with the perf tool is spec/parse_perf_spec.lua).
local perfev = require "perfev"
local parse = require "perfev.parse"
local core = require "perfev.core"

local TYPE, HW, SW = core.TYPE, core.HW, core.SW

local function fails(pattern, s, opts)
  local ok, err = pcall(parse.parse, s, opts)
  assert.is_false(ok, "accepted: " .. s)
  assert.matches(pattern, err, 1, true)
  return err
end

local function has_tracefs()
  return require("perfev.tracepoint").root() ~= nil
end

describe("perfev.parse", function()
  it("is perfev.parse, perfev.parse_list and perfev.list", function()
    assert.equal(parse.parse, perfev.parse)
    assert.equal(parse.list, perfev.parse_list)
    assert.is_function(perfev.list)
  end)

  describe("result shape", function()
    it("one event: a plain table of attr fields, the bits always present", function()
      local t = parse.parse("cycles")
      assert.same({ type = TYPE.HARDWARE, config = HW.CPU_CYCLES, name = "cpu-cycles", precise_ip = 0,
                    exclude_user = false, exclude_kernel = false, exclude_hv = false,
                    exclude_idle = false, exclude_host = false, exclude_guest = true,
                    pinned = false, exclusive = false }, t)
    end)

    it("several events: a list; parse_list always gives a list", function()
      local l = parse.parse("cs,faults")
      assert.equal(2, #l)
      assert.is_nil(l.type)
      assert.equal("context-switches", l[1].name)
      assert.equal(1, #parse.list("cs"))
      assert.equal(SW.CONTEXT_SWITCHES, parse.list("cs")[1].config)
    end)

    it("groups: members carry the group number, the first is the leader", function()
      local l = parse.parse("{cs,faults}:u,migrations,g{task-clock}")
      assert.equal(4, #l)
      assert.same({ 1, 1, nil, 2 }, { l[1].group, l[2].group, l[3].group, l[4].group })
      assert.is_true(l[1].leader)
      assert.is_nil(l[2].leader)
      assert.is_true(l[4].leader)
      assert.equal("g", l[4].group_name)
      assert.is_true(l[2].exclude_kernel)
      assert.is_false(l[3].exclude_kernel)
      -- a one-member group is still a list
      assert.equal(1, #parse.parse("{cs}"))
    end)

    it("feeds perfev.attr, perfev.open and perfev.group", function()
      local a = perfev.attr("page-faults:u")
      assert.equal(SW.PAGE_FAULTS, a.config)
      assert.equal(1, a.exclude_kernel)
      assert.equal(0, a.exclude_user)
      local b = perfev.attr("mem:0x1000/8:w")
      assert.equal(TYPE.BREAKPOINT, b.type)
      assert.equal(core.BP_TYPE.W, b.bp_type)
      assert.equal(0x1000, b.bp_addr)
      assert.equal(8, b.bp_len)
      local ev = assert(perfev.open("task-clock:u"))
      assert.equal("task-clock:u", ev:name())
      ev:close()
      local g = assert(perfev.group("{cs,faults}:k"))
      assert.same({ "context-switches:k", "page-faults:k" }, g:names())
      g:close()
      local ok, err = pcall(perfev.open, "{cs,faults}")
      assert.is_false(ok)
      assert.matches("names 2 events", err, 1, true)
    end)
  end)

  describe("names", function()
    it("every generic name and alias from perfev.names", function()
      for _, kind in ipairs { perfev.names.hardware, perfev.names.software } do
        for _, row in ipairs(kind) do
          for i = 1, #row do
            if i ~= 2 then
              local t = parse.parse(row[i])
              assert.equal(row[2], t.config, row[i])
              assert.equal(row[1], t.name, row[i])
            end
          end
        end
      end
    end)

    it("hardware cache names, aliases and canonical names", function()
      local HC, OP, RES = core.HW_CACHE, core.HW_CACHE_OP, core.HW_CACHE_RESULT
      for s, want in pairs {
        ["L1-dcache-load-misses"] = { HC.L1D, OP.READ, RES.MISS, "L1-dcache-load-misses" },
        ["l1d-misses-loads"] = { HC.L1D, OP.READ, RES.MISS, "L1-dcache-load-misses" },
        ["L1-instruction-speculative-read"] = { HC.L1I, OP.PREFETCH, RES.ACCESS, "L1-icache-prefetches" },
        ["L2-write-access"] = { HC.LL, OP.WRITE, RES.ACCESS, "LLC-stores" },
        ["Data-TLB-store-miss"] = { HC.DTLB, OP.WRITE, RES.MISS, "dTLB-store-misses" },
        ["btb"] = { HC.BPU, OP.READ, RES.ACCESS, "branch-loads" },
        ["node-prefetch-Reference"] = { HC.NODE, OP.PREFETCH, RES.ACCESS, "node-prefetches" },
      } do
        local t = parse.parse(s)
        assert.equal(TYPE.HW_CACHE, t.type, s)
        assert.equal(want[1] | want[2] << 8 | want[3] << 16, t.config, s)
        assert.equal(want[4], t.name, s)
      end
      fails("the iTLB cache has no 'stores' operation", "iTLB-stores")
      fails("unknown event 'l1-dcache-loads'", "l1-dcache-loads")
      fails("unexpected '-load' after the event 'branch-misses' at position 14", "branch-misses-load")
    end)

    it("raw events rNNN and r0xNNN, up to 64 bits", function()
      assert.same({ TYPE.RAW, 0x1a8 }, { parse.parse("r1a8").type, parse.parse("r1a8").config })
      assert.equal(0x1a8, parse.parse("r0x1a8").config)
      assert.equal(-1, parse.parse("rffffffffffffffff").config)
      fails("unknown event 'r12345678901234567'", "r12345678901234567")
    end)

    it("breakpoints mem:ADDR[/LEN][:rwx] with perf's default lengths", function()
      local BP = core.BP_TYPE
      for s, want in pairs {
        ["mem:0x1000"] = { 0x1000, BP.RW, 4 }, ["mem:0x1000:x"] = { 0x1000, BP.X, 8 },
        ["mem:4096/2:rw"] = { 0x1000, BP.RW, 2 }, ["mem:0x10:rx"] = { 0x10, BP.R | BP.X, 4 },
        ["mem:010:w"] = { 10, BP.W, 4 },
      } do
        local t = parse.parse(s)
        assert.same(want, { t.bp_addr, t.bp_type, t.bp_len }, s)
      end
      local t = parse.parse("mem:0x1000:wk")            -- access, then modifiers
      assert.equal(BP.W, t.bp_type)
      assert.is_true(t.exclude_user)
      fails("duplicate access 'x'", "mem:0x1000:xx")
    end)
  end)

  describe("modifiers", function()
    it("every modifier in the table is accepted, each once (p up to three times)", function()
      for _, m in ipairs(parse.MODIFIERS) do
        assert.is_table(parse.parse("cycles:" .. m[1]), m[1])
        fails(m.max and "more than 3 times" or ("duplicate modifier '" .. m[1] .. "'"),
              "cycles:" .. m[1]:rep((m.max or 1) + 1))
      end
    end)

    it("perf's semantics for privilege levels, guest/host and precise", function()
      local function bits(s)
        local t = parse.parse(s)
        local out = {}
        for _, k in ipairs { "exclude_user", "exclude_kernel", "exclude_hv", "exclude_guest",
                             "exclude_host", "exclude_idle", "pinned", "exclusive" } do
          if t[k] then out[#out + 1] = k:gsub("exclude_", "x") end
        end
        if t.precise_ip > 0 then out[#out + 1] = "p" .. t.precise_ip end
        return table.concat(out, " ")
      end
      assert.equal("xguest", bits("cycles"))              -- perf's default
      assert.equal("xkernel xhv xguest", bits("cycles:u"))
      assert.equal("xuser xhv", bits("cycles:k"))
      assert.equal("xuser xkernel", bits("cycles:h"))
      assert.equal("xhv xguest", bits("cycles:uk"))
      assert.equal("xhost", bits("cycles:G"))
      assert.equal("xguest", bits("cycles:H"))
      assert.equal("", bits("cycles:GH"))
      assert.equal("xkernel xhv xhost", bits("cycles:Gu"))
      assert.equal("xguest p2", bits("cycles:pp"))
      assert.equal("xhost p1", bits("cycles:pG"))
      assert.equal("xidle", bits("cycles:I"))
      assert.equal("pinned exclusive", bits("cycles:De"))
      assert.equal("", bits("cycles:S"))
      assert.is_true(parse.parse("cycles:S").sample_read)
      assert.is_true(parse.parse("cycles:W").weak)
      assert.is_true(parse.parse("cycles:P").precise_max)
      -- group modifiers add to each member's own
      local l = parse.parse("{cycles:k,instructions}:u")
      assert.equal("xhv xguest", bits("cycles:uk"))
      assert.is_false(l[1].exclude_user or l[1].exclude_kernel)
      assert.is_true(l[2].exclude_kernel)
      l = parse.parse("{cpu-clock,task-clock}:D")
      assert.is_true(l[1].pinned)
      assert.is_false(l[2].pinned)                        -- only a leader may be pinned
      assert.equal(3, parse.parse("{cs:p}:pp")[1].precise_ip)
      fails("precise level 4 is above 3", "{cs:pp}:pp")
    end)
  end)

  describe("tracepoints", function()
    it("subsys:name gives the tracefs id; globs expand", function()
      if not has_tracefs() then
        pending("tracefs is not mounted: mount -t tracefs nodev /sys/kernel/tracing")
        return
      end
      local tp = require "perfev.tracepoint"
      local t = parse.parse("sched:sched_switch:k")
      assert.equal(TYPE.TRACEPOINT, t.type)
      assert.equal(tp.id("sched", "sched_switch"), t.config)
      assert.is_true(t.exclude_user)
      local l = parse.parse("sched:sched_process_*")
      assert.is_true(#l >= 3)
      for _, e in ipairs(l) do assert.matches("^sched:sched_process_", e.name) end
      fails("unknown tracepoint 'sched:no_such'", "sched:no_such")
    end)

    it("a missing tracefs is named, with the mount command", function()
      fails("tracefs is not mounted", "sched:sched_switch", { tracefs = "/nonexistent" })
      fails("mount -t tracefs nodev /sys/kernel/tracing", "sched:sched_switch", { tracefs = "/nonexistent" })
    end)
  end)

  describe("errors name the position and what was expected", function()
    for s, want in pairs {
      ["cyclez"] = "unknown event 'cyclez'.* at position 1$",
      ["cycles:x"] = "expected a modifier.* at position 8$",
      ["cycles:uu"] = "duplicate modifier 'u' at position 9$",
      ["cycles:u:k"] = "unexpected ':': expected ',' or the end at position 9$",
      ["cs,"] = "expected an event after ',', found the end at position 4$",
      [",cs"] = "expected an event, found ',' at position 1$",
      ["{cs,faults"] = "expected ',' or '}' closing the group opened at position 1, found the end at position 11$",
      ["{cs,{faults}}"] = "expected an event, found '{' at position 5$",
      ["{cs}:"] = "expected a modifier.* at position 6$",
      ["mem:"] = "expected an address after 'mem:', found the end at position 5$",
      ["mem:0x1000/4/"] = "unexpected '/'.* at position 13$",
      ["software/config=1"] = "expected ',' or '/' in the terms, found the end at position 18$",
      [""] = "expected an event, found the end at position 1$",
    } do
      it(("%q"):format(s), function()
        local ok, err = pcall(parse.parse, s)
        assert.is_false(ok)
        assert.matches("^perfev%.parse: " .. want, err)
      end)
    end

    it("a non-string raises", function()
      assert.has_error(function() parse.parse(42) end)
    end)
  end)
end)

describe("perfev.list", function()
  it("lists hardware, software, cache, PMU and tracepoint events with can_open", function()
    local l = perfev.list()
    local kinds, byname = {}, {}
    for _, r in ipairs(l) do
      kinds[r.kind] = true
      byname[r.name] = r
    end
    for _, k in ipairs { "hardware", "software", "hw-cache" } do assert.is_true(kinds[k], k) end
    assert.is_true(byname["cpu-clock"].can_open)
    assert.same({ "cs" }, byname["context-switches"].aliases)
    assert.is_not_nil(byname["L1-dcache-load-misses"])
    assert.is_boolean(byname["cpu-cycles"].can_open)
  end)

  it("filters by kind, glob or substring, and prints like perf list", function()
    local sw = perfev.list("sw")
    for _, r in ipairs(sw) do assert.equal("software", r.kind) end
    assert.equal(#perfev.names.software, #sw)
    assert.matches("context-switches OR cs", tostring(sw), 1, true)
    assert.matches("[Software event]", tostring(sw), 1, true)
    local g = perfev.list("*-faults")
    assert.is_true(#g >= 4)
    local sub = perfev.list("migrat")
    assert.equal("cpu-migrations", sub[1].name)
  end)
end)
