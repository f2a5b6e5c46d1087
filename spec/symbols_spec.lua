-- perfev.symbols: addresses, maps, ELF symbol tables (with build ids),
-- perf-PID.map files and kallsyms, checked against what the files and
-- the kernel hold on this machine (nm, /proc/self/maps, /proc/kallsyms).
local symbols = require "perfev.symbols"
local kallsyms = require "perfev.symbols.kallsyms"
local elfsyms = require "perfev.elf"
local shell = require "spec.support.shell"

local function write(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

local function copy(from, to)
  write(to, assert(shell.read_file(from)))
end

-- The r-xp mapping of a file in this process: start, pgoff
local function exec_map(pattern)
  for line in io.lines("/proc/self/maps") do
    local a, perms, off, path = line:match("^(%x+)%-%x+ (%S+) (%x+) %S+ %d+%s*(.*)$")
    if a and perms:sub(3, 3) == "x" and path:match(pattern) then
      return tonumber(a, 16), tonumber(off, 16), path
    end
  end
end

-- st_value of a defined dynamic symbol, from nm
local function nm_value(path, name)
  local out = shell.sh(("nm -D --defined-only %s 2>/dev/null"):format(shell.quote(path)))
  for v, n in out:gmatch("(%x+) %a ([^\n]+)") do
    if n == name or n:match("^([^@]+)") == name then return tonumber(v, 16) end
  end
end

local function own_pid()
  return tonumber(shell.read_file("/proc/self/stat"):match("^(%d+)"))
end

describe("perfev.symbols", function()
  local dir
  setup(function() dir = shell.tmpdir() end)

  -- kallsyms.open of a file of these lines, written in dir
  local function kallsyms_file(name, lines)
    write(dir .. "/" .. name, table.concat(lines, "\n") .. "\n")
    return assert(kallsyms.open(dir .. "/" .. name))
  end
  teardown(function() shell.rmdir(dir) end)

  it("splits addresses into user, kernel, context markers and prints them as perf", function()
    local S = symbols
    assert.same({ "u", 0x7f0012345678 }, { S.split(0x7f0012345678) })
    local space, v = S.split(-2130706432)                 -- 0xffffffff81000000
    assert.same({ "k", 0x7fff81000000 }, { space, v })
    assert.equal("0xffffffff81000000", S.hex(space, v))
    assert.same({ "c", -128 }, { S.split(-128) })          -- PERF_CONTEXT_KERNEL
    assert.equal("0x00007f0012345678", S.hex("u", 0x7f0012345678))
    assert.equal("0000000000000000", S.hex("u", 0))        -- C's %#x prints no 0x for 0
    assert.equal(0x7fff81000000, S.kernel_v("ffffffff81000000"))
    assert.is_nil(S.kernel_v("0000000000000000"))
  end)

  it("names a function of libc mapped in this process, from /proc/self/maps", function()
    local start, pgoff, path = exec_map("/libc%.so")
    if not start then pending("no libc mapping in /proc/self/maps"); return end
    local value = nm_value(path, "malloc")
    if not value then pending("nm (binutils) is not installed"); return end
    local S = symbols.new()
    assert.is_true(S:proc(own_pid()))
    local info = assert(elfsyms.inspect(path))
    -- a shared object keeps st_value: the address is start + value - pgoff
    -- when its text segment is mapped at its file offset (as Debian's libc)
    local seg
    for _, ph in ipairs(info.segments) do
      if value >= ph.vaddr and value < ph.vaddr + ph.memsz then seg = ph end
    end
    assert(seg and seg.vaddr == seg.offset, "libc's text segment is not at its file offset")
    local e = S:resolve(own_pid(), start + value - pgoff + 3, "user")
    assert.equal("malloc", e.name)
    assert.equal(path:match("[^/]+$"), e.dso.short)
    assert.equal("malloc", symbols.format(e))
  end)

  it("takes symbols from perf's build-id cache when the file changed since the recording", function()
    local lua = "/usr/bin/lua5.4"
    local value = nm_value(lua, "lua_pushnumber")
    if not value then pending("nm or /usr/bin/lua5.4 missing"); return end
    local id = assert(elfsyms.build_id(lua))
    -- "the file changed": another ELF file at the recorded path
    local path = dir .. "/prog"
    copy("/bin/true", path)
    assert.are_not.equal(id, elfsyms.build_id(path))
    local function lookup(opts)
      local S = symbols.new(opts)
      S:add_map(7, 0x555500000000, 0x555500100000, 0, path, 5)
      return S:resolve(7, 0x555500000000 + value, "user")
    end
    local ids = { { filename = path, build_id = id } }
    local e = lookup { build_ids = ids, debug_dir = dir .. "/none" }
    assert.is_nil(e.name)                                   -- as perf: a mismatched build id
    assert.equal(("0x%016x"):format(value), symbols.format(e))
    local h = symbols.tohex(id)
    local cache = ("%s/.debug/.build-id/%s/%s"):format(dir, h:sub(1, 2), h:sub(3))
    assert(shell.sh(("mkdir -p %s && echo ok"):format(shell.quote(cache))):match("ok"))
    copy(lua, cache .. "/elf")
    e = lookup { build_ids = ids, debug_dir = dir .. "/.debug" }
    assert.equal("lua_pushnumber", e.name)
    assert.equal("prog", e.dso.short)
  end)

  it("names anonymous executable memory from /tmp/perf-PID.map", function()
    write(dir .. "/perf-4242.map", "7f0000001000 10 lua:main@x.lua:1\n7f0000001010 20 lua:f@x.lua:10\n")
    local S = symbols.new { perfmap_dir = dir }
    S:add_map(4242, 0x7f0000000000, 0x7f0000100000, 0, "//anon", 5)
    local e = S:resolve(4242, 0x7f000000101f, "user")
    assert.equal("lua:f@x.lua:10", e.name)
    assert.equal("[JIT] tid 4242", e.dso.short)
    e = S:resolve(4242, 0x7f0000002000, "user")             -- mapped, not in the map file
    assert.is_nil(e.name)
    assert.equal("0x00007f0000002000", symbols.format(e))  -- anon maps are not offset
    e = S:resolve(4242, 0x10, "user")
    assert.equal("[unknown]", e.dso.short)
    e = S:resolve(9999, 0x7f000000101f, "user")            -- a process without maps
    assert.equal("[unknown]", e.dso.short)
  end)

  it("cuts overlapped maps and copies a parent's maps to a forked process", function()
    local S = symbols.new { perfmap_dir = dir }
    write(dir .. "/perf-1.map", "1000 1000 low\n3000 1000 high\n")
    S:add_map(1, 0x1000, 0x5000, 0, "//anon", 5)
    S:add_map(1, 0x2000, 0x3000, 0, "/nonexistent/lib.so", 5)
    assert.equal("low", S:resolve(1, 0x1800, "user").name)
    assert.equal("lib.so", S:resolve(1, 0x2800, "user").dso.short)
    assert.equal("high", S:resolve(1, 0x3800, "user").name)
    S:fork { pid = 2, ppid = 1, tid = 2, ptid = 1 }
    assert.equal("lib.so", S:resolve(2, 0x2800, "user").dso.short)
    -- the child's copy of the anonymous map keeps its dso, as perf's maps__clone
    assert.equal("[JIT] tid 1", S:resolve(2, 0x1800, "user").dso.short)
  end)

  it("reads kallsyms as perf: T/W/D/B symbols, the last name at an address, ends, modules", function()
    local k = kallsyms_file("kallsyms", {
      "ffffffff81000000 T _stext",
      "ffffffff81000000 T startup_64",
      "ffffffff81000100 r some_rodata",
      "ffffffff81000200 t local_fn",
      "ffffffff81000300 W weak_fn",
      "ffffffffc0000000 t mod_fn\t[mymod]",
      "ffffffffc0000400 T mod_fn2\t[mymod]",
    })
    local function name(addr)
      local _, n, _, m = k:find(assert(symbols.kernel_v(addr)))
      return n, m
    end
    assert.equal("startup_64", name("ffffffff81000000"))
    assert.equal("startup_64", name("ffffffff81000150"))   -- r is not a symbol perf keeps
    assert.equal("local_fn", name("ffffffff810002ff"))
    assert.equal("weak_fn", name("ffffffff81000300"))
    -- the kernel's last symbol before the modules: to the end of the page after it
    assert.equal("weak_fn", name("ffffffff81001fff"))
    assert.is_nil(name("ffffffff81002000"))
    assert.same({ "mod_fn", "mymod" }, { name("ffffffffc0000010") })
    assert.same({ "mod_fn2", "mymod" }, { name("ffffffffc0000400") })
    assert.is_nil(name("ffffffff80ffffff"))
  end)

  it("finds this kernel's symbols in /proc/kallsyms when it is readable", function()
    local f = io.open("/proc/kallsyms")
    local first = f and f:read("l")
    if f then f:close() end
    if not first or first:match("^0+ ") then pending("/proc/kallsyms hides addresses (kptr_restrict)"); return end
    local k = assert(kallsyms.open("/proc/kallsyms"))
    local checked = 0
    local prev
    for line in io.lines("/proc/kallsyms") do
      local a, t, n = line:match("^(%x+) (%a) (%S+)$")
      -- a function with one name, followed by a symbol at another address
      if prev and a and prev.a ~= a and prev.t:upper() == "T" and not prev.dup then
        local _, got = k:find(symbols.kernel_v(prev.a))
        assert.equal(prev.n, got)
        checked = checked + 1
        if checked >= 200 then break end
      end
      if a then
        local dup = prev and prev.a == a
        if dup then prev.dup = true end
        prev = { a = a, t = t, n = n, dup = false }
      end
    end
    assert.is_true(checked >= 200)
  end)

  it("maps a regular kallsyms file and reads /proc/kallsyms: the same symbols either way", function()
    local f = io.open("/proc/kallsyms")
    local first = f and f:read("l")
    if f then f:close() end
    if not first or first:match("^0+ ") then pending("/proc/kallsyms hides addresses (kptr_restrict)"); return end
    local copy_path = dir .. "/kallsyms.copy"
    copy("/proc/kallsyms", copy_path)
    local core = require "perfev.core"
    local mapped, read = assert(core.kallsyms_map(copy_path)), assert(core.kallsyms_map("/proc/kallsyms"))
    assert.matches("mapped", tostring(mapped), 1, true)
    assert.matches("read", tostring(read), 1, true)
    local km, kr = assert(kallsyms.open(copy_path)), assert(kallsyms.open("/proc/kallsyms"))
    local n, i = 0, 0
    for line in io.lines(copy_path) do
      i = i + 1
      local a = line:match("^(%x+) [TtDdBbWw] ")
      if a and i % 97 == 0 then
        local v = symbols.kernel_v(a)
        assert.same({ km:find(v) }, { kr:find(v) })
        assert.same({ km:find(v + 1) }, { kr:find(v + 1) })
        n = n + 1
      end
    end
    assert.is_true(n > 100, n)
    assert.equal(km:core_limit(), kr:core_limit())
    mapped:close()
    assert.is_true(mapped:closed())
    assert.has_error(function() mapped:find(0) end, "perfev.kallsyms: the file is closed")
    read:close()
    km:close()
    kr:close()
  end)

  it("says which kernel symbols are data (D, B: perf's objects) and where the last one ends", function()
    local k = kallsyms_file("kallsyms.data", {
      "ffffffff81000000 T _stext",
      "ffffffff81000100 T fn",
      "ffffffff82000000 D some_data",
      "ffffffff82000100 b some_bss",
      "ffffffff82000200 r some_rodata",
    })
    local function find(addr)
      local _, name, _, _, object = k:find(symbols.kernel_v(addr))
      return name, object
    end
    assert.same({ "fn", false }, { find("ffffffff81000110") })
    assert.same({ "some_data", true }, { find("ffffffff82000010") })
    assert.same({ "some_bss", true }, { find("ffffffff82000300") })
    -- no modules: the last kept symbol ends one page after its own page
    assert.equal(symbols.kernel_v("ffffffff82002000"), k:core_limit())
    assert.is_nil(k:find(symbols.kernel_v("ffffffff82002000")))
    k:close()
  end)

  it("demangles C++ names as perf prints them (no parameters)", function()
    if not shell.have("c++filt") then pending("c++filt (binutils) is not installed"); return end
    local e = { { name = "_ZNSt6localeaSERKS_" }, { name = "_Znwm" }, { name = "main" } }
    symbols.demangle(e)
    assert.same({ "std::locale::operator=", "operator new", "main" }, { e[1].name, e[2].name, e[3].name })
  end)
end)
