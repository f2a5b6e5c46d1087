-- A small ELF64 reader in pure Lua: what a uprobe needs from a binary.
--
--   local elf = require "perfev.elf"
--   local e = assert(elf.open("/usr/bin/ls"))
--   local sym = assert(e:find("main"))          -- .symtab, else .dynsym
--   local off = assert(e:offset(sym.value))     -- virtual address -> file offset
--   local off2, sym2 = elf.func_offset("/lib/x86_64-linux-gnu/libc.so.6", "malloc")
--
-- The uprobe PMU takes a file offset (probe_offset), not a virtual address:
-- a function's st_value is turned into one through the PT_LOAD program
-- header that maps it (offset = value - p_vaddr + p_offset), as perf probe
-- and bpftrace do. Stripped binaries keep their exported functions in
-- .dynsym, which is searched when .symtab is missing or lacks the name.
--
-- Every function returns nil, message on failure (a missing file, not an
-- ELF file, a 32-bit ELF, a missing symbol with the nearest names). Needs
-- Lua 5.3+ (string.unpack, 64-bit integers); both byte orders are read.
local M = {}

-- Layouts of the ELF64 structures, as string.unpack formats (the byte
-- order prefix is added per file) and their sizes.
local EHDR = { fmt = "I2 I2 I4 I8 I8 I8 I4 I2 I2 I2 I2 I2 I2", size = 64, at = 17,
               fields = { "type", "machine", "version", "entry", "phoff", "shoff", "flags",
                          "ehsize", "phentsize", "phnum", "shentsize", "shnum", "shstrndx" } }
local SHDR = { fmt = "I4 I4 I8 I8 I8 I8 I4 I4 I8 I8", size = 64,
               fields = { "name", "type", "flags", "addr", "offset", "size", "link", "info",
                          "addralign", "entsize" } }
local PHDR = { fmt = "I4 I4 I8 I8 I8 I8 I8 I8", size = 56,
               fields = { "type", "flags", "offset", "vaddr", "paddr", "filesz", "memsz", "align" } }
local SYM = { fmt = "I4 B B I2 I8 I8", size = 24 }

local SHT = { SYMTAB = 2, STRTAB = 3, DYNSYM = 11 }
local PT_LOAD = 1
local SHN_UNDEF, SHN_XINDEX, PN_XNUM = 0, 0xffff, 0xffff
-- symbol types that are code: FUNC, and GNU_IFUNC (a resolver perf probes too)
local CODE = { [2] = "func", [10] = "ifunc" }
local BIND = { [0] = "local", [1] = "global", [2] = "weak" }
M.ET = { [1] = "relocatable", [2] = "executable", [3] = "shared object", [4] = "core" }

local function unpack_struct(layout, order, s, pos)
  local vals = { string.unpack(order .. layout.fmt, s, pos) }
  local t = {}
  for i, name in ipairs(layout.fields) do t[name] = vals[i] end
  return t
end

local Elf = {}
Elf.__index = Elf

-- read(f, offset, size) -> exactly size bytes | nil, message
local function read_at(f, path, offset, size)
  if size == 0 then return "" end
  local ok, err = f:seek("set", offset)
  if not ok then return nil, ("%s: cannot seek to %d: %s"):format(path, offset, err) end
  local s = f:read(size)
  if not s or #s < size then
    return nil, ("%s: truncated ELF file (wanted %d bytes at offset %d)"):format(path, size, offset)
  end
  return s
end

-- open(path) -> elf | nil, message: reads the ELF header, the section and
-- program headers and the section names; symbol tables are read on demand.
function M.open(path)
  if type(path) ~= "string" then
    error("perfev.elf.open: expected a path, got " .. type(path), 2)
  end
  if not string.unpack then return nil, "perfev.elf needs Lua 5.3 or newer (string.unpack)" end
  local f, msg = io.open(path, "rb")
  if not f then return nil, ("cannot open %s"):format(msg) end
  local ok, e = pcall(M.read_headers, f, path)
  f:close()
  if not ok then return nil, e end
  return e
end

-- The header reading proper (raises; open() turns that into nil, message).
function M.read_headers(f, path)
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
  local order = data == 1 and "<" or data == 2 and ">" or nil
  if not order then error(("%s: unknown ELF byte order %d"):format(path, data), 0) end
  local rest = assert(read_at(f, path, 16, EHDR.size - 16))
  local h = unpack_struct(EHDR, order, ident .. rest, EHDR.at)
  local e = setmetatable({ path = path, order = order, header = h, sections = {}, segments = {},
                           type = M.ET[h.type] or ("type " .. h.type) }, Elf)
  -- section headers (with the extended numbering of files over 0xff00 sections)
  local shnum, shstrndx = h.shnum, h.shstrndx
  if h.shoff ~= 0 then
    assert(h.shentsize == SHDR.size, path .. ": unexpected section header size " .. h.shentsize)
    local first = unpack_struct(SHDR, order, assert(read_at(f, path, h.shoff, SHDR.size)), 1)
    if shnum == 0 then shnum = first.size end
    if shstrndx == SHN_XINDEX then shstrndx = first.link end
    local all = assert(read_at(f, path, h.shoff, shnum * SHDR.size))
    for i = 0, shnum - 1 do
      e.sections[i + 1] = unpack_struct(SHDR, order, all, i * SHDR.size + 1)
    end
    local strtab = e.sections[shstrndx + 1]
    if strtab then
      local names = assert(read_at(f, path, strtab.offset, strtab.size))
      for _, s in ipairs(e.sections) do s.sname = names:match("^[^%z]*", s.name + 1) end
    end
    if h.phnum == PN_XNUM then h.phnum = first.info end
  end
  -- program headers: the PT_LOAD segments map virtual addresses to the file
  if h.phoff ~= 0 and h.phnum > 0 then
    assert(h.phentsize == PHDR.size, path .. ": unexpected program header size " .. h.phentsize)
    local all = assert(read_at(f, path, h.phoff, h.phnum * PHDR.size))
    for i = 0, h.phnum - 1 do
      local ph = unpack_struct(PHDR, order, all, i * PHDR.size + 1)
      if ph.type == PT_LOAD then e.segments[#e.segments + 1] = ph end
    end
  end
  return e
end

-- e:section(name) -> the section header named so | nil
function Elf:section(name)
  for _, s in ipairs(self.sections) do
    if s.sname == name then return s end
  end
end

-- Reads one symbol table section: a list of the defined code symbols
-- { name, value, size, kind, bind, table }.
local function read_symbols(self, f, sec)
  local strsec = self.sections[sec.link + 1]
  if not strsec or strsec.type ~= SHT.STRTAB then return {} end
  local data = assert(read_at(f, self.path, sec.offset, sec.size))
  local strings = assert(read_at(f, self.path, strsec.offset, strsec.size))
  local fmt = self.order .. SYM.fmt
  local list = {}
  for pos = 1, #data - SYM.size + 1, SYM.size do
    local name, info, _, shndx, value, size = string.unpack(fmt, data, pos)
    local kind = CODE[info & 0xf]
    if kind and shndx ~= SHN_UNDEF and name ~= 0 then
      list[#list + 1] = { name = strings:match("^[^%z]*", name + 1), value = value, size = size,
                          kind = kind, bind = BIND[info >> 4] or "other", table = sec.sname }
    end
  end
  return list
end

-- e:symbols() -> { symtab = list, dynsym = list }: the defined functions of
-- each table (read once, then cached on the object).
function Elf:symbols()
  if self.syms then return self.syms end
  local f, msg = io.open(self.path, "rb")
  if not f then return nil, ("cannot open %s"):format(msg) end
  local syms = { symtab = {}, dynsym = {} }
  local ok, err = pcall(function()
    for _, s in ipairs(self.sections) do
      if s.type == SHT.SYMTAB then syms.symtab = read_symbols(self, f, s) end
      if s.type == SHT.DYNSYM then syms.dynsym = read_symbols(self, f, s) end
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
  for _, ph in ipairs(self.segments) do
    if math.ult(vaddr - ph.vaddr, ph.filesz) and vaddr >= ph.vaddr then
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
  local e, err = M.open(path)
  if not e then return nil, err end
  local sym, serr = e:find(name)
  if not sym then return nil, serr end
  local off, oerr = e:offset(sym.value)
  if not off then return nil, oerr end
  return off, sym
end

return M
