-- perfev.parse: perf's event grammar in Lua (no perf needed; the comparison
-- with the perf tool is spec/parse_perf_spec.lua).
local perfev = require "perfev"
local parse = require "perfev.parse"
local names = require "perfev.names"
local core = require "perfev.core"
local compat = require "perfev.compat"

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

    it("a group's name is on its leader only, as perf's (its parse-events test__group3)", function()
      local l = parse.parse("group1{syscalls:sys_enter_openat:H,cycles:kppp},group2{cycles,1:3}:G,instructions:u",
                            { tracefs = "spec/fixtures/tracefs" })
      assert.equal(5, #l)
      local got = {}
      for i, ev in ipairs(l) do
        got[i] = { ev.name, ev.group or false, ev.leader or false, ev.group_name or false }
      end
      assert.same({
        { "syscalls:sys_enter_openat:H", 1, true, "group1" },
        { "cpu-cycles:kppp", 1, false, false },
        { "cpu-cycles:G", 2, true, "group2" },
        { "1:3:G", 2, false, false },
        { "instructions:u", false, false, false },
      }, got)
      -- the tracepoint leader and its member keep what perf's test expects of them
      assert.same({ TYPE.TRACEPOINT, 614, true, false }, { l[1].type, l[1].config, l[1].exclude_guest,
                                                          l[1].exclude_host })
      assert.same({ TYPE.HARDWARE, HW.CPU_CYCLES, 3, true, true }, { l[2].type, l[2].config, l[2].precise_ip,
                                                                     l[2].exclude_user, l[2].exclude_hv })
      -- a plain group's member likewise
      assert.same({ "g", false }, { parse.parse("g{cs,faults}")[1].group_name,
                                    parse.parse("g{cs,faults}")[2].group_name or false })
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
      for _, kind in ipairs { names.hardware, names.software } do
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
        assert.equal(compat.bor(want[1], compat.lshift(want[2], 8), compat.lshift(want[3], 16)), t.config, s)
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
        ["mem:4096/2:rw"] = { 0x1000, BP.RW, 2 }, ["mem:0x10:rx"] = { 0x10, compat.bor(BP.R, BP.X), 4 },
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
      assert.is_true(parse.parse("cycles:W").weak_group)
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
      ["cyclez"] = "unknown event 'cyclez' %(did you mean 'cycles'%?%) at position 1; perfev%.list%(%) shows the "
                   .. "events of this machine$",
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
        assert.matches("^spec/parse_spec%.lua:%d+: perfev%.parse: " .. want, err)
      end)
    end

    it("a non-string raises", function()
      assert.has_error(function() parse.parse(42) end)
    end)

    -- The message a user sees first (the REPL's perfev.open("task-clok")):
    -- one short line with the closest name and where to look, never the
    -- list of every generic name.
    it("an unknown event: one short line, the closest name and where to look", function()
      for _, call in ipairs {
        { "perfev.parse", perfev.parse, "task-clok", 1 },
        { "perfev.parse_list", perfev.parse_list, "cycles,task-clok", 8 },
        { "perfev.open", perfev.open, "task-clok", 1 },
        { "perfev.group", perfev.group, "{cs,task-clok}", 5 },
        { "perfev.attr", perfev.attr, "task-clok", 1 },
      } do
        local line = debug.getinfo(1, "l").currentline + 1
        local ok, err = pcall(call[2], call[3])
        assert.is_false(ok, call[1])
        assert.equal(("spec/parse_spec.lua:%d: perfev.parse: unknown event 'task-clok' (did you mean "
                      .. "'task-clock'?) at position %d; perfev.list() shows the events of this machine")
                     :format(line, call[4]), err, call[1])
      end
      local _, err = pcall(perfev.open, "no-such-event")
      assert.matches("unknown event 'no%-such%-event' at position 1; perfev%.list%(%) shows", err)
      assert.is_true(#err < 140 and not err:find("\n"), err)
    end)
  end)

  describe("printed", function()
    it("an event table prints as perfev.parse.event, and stays a plain table", function()
      local t = perfev.parse("cycles:u")
      assert.equal("perfev.parse.event(cpu-cycles:u: type 0, config 0x0, exclude_guest, exclude_hv, "
                   .. "exclude_kernel)", tostring(t))
      -- the metatable holds only __tostring: no __index, __pairs, __eq, __newindex
      local mt = getmetatable(t)
      for k in pairs(mt) do assert.equal("__tostring", k) end
      -- pairs gives the fields and nothing else: those of a table built by hand
      local keys = {}
      for k in pairs(t) do keys[#keys + 1] = k end
      table.sort(keys)
      local want = { "name", "precise_ip", "type", "config" }
      for _, b in ipairs(require("perfev.parse.vocab").BITS) do want[#want + 1] = b end
      table.sort(want)
      assert.same(want, keys)
      t.config = 5      -- writable as before
      assert.equal(5, rawget(t, "config"))
    end)

    it("a list prints as perfev.parse.list, its names", function()
      local l = perfev.parse_list("cycles:u")
      assert.equal("perfev.parse.list(1 event: cpu-cycles:u)", tostring(l))
      assert.equal(1, #l)
      assert.equal("perfev.parse.list(2 events: context-switches:k, page-faults:k)",
                   tostring(perfev.parse("{cs,faults}:k")))
      assert.matches("^perfev%.parse%.event%(context%-switches:k: type 1, config 0x3, exclude_guest, "
                     .. "exclude_hv, exclude_user, group 1, leader%)$", tostring(perfev.parse("{cs,faults}:k")[1]))
    end)
  end)
end)

describe("perfev.parse: whitespace and quoting", function()
  it("takes whitespace between tokens, as perf does", function()
    local l = parse.parse("{ cs , faults } : k")
    assert.equal(2, #l)
    assert.is_true(l[1].exclude_user and l[2].exclude_user)
    assert.equal(SW.CONTEXT_SWITCHES, parse.parse(" cs :u ").config)
    local t = parse.parse("software/ config = 3 , config1 = 2 / u")
    assert.same({ 3, 2, true }, { t.config, t.config1, t.exclude_kernel })
    t = parse.parse("mem: 0x1000 / 8 :u")
    assert.same({ 0x1000, 8, core.BP_TYPE.RW, true }, { t.bp_addr, t.bp_len, t.bp_type, t.exclude_kernel })
    assert.equal("mem:0x1000/8:u", t.name)
    assert.equal("g", parse.parse("g {cs}")[1].group_name)
  end)

  it("not inside a name, a modifier string, or before a breakpoint's access", function()
    fails("unexpected 'k': expected ',' or the end at position 6", "cs:u k")
    fails("unknown event 'c'", "c s")
    fails("expected a modifier", "mem:0x1000 :w")
    fails("expected an event after ','", "cs ,")
  end)

  it("quotes term values with single quotes, as perf does", function()
    assert.equal("a,b", parse.parse("cpu-clock/name='a,b'/").name)
    fails("term values are quoted with single quotes", 'cpu-clock/name="a,b"/')
    fails("a quoted term value cannot be empty or hold spaces or '/'", "cpu-clock/name='a b'/")
    fails("expected a string value for 'name', found a number", "cpu-clock/name=1/")
    fails("expected a number for 'config'", "cpu-clock/config='1'/")
  end)
end)

describe("perfev.parse: record-time terms", function()
  local S, B = core.SAMPLE, core.BRANCH
  it("call-graph=dwarf, with stack-size and max-stack in any order", function()
    local t = parse.parse("cpu-clock/stack-size=100,call-graph=dwarf,max-stack=9/")
    assert.equal(compat.bor(S.CALLCHAIN, S.REGS_USER, S.STACK_USER, S.ADDR, S.DATA_SRC), t.sample_type)
    assert.equal(0xff0fff, t.sample_regs_user)            -- x86-64 without the segment registers
    assert.equal(104, t.sample_stack_user)                -- rounded up to 8 bytes
    assert.same({ true, true, 9 }, { t.mmap_data, t.exclude_callchain_user, t.sample_max_stack })
    assert.same({ ["call-graph"] = "dwarf", ["stack-size"] = 100, ["max-stack"] = 9 }, t.terms)
    assert.equal(8192, parse.parse("cpu-clock/call-graph=dwarf/").sample_stack_user)
  end)

  it("call-graph=fp and lbr, max-stack alone, stack-size alone, call-graph=no", function()
    assert.equal(S.CALLCHAIN, parse.parse("cpu-clock/call-graph=fp/").sample_type)
    local t = parse.parse("cpu-clock/call-graph=lbr/")
    assert.equal(compat.bor(S.CALLCHAIN, S.BRANCH_STACK), t.sample_type)
    assert.equal(compat.bor(B.USER, B.CALL_STACK, B.NO_FLAGS, B.NO_CYCLES, B.HW_INDEX), t.branch_sample_type)
    t = parse.parse("cpu-clock/max-stack=4/")
    assert.same({ S.CALLCHAIN, 4 }, { t.sample_type, t.sample_max_stack })
    assert.is_nil(parse.parse("cpu-clock/stack-size=4096/").sample_type)
    assert.is_nil(parse.parse("cpu-clock/call-graph=fp,call-graph=no/").sample_type)
  end)

  it("period, freq, inherit, overwrite, time, branch_type, aux", function()
    local t = parse.parse("cpu-clock/freq=99,period=100/")
    assert.same({ 100, false }, { t.sample_period, t.freq })
    assert.is_nil(t.sample_freq)
    t = parse.parse("cpu-clock/period=100,freq=99/")
    assert.same({ 99, true }, { t.sample_freq, t.freq })
    assert.is_false(parse.parse("cpu-clock/no-inherit/").inherit)
    assert.is_true(parse.parse("cpu-clock/overwrite/").write_backward)
    assert.is_false(parse.parse("cpu-clock/no-overwrite/").write_backward)
    assert.equal(S.TIME, parse.parse("cpu-clock/time/").sample_type)
    assert.same({ 0, 0 }, { parse.parse("cpu-clock/time=0/").sample_type, parse.parse("cpu-clock/time=0/").terms.time })
    t = parse.parse("cpu-clock/branch_type=u/")
    assert.same({ compat.bor(B.USER, B.ANY), S.BRANCH_STACK }, { t.branch_sample_type, t.sample_type })
    assert.equal(B.ANY_CALL, parse.parse("cpu-clock/branch_type=any_call/").branch_sample_type)
    t = parse.parse("cpu-clock/aux-output,aux-sample-size=4096/")
    assert.same({ true, 4096, S.AUX }, { t.aux_output, t.aux_sample_size, t.sample_type })
    assert.equal(1, parse.parse("cpu-clock/percore/").terms.percore)
    assert.equal("cpu-clock/period=1000/u", parse.parse("cpu-clock/period=1000/u").name)
  end)

  it("refuses values perf refuses, and call-graph modes perf only warns about", function()
    fails("expected 0 or 1 for 'time'", "cpu-clock/time=2/")
    fails("unknown branch filter 'bogus' (one of abort_tx, any", "cpu-clock/branch_type=bogus/")
    -- perf 6.1 warns and ignores an unknown mode; perfev says so
    fails("unknown call-graph mode 'bogus' (one of fp, dwarf, lbr, no) at position 22", "cpu-clock/call-graph=bogus/")
    fails("stack-size 70000 is out of range (8..65528)", "cpu-clock/call-graph=dwarf,stack-size=70000/")
    fails("unknown term 'driver-config'", "cpu-clock/driver-config=x/")
  end)

  it("a tracepoint takes the record-time terms perf allows it", function()
    local TF = { tracefs = "spec/fixtures/tracefs" }
    local t = parse.parse("sched:sched_switch/call-graph=fp,no-inherit/u", TF)
    -- perf's PERF_TP_SAMPLE_TYPE (RAW|TIME|CPU|PERIOD) and period 1, and the term's CALLCHAIN
    assert.same({ 316, S.CALLCHAIN + S.RAW + S.TIME + S.CPU + S.PERIOD, 1, false, true },
                { t.config, t.sample_type, t.sample_period, t.inherit, t.exclude_kernel })
    assert.is_true(parse.parse("sched:sched_switch/max-stack=2/:k", TF).exclude_user)
    fails("unknown term 'period' for the tracepoint sched:sched_switch (valid terms: aux-output,",
          "sched:sched_switch/period=5/", TF)
  end)

  it("the mapped fields open: a dwarf callchain sample carries registers and the user stack", function()
    local ev = assert(perfev.open("cpu-clock/period=100000,call-graph=dwarf,stack-size=1024/u"))
    local a = ev:attr()
    assert.equal(1024, a.sample_stack_user)
    assert.equal(compat.bor(S.CALLCHAIN, S.REGS_USER, S.STACK_USER, S.ADDR, S.DATA_SRC), a.sample_type)
    local ring = assert(ev:mmap(16))
    ev:enable()
    require("spec.support.util").spin(3e7)
    ev:disable()
    local n = 0
    for rec in ring:records() do
      if rec.type == "sample" then
        n = n + 1
        assert.equal(1024, #rec.stack_user)
        assert.is_true(rec.dyn_size > 0 and rec.dyn_size <= 1024)
        assert.is_true(compat.math_type(rec.regs_user.sp) == "integer" and rec.regs_user.sp ~= 0)
        -- exclude_callchain_user leaves the user chain to the unwinder, :u the kernel's out
        assert.equal(0, #rec.callchain)
      end
    end
    assert.is_true(n > 0, "no sample")
    ring:close()
    ev:close()
  end)
end)

describe("perfev.parse: tool events", function()
  local tool = require "perfev.tool"
  local u = require "spec.support.util"
  local _, clock = tool.wall_clock()
  local STEP = 0                                  -- CLOCK_MONOTONIC: nanoseconds
  local TICK = compat.idiv(1000000000, tool.USER_HZ)         -- getrusage splits user/system by ticks

  it("parse to perf's placeholder (a dummy software event) with the tool named", function()
    for _, n in ipairs { "duration_time", "user_time", "system_time" } do
      local t = parse.parse(n)
      assert.same({ TYPE.SOFTWARE, SW.DUMMY, n, n }, { t.type, t.config, t.tool, t.name })
    end
    assert.is_true(parse.parse("user_time:u").exclude_kernel)
    fails("the tool event 'duration_time' takes no terms", "duration_time/name=x/")
  end)

  it("open as Lua-side events: duration_time covers a sleep", function()
    local ev = assert(perfev.open("duration_time"))
    assert.is_false(ev:read())                      -- never enabled: not counted
    local ns, enabled = ev:measure(u.h.sleep_ms, 20)
    assert.is_true(ns >= 20000000 - STEP, ("slept 20 ms, measured %d ns (%s)"):format(ns, clock))
    assert.equal(ns, enabled)
    ev:disable()
    assert.equal(ns, (ev:read()))                   -- disabled: the count stays
    ev:close()
    assert.is_true(ev:closed())
    assert.has_error(function() ev:read() end, "perfev.tool: attempt to use a closed event")
  end)

  it("user_time + system_time follow the kernel's task-clock, within the clock tick", function()
    local g = assert(perfev.group { "task-clock", "user_time", "system_time", "duration_time" })
    local r = g:measure(u.spin, 3e7)
    local cpu = r["user_time"] + r["system_time"]
    assert.equal(0, r["user_time"] % 1000)     -- getrusage: microseconds
    assert.is_true(math.abs(cpu - r["task-clock"]) <= 3 * TICK,
                   ("task-clock %d ns, user+system %d ns"):format(r["task-clock"], cpu))
    assert.is_true(r.duration_time >= r["task-clock"] - STEP)    -- one thread: wall >= CPU
    assert.same({ "task-clock", "user_time", "system_time", "duration_time" }, g:names())
    assert.equal(r[2], r.raw[2])
    g:reset()
    assert.equal(0, g:read()[4])
    g:close()
  end)
end)

describe("perfev.parse: modifiers that perfev.open and perfev.group honour", function()
  local E = { EINVAL = 22, ENOENT = 2 }
  it("P: precise_ip 3, stepped down until the kernel accepts", function()
    local t = parse.parse("cpu-clock:P")
    assert.same({ 0, true }, { t.precise_ip, t.precise_max })   -- as perf stat -vv shows it
    local ev = assert(perfev.open("cpu-clock:P"))
    assert.equal(3, ev:attr().precise_ip)                       -- software events take any level
    ev:close()
    local hw, msg, errno = perfev.open("cycles:P")
    if hw then
      assert.is_true(hw:attr().precise_ip <= 3)
      hw:close()
    else
      assert.equal(E.ENOENT, errno)
      assert.matches("(precise_ip 3 down to 0 tried, for modifier P)", msg, 1, true)
    end
  end)

  it("D and e: only the leader is pinned and exclusive", function()
    local g = assert(perfev.group("{cpu-clock,task-clock}:De"))
    local a1, a2 = g:events()[1]:attr(), g:events()[2]:attr()
    assert.same({ 1, 1, 0, 0 }, { a1.pinned, a1.exclusive, a2.pinned, a2.exclusive })
    local r = g:measure(function() for _ = 1, 1e5 do end end)
    assert.is_true(r[1] > 0 and r[2] > 0)
    g:close()
  end)

  it("W: a weak group that cannot open as a group opens its members one by one", function()
    -- a pinned member (D on the member itself) is refused inside a group
    local g, _, errno = perfev.group("{cpu-clock,task-clock:D}")
    assert.is_nil(g)
    assert.equal(E.EINVAL, errno)
    g = assert(perfev.group("{cpu-clock,task-clock:D}:W"))
    assert.is_true(g.split)
    assert.is_true(parse.parse("{cs,faults}:W")[1].weak_group)
    local r = g:measure(function() for _ = 1, 2e5 do end end)
    assert.is_true(r[1] > 0 and r[2] > 0)
    assert.equal(r[1], r["cpu-clock:W"])
    assert.is_true(r.time_enabled > 0)
    g:reset()
    local z = g:read()
    assert.same({ 0, 0 }, { z.raw[1], z.raw[2] })
    g:close()
    -- a group that opens stays a group
    local ok = assert(perfev.group("{cpu-clock,task-clock}:W"))
    assert.is_false(ok.split)
    ok:close()
  end)

  it("S: the leader samples and reads the whole group into each sample", function()
    local g = assert(perfev.group("{cpu-clock/period=200000/,task-clock}:S"))
    local leader, member = g:events()[1], g:events()[2]
    assert.equal(core.SAMPLE.READ, compat.band(leader:attr().sample_type, core.SAMPLE.READ))
    assert.equal(core.FORMAT.GROUP, compat.band(leader:attr().read_format, core.FORMAT.GROUP))
    assert.same({ 0, 0, 0 }, { leader:attr().inherit, member:attr().inherit, member:attr().sample_period })
    local ring = assert(leader:mmap(8))
    g:enable()
    require("spec.support.util").spin(3e7)
    g:disable()
    local n = 0
    for rec in ring:records() do
      if rec.type == "sample" then
        n = n + 1
        assert.equal(2, rec.read.nr)
        assert.same({ leader:id(), member:id() }, { rec.read[1].id, rec.read[2].id })
        assert.is_true(rec.read[2].value > 0)
      end
    end
    assert.is_true(n > 0, "no sample")
    ring:close()
    g:close()
  end)
end)

describe("perfev.parse: what is not supported says why", function()
  it("perf metrics", function()
    fails("perf metrics (-M, --metrics) are not supported", "-M IPC")
    fails("perf's per-CPU JSON tables", "--metrics=TopdownL1")
  end)

  it("SDT markers not created by perf probe", function()
    local err = fails("SDT event 'sdt_libc:setjmp' is not in tracefs", "sdt_libc:setjmp",
                      { tracefs = "spec/fixtures/tracefs" })
    assert.matches("`perf probe sdt_libc:setjmp`", err, 1, true)
    -- the fixture's tracepoint itself parses
    assert.equal(316, parse.parse("sched:sched_switch", { tracefs = "spec/fixtures/tracefs" }).config)
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
    assert.equal(#names.software, #sw)
    assert.matches("context-switches OR cs", tostring(sw), 1, true)
    assert.matches("[Software event]", tostring(sw), 1, true)
    local g = perfev.list("*-faults")
    assert.is_true(#g >= 4)
    local sub = perfev.list("migrat")
    assert.equal("cpu-migrations", sub[1].name)
    local tools = perfev.list("tool")
    assert.equal(3, #tools)
    assert.equal("duration_time", tools[1].name)
    assert.matches("[Tool event]", tostring(tools), 1, true)
  end)
end)
