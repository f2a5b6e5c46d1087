-- perfev's one ELF64 reader, in Lua that runs on 5.3, 5.4 and LuaJIT (a
-- byte reader: no string.unpack needed, no bitwise operators). It serves
-- uprobes (a function's file offset) and perf report's symbolization and
-- build ids (read the way tools/perf/util/symbol-elf.c reads them).
--
--   local elf = require "perfev.elf"
--   local e = assert(elf.open("/usr/bin/ls"))
--   local sym = assert(e:find("main"))          -- .symtab, else .dynsym
--   local off = assert(e:offset(sym.value))     -- virtual address -> file offset
--   local off2, sym2 = elf.func_offset("/lib/x86_64-linux-gnu/libc.so.6", "malloc")
--   local id = elf.build_id("/usr/bin/lua5.4")  -- raw bytes of the GNU build id
--   local info = assert(elf.inspect(path))      -- type, build_id, symtab, dynsym, segments
--   local t = assert(elf.symbols(path, ".dynsym", info))  -- a core.symtab: t:find(v), t:name(i), #t
--
-- The uprobe PMU takes a file offset (probe_offset), not a virtual address:
-- a function's st_value is turned into one through the PT_LOAD program
-- header that maps it (offset = value - p_vaddr + p_offset), as perf probe
-- and bpftrace do. Stripped binaries keep their exported functions in
-- .dynsym, which is searched when .symtab is missing or lacks the name.
--
-- For perf report, samples are looked up by perf's map_ip (ip - map start
-- + pgoff, a file offset); as in perf, the symbols of an executable
-- (ET_EXEC) are moved to file offsets through their PT_LOAD segment, those
-- of a shared object or a PIE are kept as they are. Aliases at one address
-- are reduced to one as perf's choose_best_symbol does, and a symbol of
-- size 0 ends where the next one starts (symbols__fixup_end).
--
-- The symbol entries are parsed in C (csrc/symbols/elf.c), and perf
-- report's tables are kept in C (core.symtab, csrc/symbols/symtab.c: the
-- symbols sorted, perf's choices made, looked up by address) without a
-- Lua value per symbol.
--
-- Every function returns nil, message on failure (a missing file, not an
-- ELF file, a 32-bit ELF, a missing symbol with the nearest names). Both
-- byte orders are read. On LuaJIT, values above 2^53 (never an address of
-- user space) lose precision.
local core = require "perfev.core"
local M = {}

local SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOTE, SHT_NOBITS, SHT_DYNSYM = 2, 3, 4, 7, 8, 11
local STT_OBJECT, STT_FUNC, STT_GNU_IFUNC = 1, 2, 10
local SHF_EXECINSTR = 4
local SHN_UNDEF, SHN_XINDEX, PN_XNUM = 0, 0xffff, 0xffff
local NT_GNU_BUILD_ID = 3
local PT_LOAD, ET_REL, ET_EXEC = 1, 1, 2
local EHDR_SIZE, SHDR_SIZE, PHDR_SIZE, SYM_SIZE = 64, 64, 56, 24
-- symbol types that are code: FUNC, and GNU_IFUNC (a resolver perf probes too)
local CODE = { [STT_FUNC] = "func", [STT_GNU_IFUNC] = "ifunc" }
local BIND = { [0] = "local", [1] = "global", [2] = "weak" }
M.ET = { [1] = "relocatable", [2] = "executable", [3] = "shared object", [4] = "core" }

-- Little- and big-endian readers over a string (1-based positions).
local function reader(be)
  local byte = string.byte
  local r = { order = be and ">" or "<" }
  if be then
    function r.u16(s, p) local a, b = byte(s, p, p + 1); return a * 256 + b end
    function r.u32(s, p)
      local a, b, c, d = byte(s, p, p + 3)
      return ((a * 256 + b) * 256 + c) * 256 + d
    end
    function r.u64(s, p) return r.u32(s, p) * 4294967296 + r.u32(s, p + 4) end
  else
    function r.u16(s, p) local a, b = byte(s, p, p + 1); return b * 256 + a end
    function r.u32(s, p)
      local a, b, c, d = byte(s, p, p + 3)
      return ((d * 256 + c) * 256 + b) * 256 + a
    end
    function r.u64(s, p) return r.u32(s, p + 4) * 4294967296 + r.u32(s, p) end
  end
  return r
end
local READERS = { [false] = reader(false), [true] = reader(true) }

-- read_at(f, path, offset, size) -> exactly size bytes | nil, message
local function read_at(f, path, offset, size)
  if size <= 0 then return "" end
  local ok, err = f:seek("set", offset)
  if not ok then return nil, ("%s: cannot seek to %.0f: %s"):format(path, offset, tostring(err)) end
  local s = f:read(size)
  if not s or #s < size then
    return nil, ("%s: truncated ELF file (wanted %.0f bytes at offset %.0f)"):format(path, size, offset)
  end
  return s
end

-- the string at offset off of a string table
local function cstring(strings, off)
  local z = strings:find("\0", off + 1, true)
  return strings:sub(off + 1, (z or #strings + 1) - 1)
end

local Elf = {}
Elf.__index = Elf

-- own(self, method): the check at the top of every method (options.self:
-- one called with '.' instead of ':' gets its first argument as self).
local function own(self, method)
  if getmetatable(self) ~= Elf then require("perfev.options").self(self, Elf, "perfev.elf", method) end
end

-- Decodes one struct at p of s: fields is a list of { name, reader, offset }
-- (and fields.fmt: the same fields as string.unpack reads them, in order,
-- one call where Lua 5.3+ has it).
local native_unpack = rawget(string, "unpack")
local function struct(r, fields, s, p)
  local t = {}
  if native_unpack and fields.fmt then
    local v = { native_unpack(r.order .. fields.fmt, s, p) }
    for i, fd in ipairs(fields) do t[fd[1]] = v[i] end
    return t
  end
  for _, fd in ipairs(fields) do t[fd[1]] = r[fd[2]](s, p + fd[3]) end
  return t
end

local EHDR = { { "type", "u16", 16 }, { "machine", "u16", 18 }, { "version", "u32", 20 },
               { "entry", "u64", 24 }, { "phoff", "u64", 32 }, { "shoff", "u64", 40 },
               { "flags", "u32", 48 }, { "ehsize", "u16", 52 }, { "phentsize", "u16", 54 },
               { "phnum", "u16", 56 }, { "shentsize", "u16", 58 }, { "shnum", "u16", 60 },
               { "shstrndx", "u16", 62 } }
local SHDR = { { "name", "u32", 0 }, { "type", "u32", 4 }, { "flags", "u64", 8 }, { "addr", "u64", 16 },
               { "offset", "u64", 24 }, { "size", "u64", 32 }, { "link", "u32", 40 }, { "info", "u32", 44 },
               { "addralign", "u64", 48 }, { "entsize", "u64", 56 }, fmt = "I4I4I8I8I8I8I4I4I8I8" }
local PHDR = { { "type", "u32", 0 }, { "flags", "u32", 4 }, { "offset", "u64", 8 }, { "vaddr", "u64", 16 },
               { "paddr", "u64", 24 }, { "filesz", "u64", 32 }, { "memsz", "u64", 40 }, { "align", "u64", 48 },
               fmt = "I4I4I8I8I8I8I8I8" }

local function must(s, err) if not s then error(err, 0) end return s end

-- read_headers(f, path) -> elf: the ELF header, the section and program
-- headers and the section names; symbol tables are read on demand. Raises
-- (open() turns that into nil, message). Internal: open_file's.
local function read_headers(f, path)
  local ident, rerr = f:read(16)
  if not ident and rerr then error(("cannot read %s: %s"):format(path, rerr), 0) end
  if not ident or #ident < 16 or ident:sub(1, 4) ~= "\127ELF" then
    error(("%s is not an ELF file (no \\x7fELF magic)"):format(path), 0)
  end
  local class, data = ident:byte(5), ident:byte(6)
  if class == 1 then
    error(("%s is a 32-bit ELF file: only ELF64 binaries are supported"):format(path), 0)
  elseif class ~= 2 then
    error(("%s: unknown ELF class %d"):format(path, class), 0)
  end
  if data ~= 1 and data ~= 2 then error(("%s: unknown ELF byte order %d"):format(path, data), 0) end
  local be = data == 2
  local r = READERS[be]
  local h = struct(r, EHDR, ident .. must(read_at(f, path, 16, EHDR_SIZE - 16)), 1)
  local e = setmetatable({ path = path, order = be and ">" or "<", be = be, r = r, header = h,
                           sections = {}, segments = {}, etype = h.type,
                           type = M.ET[h.type] or ("type " .. h.type) }, Elf)
  -- section headers (with the extended numbering of files over 0xff00 sections)
  local shnum, shstrndx = h.shnum, h.shstrndx
  if h.shoff ~= 0 then
    if h.shentsize ~= SHDR_SIZE then error(path .. ": unexpected section header size " .. h.shentsize, 0) end
    local first = struct(r, SHDR, must(read_at(f, path, h.shoff, SHDR_SIZE)), 1)
    if shnum == 0 then shnum = first.size end
    if shstrndx == SHN_XINDEX then shstrndx = first.link end
    if shnum > 65536 then error(path .. ": too many sections", 0) end
    local all = must(read_at(f, path, h.shoff, shnum * SHDR_SIZE))
    for i = 0, shnum - 1 do
      e.sections[i + 1] = struct(r, SHDR, all, i * SHDR_SIZE + 1)
    end
    local strtab = e.sections[shstrndx + 1]
    if strtab and strtab.size < 2 ^ 24 then
      local names = must(read_at(f, path, strtab.offset, strtab.size))
      for _, s in ipairs(e.sections) do s.sname = cstring(names, s.name) end
    end
    if h.phnum == PN_XNUM then h.phnum = first.info end
  end
  -- program headers: the PT_LOAD segments map virtual addresses to the file
  if h.phoff ~= 0 and h.phnum > 0 then
    if h.phentsize ~= PHDR_SIZE then error(path .. ": unexpected program header size " .. h.phentsize, 0) end
    local all = must(read_at(f, path, h.phoff, h.phnum * PHDR_SIZE))
    for i = 0, h.phnum - 1 do
      local ph = struct(r, PHDR, all, i * PHDR_SIZE + 1)
      if ph.type == PT_LOAD then e.segments[#e.segments + 1] = ph end
    end
  end
  return e
end

-- A caller's wrong value, raised at its line naming the function (issue
-- 20: "bad argument #1 to 'open'" from inside this file).
local function refuse(fname, fmt, ...)
  local msg = ("perfev.elf.%s: " .. fmt):format(fname, ...)
  local ok, options = pcall(require, "perfev.options")   -- (needs the core, which this module may lack)
  if ok then options.raise(msg) end
  error(msg, 4)
end
local function check_path(path, fname)
  if type(path) ~= "string" then refuse(fname, "path must be a string, got %s", type(path)) end
end

-- open_file(path, fname) -> elf, f (open, for the caller to close) | nil, message
local function open_file(path, fname)
  check_path(path, fname)
  local f, msg = io.open(path, "rb")
  if not f then return nil, ("cannot open %s"):format(msg) end
  local ok, e = pcall(read_headers, f, path)
  if not ok then f:close(); return nil, e end
  return e, f
end

-- open(path) -> elf | nil, message
function M.open(path)
  local e, f = open_file(path, "open")
  if not e then return nil, f end
  f:close()
  return e
end

-- e:section(name) -> the section header named so | nil
function Elf:section(name)
  own(self, "section")
  for _, s in ipairs(self.sections) do
    if s.sname == name then return s end
  end
end

-- One byte per section header (index shndx + 1) for csrc/symbols/elf.c:
-- "\2" an executable section, "\1" another one.
local function section_kinds(e)
  if not e.kinds then
    local kinds = {}
    for i, x in ipairs(e.sections) do kinds[i] = x.flags % 8 >= SHF_EXECINSTR and "\2" or "\1" end
    e.kinds = table.concat(kinds)
  end
  return e.kinds
end

-- The string table of symbol table sec, or nil when sec cannot be one (no
-- string table, another entry size).
local function strings_of(e, sec)
  local strsec = e.sections[sec.link + 1]
  if not strsec or strsec.type ~= SHT_STRTAB or (sec.entsize ~= SYM_SIZE and sec.entsize ~= 0) then
    return nil
  end
  return strsec
end

-- Reads one symbol table section: { { value, size, bind, name, type } } of
-- its defined functions; with labels, also perf's labels (NOTYPE, visible,
-- in an executable section: elf_sym__is_label).
local function read_table(e, f, sec, labels)
  local strsec = strings_of(e, sec)
  if not strsec then return {} end
  local data, strings = must(read_at(f, e.path, sec.offset, sec.size)),
                        must(read_at(f, e.path, strsec.offset, strsec.size))
  return core.elf_symtab(data, strings, e.be, labels, section_kinds(e))
end

-- Whether the table sec defines a named data object: perf loads those
-- with the functions (elf_sym__filter), and so counts them among the
-- symbols a table gave.
local function defines_objects(e, f, sec)
  local data = read_at(f, e.path, sec.offset, sec.size)
  if not data or (sec.entsize ~= SYM_SIZE and sec.entsize ~= 0) then return false end
  local r = e.r
  for p = 1, #data - SYM_SIZE + 1, SYM_SIZE do
    if string.byte(data, p + 4) % 16 == STT_OBJECT and r.u32(data, p) ~= 0 and r.u16(data, p + 6) ~= SHN_UNDEF then
      return true
    end
  end
  return false
end

-- e:symbols() -> { symtab = list, dynsym = list }: the defined functions of
-- each table { name, value, size, kind, bind, table } (read once, then
-- cached on the object).
function Elf:symbols()
  own(self, "symbols")
  if self.syms then return self.syms end
  local f, msg = io.open(self.path, "rb")
  if not f then return nil, ("cannot open %s"):format(msg) end
  local syms = { symtab = {}, dynsym = {} }
  local ok, err = pcall(function()
    for _, sec in ipairs(self.sections) do
      local which = sec.type == SHT_SYMTAB and "symtab" or sec.type == SHT_DYNSYM and "dynsym"
      if which then
        local list = {}
        for i, s in ipairs(read_table(self, f, sec, false)) do
          list[i] = { name = s[4], value = s[1], size = s[2], kind = CODE[s[5]],
                      bind = BIND[s[3]] or "other", table = sec.sname }
        end
        syms[which] = list
      end
    end
  end)
  f:close()
  if not ok then return nil, err end
  self.syms = syms
  return syms
end

-- distance(a, b, max) and nearest(name, names, n): perfev.nearest's.
local nearest = require "perfev.nearest"
M.distance = nearest.distance
M.nearest = nearest.list

local RANK = { global = 1, weak = 2, ["local"] = 3, other = 4 }

-- e:find(name) -> symbol | nil, message. Looks in .symtab, then .dynsym;
-- a versioned name (malloc@@GLIBC_2.2.5) matches its bare name; among
-- several definitions the global one wins, then the first. The symbol
-- tells where it came from (sym.table) and how many definitions there were
-- (sym.count).
function Elf:find(name)
  own(self, "find")
  local syms, err = self:symbols()
  if not syms then return nil, err end
  local best, count
  for _, list in ipairs { syms.symtab, syms.dynsym } do
    count = 0
    for _, s in ipairs(list) do
      local bare = s.name:match("^([^@]+)@") or s.name
      if s.name == name or bare == name then
        count = count + 1
        if not best or RANK[s.bind] < RANK[best.bind] then best = s end
      end
    end
    if best then
      local found = {}
      for k, v in pairs(best) do found[k] = v end
      found.count = count
      return found
    end
  end
  local names, seen = {}, {}
  for _, list in ipairs { syms.symtab, syms.dynsym } do
    for _, s in ipairs(list) do
      local bare = s.name:match("^([^@]+)@") or s.name
      if not seen[bare] then
        seen[bare] = true
        names[#names + 1] = bare
      end
    end
  end
  local where = (#syms.symtab > 0 and ".symtab" or "") .. (#syms.symtab > 0 and #syms.dynsym > 0 and " and " or "")
                .. (#syms.dynsym > 0 and ".dynsym" or "")
  if #names == 0 then
    return nil, ("no function '%s' in %s: it has no symbol table (stripped of .symtab and without .dynsym)")
      :format(name, self.path)
  end
  local near = M.nearest(name, names)
  return nil, ("no function '%s' in %s (searched %s, %d functions)%s"):format(
    name, self.path, where, #names, #near > 0 and ("; nearest: " .. table.concat(near, ", ")) or "")
end

-- e:offset(vaddr) -> file offset | nil, message: through the PT_LOAD
-- segment whose file-backed part holds the address.
function Elf:offset(vaddr)
  own(self, "offset")
  local options = require "perfev.options"
  if not options.is_integer(vaddr) or vaddr < 0 then
    options.raisef("perfev.elf: e:offset: the address must be a non-negative integer, got %s", options.describe(vaddr))
  end
  for _, ph in ipairs(self.segments) do
    if vaddr >= ph.vaddr and vaddr - ph.vaddr < ph.filesz then
      return vaddr - ph.vaddr + ph.offset
    end
  end
  if #self.segments == 0 then
    return nil, ("%s is a %s without PT_LOAD segments: uprobes need an executable or a shared object")
      :format(self.path, self.type)
  end
  return nil, ("address 0x%x is in no PT_LOAD segment of %s"):format(vaddr, self.path)
end

-- func_offset(path, name) -> file offset, symbol | nil, message
function M.func_offset(path, name)
  check_path(path, "func_offset")
  local e, err = M.open(path)
  if not e then return nil, err end
  local sym, serr = e:find(name)
  if not sym then return nil, serr end
  local off, oerr = e:offset(sym.value)
  if not off then return nil, oerr end
  return off, sym
end

-- parse_notes(s, big_endian) -> the GNU build id (raw bytes) among the ELF
-- notes in s, or nil.
function M.parse_notes(s, big_endian)
  if type(s) ~= "string" then refuse("parse_notes", "expects the notes' bytes, a string, got %s", type(s)) end
  local r = READERS[big_endian and true or false]
  local pos = 1
  while pos + 12 <= #s + 1 do
    local namesz, descsz, ntype = r.u32(s, pos), r.u32(s, pos + 4), r.u32(s, pos + 8)
    local name_at = pos + 12
    local desc_at = name_at + math.ceil(namesz / 4) * 4
    local next_at = desc_at + math.ceil(descsz / 4) * 4
    if next_at > #s + 1 then return nil end
    if ntype == NT_GNU_BUILD_ID and s:sub(name_at, name_at + namesz - 1) == "GNU\0" then
      return s:sub(desc_at, desc_at + descsz - 1)
    end
    pos = next_at
  end
end

-- The build id in the note sections of an open file, or nil.
local function note_id(e, f)
  for _, sec in ipairs(e.sections) do
    if sec.type == SHT_NOTE and sec.size > 0 and sec.size < 65536 then
      local id = M.parse_notes(read_at(f, e.path, sec.offset, sec.size) or "", e.be)
      if id then return id end
    end
  end
end

-- build_id(path) -> raw bytes | nil, why
function M.build_id(path)
  local e, f = open_file(path, "build_id")
  if not e then return nil, f end
  local id = note_id(e, f)
  f:close()
  if not id then return nil, path .. ": no GNU build id note" end
  return id
end

-- finish(list) -> a core.symtab: the symbols of list ({ { start, size,
-- bind, name } }, e.g. a perf map's) sorted by start, the best symbol of
-- each start kept (perf's choose_best_symbol), every zero-size symbol
-- ended at the start of the next (the last at the end of its page + 4096).
function M.finish(list)
  if type(list) ~= "table" then refuse("finish", "expects a list of symbols, got %s", type(list)) end
  local t = core.symtab()
  local options = require "perfev.options"
  local int = options.is_integer
  for i, s in ipairs(list) do
    if type(s) ~= "table" or not int(s[1]) or not int(s[2]) or not int(s[3]) or type(s[4]) ~= "string" then
      refuse("finish", "entry %d must be { start, size, bind (integers), name }, got %s", i,
             options.describe(s))
    end
    t:add(s[1], s[2], s[3], s[4])
  end
  return t:finish()
end

-- perf 6.1's dso__synthesize_plt_symbols, added to t: "name@plt" for
-- each relocation of .rela.plt, in its order, one .plt entry (sh_entsize
-- bytes) each after the PLT's header, at file offsets (core.elf_add_plt).
-- (Later perfs add a ".plt" symbol and read .plt.sec; 6.1 does neither.)
local function add_plt(t, e)
  local plt, rel = e:section(".plt"), e:section(".rela.plt")
  -- a separate debug file (-dbg packages) keeps these headers as NOBITS,
  -- with no bytes: perf finds no relocations there (sh_type), nor here
  if not plt or not rel or rel.type ~= SHT_RELA or rel.entsize ~= 24 or plt.type == SHT_NOBITS
     or plt.entsize == 0 then
    return
  end
  local dynsym = e.sections[rel.link + 1]
  local strsec = dynsym and dynsym.type == SHT_DYNSYM and e.sections[dynsym.link + 1]
  if not strsec or strsec.type ~= SHT_STRTAB then return end
  -- a section past the end of the file: no stubs, as when read_at failed
  pcall(core.elf_add_plt, t, e.path, rel.offset, rel.size, dynsym.offset, dynsym.size, strsec.offset, strsec.size,
        e.be, plt.offset, plt.entsize)
end

-- inspect(path) -> { path, type, build_id, symtab, dynsym, segments } | nil,
-- why: what perf's symsrc__init learns of a candidate file, without its
-- symbols (type: the e_type number).
function M.inspect(path)
  local e, f = open_file(path, "inspect")
  if not e then return nil, f end
  local info = { path = path, type = e.etype, build_id = note_id(e, f), segments = e.segments }
  for _, s in ipairs(e.sections) do
    if s.type == SHT_SYMTAB then info.symtab = true end
    if s.type == SHT_DYNSYM then info.dynsym = true end
  end
  f:close()
  return info
end

-- symbols(path, which, runtime, plt_from) -> a core.symtab (t:find(v) ->
-- i, t:name(i), t:start(i), t:stop(i), #t) | nil, why: the functions and
-- labels of section `which` (".symtab" or ".dynsym") of path, as finish()
-- keeps them. For an executable or relocatable file (perf's
-- adjust_symbols) each value is moved to its file offset through the
-- PT_LOAD segment of the runtime file (an inspect() table) that holds it,
-- as perf does; a shared object's values are kept. plt_from: the file
-- whose PLT stubs are added as "name@plt" symbols (the runtime file, as
-- perf does), when the table has symbols of its own.
function M.symbols(path, which, runtime, plt_from)
  local e, f = open_file(path, "symbols")
  if not e then return nil, f end
  local want = which == ".symtab" and SHT_SYMTAB or SHT_DYNSYM
  local segs
  if e.etype == ET_EXEC or e.etype == ET_REL then segs = (runtime or {}).segments or {} end
  local t = core.symtab()
  local ok, err, any = true, nil, false
  for _, s in ipairs(e.sections) do
    if s.type == want then
      local n
      local strsec = strings_of(e, s)
      ok, n = true, 0
      if strsec then
        ok, n = pcall(core.elf_add_symbols, t, path, s.offset, s.size, strsec.offset, strsec.size, e.be, true,
                      section_kinds(e), segs)
      end
      if not ok then err = n end
      any = ok and (n > 0 or defines_objects(e, f, s))
      break
    end
  end
  f:close()
  if not ok then return nil, err end
  -- perf synthesizes the PLT's names only when the table gave symbols
  -- (dso__load: ret > 0; functions or data objects): a stripped executable
  -- whose .dynsym holds only imports keeps its PLT stubs unnamed
  if plt_from and any then
    local pe, pf = open_file(plt_from, "symbols")
    if pe then
      pf:close()
      add_plt(t, pe)
    end
  end
  return t:finish()
end

return M
