-- What a symbolizer needs from an ELF64 file, read the way perf report
-- reads it (tools/perf/util/symbol-elf.c), in Lua that runs on 5.3, 5.4
-- and LuaJIT (no string.unpack, no bitwise operators): the functions of
-- .symtab (else .dynsym) placed at their file offsets, and the GNU build
-- id. perfev.elf is the full reader (uprobes); this one only loads
-- symbol tables, fast, for perfev.symbols.
--
--   local elfsyms = require "perfev.symbols.elf"
--   local info = assert(elfsyms.inspect("/usr/bin/lua5.4"))
--   -- info.type, info.build_id (raw bytes), info.symtab, info.dynsym, info.segments
--   local t = assert(elfsyms.symbols("/usr/bin/lua5.4", ".dynsym", info))
--   -- t.starts, t.ends, t.names: sorted by start; t.n
--
-- Samples are looked up by perf's map_ip (ip - map start + pgoff, a file
-- offset); as in perf, the symbols of an executable (ET_EXEC) are moved
-- to file offsets through their PT_LOAD segment, those of a shared object
-- or a PIE are kept as they are. Aliases at one address
-- are reduced to one as perf's choose_best_symbol does, and a symbol of
-- size 0 ends where the next one starts (symbols__fixup_end).
local M = {}

local SHT_SYMTAB, SHT_NOTE, SHT_DYNSYM = 2, 7, 11
local STT_NOTYPE, STT_FUNC, STT_GNU_IFUNC = 0, 2, 10
local STV_INTERNAL, STV_HIDDEN = 1, 2
local SHF_EXECINSTR = 4
local STB_GLOBAL, STB_WEAK = 1, 2
local SHN_UNDEF, SHN_LORESERVE = 0, 0xff00
local NT_GNU_BUILD_ID = 3
local PT_LOAD, ET_REL, ET_EXEC = 1, 1, 2
local PAGE = 4096

-- Little- and big-endian readers over a string (1-based positions).
-- Values above 2^53 (never an address of user space) lose precision.
local function reader(be)
  local byte = string.byte
  local r = {}
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

local function read_at(f, offset, size)
  if size <= 0 then return "" end
  if not f:seek("set", offset) then return nil end
  local s = f:read(size)
  if not s or #s < size then return nil end
  return s
end

-- The ELF header and section headers: { be, r, type, sections } | nil, why
local function headers(f, path)
  local h = read_at(f, 0, 64)
  if not h or h:sub(1, 4) ~= "\127ELF" then return nil, path .. ": not an ELF file" end
  if h:byte(5) ~= 2 then return nil, path .. ": not an ELF64 file" end
  local be = h:byte(6) == 2
  local r = reader(be)
  local e = { be = be, r = r, type = r.u16(h, 17), sections = {}, h = h }
  local shoff, shentsize, shnum = r.u64(h, 41), r.u16(h, 59), r.u16(h, 61)
  if shoff == 0 or shentsize < 64 then return e end
  if shnum == 0 then   -- extended numbering: the count is in section 0
    local s0 = read_at(f, shoff, 64)
    if not s0 then return nil, path .. ": truncated section headers" end
    shnum = r.u64(s0, 33)
  end
  if shnum > 65536 then return nil, path .. ": too many sections" end
  local all = read_at(f, shoff, shnum * shentsize)
  if not all then return nil, path .. ": truncated section headers" end
  for i = 0, shnum - 1 do
    local p = i * shentsize + 1
    e.sections[i] = { name = r.u32(all, p), type = r.u32(all, p + 4), flags = r.u64(all, p + 8),
                      addr = r.u64(all, p + 16),
                      offset = r.u64(all, p + 24), size = r.u64(all, p + 32),
                      link = r.u32(all, p + 40), align = r.u64(all, p + 48),
                      entsize = r.u64(all, p + 56) }
  end
  local strtab = e.sections[r.u16(h, 63)]
  local names = strtab and strtab.size < 2 ^ 24 and read_at(f, strtab.offset, strtab.size)
  if names then
    for i = 0, shnum - 1 do
      local sec = e.sections[i]
      local z = names:find("\0", sec.name + 1, true)
      sec.sname = z and names:sub(sec.name + 1, z - 1) or ""
    end
  end
  return e
end

-- The GNU build id among notes s, or nil.
local function parse_notes(s, r)
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
M.parse_notes = function(s, big_endian) return parse_notes(s, reader(big_endian)) end

local function note_id(f, e)
  for i = 0, #e.sections do
    local sec = e.sections[i]
    if sec and sec.type == SHT_NOTE and sec.size > 0 and sec.size < 65536 then
      local id = parse_notes(read_at(f, sec.offset, sec.size) or "", e.r)
      if id then return id end
    end
  end
end

-- build_id(path) -> raw bytes | nil, why
function M.build_id(path)
  local f, msg = io.open(path, "rb")
  if not f then return nil, msg end
  local e, why = headers(f, path)
  local id = e and note_id(f, e)
  f:close()
  if not e then return nil, why end
  if not id then return nil, path .. ": no GNU build id note" end
  return id
end

local function underscores(name)
  local n = #(name:match("^_*"))
  return n
end

-- perf's choose_best_symbol for two symbols at one address: true when a wins.
local function better(a_size, a_bind, a_name, b_size, b_bind, b_name)
  if (b_size == 0) ~= (a_size == 0) then return a_size > 0 end
  if (a_bind == STB_WEAK) ~= (b_bind == STB_WEAK) then return b_bind == STB_WEAK end
  if (a_bind == STB_GLOBAL) ~= (b_bind == STB_GLOBAL) then return a_bind == STB_GLOBAL end
  local ua, ub = underscores(a_name), underscores(b_name)
  if ua ~= ub then return ua < ub end
  if #a_name ~= #b_name then return #a_name > #b_name end
  return true
end
M.better = better

-- Sorts parallel lists by start, keeps the best symbol of each start and
-- gives every zero-size symbol the start of the next (or the end of its
-- page + 4096, for the last). list: { { start, size, bind, name } }.
function M.finish(list)
  -- sort by start, equal starts in the table's order (perf's rb-tree):
  -- the distinct starts are sorted as plain numbers (fast), each with the
  -- symbols at it in their order
  local at, uniq = {}, {}
  for _, s in ipairs(list) do
    local g = at[s[1]]
    if g then g[#g + 1] = s
    else
      at[s[1]] = { s }
      uniq[#uniq + 1] = s[1]
    end
  end
  table.sort(uniq)
  local k = 0
  for _, v in ipairs(uniq) do
    for _, s in ipairs(at[v]) do
      k = k + 1
      list[k] = s
    end
  end
  local starts, ends, names = {}, {}, {}
  local n = 0
  for _, s in ipairs(list) do
    if n > 0 and starts[n] == s[1] then
      local prev = list[n]
      if not better(prev[2], prev[3], prev[4], s[2], s[3], s[4]) then
        list[n] = s
        ends[n], names[n] = s[1] + s[2], s[4]
      end
    else
      n = n + 1
      list[n] = s
      starts[n], ends[n], names[n] = s[1], s[1] + s[2], s[4]
    end
  end
  for i = n + 1, #list do list[i] = nil end
  for i = 1, n - 1 do
    if ends[i] == starts[i] then ends[i] = starts[i + 1] end
  end
  if n > 0 and ends[n] == starts[n] then
    ends[n] = math.ceil(starts[n] / PAGE) * PAGE + PAGE
  end
  return { starts = starts, ends = ends, names = names, n = n }
end

local function read_table(f, e, sec)
  local strsec = e.sections[sec.link]
  if not strsec or sec.entsize ~= 24 then return nil end
  local data = read_at(f, sec.offset, sec.size)
  local strings = read_at(f, strsec.offset, strsec.size)
  if not data or not strings then return nil end
  local r, secs, byte, find, sub = e.r, e.sections, string.byte, string.find, string.sub
  local list = {}
  -- Lua 5.3+: one string.unpack per symbol; LuaJIT: the byte readers
  local unpack = string.unpack
  local fmt = (e.be and ">" or "<") .. "I4BBI2I8I8"
  for p = 1, #data - 23, 24 do
    local name, info, other, shndx, value, size
    local t = byte(data, p + 4) % 16
    if t ~= STT_FUNC and t ~= STT_GNU_IFUNC and t ~= STT_NOTYPE then
      info = nil   -- data, sections, files: skipped before decoding
    elseif unpack then
      name, info, other, shndx, value, size = unpack(fmt, data, p)
    else
      name, info, other, shndx = r.u32(data, p), byte(data, p + 4), byte(data, p + 5), r.u16(data, p + 6)
    end
    local stype = info and info % 16
    local vis = other and other % 4
    local in_sec = info and shndx ~= SHN_UNDEF and shndx < SHN_LORESERVE and secs[shndx]
    -- functions, and labels (NOTYPE, visible, in code: perf's elf_sym__is_label)
    if name ~= 0 and in_sec and (stype == STT_FUNC or stype == STT_GNU_IFUNC or
       (stype == STT_NOTYPE and vis ~= STV_INTERNAL and vis ~= STV_HIDDEN
        and in_sec.flags % 8 >= SHF_EXECINSTR)) then
      local z = find(strings, "\0", name + 1, true) or (#strings + 1)
      if not unpack then value, size = r.u64(data, p + 8), r.u64(data, p + 16) end
      list[#list + 1] = { value, size, math.floor(info / 16), sub(strings, name + 1, z - 1) }
    end
  end
  return list
end

local function section(e, name)
  for i = 0, #e.sections do
    local s = e.sections[i]
    if s and s.sname == name then return s end
  end
end

-- perf 6.1's dso__synthesize_plt_symbols: "name@plt" for each relocation
-- of .rela.plt, in its order, one .plt entry (sh_entsize bytes) each after
-- the PLT's header: { { start, size, bind, name } } at file offsets. (Later
-- perfs add a ".plt" symbol and read .plt.sec; 6.1 does neither.)
local function plt_symbols(f, e)
  local plt = section(e, ".plt")
  local rel = section(e, ".rela.plt")
  if not plt or not rel or rel.entsize ~= 24 or plt.entsize == 0 then return {} end
  local size = plt.entsize
  local dynsym = e.sections[rel.link]
  local strsec = dynsym and e.sections[dynsym.link]
  local data = read_at(f, rel.offset, rel.size)
  local syms = dynsym and read_at(f, dynsym.offset, dynsym.size)
  local strings = strsec and read_at(f, strsec.offset, strsec.size)
  if not data or not syms or not strings then return {} end
  local r = e.r
  local out = {}
  local offset = plt.offset
  for p = 1, #data - 23, 24 do
    local symidx = math.floor(r.u64(data, p + 8) / 4294967296)
    local name = ""
    local sp = symidx * 24 + 1
    if sp + 23 <= #syms then
      local n = r.u32(syms, sp)
      local z = strings:find("\0", n + 1, true)
      name = z and strings:sub(n + 1, z - 1) or ""
    end
    offset = offset + size
    out[#out + 1] = { offset, size, STB_GLOBAL, name .. "@plt" }
  end
  return out
end

-- The PT_LOAD segments: { { vaddr, memsz, offset } }
local function segments(f, e, h)
  local r = e.r
  local phoff, phentsize, phnum = r.u64(h, 33), r.u16(h, 55), r.u16(h, 57)
  local list = {}
  if phoff == 0 or phentsize < 56 or phnum == 0 then return list end
  local all = read_at(f, phoff, phnum * phentsize) or ""
  for i = 0, phnum - 1 do
    local p = i * phentsize + 1
    if p + 55 <= #all and r.u32(all, p) == PT_LOAD then
      list[#list + 1] = { vaddr = r.u64(all, p + 16), memsz = r.u64(all, p + 40), offset = r.u64(all, p + 8) }
    end
  end
  return list
end

-- inspect(path) -> { type, build_id, symtab, dynsym, segments } | nil, why:
-- what perf's symsrc__init learns of a candidate file, without its symbols.
function M.inspect(path)
  local f, msg = io.open(path, "rb")
  if not f then return nil, msg end
  local e, why = headers(f, path)
  if not e then f:close(); return nil, why end
  local info = { path = path, type = e.type, build_id = note_id(f, e),
                 segments = segments(f, e, e.h) }
  for i = 0, #e.sections do
    local s = e.sections[i]
    if s and s.type == SHT_SYMTAB then info.symtab = true end
    if s and s.type == SHT_DYNSYM then info.dynsym = true end
  end
  f:close()
  return info
end

-- symbols(path, which, runtime) -> { starts, ends, names, n } | nil, why:
-- the functions of section `which` (".symtab" or ".dynsym") of path. For an
-- executable or relocatable file (perf's adjust_symbols) each value is
-- moved to its file offset through the PT_LOAD segment of the runtime
-- file (an inspect() table) that holds it, as perf does; a shared object's
-- values are kept. plt_from: the file whose PLT stubs are added as
-- "name@plt" symbols (the runtime file, as perf does).
function M.symbols(path, which, runtime, plt_from)
  local f, msg = io.open(path, "rb")
  if not f then return nil, msg end
  local e, why = headers(f, path)
  if not e then f:close(); return nil, why end
  local want = which == ".symtab" and SHT_SYMTAB or SHT_DYNSYM
  local list
  for i = 0, #e.sections do
    local s = e.sections[i]
    if s and s.type == want then list = read_table(f, e, s); break end
  end
  f:close()
  list = list or {}
  if e.type == ET_EXEC or e.type == ET_REL then
    local segs = (runtime or {}).segments or {}
    local out = {}
    for _, s in ipairs(list) do
      for _, ph in ipairs(segs) do
        if s[1] >= ph.vaddr and s[1] < ph.vaddr + ph.memsz then
          s[1] = s[1] - (ph.vaddr - ph.offset)
          out[#out + 1] = s
          break
        end
      end
    end
    list = out
  end
  if plt_from then
    local pf = io.open(plt_from, "rb")
    local pe = pf and headers(pf, plt_from)
    if pe then
      for _, x in ipairs(plt_symbols(pf, pe)) do list[#list + 1] = x end
    end
    if pf then pf:close() end
  end
  return M.finish(list)
end

return M
