-- perfev.attach.target: a running process as the attach readers see it
-- (lua/perfev/attach/puc.lua, luajit.lua; the interface is in doc/attach.md):
-- its files, its mappings, its memory and the symbols of the objects it maps.
-- It only reads: memory through process_vm_readv (core.vm_read), which asks
-- the same permission as ptrace and never changes the target.
--
--   local target = require "perfev.attach.target"
--   local t = assert(target.new(pid))
--   t.pid, t.exe, t.cwd, t.root, t.maps     -- maps: { { lo, hi, perms, offset, path } }
--   t:read(addr, len) -> bytes | nil, err
--   t:ptr(addr), t:u32(addr), t:i32(addr), t:u16(addr), t:u8(addr) -> number | nil
--   t:u64parts(addr) -> lo32, hi32
--   t:cstring(addr, max) -> string | nil
--   t:symbol(name [, path_pattern]) -> address | nil
--
-- Addresses are plain Lua numbers (integers on 5.3+, doubles on LuaJIT:
-- exact, user addresses being below 2^47). Runs on Lua 5.3, 5.4, LuaJIT.
local core = require "perfev.core"
local elf = require "perfev.elf"

local M = {}

local Target = {}
Target.__index = Target

-- The bytes of a little-endian unsigned integer of n bytes at position p.
local function le(s, p, n)
  local v = 0
  for i = p + n - 1, p, -1 do v = v * 256 + s:byte(i) end
  return v
end

-- maps(pid) -> { { lo, hi, perms, offset, path } } from /proc/PID/maps
function M.maps(pid)
  local f, msg = io.open(("/proc/%d/maps"):format(pid), "r")
  if not f then return nil, msg end
  local out = {}
  for line in f:lines() do
    local lo, hi, perms, off, path = line:match("^(%x+)%-(%x+)%s+(%S+)%s+(%x+)%s+%S+%s+%d+%s*(.*)$")
    -- a mapping above user space (vsyscall) is left out: it would not be exact on LuaJIT
    if lo and #hi <= 12 then
      out[#out + 1] = { lo = tonumber(lo, 16), hi = tonumber(hi, 16), perms = perms,
                        offset = tonumber(off, 16), path = path ~= "" and path or nil }
    end
  end
  f:close()
  return out
end

-- new(pid) -> target | nil, message
function M.new(pid)
  local maps, msg = M.maps(pid)
  if not maps then return nil, ("perfev.attach: no process %d (%s)"):format(pid, msg) end
  local base = ("/proc/%d/"):format(pid)
  local t = setmetatable({ pid = pid, maps = maps, exe = core.readlink(base .. "exe"),
                           cwd = core.readlink(base .. "cwd"), root = core.readlink(base .. "root"),
                           elves = {} }, Target)
  return t
end

-- t:refresh(): the mappings read again (the target maps and unmaps files)
function Target:refresh()
  self.maps = M.maps(self.pid) or self.maps
  self.last_region = nil
end

-- t:map_of(addr) -> the mapping holding addr | nil
function Target:map_of(addr)
  for _, m in ipairs(self.maps) do
    if addr >= m.lo and addr < m.hi then return m end
  end
end

-- t:file(path) -> the path to open for a file of the target (seen through
-- its root: a process in a container sees its own files)
function Target:file(path)
  return ("/proc/%d/root%s"):format(self.pid, path)
end

-- Reads go through a cache of whole pages while the engine holds the
-- thread stopped (t:hold() ... t:flush()): a reader's many small reads of
-- one sample (a pointer, a field, the next frame) cost one
-- process_vm_readv per page touched instead of one each. A page is mapped
-- whole or not at all, so a page read fails exactly where the small read
-- would. The pages a sample touched are read again at the next hold, all
-- in one process_vm_readv (core.vm_read_pages): consecutive samples of a
-- program mostly walk the same structures. They are read anew at each
-- hold, while the thread is stopped: nothing is kept from one sample to
-- the next but the list of their addresses. Outside a hold (a reader's own
-- tests, probing) every read goes to the target.
local PAGE = 4096
M.PAGE = PAGE
M.PREFETCH_MAX = 64    -- pages read again at a hold, at most

local byte = string.byte

function Target:hold()
  local pages, want = {}, self.touched
  if want and #want > 0 then
    local got = core.vm_read_pages(self.pid, want, PAGE)
    for i = 1, #got do pages[want[i]] = got[i] end
  end
  self.pages, self.touched, self.used, self.last_base = pages, {}, {}, nil
end

function Target:flush() self.pages, self.used, self.last_base, self.last_page = nil, nil, nil, nil end

-- the page at base (a multiple of PAGE): its bytes, false when it cannot
-- be read; noted as touched. Pages are keyed by their address (exact on
-- LuaJIT too: no division).
local function page(self, base)
  if base == self.last_base then return self.last_page end
  local pages = self.pages
  local p = pages[base]
  if p == nil then
    p = core.vm_read(self.pid, base, PAGE) or false
    pages[base] = p
  end
  local used = self.used
  if not used[base] then
    used[base] = true
    local t = self.touched
    if p and #t < M.PREFETCH_MAX then t[#t + 1] = base end
  end
  self.last_base, self.last_page = base, p
  return p
end

function Target:read(addr, len)
  if not self.pages or len > 2 * PAGE or len <= 0 then return core.vm_read(self.pid, addr, len) end
  local off = addr % PAGE
  local p = page(self, addr - off)
  if not p then return core.vm_read(self.pid, addr, len) end   -- its own message
  if off + len <= PAGE then return p:sub(off + 1, off + len) end
  local q = off + len <= 2 * PAGE and page(self, addr - off + PAGE)
  if not q then return core.vm_read(self.pid, addr, len) end   -- over 2 pages, or its message
  return p:sub(off + 1) .. q:sub(1, len - (PAGE - off))
end

-- the page holding the n bytes at addr and their offset in it, when they
-- lie in one page of a hold (the fixed-size readers decode them in place)
local function in_page(self, addr, n)
  if not self.pages then return nil end
  local off = addr % PAGE
  if off + n > PAGE then return nil end
  local base = addr - off
  local p
  if base == self.last_base then p = self.last_page else p = page(self, base) end   -- (the last page: no call)
  if not p then return nil end
  return p, off
end

-- The fixed-size readers decode in place in a held page (no copy); on Lua
-- 5.3+ with string.unpack (one call per field).
local unpack = rawget(string, "unpack")
local FORMAT = { [1] = "<I1", [2] = "<I2", [4] = "<I4" }

local function reader(n, signed)
  local top = 2 ^ (8 * n)
  local fmt = unpack and (signed and "<i" .. n or FORMAT[n])
  return function(self, addr)
    local s, o = in_page(self, addr, n)
    if not s then
      s, o = self:read(addr, n), 0
      if not s then return nil end
    end
    if fmt then return (unpack(fmt, s, o + 1)) end
    local v = le(s, o + 1, n)
    if signed and v >= top / 2 then v = v - top end
    return v
  end
end

Target.u8 = reader(1)
Target.u16 = reader(2)
Target.u32 = reader(4)
Target.i32 = reader(4, true)

local function word(self, addr)
  local s, o = in_page(self, addr, 8)
  if not s then
    s, o = self:read(addr, 8), 0
  end
  return s, o
end

-- t:u64parts(addr) -> lo32, hi32
function Target:u64parts(addr)
  local s, o = word(self, addr)
  if not s then return nil end
  if unpack then return unpack("<I4I4", s, o + 1) end
  local a, b, c, d, e, f, g, h = byte(s, o + 1, o + 8)
  return a + b * 256 + c * 65536 + d * 16777216, e + f * 256 + g * 65536 + h * 16777216
end

-- t:ptr(addr) -> a pointer (64-bit little-endian); nil when it cannot be
-- read or is not a user address (at or above 2^47)
function Target:ptr(addr)
  if unpack then
    local s, o = word(self, addr)
    if not s then return nil end
    local v = unpack("<i8", s, o + 1)
    if v < 0 or v >= 0x800000000000 then return nil end
    return v
  end
  local lo, hi = self:u64parts(addr)
  if not lo or hi >= 0x8000 then return nil end
  return hi * 4294967296 + lo
end

-- t:region(addr [, len]) -> the mapping holding the len bytes (1 by
-- default) at addr | nil; the last one found is tried first (a reader
-- asks mostly about the heap)
function Target:region(addr, len)
  local last = self.last_region
  local hi = addr + (len or 1)
  if last and addr >= last.lo and hi <= last.hi then return last end
  local maps = self.maps
  for i = 1, #maps do
    local m = maps[i]
    if addr >= m.lo and addr < m.hi then
      if hi > m.hi then return nil end
      self.last_region = m
      return m
    end
  end
  return nil
end

-- t:cstring(addr, max) -> the NUL-terminated string at addr (at most max
-- bytes, 256 by default) | nil
function Target:cstring(addr, max)
  max = max or 256
  local out, got = {}, 0
  while got < max do
    -- read up to the end of the page: the next page may be unmapped
    local n = math.min(max - got, 4096 - (addr + got) % 4096)
    local s = self:read(addr + got, n)
    if not s then return nil end
    local z = s:find("\0", 1, true)
    if z then
      out[#out + 1] = s:sub(1, z - 1)
      return table.concat(out)
    end
    out[#out + 1] = s
    got = got + n
  end
  return nil
end

-- The ELF file of a mapped path, opened once (false when it cannot be).
function Target:elf(path)
  local e = self.elves[path]
  if e == nil then
    e = elf.open(self:file(path)) or false
    self.elves[path] = e
  end
  return e or nil
end

-- t:symbol(name [, path_pattern]) -> address | nil: a function symbol
-- (.symtab, else .dynsym) of a mapped file whose path matches the Lua
-- pattern (any file by default: the executable first), at the address
-- where the target maps it.
function Target:symbol(name, pattern)
  local paths, seen = {}, {}
  if self.exe and not pattern then paths[1], seen[self.exe] = self.exe, true end
  for _, m in ipairs(self.maps) do
    local p = m.path
    if p and p:sub(1, 1) == "/" and not seen[p] and (not pattern or p:find(pattern)) then
      seen[p] = true
      paths[#paths + 1] = p
    end
  end
  for _, p in ipairs(paths) do
    local e = self:elf(p)
    local sym = e and e:find(name)
    local off = sym and e:offset(sym.value)
    if off then
      for _, m in ipairs(self.maps) do
        if m.path == p and off >= m.offset and off < m.offset + (m.hi - m.lo) then
          return m.lo + (off - m.offset)
        end
      end
    end
  end
  return nil
end

M.Target = Target
return M
