-- perfev.elf: the ELF64 reader uprobes use. Checked against readelf and nm
-- (binutils) and against the file offsets `perf probe -n -v -x BIN FUNC`
-- computes, on the spec helper (with .symtab), the system C library
-- (stripped: .dynsym only), a non-PIE executable built here with gcc, a
-- stripped copy of the helper, and on synthetic ELF files of both byte
-- orders built below.
local elf = require "perfev.elf"
local u = require "spec.support.util"
local compat = require "perfev.compat"

local have = u.have

local HELPER = assert(package.searchpath("bphelper", package.cpath), "bphelper.so not on package.cpath")
local LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
if not u.exists(LIBC) then LIBC = "/lib/x86_64-linux-gnu/libc.so.6" end


-- perf probe's file offset for func in bin (dry run: nothing is written)
local function perf_offset(bin, func)
  local out = u.sh(("perf probe -n -v -x '%s' -a '%s' 2>&1"):format(bin, func))
  local hex = out:match("Writing event: %S+ %S+:0x(%x+)")
  return hex and tonumber(hex, 16), out
end

-- nm's value for a defined function symbol (T/t/W/i) of bin
local function nm_value(bin, func, dynamic)
  local out = u.sh(("nm %s '%s' 2>/dev/null"):format(dynamic and "-D" or "", bin))
  for line in out:gmatch("[^\n]+") do
    local v, kind, name = line:match("^(%x+) (%a) (%S+)$")
    if name and (name == func or name:match("^([^@]+)@") == func) and kind:match("[TtWi]") then
      return tonumber(v, 16)
    end
  end
end

-- A synthetic ELF64 shared object: one PT_LOAD mapping file offset 0x1000
-- at vaddr 0x401000, and a .symtab with three functions and an object.
-- str_off: the .strtab's offset in its section header (one past the end
-- of the file: a truncated file).
local function synthetic(order, str_off)
  local p = function(fmt, ...) return compat.pack(order .. fmt, ...) end
  local strtab = "\0alpha\0beta\0gamma\0datum\0"
  local shstr = "\0.symtab\0.strtab\0.shstrtab\0"
  local function sym(name, info, shndx, value, size) return p("I4BBI2I8I8", name, info, 0, shndx, value, size) end
  local syms = sym(0, 0, 0, 0, 0) .. sym(1, 0x12, 1, 0x401100, 32) .. sym(7, 0x22, 1, 0x401200, 16)
               .. sym(12, 0x02, 1, 0x401300, 8) .. sym(18, 0x11, 1, 0x402000, 8)
  local body_at = 0x40 + 0x38                     -- after the ELF header and one program header
  local sym_at = body_at
  local str_at = sym_at + #syms
  local shstr_at = str_at + #strtab
  local sh_at = compat.band(shstr_at + #shstr + 7, compat.bnot(7))
  local ident = "\127ELF" .. string.char(2, order == "<" and 1 or 2, 1, 0) .. ("\0"):rep(8)
  local ehdr = ident .. p("I2I2I4I8I8I8I4I2I2I2I2I2I2", 3, 62, 1, 0, 0x40, sh_at, 0, 64, 56, 1, 64, 4, 3)
  local phdr = p("I4I4I8I8I8I8I8I8", 1, 5, 0x1000, 0x401000, 0x401000, 0x2000, 0x2000, 0x1000)
  local function shdr(name, type, off, size, link, entsize)
    return p("I4I4I8I8I8I8I4I4I8I8", name, type, 0, 0, off, size, link, 0, 8, entsize)
  end
  local shdrs = shdr(0, 0, 0, 0, 0, 0) .. shdr(1, 2, sym_at, #syms, 2, 24)
                .. shdr(9, 3, str_off or str_at, #strtab, 0, 0)
                .. shdr(17, 3, shstr_at, #shstr, 0, 0)
  local img = ehdr .. phdr .. syms .. strtab .. shstr
  return img .. ("\0"):rep(sh_at - #img) .. shdrs
end

local function write(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
  return path
end

describe("perfev.elf", function()
  local dir
  setup(function() dir = u.tmpdir() end)
  teardown(function() u.rmdir(dir) end)

  it("reads the section and program headers as readelf does", function()
    if not have("readelf") then
      pending("readelf (binutils) is not installed")
      return
    end
    local e = assert(elf.open(HELPER))
    assert.equal("shared object", e.type)
    local names = {}
    for _, s in ipairs(e.sections) do if s.sname ~= "" then names[#names + 1] = s.sname end end
    local want = {}
    for name in u.sh("readelf -SW '" .. HELPER .. "'"):gmatch("%]%s+(%.%S+)") do want[#want + 1] = name end
    assert.is_true(#want > 10)
    assert.same(want, names)
    local loads = {}
    for off, va, fsz in u.sh("readelf -lW '" .. HELPER .. "'"):gmatch("LOAD%s+0x(%x+) 0x(%x+) 0x%x+ 0x(%x+)") do
      loads[#loads + 1] = { tonumber(off, 16), tonumber(va, 16), tonumber(fsz, 16) }
    end
    assert.equal(#loads, #e.segments)
    for i, ph in ipairs(e.segments) do assert.same(loads[i], { ph.offset, ph.vaddr, ph.filesz }) end
  end)

  it("finds functions with nm's values, in .symtab and in .dynsym", function()
    if not have("nm") then
      pending("nm (binutils) is not installed")
      return
    end
    local e = assert(elf.open(HELPER))
    for _, f in ipairs { "perfev_probe_target", "luaopen_bphelper", "h_probe_loop", "h_getppid_loop" } do
      local sym = assert(e:find(f))
      assert.equal(nm_value(HELPER, f), sym.value, f)
      assert.equal(".symtab", sym.table, f)
    end
    local libc = assert(elf.open(LIBC))
    for _, f in ipairs { "malloc", "getppid", "syscall", "memcpy" } do
      local sym = assert(libc:find(f))
      assert.equal(nm_value(LIBC, f, true), sym.value, f)
    end
  end)

  it("gives the file offsets perf probe computes", function()
    if not have("perf") then
      pending("perf is not installed (package linux-perf)")
      return
    end
    local cases = { { HELPER, "perfev_probe_target" }, { HELPER, "h_probe_loop" }, { LIBC, "malloc" },
                    { LIBC, "getppid" }, { LIBC, "syscall" } }
    if have("gcc") then
      local src = write(dir .. "/np.c", "int f1(int x){return x*3;}\nint f2(int x){return f1(x)+1;}\n"
                        .. "int main(int c,char**v){(void)v;return f2(c);}\n")
      local _, ok = u.sh(("gcc -O0 -no-pie -o '%s/np' '%s' 2>&1"):format(dir, src))
      assert.is_true(ok)
      cases[#cases + 1] = { dir .. "/np", "f1" }
      cases[#cases + 1] = { dir .. "/np", "f2" }
      cases[#cases + 1] = { dir .. "/np", "main" }
    end
    for _, c in ipairs(cases) do
      local want, out = perf_offset(c[1], c[2])
      assert(want, "perf probe gave no offset for " .. c[2] .. ":\n" .. out)
      local off, sym = elf.func_offset(c[1], c[2])
      assert.equal(want, off, c[2])
      assert.is_table(sym)
    end
    -- a non-PIE executable: the offset is not the virtual address
    if have("gcc") then
      local off, sym = elf.func_offset(dir .. "/np", "f1")
      assert.is_true(sym.value > off)
      assert.equal("executable", assert(elf.open(dir .. "/np")).type)
    end
  end)

  it("uses .dynsym in a stripped binary, and says which tables it searched", function()
    if not have("strip") then
      pending("strip (binutils) is not installed")
      return
    end
    local copy = dir .. "/stripped.so"
    local _, ok = u.sh(("strip --strip-all -o '%s' '%s' 2>&1"):format(copy, HELPER))
    assert.is_true(ok)
    local e = assert(elf.open(copy))
    assert.is_nil(e:section(".symtab"))
    local sym = assert(e:find("perfev_probe_target"))
    assert.equal(".dynsym", sym.table)
    assert.equal(elf.func_offset(HELPER, "perfev_probe_target"), (elf.func_offset(copy, "perfev_probe_target")))
    -- a static function is gone with .symtab
    local none, err = e:find("h_probe_loop")
    assert.is_nil(none)
    assert.matches("no function 'h_probe_loop' in .-stripped%.so %(searched %.dynsym, %d+ functions%)", err)
  end)

  -- perf 6.1 names the PLT stubs "name@plt" only when the file's own
  -- table gave symbols (dso__load: ret > 0, functions or data objects).
  -- Seen on the same system-wide perf.data file: perf names dash's stubs
  -- (its .dynsym defines environ, an object) and leaves those of binutils'
  -- stripped addr2line (imports only) as addresses; perfev report gives
  -- the same rows.
  it("names PLT stubs name@plt only when the table has symbols of its own, as perf", function()
    if not (have("gcc") and have("strip")) then pending("gcc and strip (binutils) are needed") return end
    local src = dir .. "/plt.c"
    local f = assert(io.open(src, "w"))
    f:write("#include <string.h>\nvolatile unsigned long sink;\n" ..
            "int main(int c, char **v) { sink = strlen(v[0]) + (unsigned long)c; return 0; }\n")
    f:close()
    local bin = dir .. "/plt"
    local _, ok = u.sh(("gcc -O1 -fno-builtin -o '%s' '%s' && strip --strip-all '%s' 2>&1"):format(bin, src, bin))
    assert.is_true(ok)
    local function plt_names(path, runtime)
      local t = assert(elf.symbols(path, ".dynsym", assert(elf.inspect(runtime or path)), runtime or path))
      local out = {}
      for i = 1, #t do
        if t:name(i):match("@plt$") then out[#out + 1] = t:name(i) end
      end
      return out
    end
    -- only imports in .dynsym: no symbol, no stub named
    assert.same({}, plt_names(bin))
    -- a table with a data object: the stubs are named, strlen among them
    local dash = "/usr/bin/dash"
    if u.exists(dash) and u.sh("readelf --dyn-syms -W " .. dash):match("OBJECT%s+%S+%s+%S+%s+%d+") then
      local names = table.concat(plt_names(dash), " ")
      assert.matches("strlen@plt", names, 1, true)
    end
  end)

  it("reads synthetic ELF64 files of both byte orders", function()
    for _, order in ipairs { "<", ">" } do
      local path = write(dir .. "/synth" .. (order == "<" and "le" or "be"), synthetic(order))
      local e = assert(elf.open(path))
      assert.equal("shared object", e.type)
      assert.same({ ".symtab", ".strtab", ".shstrtab" },
                  { e.sections[2].sname, e.sections[3].sname, e.sections[4].sname })
      local syms = assert(e:symbols())
      assert.equal(3, #syms.symtab)                  -- the object is not a function
      local a, b, g = e:find("alpha"), e:find("beta"), e:find("gamma")
      assert.same({ 0x401100, "global", 32 }, { a.value, a.bind, a.size })
      assert.same({ 0x401200, "weak" }, { b.value, b.bind })
      assert.same({ 0x401300, "local" }, { g.value, g.bind })
      assert.equal(0x1100, e:offset(a.value))
      assert.equal(0x1300, (elf.func_offset(path, "gamma")))
      local none, err = e:find("datum")
      assert.is_nil(none)
      assert.matches("no function 'datum'", err, 1, true)
      local off, oerr = e:offset(0x500000)
      assert.is_nil(off)
      assert.matches("address 0x500000 is in no PT_LOAD segment", oerr, 1, true)
      -- perf report's table (the sections mapped in C): the functions,
      -- sorted, each ending at its size; the object left out
      local t = assert(elf.symbols(path, ".symtab"))
      assert.equal(3, #t)
      assert.same({ "alpha", 0x401100, 0x401120 }, { t:name(1), t:start(1), t:stop(1) })
      assert.same({ "beta", "gamma" }, { t:name(2), t:name(3) })
      assert.same({ 1, 2, 3 }, { t:find(0x40111f), t:find(0x401200), t:find(0x401307) })
      assert.is_nil(t:find(0x401308))
      -- a string table past the end of the file: refused, saying so
      local bad = write(dir .. "/trunc" .. (order == "<" and "le" or "be"), synthetic(order, 0x100000))
      local no_t, terr = elf.symbols(bad, ".symtab")
      assert.is_nil(no_t)
      assert.matches("trunc%a+: truncated ELF file %(wanted 24 bytes at offset 1048576%)", terr)
    end
  end)

  -- A table's symbols as { starts, ends, names, n }, by its methods.
  local function dump(t)
    local out = { starts = {}, ends = {}, names = {}, n = #t }
    for i = 1, #t do out.starts[i], out.ends[i], out.names[i] = t:start(i), t:stop(i), t:name(i) end
    return out
  end

  -- perf's rules over a list { { start, size, bind, name } }, in Lua: the
  -- reference the C table (csrc/symbols/symtab.c) is checked against.
  -- Sorted by start, equal starts in the list's order (perf's rb-tree);
  -- at one start the best kept (choose_best_symbol: sized, then not weak,
  -- then global, then fewer leading underscores, then the longer name); a
  -- zero size ends at the next start, the last a page past its own page.
  local function reference(list)
    local order = {}
    for i, s in ipairs(list) do order[i] = { s = s, i = i } end
    table.sort(order, function(a, b)
      if a.s[1] ~= b.s[1] then return a.s[1] < b.s[1] end
      return a.i < b.i
    end)
    local function better(a, b)
      if (b[2] == 0) ~= (a[2] == 0) then return a[2] > 0 end
      if (a[3] == 2) ~= (b[3] == 2) then return b[3] == 2 end
      if (a[3] == 1) ~= (b[3] == 1) then return a[3] == 1 end
      local ua, ub = #a[4]:match("^_*"), #b[4]:match("^_*")
      if ua ~= ub then return ua < ub end
      if #a[4] ~= #b[4] then return #a[4] > #b[4] end
      return true
    end
    local kept = {}
    for _, o in ipairs(order) do
      local last = kept[#kept]
      if last and last[1] == o.s[1] then
        if not better(last, o.s) then kept[#kept] = o.s end
      else
        kept[#kept + 1] = o.s
      end
    end
    local out = { starts = {}, ends = {}, names = {}, n = #kept }
    for i, s in ipairs(kept) do
      local stop = s[1] + s[2]
      if s[2] == 0 then stop = kept[i + 1] and kept[i + 1][1] or math.ceil(s[1] / 4096) * 4096 + 4096 end
      out.starts[i], out.ends[i], out.names[i] = s[1], stop, s[4]
    end
    return out
  end

  it("keeps each table's symbols as perf does, in C (every library of the system against perf's rules in Lua)",
     function()
    local core = require "perfev.core"
    -- perf's rules on made-up symbols
    local list = { { 0x2000, 0, 2, "__w" }, { 0x1000, 16, 1, "b" }, { 0x1000, 16, 1, "_a" },
                   { 0x1000, 0, 1, "c" }, { 0x1800, 0, 0, "l" }, { 0x1800, 8, 2, "weak" } }
    local want = { starts = { 0x1000, 0x1800, 0x2000 }, ends = { 0x1010, 0x1808, 0x3000 },
                   names = { "b", "weak", "__w" }, n = 3 }
    local t = elf.finish(list)
    assert.same(want, dump(t))
    assert.same(want, reference(list))
    -- lookups: the symbol whose [start, stop) holds the address
    assert.same({ 1, 1, 2, 3, 3 }, { t:find(0x1000), t:find(0x100f), t:find(0x1807), t:find(0x2000), t:find(0x2fff) })
    assert.is_nil(t:find(0xfff))
    assert.is_nil(t:find(0x1010))   -- between b's end and weak's start
    assert.is_nil(t:find(0x3000))
    assert.equal(3, t:index("__w"))
    assert.is_nil(t:index("l"))     -- dropped: weak has a size
    assert.has_error(function() t:add(1, 2, 1, "x") end, "perfev.symtab: the table is finished: nothing can be added")
    assert.has_error(function() core.symtab():find(1) end, "perfev.symtab: the table is not finished (t:finish())")
    assert.has_error(function() t:name(4) end)
    assert.matches("perfev.elf.finish: entry 1 must be { start, size, bind %(integers%), name }",
                   select(2, pcall(elf.finish, { { 1, 2, 3 } })))
    assert.is_nil(elf.finish({}):find(0))
    -- the system's tables: symbol by symbol as the rules in Lua keep the
    -- entries perfev.elf reads (core.elf_symtab, the list e:symbols() uses)
    local tables, syms = 0, 0
    local p = io.popen("find /usr/lib/x86_64-linux-gnu -maxdepth 1 -name '*.so*' -type f -size +20k | head -150")
    for path in p:lines() do
      local e = elf.open(path)
      for _, which in ipairs { ".symtab", ".dynsym" } do
        local sec = e and e:section(which)
        local strsec = sec and e.sections[sec.link + 1]
        if sec and strsec and e.etype == 3 then
          local f = assert(io.open(path, "rb"))
          f:seek("set", sec.offset)
          local data = f:read(sec.size)
          f:seek("set", strsec.offset)
          local strings = f:read(strsec.size)
          f:close()
          local kinds = {}
          for i, x in ipairs(e.sections) do kinds[i] = x.flags % 8 >= 4 and "\2" or "\1" end
          local entries = core.elf_symtab(data, strings, e.be, true, table.concat(kinds))
          local got = dump(assert(elf.symbols(path, which)))
          tables, syms = tables + 1, syms + got.n
          assert.same(reference(entries), got, path .. " " .. which)
        end
      end
    end
    p:close()
    assert.is_true(tables > 20 and syms > 10000, ("%d tables, %d symbols"):format(tables, syms))
  end)

  it("suggests the nearest names for a missing function", function()
    local none, err = elf.func_offset(HELPER, "perfev_probe_targte")
    assert.is_nil(none)
    assert.matches("no function 'perfev_probe_targte' in .+; nearest: perfev_probe_target", err)
    assert.same({ "malloc" }, elf.nearest("mallco", { "calloc", "malloc", "free", "mmap" }, 2))
    assert.same({ "calloc", "malloc" }, elf.nearest("caloc", { "calloc", "malloc", "free", "mmap" }, 2))
    assert.same({ "getppid" }, elf.nearest("ppid", { "getppid", "getpid", "open" }, 1))
    assert.equal(2, elf.distance("kitten", "sitten2", 5))
  end)

  it("refuses what it cannot read, saying why", function()
    local cases = {
      { write(dir .. "/text", "hello, not an ELF file\n"), "is not an ELF file" },
      { write(dir .. "/elf32", "\127ELF\1\1\1" .. ("\0"):rep(45)), "is a 32%-bit ELF file: only ELF64" },
      { write(dir .. "/short", "\127ELF\2\1\1" .. ("\0"):rep(13)), "truncated ELF file" },
      { write(dir .. "/empty", ""), "is not an ELF file" },
      { dir .. "/missing", "cannot open .*missing: No such file or directory" },
      { dir, "cannot read .+: Is a directory" },
    }
    for _, c in ipairs(cases) do
      local e, err = elf.open(c[1])
      assert.is_nil(e, c[1])
      assert.matches(c[2], err)
    end
    assert.has_error(function() elf.open(42) end, "perfev.elf.open: path must be a string, got number")
  end)
end)
