-- perfev.perfmap: the /tmp/perf-PID.map file through which perf report and
-- perf script name code that has no ELF file: JIT output, or the frames of
-- an interpreter (Lua functions) given synthetic addresses.
--
--   local perfmap = require "perfev.perfmap"
--   local m = assert(perfmap.open())               -- /tmp/perf-<this pid>.map
--   m:add(0x10000000000, 16, "lua:main@x.lua:1")   -- START SIZE name, in hex
--   local ip = m:intern("lua:f@x.lua:10")          -- a fresh synthetic address
--   w:write(m:mmap_record())                       -- the "//anon" mapping perf needs
--   m:close()
--
-- perf 6.1 reads the map only for a sample that falls in an anonymous
-- executable mapping ("//anon" in an mmap or mmap2 record, as the kernel
-- names one): a sample at an address no mapping covers stays [unknown].
-- m:mmap_record() gives that mapping for the addresses the map covers. See
-- doc/perfdata-write.md.
local fs = require "perfev.fs"
local core = require "perfev.core"
local options = require "perfev.options"
local compat = require "perfev.compat"

local M = {}

-- Where m:intern places names unless told otherwise: 1 TiB, above a
-- non-PIE binary and its heap, far below where x86-64 Linux puts PIE
-- binaries (0x55...) and shared libraries (0x7f...).
M.BASE = 0x10000000000
M.SLOT = 16            -- bytes m:intern gives each name

local PROT_READ, PROT_EXEC = 1, 4
local MAP_PRIVATE, MAP_ANONYMOUS = 0x02, 0x20
local PID_MAX_LIMIT = 4194304    -- the kernel's largest pid_max (PID_MAX_LIMIT on 64-bit)

local Map = {}
Map.__index = Map

-- perfmap.open([pid[, opts]]) -> map | nil, message, errno
-- pid: whose map (default this process); opts.path: another file (tests),
-- opts.append: keep what the file holds, opts.base, opts.slot: m:intern's
-- first address and bytes per name.
local OPTIONS = { path = "string", append = "boolean", base = "positive", slot = "positive" }

function M.open(pid, opts)
  if pid ~= nil and not (options.is_integer(pid) and pid > 0 and pid <= PID_MAX_LIMIT) then
    options.raisef("perfev.perfmap.open: pid must be a process id (1..%d), got %s", PID_MAX_LIMIT,
                   options.describe(pid))
  end
  opts = options.check(opts, OPTIONS, "perfev.perfmap.open")
  pid = pid or fs.own_pid()
  local path = opts.path or ("/tmp/perf-%d.map"):format(pid)
  local f, msg, errno = io.open(path, opts.append and "a" or "w")
  if not f then return nil, "perfev.perfmap: " .. msg, errno end
  return setmetatable({ f = f, path = path, pid = pid, names = {}, next = opts.base or M.BASE,
                        slot = opts.slot or M.SLOT, n = 0 }, Map)
end

local function check_open(self, method)
  options.self(self, Map, "perfev.perfmap", method)
  if not self.f then options.raise("perfev.perfmap: the map is closed") end
end

-- m:add(start, size, name): one line "START SIZE name" (hex, as perf reads
-- it). A name cannot hold a newline or a NUL (perf reads the line as a C
-- string); the size must be > 0.
function Map:add(start, size, name)
  check_open(self, "add")
  if not options.is_integer(start) then options.raise("perfev.perfmap: add: start must be an integer") end
  if not options.is_integer(size) or size <= 0 then
    options.raise("perfev.perfmap: add: size must be a positive integer")
  end
  if type(name) ~= "string" or name == "" or name:find("[\r\n]") or name:find("\0", 1, true) then
    options.raise("perfev.perfmap: add: name must be a non-empty string without a newline or a NUL")
  end
  local ok, msg, errno = self.f:write(("%x %x %s\n"):format(start, size, name))
  if not ok then return nil, "perfev.perfmap: " .. self.path .. ": " .. tostring(msg), errno end
  if not self.lo or compat.ult(start, self.lo) then self.lo = start end
  local hi = start + size
  if not self.hi or compat.ult(self.hi, hi) then self.hi = hi end
  self.n = self.n + 1
  return true
end

-- m:intern(name) -> address: the same address for the same name, a new
-- slot after the last for a new one (written to the map at once).
function Map:intern(name)
  check_open(self, "intern")
  local a = self.names[name]
  if a then return a end
  a = self.next
  local ok, msg, errno = self:add(a, self.slot, name)
  if not ok then return nil, msg, errno end
  self.names[name] = a
  self.next = a + self.slot
  return a
end

-- m:range() -> lo, hi: the addresses the lines cover ([lo, hi)), or nil.
function Map:range()
  options.self(self, Map, "perfev.perfmap", "range")
  return self.lo, self.hi
end

-- m:mmap_record([opts]) -> an mmap2 record of an anonymous executable
-- mapping over m:range() for the map's pid, which makes perf look the
-- addresses up in the map. opts: tid, time, and any other field.
function Map:mmap_record(opts)
  options.self(self, Map, "perfev.perfmap", "mmap_record")
  if opts ~= nil and type(opts) ~= "table" then
    options.raisef("perfev.perfmap: mmap_record: options must be a table, got %s", options.describe(opts))
  end
  if not self.lo then options.raise("perfev.perfmap: mmap_record: the map has no lines yet") end
  local r = { type = "mmap2", misc = core.MISC.USER, pid = self.pid, tid = self.pid, addr = self.lo,
              len = self.hi - self.lo, pgoff = 0, maj = 0, min = 0, ino = 0, ino_generation = 0,
              prot = PROT_READ + PROT_EXEC, flags = MAP_PRIVATE + MAP_ANONYMOUS,   -- disjoint bits
              filename = "//anon", time = 0 }
  for k, v in pairs(opts or {}) do r[k] = v end
  return r
end

function Map:flush()
  check_open(self, "flush")
  local ok, msg, errno = self.f:flush()
  if not ok then return nil, "perfev.perfmap: " .. self.path .. ": " .. tostring(msg), errno end
  return true
end

-- m:close() -> true | nil, message, errno (also __close and __gc)
function Map:close()
  options.self(self, Map, "perfev.perfmap", "close")
  if not self.f then return true end
  local f = self.f
  self.f = nil
  local ok, msg, errno = f:close()
  if not ok then return nil, "perfev.perfmap: " .. self.path .. ": " .. tostring(msg), errno end
  return true
end

-- m:remove(): close and delete the file (a profiler's temporary map).
function Map:remove()
  options.self(self, Map, "perfev.perfmap", "remove")
  self:close()
  return os.remove(self.path)
end

Map.__close = Map.close
Map.__gc = Map.close

function Map:__tostring()
  options.self(self, Map, "perfev.perfmap", "__tostring")
  return ("perfev.perfmap (%s, %d lines%s)"):format(self.path, self.n, self.f and "" or ", closed")
end

-- perfev.perfmap is this module, called: perfev.perfmap([pid][, opts]) is open
return setmetatable(M, { __call = function(_, pid, opts) return M.open(pid, opts) end })
