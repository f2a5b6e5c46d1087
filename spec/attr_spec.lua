-- The attr userdata: every field of struct perf_event_attr by name, its
-- byte layout against the kernel ABI, masks by name, errors, table(),
-- clone(), bytes() and the `perf stat -vv` style dump.
local core = require "perfev.core"
local u = require "spec.support.util"
local compat = require "perfev.compat"

local SIZE = core.ATTR_SIZE_MAX

local function u8(bytes, off) return (compat.unpack("<I1", bytes, off + 1)) end
local function u16(bytes, off) return (compat.unpack("<I2", bytes, off + 1)) end
local function u32(bytes, off) return (compat.unpack("<I4", bytes, off + 1)) end
local function u64(bytes, off) return (compat.unpack("<i8", bytes, off + 1)) end

-- include/uapi/linux/perf_event.h: whole fields, their offsets and sizes
local LAYOUT = {
  { "type", 0, 4 }, { "size", 4, 4 }, { "config", 8, 8 }, { "sample_period", 16, 8 },
  { "sample_type", 24, 8 }, { "read_format", 32, 8 }, { "wakeup_events", 48, 4 },
  { "bp_type", 52, 4 }, { "bp_addr", 56, 8 }, { "bp_len", 64, 8 },
  { "branch_sample_type", 72, 8 }, { "sample_regs_user", 80, 8 },
  { "sample_stack_user", 88, 4 }, { "clockid", 92, 4 }, { "sample_regs_intr", 96, 8 },
  { "aux_watermark", 104, 4 }, { "sample_max_stack", 108, 2 }, { "aux_sample_size", 112, 4 },
  { "aux_action", 116, 4 }, { "sig_data", 120, 8 }, { "config3", 128, 8 },
}

-- the flag word at offset 40, bit by bit (precise_ip takes bits 15 and 16)
local FLAGS = {
  "disabled", "inherit", "pinned", "exclusive", "exclude_user", "exclude_kernel",
  "exclude_hv", "exclude_idle", "mmap", "comm", "freq", "inherit_stat", "enable_on_exec",
  "task", "watermark", "precise_ip", false, "mmap_data", "sample_id_all", "exclude_host",
  "exclude_guest", "exclude_callchain_kernel", "exclude_callchain_user", "mmap2",
  "comm_exec", "use_clockid", "context_switch", "write_backward", "namespaces", "ksymbol",
  "bpf_event", "aux_output", "cgroup", "text_poke", "build_id", "inherit_thread",
  "remove_on_exec", "sigtrap", "defer_callchain", "defer_output",
}

-- union members: every alias reads and writes the same storage
local UNIONS = {
  { "sample_period", "sample_freq" },
  { "wakeup_events", "wakeup_watermark" },
  { "bp_addr", "config1" },
  { "bp_len", "config2", "kprobe_addr", "probe_offset" },
}

describe("perfev.core.attr", function()
  describe("fields", function()
    it("a new attr is all zero but its size, the newest ABI's 136 bytes", function()
      assert.equal(136, SIZE)
      local a = core.attr()
      local b = a:bytes()
      assert.equal(SIZE, #b)
      assert.equal(SIZE, u32(b, 4))
      assert.equal(SIZE, a.size)
      assert.equal(string.rep("\0", SIZE - 8), b:sub(9))
      assert.equal(0, u32(b, 0))
      for _, name in ipairs(core.attr_fields()) do
        if name ~= "size" and name ~= "kprobe_func" and name ~= "uprobe_path" then
          assert.equal(0, a[name], name)
        end
      end
    end)

    it("lists every field of the kernel ABI, unions under every alias", function()
      local list, seen = core.attr_fields(), {}
      for _, name in ipairs(list) do
        assert.is_nil(seen[name], "duplicate " .. name)
        seen[name] = true
      end
      for _, row in ipairs(LAYOUT) do assert.is_true(seen[row[1]], row[1]) end
      for _, name in ipairs(FLAGS) do
        if name then assert.is_true(seen[name], name) end
      end
      for _, union in ipairs(UNIONS) do
        for _, name in ipairs(union) do assert.is_true(seen[name], name) end
      end
      for _, name in ipairs { "kprobe_func", "uprobe_path", "aux_start_paused", "aux_pause",
                              "aux_resume" } do
        assert.is_true(seen[name], name)
      end
    end)

    it("stores every whole field at its kernel offset and size", function()
      for i, row in ipairs(LAYOUT) do
        local name, off, size = row[1], row[2], row[3]
        local a = core.attr()
        local v = (size == 2) and 0x1234 + i or (size == 4) and 0x12345678 + i
                  or compat.hex64("0x1122334455667700") + i
        a[name] = v
        assert.equal(v, a[name], name)
        local b = a:bytes()
        local got = (size == 2) and u16(b, off) or (size == 4) and u32(b, off) or u64(b, off)
        assert.equal(v, got, name .. " at offset " .. off)
        -- and nothing else changed: every other byte is as in a new attr
        local zero = core.attr():bytes()
        for k = 0, SIZE - 1 do
          if k < off or k >= off + size then
            assert.equal(u8(zero, k), u8(b, k), name .. ": byte " .. k .. " changed")
          end
        end
      end
    end)

    it("stores every bitfield at its kernel bit of the flag word", function()
      for bit, name in ipairs(FLAGS) do
        if name and name ~= "precise_ip" then
          local a = core.attr()
          a[name] = true
          assert.equal(1, a[name], name)
          assert.equal(compat.lshift(1, bit - 1), u64(a:bytes(), 40), name .. " is bit " .. (bit - 1))
          a[name] = false
          assert.equal(0, u64(a:bytes(), 40), name)
        end
      end
      local a = core.attr { precise_ip = 3 }
      assert.equal(3, a.precise_ip)
      assert.equal(compat.lshift(3, 15), u64(a:bytes(), 40))
      a.precise_ip = 2
      assert.equal(compat.lshift(2, 15), u64(a:bytes(), 40))
      -- neighbours are untouched by a 2-bit field
      a.watermark, a.mmap_data = true, true
      a.precise_ip = 0
      assert.equal(compat.bor(compat.lshift(1, 14), compat.lshift(1, 17)), u64(a:bytes(), 40))
    end)

    it("sets several bitfields side by side without disturbing each other", function()
      local a = core.attr { disabled = true, exclude_kernel = true, sigtrap = true,
                            remove_on_exec = true, precise_ip = 1, defer_output = true }
      assert.equal(compat.bor(1, compat.lshift(1, 5), compat.lshift(1, 15), compat.lshift(1, 36), compat.lshift(1,
          37), compat.lshift(1, 39)),
                   u64(a:bytes(), 40))
      a.exclude_kernel = false
      assert.equal(1, a.disabled)
      assert.equal(0, a.exclude_kernel)
      assert.equal(1, a.sigtrap)
      assert.equal(1, a.precise_ip)
    end)

    it("aux_start_paused, aux_pause and aux_resume are bits 0..2 of aux_action", function()
      local a = core.attr { aux_pause = true }
      assert.equal(2, a.aux_action)
      a.aux_resume = 1
      a.aux_start_paused = true
      assert.equal(7, a.aux_action)
      assert.equal(7, u32(a:bytes(), 116))
      a.aux_action = 1
      assert.equal(1, a.aux_start_paused)
      assert.equal(0, a.aux_pause)
    end)

    it("reads and writes every union through each of its aliases", function()
      for _, union in ipairs(UNIONS) do
        for _, writer in ipairs(union) do
          local a = core.attr()
          a[writer] = 4242
          for _, reader in ipairs(union) do
            assert.equal(4242, a[reader], writer .. " -> " .. reader)
          end
        end
      end
    end)

    it("keeps kprobe_func/uprobe_path strings alive and points config1 at them", function()
      local a = core.attr { type = 6, uprobe_path = "/bin/true", probe_offset = 0x1040 }
      assert.equal("/bin/true", a.uprobe_path)
      assert.is_true(a.config1 ~= 0)
      assert.equal(a.config1, a.bp_addr)
      assert.equal(0x1040, a.config2)
      collectgarbage()
      collectgarbage()
      assert.equal("/bin/true", a.uprobe_path)
      -- the number the kernel reads is the address of a NUL-terminated copy
      a.kprobe_func = "do_sys_open"
      assert.equal("do_sys_open", a.kprobe_func)
      -- a plain number in the union is not mistaken for a string
      a.config1 = 12345
      assert.equal(12345, a.kprobe_func)
    end)

    it("takes the full unsigned range of 64-bit fields (read back as Lua integers)", function()
      local a = core.attr { config = -1, sample_type = compat.mininteger }
      assert.equal(-1, a.config)
      assert.equal(compat.mininteger, a.sample_type)
      assert.equal("ffffffffffffffff", ("%x"):format(a.config))
    end)

    it("clockid is signed 32-bit and takes clock names", function()
      local a = core.attr { clockid = "monotonic" }
      assert.equal(1, a.clockid)
      a.clockid = "MONOTONIC_RAW"
      assert.equal(4, a.clockid)
      a.clockid = "boottime"
      assert.equal(7, a.clockid)
      a.clockid = -1
      assert.equal(-1, a.clockid)
      assert.equal(0xffffffff, u32(a:bytes(), 92))
      a.clockid = core.CLOCK.TAI
      assert.equal(11, a.clockid)
    end)

    it("type takes the PERF_TYPE_ names", function()
      assert.equal(core.TYPE.SOFTWARE, core.attr { type = "software" }.type)
      assert.equal(core.TYPE.BREAKPOINT, core.attr { type = "breakpoint" }.type)
      assert.equal(core.TYPE.TRACEPOINT, core.attr { type = "TRACEPOINT" }.type)
      assert.equal(8, core.attr { type = 8 }.type)   -- a dynamic PMU's number
    end)
  end)

  describe("masks", function()
    it("accept an integer, a list of names, or an 'a|b' string", function()
      local S = core.SAMPLE
      local want = compat.bor(S.IP, S.TID, S.TIME)
      assert.equal(want, core.attr { sample_type = want }.sample_type)
      assert.equal(want, core.attr { sample_type = { "ip", "tid", "time" } }.sample_type)
      assert.equal(want, core.attr { sample_type = "ip|tid|time" }.sample_type)
      assert.equal(want, core.attr { sample_type = "IP|TID|TIME" }.sample_type)
      assert.equal(want, core.attr { sample_type = { "ip|tid", S.TIME } }.sample_type)
      assert.equal(S.IDENTIFIER, core.attr { sample_type = "identifier" }.sample_type)
    end)

    it("read_format, branch_sample_type and bp_type take their own names", function()
      local F = core.FORMAT
      assert.equal(compat.bor(F.GROUP, F.ID), core.attr { read_format = { "group", "id" } }.read_format)
      assert.equal(compat.bor(F.LOST, F.TOTAL_TIME_ENABLED),
                   core.attr { read_format = "lost|total_time_enabled" }.read_format)
      local B = core.BRANCH
      assert.equal(compat.bor(B.USER, B.ANY), core.attr { branch_sample_type = { "user", "any" } }
                                     .branch_sample_type)
      assert.equal(core.BP_TYPE.W, core.attr { bp_type = "w" }.bp_type)
      assert.equal(core.BP_TYPE.RW, core.attr { bp_type = "rw" }.bp_type)
      assert.equal(core.BP_TYPE.RW, core.attr { bp_type = { "r", "w" } }.bp_type)
      assert.equal(core.BP_TYPE.X, core.attr { bp_type = "x" }.bp_type)
    end)

    it("register masks take register names as bit numbers (xmm takes two bits)", function()
      local R = core.REG
      assert.equal(compat.bor(compat.lshift(1, R.AX), compat.lshift(1, R.IP)),
                   core.attr { sample_regs_user = { "ax", "ip" } }.sample_regs_user)
      assert.equal(compat.bor(compat.lshift(1, R.SP), compat.lshift(1, R.BP)), core.attr { sample_regs_intr = "sp|bp" }
                                                .sample_regs_intr)
      assert.equal(compat.lshift(3, 32), core.attr { sample_regs_user = "xmm0" }.sample_regs_user)
      assert.equal(0x101, core.attr { sample_regs_user = 0x101 }.sample_regs_user)
    end)
  end)

  describe("errors", function()
    local function fails(pattern, fn)
      local ok, err = pcall(fn)
      assert.is_false(ok)
      assert.matches(pattern, tostring(err), 1, true)
    end

    it("an unknown field is named, in a constructor, on set and on get", function()
      fails("perfev.attr: unknown field 'nosuch'", function() return core.attr { nosuch = 1 } end)
      local a = core.attr()
      fails("perfev.attr: unknown field 'nosuch'", function() a.nosuch = 1 end)
      fails("perfev.attr: unknown field 'sample_perod'", function() return a.sample_perod end)
      fails("field names must be strings", function() return core.attr { 1 } end)
    end)

    it("a value out of a bitfield's range names the field and the range", function()
      fails("field 'precise_ip' is 2 bits wide: 4 is out of range (0..3)",
            function() return core.attr { precise_ip = 4 } end)
      fails("field 'disabled' is 1 bit wide: 2 is out of range (0..1)",
            function() return core.attr { disabled = 2 } end)
      fails("field 'sample_max_stack' is 16 bits wide: 65536 is out of range (0..65535)",
            function() return core.attr { sample_max_stack = 65536 } end)
      fails("field 'wakeup_events' is 32 bits wide",
            function() return core.attr { wakeup_events = compat.lshift(1, 32) } end)
      fails("field 'precise_ip' is 2 bits wide: -1 is out of range",
            function() return core.attr { precise_ip = -1 } end)
      fails("field 'clockid' is a signed 32-bit value",
            function() return core.attr { clockid = compat.lshift(1, 40) } end)
    end)

    it("a value of the wrong type names the field", function()
      fails("field 'config' does not take a string value",
            function() return core.attr { config = "cycles" } end)
      fails("field 'config' expects an integer, got boolean",
            function() return core.attr { config = true } end)
      fails("field 'config' expects an integer, got 1.5",
            function() return core.attr { config = 1.5 } end)
      fails("field 'config' does not take a table value",
            function() return core.attr { config = {} } end)
      fails("field 'disabled' does not take a string value",
            function() return core.attr { disabled = "yes" } end)
      fails("field 'sample_type' does not take a function value",
            function() return core.attr { sample_type = print } end)
      fails("field 'sample_type': unknown name 'nosuch'",
            function() return core.attr { sample_type = { "ip", "nosuch" } } end)
      fails("field 'sample_type': item 2 is a boolean",
            function() return core.attr { sample_type = { "ip", true } } end)
      fails("field 'clockid': unknown name 'sundial'",
            function() return core.attr { clockid = "sundial" } end)
      fails("expected a table or an attr, got number", function() return core.attr(42) end)
    end)

    it("a failed set leaves the attr unchanged", function()
      local a = core.attr { precise_ip = 2, config = 7 }
      local before = a:bytes()
      assert.is_false(pcall(function() a.precise_ip = 4 end))
      assert.is_false(pcall(function() a.config = "x" end))
      assert.is_false(pcall(function() a.sample_type = { "ip", "nosuch" } end))
      assert.equal(before, a:bytes())
    end)
  end)

  describe("table(), clone(), bytes(), ==", function()
    it("table() gives the non-default fields, 1-bit fields as true, and round-trips", function()
      local a = core.attr { type = "software", config = 2, sample_period = 1000,
                            sample_type = "ip|tid", disabled = true, precise_ip = 2,
                            exclude_kernel = true, clockid = -1, config3 = 5 }
      local t = a:table()
      assert.same({ type = 1, config = 2, sample_period = 1000,
                    sample_type = compat.bor(core.SAMPLE.IP, core.SAMPLE.TID), disabled = true,
                    precise_ip = 2, exclude_kernel = true, clockid = -1, config3 = 5 }, t)
      assert.equal(a, core.attr(t))
    end)

    it("table() names a union by the member the other fields make meaningful", function()
      local f = core.attr { freq = true, sample_freq = 4000 }:table()
      assert.equal(4000, f.sample_freq)
      assert.is_nil(f.sample_period)
      local p = core.attr { sample_period = 4000 }:table()
      assert.equal(4000, p.sample_period)
      assert.is_nil(p.sample_freq)
      local bp = core.attr { type = "breakpoint", bp_addr = 0x1000, bp_len = 8 }:table()
      assert.equal(0x1000, bp.bp_addr)
      assert.equal(8, bp.bp_len)
      assert.is_nil(bp.config1)
      local pmu = core.attr { type = 9, config1 = 3, config2 = 4 }:table()
      assert.same({ type = 9, config1 = 3, config2 = 4 }, pmu)
      local w = core.attr { watermark = true, wakeup_watermark = 4096 }:table()
      assert.equal(4096, w.wakeup_watermark)
      assert.is_nil(w.wakeup_events)
    end)

    it("clone() is an equal, independent copy that keeps probe strings alive", function()
      local a = core.attr { type = 6, uprobe_path = "/usr/bin/env", config = 1 }
      local c = a:clone()
      assert.equal(a, c)
      assert.is_false(rawequal(a, c))
      c.config = 2
      assert.equal(1, a.config)
      assert.are_not.equal(a, c)
      a = nil   -- luacheck: ignore 311
      collectgarbage()
      collectgarbage()
      assert.equal("/usr/bin/env", c.uprobe_path)
      assert.equal(c, core.attr(c))
    end)

    it("bytes() is the kernel's struct image", function()
      local b = core.attr { type = 5, config = compat.hex64("0x0102030405060708"), bp_type = "rw",
                            bp_addr = 0x7fff0000, bp_len = 8, disabled = true }:bytes()
      assert.equal(136, #b)
      assert.equal(5, u32(b, 0))
      assert.equal(compat.hex64("0x0102030405060708"), u64(b, 8))
      assert.equal(1, u8(b, 40))
      assert.equal(3, u32(b, 52))
      assert.equal(0x7fff0000, u64(b, 56))
      assert.equal(8, u64(b, 64))
    end)
  end)

  describe("tostring", function()
    it("prints the non-zero fields like `perf stat -vv`, unions by their label", function()
      local s = tostring(core.attr { type = "breakpoint", bp_type = "w", bp_addr = 0x1000,
                                     bp_len = 4, sample_type = "identifier",
                                     read_format = "total_time_enabled|total_time_running",
                                     disabled = true, exclude_guest = true, size = 128 })
      local rule = string.rep("-", 60)
      assert.equal(table.concat({
        rule,
        "perf_event_attr:",
        "  type                             5",
        "  size                             128",
        "  sample_type                      IDENTIFIER",
        "  read_format                      TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING",
        "  disabled                         1",
        "  exclude_guest                    1",
        "  bp_type                          2",
        "  { bp_addr, config1 }             0x1000",
        "  { bp_len, config2 }              0x4",
        rule, "" }, "\n"), s)
    end)

    it("prints unknown mask bits in hex and sample_period under its union label", function()
      local s = tostring(core.attr { sample_type = compat.bor(core.SAMPLE.IP, compat.lshift(1, 40)),
                                     sample_period = 4000, clockid = -1 })
      assert.matches("\n  sample_type                      IP|0x10000000000\n", s, 1, true)
      assert.matches("\n  { sample_period, sample_freq }   4000\n", s, 1, true)
      assert.matches("\n  clockid                          -1\n", s, 1, true)
      assert.not_matches("sample_freq   ", s, 1, true)
    end)

    -- `perf stat -vv` prints the attr it opens; perfev given the same fields
    -- must print the same lines.
    local function perf_attr_block(event)
      local out = u.sh("perf stat -vv -e '" .. event .. "' true 2>&1")
      local block = out:match("(perf_event_attr:\n.-\n)%-%-%-%-")
      return block
    end

    -- perf's dump back into attr fields: "{ a, b }" labels name their first member
    local function fields_of(block)
      local t = {}
      for label, value in block:gmatch("\n  (.-)%s%s+(%S+)") do
        local name = label:match("^{ ([%w_]+),") or label
        t[name] = tonumber(value) or value
      end
      return t
    end

    local have_perf = select(2, u.sh("perf --version >/dev/null 2>&1"))
    for _, event in ipairs { "task-clock", "page-faults", "mem:0x1000:w" } do
      if have_perf then
        it("prints what `perf stat -vv -e " .. event .. "` prints for the same attr", function()
          local block = perf_attr_block(event)
          assert.is_string(block, "no perf_event_attr block in perf's output")
          local a = core.attr(fields_of(block))
          local mine = tostring(a):match("(perf_event_attr:\n.-\n)%-%-%-%-")
          assert.equal(block, mine)
        end)
      else
        pending("compare with `perf stat -vv -e " .. event .. "`: the perf tool is not installed")
      end
    end
  end)
end)
