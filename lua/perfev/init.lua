-- perfev: Linux perf events for Lua. `require "perfev"` gives what the
-- README documents: attrs, event strings, events and groups, decoding,
-- the constants; the C core stays reachable as perfev.core for low-level
-- work. doc/architecture.md maps the files.
-- first: on Lua 5.1/5.2 it refuses with the runtimes perfev supports
require "perfev.compat"

-- A core built for another Lua (make LUA=luajit, then lua5.4) fails in
-- dlopen with an undefined lua_* symbol: say which Lua it was built for
-- (csrc/core.c writes it into the file) and how to rebuild it.
local function load_core()
  local ok, core = pcall(require, "perfev.core")
  if ok then return core end
  local msg = tostring(core)
  local path = package.searchpath("perfev.core", package.cpath)
  if path and msg:find("undefined symbol: lua", 1, true) then
    local f = io.open(path, "rb")
    local built = f and f:read("*a"):match("perfev%.core built for <([^>]*)>")
    if f then f:close() end
    local this = rawget(_G, "jit") and rawget(_G, "jit").version or _VERSION
    msg = ("%s was built for %s, not for %s, which runs now: rebuild it for this Lua "
           .. "(from a checkout: make LUA=%s; make core-luajit builds build/luajit/ for LuaJIT apart)")
          :format(path, built or "another Lua", this, rawget(_G, "jit") and "luajit" or this:gsub("Lua ", "lua"))
  end
  error(msg, 0)
end
local core = load_core()
local spec = require "perfev.spec"
local open = require "perfev.open"
local group = require "perfev.group"
local parse = require "perfev.parse"
local measure = require "perfev.measure"
local options = require "perfev.options"
local show = require "perfev.show"

local M = {}
M.core = core
M.VERSION = core.VERSION
M._VERSION = "perfev " .. core.VERSION
-- perfev.compat.hex(v) ...: 64-bit integers on every runtime (doc/runtimes.md)
M.compat = require "perfev.compat"

-- LuaJIT: field-selected values of plain samples read through the FFI, in
-- a loop LuaJIT compiles (lua/perfev/decode_jit.lua); not without the FFI.
if core.decode_accelerator then
  local ok, decode_jit = pcall(require, "perfev.decode_jit")
  if ok then core.decode_accelerator(decode_jit.iterator) end
end

-- The core's functions that are part of perfev's own API.
for _, k in ipairs { "encode", "enable_all", "disable_all", "clock_ns", "rusage" } do
  M[k] = core[k]
end
-- perfev.decode(bytes, attrs[, opts]), .records, .samples, .tally (lua/perfev/decode.lua);
-- the same iteration methods on rings (lua/perfev/ring.lua)
M.decode = require "perfev.decode"
require("perfev.ring").install()
-- Every constant table of the core (TYPE, SW, SAMPLE, FORMAT, RECORD, MISC, ERRNO ...).
for k, v in pairs(core) do
  if type(v) == "table" and k:match("^[A-Z][A-Z0-9_]*$") then M[k] = v end
end

-- perfev.attr(spec): a new attr from an attr, a table of fields or an event name.
function M.attr(s)
  return (spec.attr(s, "perfev.attr"))
end

-- Every constructor is a callable module table (perfev.stat is one):
-- perfev.X(...) builds, and the module's other functions are reachable
-- beside it (perfev.profile.formats, perfev.group.is_group, ...).
-- perfev.open(spec, opts) -> event | nil, message, errno (lua/perfev/open.lua)
M.open = open

-- perfev.group(specs | "{a,b}:u" string, opts) -> group | nil, message, errno
M.group = group

-- perfev.parse(s, opts) -> event table, or a list of them (lua/perfev/parse.lua);
-- perfev.parse_list(s, opts) -> always a list
M.parse = parse.parse
M.parse_list = parse.list

-- ev:measure(fn, ...) -> count, enabled, running: reset, enable, call,
-- disable, read. The one Lua method of the C event class: the core
-- exports its method table (core.event_methods) for this.
function core.event_methods.measure(ev, fn, ...)
  if not options.is_event(ev) then
    options.raisef("perfev.event: bad self for measure (expected a perfev event, got %s): call it as "
                   .. "ev:measure(fn, ...)", options.describe(ev))
  end
  return measure(ev, fn, ...)
end

-- ev:read_raw() -> the kernel's words by name, a table that prints as
-- perfev.reading(value = ..., ...) (lua/perfev/show.lua)
local read_raw = core.event_methods.read_raw
function core.event_methods.read_raw(ev)
  if not options.is_event(ev) then
    options.raisef("perfev.event: bad self for read_raw (expected a perfev event, got %s): call it as "
                   .. "ev:read_raw()", options.describe(ev))
  end
  return show.reading(read_raw(ev))
end

-- What a script may never use is loaded on first access, so that
-- `require "perfev"` stays cheap (start-up matters in OpenResty and games):
--   perfev.list([filter], [opts]) -> the events of this machine, like perf list
--   perfev.uprobe{ path, func | offset | addr, ret } / perfev.kprobe{ func | addr,
--     offset, ret } -> a spec table perfev.open takes (see perfev/probe.lua)
--   perfev.sampler(opts) -> a per-CPU sampling session over a task and its
--     children, or a command (see perfev/sampler.lua, doc/sampler.md)
--   perfev.record(opts) -> summary: sample into a perf.data file, like perf
--     record (see perfev/record.lua, doc/perfdata-write.md)
--   perfev.frames(opts) -> per-frame counters, zones and worst frames of a
--     game loop (see perfev/frames.lua, doc/games.md)
--   perfev.alloc(opts) -> an allocation profiler: bytes and blocks allocated
--     and in use by Lua stack (see perfev/alloc.lua, doc/memory.md)
--   perfev.perfdata, perfev.perfmap: the modules
--   perfev.attach(opts) -> the profile of a running process's Lua stacks
--     (see perfev/attach/init.lua, doc/attach.md)
--   perfev.help([name]): the entry points, or one's signature, what it does
--     and its doc page (see perfev/help.lua)
local LAZY = {   -- key -> module, and the field of it (nil: the module itself)
  list = { "perfev.list", "list" },
  uprobe = { "perfev.probe", "uprobe" }, kprobe = { "perfev.probe", "kprobe" },
  sampler = { "perfev.sampler" }, record = { "perfev.record" },
  perfdata = { "perfev.perfdata" }, perfmap = { "perfev.perfmap" },
  profile = { "perfev.profile" },
  attach = { "perfev.attach" },
  frames = { "perfev.frames" },
  alloc = { "perfev.alloc" },          -- callable: perfev.alloc{...}; perfev.alloc.counter()
  report = { "perfev.report" },
  stat = { "perfev.stat" },
  on_warning = { "perfev.warn", "on_warning" },
  help = { "perfev.help", "help" },
}
setmetatable(M, { __index = function(t, k)
  local where = LAZY[k]
  if not where then return nil end
  local v = require(where[1])
  if where[2] then v = v[where[2]] end
  rawset(t, k, v)
  return v
end,
-- print(perfev), the REPL's `perfev`: the version and the entry points
__tostring = function() return require("perfev.help").summary(M.VERSION) end })

return M
