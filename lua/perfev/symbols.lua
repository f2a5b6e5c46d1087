-- perfev.symbols: addresses -> symbols, the way perf report resolves them
-- (tools/perf/util/{machine,map,maps,symbol,symbol-elf}.c, re-implemented).
--
--   local symbols = require "perfev.symbols"
--   local S = symbols.new { build_ids = f:features().build_id }
--   S:mmap(rec)                      -- every mmap/mmap2 record, in time order
--   S:fork(rec)                      -- fork records: a new process inherits the maps
--   S:proc(pid)                      -- or a live process's /proc/PID/maps
--   local e = S:resolve(pid, ip, "user")   -- or "kernel"
--   print(e.dso.short, e.name, e.level)    -- "libm.so.6", "__sin_fma" (nil: unresolved)
--   print(symbols.format(e))               -- "__sin_fma" or "0x000000000001b41f"
--
-- Where the names come from, as perf 6.1 takes them:
--  * a file an mmap record names: its .symtab, else .dynsym, from the first
--    of perf's candidates whose GNU build id is the one perf.data recorded
--    (or the file's own, when perf.data has none): ~/.debug/.build-id
--    (perf's cache, `elf` and `debug`), /usr/lib/debug/.build-id/xx/y.debug
--    (Debian's -dbg packages), /usr/lib/debug/PATH(.debug), the file itself.
--    A file that changed since the recording and is in no cache stays
--    unresolved, as in perf.
--  * anonymous executable memory ("//anon", JIT code, Lua functions named by
--    a profiler): /tmp/perf-PID.map (dso "perf-PID.map").
--  * the kernel: /proc/kallsyms when it is readable (kptr_restrict) and the
--    running kernel is the recorded one (build id), else
--    ~/.debug/[kernel.kallsyms]/ID/kallsyms; module symbols are named
--    "[module]" as perf names their dso.
--  * what no map covers: dso "[unknown]", the address as the symbol.
--
-- Every function of the module checks what it is given and refuses a
-- wrong value at the caller's line naming the function. symbols.fast
-- (internal: report's per-frame and per-row path, which passes addresses
-- and entries it made; not part of the API) holds split, hex, find,
-- format and callchain_name without those checks, and the methods
-- resolve, cache and unknown_entry without their self check (called as
-- fast.resolve(S, ...)).
--
-- Addresses: Lua 5.3/5.4 give u64 addresses as integers (kernel ones
-- negative), LuaJIT as uint64_t cdata (or numbers below 2^53). Every
-- address is turned at once into a space and a non-negative number below
-- 2^53 by split() below: the only code that knows the representation.
local elfsyms = require "perfev.elf"
local buildid = require "perfev.perfdata.buildid"
local kallsyms = require "perfev.symbols.kallsyms"
local compat = require "perfev.compat"
local fs = require "perfev.fs"

local M = {}
local F = {}   -- symbols.fast: the unchecked functions (see above)
M.fast = F

-- A caller's wrong value, raised at its line naming the function.
local function refuse(fname, fmt, ...)
  require("perfev.options").raisef("perfev.symbols.%s: " .. fmt, fname, ...)
end
local function describe(v) return require("perfev.options").describe(v) end
local SPACES = { u = true, k = true, c = true, x = true }
-- an address as split() takes it: a number or (LuaJIT) a 64-bit cdata
local function is_address(v) return type(v) == "number" or type(v) == "cdata" end
-- a value hex() prints: an integer (a float with an integer value, a cdata)
local function is_value(v) return require("perfev.options").is_integer(v) end

-- ---------------------------------------------------------------------------
-- Addresses: the one place that knows how a runtime holds a u64.
-- split(ip) -> space, v:
--   "u": user space (below 2^63), v = the address
--   "k": kernel space (at or above 0xffff800000000000), v = address - that base
--   "c": a callchain context marker (PERF_CONTEXT_*, the top 4095 values),
--        v = the marker as a negative number (-128 for PERF_CONTEXT_KERNEL)
--   "x": anything else (a corrupt frame), v = the address as given
-- hex(space, v) -> "0x" and 16 hex digits of the original address.
local KSPAN = 0x800000000000          -- 2^47: the kernel half of x86-64's address space
M.KSPAN = KSPAN
local is_integer = math.type and function(x) return math.type(x) == "integer" end
                   or function() return false end
local has_ffi, ffi = false, nil
if not math.type then has_ffi, ffi = pcall(require, "ffi") end
local U64 = has_ffi and ffi.typeof("uint64_t")
local TWO32 = 4294967296
local KBASE_INT = is_integer(0x7fffffffffffffff) and -KSPAN or nil   -- 0xffff800000000000 as a 5.3+ integer

local function split_number(ip)      -- a double (LuaJIT numbers, or floats)
  if ip < 0 then                       -- a u64 read as signed
    if ip >= -4095 then return "c", ip end
    if ip >= -KSPAN then return "k", ip + KSPAN end
    return "x", ip
  end
  if ip < 2 ^ 63 then return "u", ip end
  local top = 2 ^ 64 - ip
  if top <= 4095 then return "c", -top end
  if ip >= 2 ^ 64 - KSPAN then return "k", ip - (2 ^ 64 - KSPAN) end
  return "x", ip
end

local split
if KBASE_INT then
  split = function(ip)
    if not is_integer(ip) then return split_number(ip) end
    if ip >= 0 then return "u", ip end
    if ip >= -4095 then return "c", ip end
    if ip >= KBASE_INT then return "k", ip - KBASE_INT end
    return "x", ip
  end
else
  local C_TOP = U64 and U64(0) - 4095
  local C_KBASE = U64 and U64(0xffff8000) * TWO32
  split = function(ip)
    if type(ip) ~= "cdata" then return split_number(ip) end
    if ip < C_KBASE then
      if ip < U64(2 ^ 53) then return "u", tonumber(ip) end
      return "x", ip
    end
    if ip >= C_TOP then return "c", -tonumber(U64(0) - ip) end
    return "k", tonumber(ip - C_KBASE)
  end
end
F.split = split
function M.split(ip)
  if not is_address(ip) then refuse("split", "expects an address (an integer), got %s", describe(ip)) end
  return split(ip)
end

local function hex_parts(hi, lo)
  return ("0x%08x%08x"):format(hi, lo)
end

local function hex(space, v)
  if v == 0 and space ~= "k" then return "0000000000000000" end   -- C's %#x prints no 0x for 0
  if KBASE_INT and is_integer(v) then
    if space == "k" then v = v + KBASE_INT end
    return ("0x%016x"):format(v)
  end
  if type(v) == "cdata" then return "0x" .. require("bit").tohex(v, 16) end
  local hi = math.floor(v / TWO32)
  local lo = v - hi * TWO32
  if space == "k" then hi = hi + 0xffff8000 end
  return hex_parts(hi % TWO32, lo)
end
F.hex = hex
local function check_value(fname, space, v)
  if not SPACES[space] then
    refuse(fname, "the space must be 'u', 'k', 'c' or 'x' (as split returns it), got %s", describe(space))
  end
  if not is_value(v) then refuse(fname, "the value must be an integer (as split returns it), got %s", describe(v)) end
end
function M.hex(space, v)
  check_value("hex", space, v)
  return hex(space, v)
end

-- A kernel address of /proc/kallsyms (16 hex digits) -> v, or nil below the base.
local function kernel_v(s)
  if #s ~= 16 or s:sub(1, 4) ~= "ffff" then return nil end
  local low = tonumber(s:sub(5), 16)
  if not low or low < KSPAN then return nil end
  return low - KSPAN
end
function M.kernel_v(s)
  if type(s) ~= "string" then refuse("kernel_v", "expects 16 hex digits of /proc/kallsyms, got %s", describe(s)) end
  return kernel_v(s)
end

-- ---------------------------------------------------------------------------
-- Symbol tables: core.symtab objects (perfev.elf's symbols() and finish():
-- t:find(v) -> i, t:name(i), t:start(i), #t), searched in C.

local EMPTY = elfsyms.finish {}

local function tohex(raw)
  return (raw:gsub(".", function(c) return ("%02x"):format(c:byte()) end))
end
function M.tohex(raw)
  if type(raw) ~= "string" then refuse("tohex", "expects the raw bytes, a string, got %s", describe(raw)) end
  return tohex(raw)
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- perf's candidates for a file's symbols (dso__load's binary types).
local function candidates(self, path, id)
  local list = {}
  if id then
    local h = tohex(id)
    local dir = ("%s/.build-id/%s/%s"):format(self.debug_dir, h:sub(1, 2), h:sub(3))
    list[#list + 1] = dir .. "/elf"
    list[#list + 1] = dir .. "/debug"
    list[#list + 1] = ("/usr/lib/debug/.build-id/%s/%s.debug"):format(h:sub(1, 2), h:sub(3))
    if path:sub(1, 1) == "[" then   -- [vdso]: perf record keeps a copy
      list[#list + 1] = ("%s/%s/%s/%s"):format(self.debug_dir, path, h, path:match("^%[(.-)%]"))
    end
  end
  list[#list + 1] = path
  list[#list + 1] = "/usr/lib/debug" .. path .. ".debug"
  list[#list + 1] = "/usr/lib/debug" .. path
  return list
end

-- The symbols of an ELF file: the first candidate with .symtab (and the
-- right build id), else the .dynsym of the file that would run.
local function load_elf_uncached(self, dso)
  local id = self.build_ids[dso.name]
  if not id then
    local info = elfsyms.inspect(dso.name)
    id = info and info.build_id
  end
  local syms_src, runtime
  for _, cand in ipairs(candidates(self, dso.name, id)) do
    local info = exists(cand) and elfsyms.inspect(cand)
    if info and (not id or info.build_id == id) then
      if not syms_src and info.symtab then syms_src = info end
      if not runtime and #info.segments > 0 and (info.dynsym or info.symtab) then runtime = info end
      if syms_src and runtime then break end
    end
  end
  dso.build_id = id
  if syms_src then
    dso.origin = syms_src.path
    return elfsyms.symbols(syms_src.path, ".symtab", runtime or syms_src, runtime and runtime.path) or EMPTY
  elseif runtime and runtime.dynsym then
    dso.origin = runtime.path
    return elfsyms.symbols(runtime.path, ".dynsym", runtime, runtime.path) or EMPTY
  end
  return EMPTY
end

-- Tables already read in this process, by (path, build id, where the
-- caches are): a file whose build id is known is the same file whatever
-- its path holds now. Without a build id nothing is kept (the file may
-- change under its name). Weak values: a table lives while a report uses
-- it (and the file it came from with it: weak keys).
local loaded = setmetatable({}, { __mode = "v" })
local origin_of = setmetatable({}, { __mode = "k" })
local function load_elf(self, dso)
  local id = self.build_ids[dso.name]
  local key = id and table.concat({ dso.name, id, self.debug_dir }, "\0")
  local hit = key and loaded[key]
  if hit then
    dso.build_id, dso.origin = id, origin_of[hit]
    return hit
  end
  local t = load_elf_uncached(self, dso)
  if key and t ~= EMPTY then
    origin_of[t] = dso.origin
    loaded[key] = t
  end
  return t
end

-- /tmp/perf-PID.map: "START SIZE name" lines, in hex.
local function load_perfmap(path)
  local f = io.open(path, "r")
  if not f then return EMPTY end
  local list = {}
  for line in f:lines() do
    local a, s, name = line:match("^%s*(%x+)%s+(%x+)%s+(.-)%s*$")
    if a and name ~= "" then
      local start, size = tonumber(a, 16), tonumber(s, 16)
      if start and size then list[#list + 1] = { start, size, 1, name } end
    end
  end
  f:close()
  return elfsyms.finish(list)
end


-- ---------------------------------------------------------------------------
-- Dsos and maps.

local function basename(p) return p:match("([^/]*)$") end

-- perf's is_anon_memory / is_no_dso_memory
local function is_anon(name)
  return name == "//anon" or name:sub(1, 9) == "/dev/zero" or name:sub(1, 14) == "/anon_hugepage"
end
local function is_nodso(name)
  return name:sub(1, 6) == "[stack" or name:sub(1, 5) == "/SYSV" or name == "[heap]"
end

local Sym = {}
Sym.__index = Sym

-- own(self, method): the check at the top of every method (options.self:
-- one called with '.' instead of ':' gets its first argument as self),
-- one metatable compare when self is a symbolizer. report's per-sample
-- and per-frame calls (S:resolve, S:cache, S:unknown_entry) and
-- S:resolve's own S:table go to the same functions unchecked, in
-- symbols.fast (the check cost ~35 ns a call, half of a cached S:resolve).
local function own(self, method)
  if getmetatable(self) ~= Sym then require("perfev.options").self(self, Sym, "perfev.symbols", method) end
end

-- A method's wrong argument, raised at the caller's line naming the method.
local function refuse_arg(method, fmt, ...)
  require("perfev.options").raisef("perfev.symbols: S:%s: " .. fmt, method, ...)
end
local function expect(ok, method, what, v)
  if not ok then refuse_arg(method, "%s, got %s", what, describe(v)) end
end
local function expect_address(v, method, what)
  expect(is_address(v), method, what .. " must be an address (an integer)", v)
end
local function expect_optional(v, method, what)
  expect(v == nil or is_value(v), method, what .. " must be an integer or nil", v)
end
local DSO_KINDS = { elf = true, perfmap = true, none = true, kernel = true, ["kernel-module"] = true }
local MODES = { kernel = true, user = true }

-- symbols.new(opts) -> a symbolizer. opts: build_ids (perf.data's build_id
-- feature list, or { [filename] = raw id }), kallsyms (path, or false:
-- no kernel names; default /proc/kallsyms), debug_dir (~/.debug),
-- perfmap_dir ("/tmp").
function M.new(opts)
  if opts ~= nil and type(opts) ~= "table" then
    require("perfev.options").arg(opts, "table", "perfev.symbols.new", "its options")
  end
  opts = opts or {}
  local ids, ranks = {}, {}
  for k, v in pairs(opts.build_ids or {}) do
    if type(k) == "string" then ids[k] = v
    elseif type(v) == "table" and v.filename then
      ids[v.filename] = v.build_id
      if type(k) == "number" then ranks[v.filename] = k end
    end
  end
  local home = os.getenv("HOME") or "/root"
  local self = setmetatable({
    build_ids = ids, ranks = ranks, kallsyms_path = opts.kallsyms, debug_dir = opts.debug_dir or (home .. "/.debug"),
    perfmap_dir = opts.perfmap_dir or "/tmp", dsos = {}, procs = {}, kernel_dso = nil, kcache = {},
  }, Sym)
  self.unknown = { name = "[unknown]", short = "[unknown]", kind = "none", entries = {}, raw = {}, rank = 0,
                   nomap = true }
  return self
end

function Sym:dso(name, kind, short)
  own(self, "dso")
  expect(type(name) == "string", "dso", "the name must be a string", name)
  expect(DSO_KINDS[kind], "dso", "the kind must be 'elf', 'perfmap', 'none', 'kernel' or 'kernel-module'", kind)
  expect(short == nil or type(short) == "string", "dso", "the short name must be a string or nil", short)
  local d = self.dsos[name]
  if not d then
    -- rank: perf orders callchain siblings of different dsos by its dso
    -- pointers, which follow their creation: those of the file's build-id
    -- list first (perf reads it first), in its order, then as they came
    self.ndsos = (self.ndsos or 0) + 1
    d = { name = name, short = short or basename(name), kind = kind, entries = {}, raw = {},
          rank = self.ranks[name] or (kind == "kernel" and 0.5) or 1e6 + self.ndsos, memo = false }
    self.dsos[name] = d
  end
  return d
end

-- The symbol table of a dso (a core.symtab), loaded on first use.
local function sym_table(self, d)
  local t = d.syms
  if t then return t end
  if d.kind == "elf" then t = load_elf(self, d)
  elseif d.kind == "perfmap" then t = load_perfmap(d.name)
  else t = EMPTY end
  d.syms = t
  return t
end
function Sym:table(d)
  own(self, "table")
  expect(type(d) == "table" and (d == self.unknown or self.dsos[d.name] == d), "table", "expects a dso of S:dso", d)
  return sym_table(self, d)
end

-- The kernel's symbols, as perf report finds them: the copy of
-- /proc/kallsyms that perf record left in the build-id cache for the
-- recorded kernel (taken when it recorded, so its modules are those of
-- the recording; a regular file, read in a few ms, where /proc/kallsyms
-- costs the kernel ~80 ms to format on every read), else /proc/kallsyms
-- when the running kernel is the recorded one.
function Sym:kernel_table()
  own(self, "kernel_table")
  if self.kallsyms_path == false then return nil end
  local path = self.kallsyms_path
  if not path then
    path = "/proc/kallsyms"
    local want = self.build_ids["[kernel.kallsyms]"]
    if want then
      local copy = ("%s/[kernel.kallsyms]/%s/kallsyms"):format(self.debug_dir, tohex(want))
      local have = buildid.of_kernel()
      if fs.exists(copy) or (have and have ~= want) then path = copy end
    end
  end
  return kallsyms.open(path)
end

local function proc(self, pid)
  local p = self.procs[pid]
  if not p then
    p = { maps = {}, cache = {}, rawcache = {} }
    self.procs[pid] = p
  end
  return p
end

-- Inserts map m into the sorted list, cutting what it overlaps out of the
-- maps already there (maps__fixup_overlappings).
local function insert_map(p, m)
  local maps = p.maps
  local n = #maps
  -- the first map that ends after m starts
  local lo, hi = 1, n + 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if maps[mid].stop <= m.start then lo = mid + 1 else hi = mid end
  end
  local last = lo
  while last <= n and maps[last].start < m.stop do last = last + 1 end
  -- maps[lo .. last-1] overlap m: keep what sticks out before and after it
  local repl = {}
  if lo < last then
    local o = maps[lo]
    if o.start < m.start then
      repl[#repl + 1] = { start = o.start, stop = m.start, pgoff = o.pgoff, dso = o.dso, ident = o.ident }
    end
  end
  repl[#repl + 1] = m
  if lo < last then
    local o = maps[last - 1]
    if o.stop > m.stop then
      local pg = o.ident and o.pgoff or o.pgoff + (m.stop - o.start)
      repl[#repl + 1] = { start = m.stop, stop = o.stop, pgoff = pg, dso = o.dso, ident = o.ident }
    end
  end
  local removed, added = last - lo, #repl
  local shift = added - removed
  if shift > 0 then
    for i = n, last, -1 do maps[i + shift] = maps[i] end
  elseif shift < 0 then
    for i = last, n do maps[i + shift] = maps[i] end
    for i = n + shift + 1, n do maps[i] = nil end
  end
  for i = 1, added do maps[lo + i - 1] = repl[i] end
  p.cache, p.rawcache = {}, {}
end

local PROT_EXEC = 4
local MISC_MMAP_DATA = 0x2000
local MISC_CPUMODE_KERNEL = 1

-- S:mmap(rec): an mmap or mmap2 record (pid, addr, len, pgoff, filename,
-- misc, prot). Kernel maps (pid -1, kernel cpumode) only mark the kernel.
function Sym:mmap(rec)
  own(self, "mmap")
  expect(type(rec) == "table", "mmap", "expects an mmap record", rec)
  expect_address(rec.addr, "mmap", "the record's addr")
  if rec.len ~= nil then expect_address(rec.len, "mmap", "the record's len") end
  if rec.pgoff ~= nil then expect_address(rec.pgoff, "mmap", "the record's pgoff") end
  expect(rec.filename == nil or type(rec.filename) == "string", "mmap", "the record's filename must be a string",
       rec.filename)
  expect(is_value(rec.pid), "mmap", "the record's pid must be an integer", rec.pid)
  expect_optional(rec.misc, "mmap", "the record's misc")
  expect_optional(rec.prot, "mmap", "the record's prot")
  local space, start = split(rec.addr)
  local name = rec.filename or ""
  local lspace, len = split(rec.len or 0)
  if lspace ~= "u" then len = 0 end
  if space == "k" or rec.pid == -1 or (rec.misc and rec.misc % 8 == MISC_CPUMODE_KERNEL) then
    -- the kernel's text ("[kernel.kallsyms]_text"): what lies outside it
    -- is a module's, or unknown
    if space == "k" and name:sub(1, 17) == "[kernel.kallsyms]" then
      self.kernel_range = { start, start + len }
    end
    return
  end
  if space ~= "u" then return end
  local prot = rec.prot
  if prot == nil then prot = (rec.misc and rec.misc >= MISC_MMAP_DATA and
                              math.floor(rec.misc / MISC_MMAP_DATA) % 2 == 1) and 0 or PROT_EXEC end
  local _, pgoff = split(rec.pgoff or 0)
  self:add_map(rec.pid, start, start + len, pgoff, name, prot)
end

-- S:add_map(pid, start, stop, pgoff, filename, prot): one mapping (user space).
function Sym:add_map(pid, start, stop, pgoff, name, prot)
  own(self, "add_map")
  expect(is_value(pid), "add_map", "the pid must be an integer", pid)
  expect(type(start) == "number", "add_map", "the start must be a number (as split returns it)", start)
  expect(type(stop) == "number", "add_map", "the stop must be a number (as split returns it)", stop)
  expect(type(pgoff) == "number", "add_map", "the pgoff must be a number (as split returns it)", pgoff)
  expect(type(name) == "string", "add_map", "the filename must be a string", name)
  expect(is_value(prot), "add_map", "the prot must be an integer", prot)
  local anon, nodso = is_anon(name), is_nodso(name)
  local d
  if (anon or nodso) and prot % 8 >= PROT_EXEC then
    local path = ("%s/perf-%d.map"):format(self.perfmap_dir, pid)
    d = self:dso(path, "perfmap", ("[JIT] tid %d"):format(pid))   -- perf's dso__set_basename
  elseif anon or nodso then
    d = self:dso(name, "none")
  elseif name:sub(1, 1) == "[" then   -- [vdso], [vsyscall], ...: from perf's cache by build id
    d = self:dso(name, self.build_ids[name] and "elf" or "none", name)
  else
    d = self:dso(name, "elf")
  end
  insert_map(proc(self, pid), { start = start, stop = stop, pgoff = pgoff, dso = d, ident = anon or nodso })
end

-- S:fork(rec): a fork record; a new process (pid ~= ppid) gets a copy of
-- its parent's maps, a new thread shares its process's.
function Sym:fork(rec)
  own(self, "fork")
  expect(type(rec) == "table", "fork", "expects a fork record", rec)
  expect(is_value(rec.pid) and is_value(rec.ppid), "fork", "the record's pid and ppid must be integers",
       not is_value(rec.pid) and rec.pid or rec.ppid)
  if rec.pid == rec.ppid then return end
  local parent = self.procs[rec.ppid]
  local p = proc(self, rec.pid)
  if parent then
    local copy = {}
    for i, m in ipairs(parent.maps) do copy[i] = m end
    p.maps = copy
  end
  p.cache, p.rawcache = {}, {}
end

-- S:proc(pid): the executable mappings of a live process, from /proc/PID/maps.
function Sym:proc(pid)
  own(self, "proc")
  expect(is_value(pid), "proc", "the pid must be an integer", pid)
  local f, msg = io.open(("/proc/%d/maps"):format(pid), "r")
  if not f then return nil, msg end
  for line in f:lines() do
    local a, b, perms, off, path = line:match("^(%x+)%-(%x+) (%S+) (%x+) %S+ %d+%s*(.*)$")
    if a and perms:sub(3, 3) == "x" then
      local start, stop = tonumber(a, 16), tonumber(b, 16)
      if start < 2 ^ 53 and stop < 2 ^ 53 then
        self:add_map(pid, start, stop, tonumber(off, 16), path ~= "" and path or "//anon", 5)
      end
    end
  end
  f:close()
  return true
end

-- An entry: what a sample or a callchain address resolves to, interned per
-- (dso, symbol) or, unresolved, per (dso, address): e.dso, e.name (nil
-- unresolved), e.space and e.addr (the address shown when unresolved),
-- e.start (the symbol's start), e.level ('.' or 'k' as perf prints).
local function entry(d, t, i, space, v)
  if i then
    local e = d.entries[i]
    if not e then
      -- every field an entry gets is in its constructor (doc/runtimes.md:
      -- LuaJIT's template forwarding)
      local start = t:start(i)
      e = { dso = d, name = t:name(i), start = start, space = space, addr = start,
            symkey = false, object_text = false }
      e.symkey = e
      d.entries[i] = e
    end
    return e
  end
  -- exact digits (LuaJIT's tostring gives 14 digits of a number: user
  -- addresses near 2^47 would share a key)
  local key = space .. compat.tostring(v)
  local e = d.raw[key]
  if not e then
    e = { dso = d, space = space, addr = v, symkey = key, object_text = false }
    d.raw[key] = e
  end
  return e
end

local function kernel_entry(self, v)
  local d = self.kernel_dso
  if not d then
    d = self:dso("[kernel.kallsyms]", "kernel", "[kernel.kallsyms]")
    self.kernel_dso = d
    self.ktable = self:kernel_table() or false
  end
  local key, name, start, mod, object
  if self.ktable then key, name, start, mod, object = self.ktable:find(v) end
  -- the kernel's map: from its text's start to the end of its last
  -- symbol (perf's, once the kernel's symbols are loaded: init text and
  -- data resolve, start_kernel in every idle callchain), or its text's end
  local r = self.kernel_range
  if r and not mod then
    local limit = self.ktable and self.ktable:core_limit()
    if v < r[1] or v >= (limit and limit > r[2] and limit or r[2]) then
      return entry(self.unknown, nil, nil, "k", v)
    end
  end
  if mod then
    local m = "[" .. mod .. "]"
    d = self.dsos[m] or self:dso(m, "kernel-module", m)
  end
  if not key then return entry(d, nil, nil, "k", v) end
  local e = d.entries[key]
  if not e then
    e = { dso = d, name = name, start = start, space = "k", addr = start, symkey = false, object_text = false }
    -- a data symbol's row reads name+0xOFF, the offset of the address
    -- that made it, as perf prints an STT_OBJECT's
    if object then e.object_text = ("%s+0x%x"):format(name, v - start) end
    e.symkey = e
    d.entries[key] = e
  end
  return e
end

-- S:resolve(pid, ip, mode[, raw]) -> entry. mode: "kernel" or "user" (the
-- sample's cpumode, or the callchain context). raw: the entry of an
-- unresolved address keeps the address itself (perf's callchain nodes)
-- instead of its offset in the file.
local function resolve(self, pid, ip, mode, raw)
  -- caches by the address as given (a Lua number); cdata (LuaJIT) by its value
  local key = ip
  if type(ip) ~= "number" then
    local space, v = split(ip)
    key = space == "u" and v or nil
  end
  if mode == "kernel" then
    local e = key and self.kcache[key]
    if e then return e end
    local space, v = split(ip)
    if space ~= "k" then e = entry(self.unknown, nil, nil, space, v)
    else e = kernel_entry(self, v) end
    if key then self.kcache[key] = e end
    return e
  end
  local p = self.procs[pid]
  local cache = p and (raw and p.rawcache or p.cache)
  local e = cache and key and cache[key]
  if e then return e end
  local space, v = split(ip)
  if not p or space ~= "u" then
    e = entry(self.unknown, nil, nil, space, v)
  else
    local maps = p.maps
    local lo, hi = 1, #maps
    local m
    while lo <= hi do
      local mid = math.floor((lo + hi) / 2)
      local x = maps[mid]
      if v < x.start then hi = mid - 1
      elseif v >= x.stop then lo = mid + 1
      else m = x; break end
    end
    if not m then
      e = entry(self.unknown, nil, nil, space, v)
    else
      local off = m.ident and v or (v - m.start + m.pgoff)
      local d = m.dso
      local t = sym_table(self, d)
      -- each file offset is looked up once per dso (its one table):
      -- processes of one executable (and the libraries every process
      -- maps) share them
      local memo = d.memo
      if not memo then memo = {}; d.memo = memo end
      local i = memo[off]
      if i == nil then
        i = t:find(off) or false
        memo[off] = i
      end
      i = i or nil
      e = entry(d, t, i, "u", (raw and not i) and v or off)
    end
  end
  if cache and key then cache[key] = e end
  return e
end
F.resolve = resolve
function Sym:resolve(pid, ip, mode, raw)
  own(self, "resolve")
  expect(is_value(pid), "resolve", "the pid must be an integer", pid)
  expect_address(ip, "resolve", "the address")
  expect(MODES[mode], "resolve", "the mode must be 'kernel' or 'user'", mode)
  return resolve(self, pid, ip, mode, raw)
end

-- S:cache(pid, mode) -> the table S:resolve(pid, ip, mode, true) keeps
-- its answers in, by ip (callers look there first: the hot path of a
-- callchain walk), or nil.
local function cache(self, pid, mode)
  if mode == "kernel" then return self.kcache end
  local p = self.procs[pid]
  if mode == "user" and p then return p.rawcache end
  return nil
end
F.cache = cache
function Sym:cache(pid, mode)
  own(self, "cache")
  return cache(self, pid, mode)
end

-- demangle(entries): C++ names (_Z...) of resolved entries become what
-- perf prints (its bfd_demangle without parameters, e.g. "operator new",
-- "std::locale::operator="), through binutils' c++filt -p, in one run;
-- names stay mangled when c++filt is missing.
local demangled = {}

-- c++filt has no switch for it, but perf (libbfd without DMGL_VERBOSE)
-- prints the standard substitutions Ss, Si, So, Sd by their short names
-- ("std::ostream::put"), and in full only before a constructor or
-- destructor of the class ("std::basic_ostream<...>::basic_ostream"), as
-- libiberty's demangler does; c++filt always prints them in full.
local STD_SUBS = {
  { full = "std::basic_string<char, std::char_traits<char>, std::allocator<char> >",
    short = "std::string", class = "basic_string" },
  { full = "std::basic_istream<char, std::char_traits<char> >", short = "std::istream", class = "basic_istream" },
  { full = "std::basic_ostream<char, std::char_traits<char> >", short = "std::ostream", class = "basic_ostream" },
  { full = "std::basic_iostream<char, std::char_traits<char> >", short = "std::iostream", class = "basic_iostream" },
}

local function abbreviate(name)
  for _, sub in ipairs(STD_SUBS) do
    local out, pos = {}, 1
    while true do
      local a, b = name:find(sub.full, pos, true)
      if not a then break end
      local ctor = name:find("^::~?" .. sub.class .. "%f[^%w_]", b + 1)
      out[#out + 1] = name:sub(pos, a - 1)
      out[#out + 1] = ctor and sub.full or sub.short
      pos = b + 1
    end
    if pos > 1 then
      out[#out + 1] = name:sub(pos)
      name = table.concat(out)
    end
  end
  return name
end

function M.demangle(entries)
  if type(entries) ~= "table" then
    require("perfev.options").arg(entries, "table", "perfev.symbols.demangle", "the entries")
  end
  local todo, seen = {}, {}
  for i, e in ipairs(entries) do
    if type(e) ~= "table" then
      refuse("demangle", "entries[%d] must be an entry of S:resolve, got %s", i, describe(e))
    end
    local n = e.name
    if n and n:sub(1, 2) == "_Z" and not e.demangled then
      if demangled[n] then
        e.name, e.demangled = demangled[n], true
      elseif not seen[n] then
        seen[n] = true
        todo[#todo + 1] = n
      end
    end
  end
  if #todo > 0 then
    local tmp = os.tmpname()
    local f = io.open(tmp, "w")
    if f then
      f:write(table.concat(todo, "\n"), "\n")
      f:close()
      local p = io.popen("c++filt -p < '" .. tmp .. "' 2>/dev/null", "r")
      local i = 0
      for line in (p and p:lines() or function() end) do
        i = i + 1
        if todo[i] and line ~= "" then demangled[todo[i]] = abbreviate(line) end
      end
      if p then p:close() end
    end
    os.remove(tmp)
  end
  for _, e in ipairs(entries) do
    local n = e.name
    if n and not e.demangled and demangled[n] then e.name, e.demangled = demangled[n], true end
  end
end

-- S:unknown_entry(ip) -> the entry of an address outside any map.
local function unknown_entry(self, ip)
  local space, v = split(ip)
  return entry(self.unknown, nil, nil, space, v)
end
F.unknown_entry = unknown_entry
function Sym:unknown_entry(ip)
  own(self, "unknown_entry")
  expect_address(ip, "unknown_entry", "the address")
  return unknown_entry(self, ip)
end

-- callchain_name(e) -> a callchain frame as perf prints it: the name, or
-- the address in C's %#x (0x and no leading zeros; 0 for zero).
local function callchain_name(e)
  if e.name then return e.name end
  local s = e.chain_text
  if not s then
    if e.addr == 0 and e.space ~= "k" then s = "0"
    else s = hex(e.space, e.addr):gsub("^0x0+(%x)", "0x%1") end
    e.chain_text = s
  end
  return s
end

F.callchain_name = callchain_name

-- format(e) -> the symbol as perf prints it: the name, or 0x and 16 digits.
local function format(e)
  if e.name then return e.object_text or e.name end
  local s = e.text
  if not s then
    s = hex(e.space, e.addr)
    e.text = s
  end
  return s
end
F.format = format

-- an entry S:resolve returned: named, or its space and address
local function check_entry(fname, e)
  if type(e) ~= "table" then refuse(fname, "expects an entry of S:resolve, got %s", describe(e)) end
  if e.name ~= nil then
    if type(e.name) ~= "string" then refuse(fname, "the entry's name must be a string, got %s", describe(e.name)) end
    return
  end
  check_value(fname, e.space, e.addr)
end
function M.callchain_name(e)
  check_entry("callchain_name", e)
  return callchain_name(e)
end
function M.format(e)
  check_entry("format", e)
  return format(e)
end

return M
