-- perfev.uprobe / perfev.kprobe and the event-string forms
-- uprobe/path=...,func=.../ and kprobe/func=.../: against the kernel's
-- uprobe PMU (a probe on a function of the spec helper counts exactly the
-- calls made), against perf probe's offsets, and on a fixture sysfs with a
-- kprobe PMU for kernels without kprobes.
local perfev = require "perfev"
local probe = require "perfev.probe"
local elf = require "perfev.elf"
local u = require "spec.support.util"
local compat = require "perfev.compat"

local h = u.h
local HELPER = assert(package.searchpath("bphelper", package.cpath), "bphelper.so not on package.cpath")
local TARGET = "perfev_probe_target"
local DEVICES = "/sys/bus/event_source/devices"
local FIX = { sysfs = "spec/fixtures/sysfs-hybrid/devices", kallsyms = "spec/fixtures/sysfs-hybrid/kallsyms" }

local function type_of(pmu)
  local s = u.read_file(DEVICES .. "/" .. pmu .. "/type")
  return s and tonumber(s)
end

local function fails(pattern, fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "no error")
  -- raised at the caller's line, here
  local at, msg = err:match("^(spec/probe_spec%.lua:%d+): (.*)$")
  assert.is_not_nil(at, err)
  assert.matches(pattern, msg)
  return msg
end

-- count(spec, fn, ...) -> what the event counted around fn(...)
local function count(spec, fn, ...)
  local ev = assert(perfev.open(spec))
  local n = ev:measure(fn, ...)
  ev:close()
  return n
end

describe("perfev.uprobe on this kernel", function()
  local UPROBE = type_of("uprobe")
  local function need_uprobe()
    if os.getenv("PERFEV_CHECK") == "valgrind" then
      -- valgrind runs a translated copy of the code: the kernel's breakpoint
      -- in the original page reaches the process as a plain SIGTRAP
      pending("uprobes cannot fire under valgrind (it executes translated code)")
      return false
    end
    if not UPROBE then
      pending("no uprobe PMU on this machine (" .. DEVICES .. "/uprobe): kernel without CONFIG_UPROBE_EVENTS")
      return false
    end
    return true
  end

  it("counts every call of a function of a shared object, exactly", function()
    if not need_uprobe() then return end
    local t = perfev.uprobe { path = HELPER, func = TARGET }
    assert.equal(UPROBE, t.type)
    assert.equal(HELPER, t.uprobe_path)
    assert.equal((elf.func_offset(HELPER, TARGET)), t.probe_offset)
    assert.equal(0, t.config)
    assert.equal("uprobe:bphelper.so:" .. TARGET, t.name)
    assert.equal(1000, count(t, h.probe_loop, 1000))
    assert.equal(12345, count(t, h.probe_loop, 12345))
    assert.equal(0, count(t, h.getppid_loop, 10))
  end)

  it("a return probe (ret = true) counts the returns", function()
    if not need_uprobe() then return end
    local t = perfev.uprobe { path = HELPER, func = TARGET, ret = true }
    assert.equal(1, t.config)                    -- the retprobe format bit (format/retprobe: config:0)
    assert.equal("uretprobe:bphelper.so:" .. TARGET, t.name)
    assert.equal(777, count(t, h.probe_loop, 777))
  end)

  it("a file offset or a virtual address names the same probe", function()
    if not need_uprobe() then return end
    local e = assert(elf.open(HELPER))
    local sym = assert(e:find(TARGET))
    local off = assert(e:offset(sym.value))
    assert.equal(50, count(perfev.uprobe { path = HELPER, offset = off }, h.probe_loop, 50))
    local t = perfev.uprobe { path = HELPER, addr = sym.value }
    assert.equal(off, t.probe_offset)
    assert.equal(60, count(t, h.probe_loop, 60))
  end)

  it("probes the C library's syscall() from getppid_loop", function()
    if not need_uprobe() then return end
    local libc
    for line in io.lines("/proc/self/maps") do
      libc = libc or line:match("%s(/%S*/libc%.so%.6)$")
    end
    if not libc then
      pending("no libc.so.6 in /proc/self/maps")
      return
    end
    assert.equal(321, count(perfev.uprobe { path = libc, func = "syscall" }, h.getppid_loop, 321))
  end)

  it("the event-string form: uprobe/path=...,func=.../ with modifiers, quoting and ret", function()
    if not need_uprobe() then return end
    local off = elf.func_offset(HELPER, TARGET)
    for _, s in ipairs {
      ("uprobe/path=%s,func=%s/"):format(HELPER, TARGET),
      ("uprobe/func=%s,path=%s/"):format(TARGET, HELPER),             -- the path's last '/' closes
      ("uprobe/func=%s,path=%s/u"):format(TARGET, HELPER),
      ('uprobe/path="%s",func=%s/'):format(HELPER, TARGET),
      ("uprobe/ path = '%s' , func = %s /"):format(HELPER, TARGET),
      ("uprobe/path=%s,offset=0x%x/"):format(HELPER, off),
    } do
      local t = perfev.parse(s)
      assert.equal(UPROBE, t.type, s)
      assert.equal(HELPER, t.uprobe_path, s)
      assert.equal(off, t.probe_offset, s)
      assert.equal(s, t.name)
      assert.equal(99, count(s, h.probe_loop, 99), s)
    end
    local r = perfev.parse(("uprobe/path=%s,func=%s,ret,name=ret_probe/"):format(HELPER, TARGET))
    assert.equal(1, r.config)
    assert.equal("ret_probe", r.name)
    assert.same({ path = HELPER, func = TARGET, ret = true }, r.probe)
    assert.is_true(perfev.parse(("uprobe/path=%s,func=%s/u"):format(HELPER, TARGET)).exclude_kernel)
  end)

  it("is a group member like any event", function()
    if not need_uprobe() then return end
    local g = assert(perfev.group { "task-clock", perfev.uprobe { path = HELPER, func = TARGET },
                                    ("uprobe/path=%s,func=%s,ret/"):format(HELPER, TARGET) })
    local r = g:measure(h.probe_loop, 4321)
    assert.equal(4321, r[2])
    assert.equal(4321, r[3])
    assert.equal(4321, r["uprobe:bphelper.so:" .. TARGET])
    g:close()
  end)

  it("takes ref_ctr_offset through the PMU's format term", function()
    if not need_uprobe() then return end
    if not u.exists(DEVICES .. "/uprobe/format/ref_ctr_offset") then
      pending("this kernel's uprobe PMU has no ref_ctr_offset format term")
      return
    end
    local t = perfev.uprobe { path = HELPER, func = TARGET, ref_ctr_offset = 0x40 }
    assert.equal(compat.lshift(0x40, 32), t.config)
  end)

  it("perf probe puts its uprobe at the same file offset", function()
    if not need_uprobe() then return end
    if (u.sh("command -v perf 2>/dev/null")) == "" then
      pending("perf is not installed (package linux-perf)")
      return
    end
    local out = u.sh(("perf probe -n -v -x '%s' -a %s 2>&1"):format(HELPER, TARGET))
    local hex = assert(out:match(":0x(%x+)\n"), out)
    assert.equal(tonumber(hex, 16), perfev.uprobe { path = HELPER, func = TARGET }.probe_offset)
  end)
end)

describe("perfev.uprobe errors", function()
  it("a missing function names the nearest ones", function()
    fails("^perfev%.uprobe: no function 'perfev_probe_targt' in .+; nearest: perfev_probe_target",
          perfev.uprobe, { path = HELPER, func = "perfev_probe_targt" })
    fails("^perfev%.parse: no function 'nope_nope'.+ at position 8$", perfev.parse,
          ("uprobe/func=nope_nope,path=%s/"):format(HELPER))
  end)

  it("a missing file, a non-ELF file, an offset outside the function", function()
    fails("cannot open /nonexistent/bin: No such file", perfev.uprobe, { path = "/nonexistent/bin", func = "main" })
    fails("/etc/hostname is not an ELF file", perfev.uprobe, { path = "/etc/hostname", offset = 0 })
    fails("offset 100000 is outside " .. TARGET, perfev.uprobe, { path = HELPER, func = TARGET, offset = 100000 })
  end)

  it("a key of the wrong type, a missing path, conflicting keys", function()
    fails("field 'path' expects a string, got number", perfev.uprobe, { path = 42, func = "f" })
    fails("field 'offset' expects an integer, got string", perfev.uprobe, { path = HELPER, offset = "4" })
    fails("needs path", perfev.uprobe, { func = "f" })
    fails("needs exactly one of func", perfev.uprobe, { path = HELPER })
    fails("needs exactly one of func", perfev.uprobe, { path = HELPER, func = TARGET, addr = 0x1000 })
    fails("expected a table, got string", perfev.uprobe, "x")
    fails("expected a number for 'offset'", perfev.parse, ("uprobe/path=%s,offset=abc/"):format(HELPER))
  end)

  it("a machine without the PMU is named, with the kernel option", function()
    fails("no uprobe PMU on this machine %(no spec/fixtures/sysfs/devices/uprobe/type%): the kernel was built "
          .. "without CONFIG_UPROBE_EVENTS", perfev.uprobe, { path = HELPER, func = TARGET },
          { sysfs = "spec/fixtures/sysfs/devices" })
  end)
end)

describe("perfev.kprobe", function()
  it("builds kprobe attrs on a fixture kprobe PMU, checked against a kallsyms", function()
    local t = perfev.kprobe({ func = "do_sys_openat2" }, FIX)
    assert.same({ 6, 0, "do_sys_openat2", 0, "kprobe:do_sys_openat2" },
                { t.type, t.config, t.kprobe_func, t.probe_offset, t.name })
    t = perfev.kprobe({ func = "__x64_sys_getppid", offset = 4, ret = true }, FIX)
    assert.same({ 1, 4, "kretprobe:__x64_sys_getppid+0x4" }, { t.config, t.probe_offset, t.name })
    t = perfev.kprobe({ addr = compat.hex64("0x7fffffff81377be0") }, FIX)
    assert.same({ 0, compat.hex64("0x7fffffff81377be0") }, { t.config1, t.kprobe_addr })
    assert.is_nil(t.kprobe_func)
    assert.equal("ext4_fill_super", perfev.kprobe({ func = "ext4_fill_super" }, FIX).kprobe_func)  -- a module's
    -- and the string form
    t = perfev.parse("kprobe/func=do_sys_openat2,offset=8,ret/k", FIX)
    assert.same({ 6, 1, "do_sys_openat2", 8, true }, { t.type, t.config, t.kprobe_func, t.probe_offset,
                                                       t.exclude_user })
  end)

  it("a missing kernel function names the nearest ones; data symbols are not functions", function()
    fails("no kernel function 'do_sys_opnat2' in spec/fixtures/sysfs%-hybrid/kallsyms; nearest: do_sys_openat2",
          perfev.kprobe, { func = "do_sys_opnat2" }, FIX)
    fails("no kernel function 'some_data_symbol'", perfev.kprobe, { func = "some_data_symbol" }, FIX)
    fails("needs exactly one of func", perfev.kprobe, { offset = 4 }, FIX)
    fails("takes offset with func, not with addr", perfev.kprobe, { addr = 1, offset = 4 }, FIX)
    fails("at position 8$", perfev.parse, "kprobe/func=nope_nope/", FIX)
  end)

  it("checks names against this machine's /proc/kallsyms #slow", function()
    if not u.exists(probe.KALLSYMS) then
      pending("no " .. probe.KALLSYMS)
      return
    end
    assert.is_true(probe.kallsyms_has("__x64_sys_getppid"))
    local ok, err = probe.kallsyms_has("__x64_sys_getpid_")
    assert.is_nil(ok)
    assert.matches("nearest: .*__x64_sys_getpid", err)
  end)

  it("counts a system call made by this process (pid 0)", function()
    if not type_of("kprobe") then
      pending("no kprobe PMU on this machine (" .. DEVICES .. "/kprobe): this kernel has no kprobes "
              .. "(CONFIG_KPROBES / CONFIG_KPROBE_EVENTS)")
      return
    end
    local t = perfev.kprobe { func = "__x64_sys_getppid" }
    assert.equal(type_of("kprobe"), t.type)
    assert.equal(2000, count(t, h.getppid_loop, 2000))
    assert.equal(500, count("kprobe/func=__x64_sys_getppid,ret/", h.getppid_loop, 500))
  end)

  it("a machine without kprobes is named, with the kernel options", function()
    fails("no kprobe PMU on this machine %(no spec/fixtures/sysfs/devices/kprobe/type%): the kernel was built "
          .. "without kprobes", perfev.kprobe, { func = "do_sys_openat2" }, { sysfs = "spec/fixtures/sysfs/devices" })
  end)
end)
