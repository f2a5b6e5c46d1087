-- One way to check what a caller passed to the Lua layer, and to report a
-- caller's mistake: every entry point (perfev.open, group, parse, attr,
-- uprobe/kprobe, sampler, record, list, perfmap, perfdata open/create,
-- writer) and every Lua-written method checks its arguments here.
--
-- Errors are raised at the caller's line: raise() walks the stack past
-- the library's own Lua files (those beside this one) and C functions, to
-- the first frame of the user's code, however deep inside the library the
-- mistake was found. Messages name the function and the option or field,
-- and say "did you mean" when a close name exists.
local core = require "perfev.core"
local nearest = require "perfev.nearest"
local compat = require "perfev.compat"

local M = {}

-- The directory of the library's Lua files, as debug.getinfo's source
-- gives it ("@lua/perfev/"): every file under it is internal.
local DIR = "@" .. (debug.getinfo(1, "S").source:match("^@(.*[/\\])[^/\\]*$") or "\0")

local function internal(source)
  return source:sub(1, #DIR) == DIR
end

-- raise(msg): error(msg) at the first frame outside the library, or
-- with no position when there is none: a call the interpreter made a tail
-- call (the REPL runs `perfev.open(...)` as `return perfev.open(...)`, and
-- LuaJIT's `=expr` the same) leaves only C frames above the library, and
-- a position inside the library would name perfev's file, not the mistake.
function M.raise(msg)
  local level = 2
  while true do
    local info = debug.getinfo(level, "S")
    if not info then
      level = 0
      break
    end
    if info.what ~= "C" and info.what ~= "tail" and not internal(info.source) then break end
    level = level + 1
  end
  error(msg, level)
end

-- where(level) -> "file:line" of the first frame outside the library from
-- level (as debug.getinfo counts, from where()'s caller), or nil
function M.where(level)
  level = (level or 1) + 1
  while true do
    local info = debug.getinfo(level, "Sl")
    if not info then return nil end
    if info.what ~= "C" and not internal(info.source) then
      return ("%s:%d"):format(info.short_src, info.currentline or 0)
    end
    level = level + 1
  end
end

-- raisef(fmt, ...): raise(fmt:format(...))
function M.raisef(fmt, ...)
  M.raise(fmt:format(...))
end

-- strip(msg) -> msg without a leading position inside the library
-- ("lua/perfev/spec.lua:45: "), which the C core adds when it raises on
-- a value the library passed on for its caller.
function M.strip(msg)
  if type(msg) ~= "string" then return msg end
  local where, rest = msg:match("^(.-:%d+): (.*)$")
  if where and internal("@" .. where) then return rest end
  return msg
end

-- strip_where(msg) -> msg without its leading position, wherever it
-- points (a message raised for the caller, wrapped into another one).
function M.strip_where(msg)
  if type(msg) ~= "string" then return tostring(msg) end
  local where, rest = msg:match("^(.-:%d+): (.*)$")
  if where and not where:find(": ", 1, true) then return rest end
  return msg
end

-- call(f, ...) -> f(...), an error raised by f (the C core refusing a
-- value the caller gave) re-raised at the caller's line.
local function pass(ok, ...)
  if ok then return ... end
  local err = ...
  if type(err) ~= "string" then error(err, 0) end
  M.raise(M.strip(err))
end
function M.call(f, ...)
  return pass(pcall(f, ...))
end

---------------------------------------------------------------------------
-- kinds of values

-- is_integer(v): an integer, or a float with an integer value (LuaJIT has
-- no integer subtype; Lua 5.3+ converts such floats where one is needed),
-- or on LuaJIT a 64-bit integer cdata (how values above 2^53 come back)
local mtype = compat.math_type
function M.is_integer(v)
  if mtype and mtype(v) == "integer" then return true end
  local t = type(v)
  if t == "cdata" then return true end
  return t == "number" and v == math.floor(v) and v - 1 ~= v
end
local is_integer = M.is_integer

-- of_class(v, methods) -> whether v is a userdata of the C class whose
-- method table the core exports as methods (core.event_methods,
-- core.ring_methods)
function M.of_class(v, methods)
  local mt = type(v) == "userdata" and getmetatable(v)
  return mt and type(mt) == "table" and rawget(mt, "__index") == methods or false
end

local function is_event(v) return M.of_class(v, core.event_methods) end
M.is_event = is_event

-- kind -> { test, what it is called in a message }
local KINDS = {
  any = { function() return true end, "anything" },
  integer = { is_integer, "an integer" },
  positive = { function(v) return is_integer(v) and v > 0 end, "a positive integer" },
  number = { function(v) return type(v) == "number" end, "a number" },
  string = { function(v) return type(v) == "string" end, "a string" },
  boolean = { function(v) return type(v) == "boolean" end, "a boolean" },
  table = { function(v) return type(v) == "table" end, "a table" },
  ["function"] = { function(v) return type(v) == "function" end, "a function" },
  file = { function(v) return io.type(v) == "file" end, "an open file handle" },
  event = { is_event, "a perfev event" },
  -- an event spec: a name, a table of attr fields or an attr
  spec = { function(v) local t = type(v) return t == "string" or t == "table" or t == "userdata" end,
           "an event (a name, a table of attr fields or an attr)" },
  -- a mask of named bits: a name, "a|b", a list of names or an integer
  mask = { function(v) local t = type(v) return t == "string" or t == "table" or is_integer(v) end,
           "a mask (a name, a list of names or an integer)" },
  -- the one type of every 'cpus' option: a list of CPU numbers or the
  -- kernel's cpulist string ("0-3,5"); M.cpus turns it into the list
  cpus = { function(v) local t = type(v) return t == "string" or t == "table" end,
           "a CPU list (a list of CPU numbers or a string such as \"0-3,5\")" },
}
M.KINDS = KINDS

-- fits(v, kind) -> whether v is of kind ("integer", "string|table" ...)
local function fits(v, kind)
  for k in kind:gmatch("[^|]+") do
    local def = KINDS[k]
    if def and def[1](v) then return true end
  end
  return false
end
M.fits = fits

-- what(kind) -> "an integer or a string"
local function what(kind)
  local out = {}
  for k in kind:gmatch("[^|]+") do out[#out + 1] = KINDS[k] and KINDS[k][2] or ("a " .. k) end
  return table.concat(out, " or ")
end
M.what = what

-- describe(v) -> the type of v for a message ("integer", "closed event" ...)
local function describe(v)
  if is_integer(v) then return "integer " .. tostring(v) end
  local t = type(v)
  if t == "string" then
    return ("string '%s'"):format(#v > 40 and v:sub(1, 40) .. "..." or v)
  end
  if t == "number" or t == "boolean" then return t .. " " .. tostring(v) end
  return t
end
M.describe = describe

---------------------------------------------------------------------------
-- checks

-- arg(v, kind, fname, name): raise unless v is of kind; name says which
-- argument ("#1", "'pid'", ...). Returns v.
function M.arg(v, kind, fname, name)
  if not fits(v, kind) then
    M.raisef("%s: %s must be %s, got %s", fname, name, what(kind), describe(v))
  end
  return v
end

-- check(opts, schema, fname) -> opts, or {} for nil. schema: key -> kind.
-- Raises (at the caller's line) on a non-table, an unknown key (with the
-- closest known one) or a value of the wrong kind.
function M.check(opts, schema, fname)
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    M.raisef("%s: options must be a table, got %s", fname, describe(opts))
  end
  for k, v in pairs(opts) do
    local kind = schema[k]
    if not kind then
      M.raisef("%s: unknown option '%s'%s", fname, tostring(k), nearest.hint(k, schema))
    end
    if not fits(v, kind) then
      M.raisef("%s: option '%s' must be %s, got %s", fname, k, what(kind), describe(v))
    end
  end
  return opts
end

-- self(obj, class, cname, method): the check at the top of a Lua-written
-- method: obj must be an instance of class (a method called with '.'
-- instead of ':' passes its first argument as self).
function M.self(obj, class, cname, method)
  if getmetatable(obj) ~= class then
    M.raisef("%s: bad self for %s (expected a %s, got %s): call it as obj:%s(...)", cname, method,
             cname, describe(obj), method)
  end
  return obj
end

-- unknown(fname, what, name, known) -> raise "unknown <what> 'name'
-- (did you mean 'x'?)"; known: a list or a set of names.
function M.unknown(fname, kind, name, known, tail)
  M.raisef("%s: unknown %s '%s'%s%s", fname, kind, tostring(name), nearest.hint(name, known), tail or "")
end

-- cpus(v, fname) -> { cpu, ... } ascending, without repeats: a 'cpus'
-- option (a list of CPU numbers or a cpulist string "0-3,5"); raises
-- naming fname's option 'cpus' when it is neither or is empty.
function M.cpus(v, fname)
  local list, why
  if type(v) == "string" then
    list, why = require("perfev.fs").cpulist(v)
    if list and #list == 0 then list, why = nil, "no CPU in it" end
  elseif type(v) == "table" then
    list = {}
    for i, c in ipairs(v) do
      if not is_integer(c) or c < 0 then
        M.raisef("%s: option 'cpus'[%d] must be a CPU number, got %s", fname, i, describe(c))
      end
      list[i] = c
    end
    if #list == 0 then why = "an empty list" end
  else
    M.raisef("%s: option 'cpus' must be %s, got %s", fname, what("cpus"), describe(v))
  end
  if why then M.raisef("%s: option 'cpus': %s (e.g. { 0, 1 } or \"0-3,5\")", fname, why) end
  table.sort(list)
  local out = {}
  for _, c in ipairs(list) do
    if c ~= out[#out] then out[#out + 1] = c end
  end
  return out
end

-- renamed(opts, RENAMES, fname) -> opts with every deprecated name given
-- replaced by its new one (a copy; opts itself is left alone), each said
-- once through the warning channel (perfev.warn.deprecated). RENAMES:
-- old name -> { new name, convert = fn(value) -> the value in the new
-- unit (nil: the same value) }. Giving both names raises. A non-table
-- opts is returned as it is, for check to refuse.
function M.renamed(opts, renames, fname)
  if type(opts) ~= "table" then return opts end
  local out
  for old, r in pairs(renames) do
    local v = opts[old]
    if v ~= nil then
      local new = r[1]
      if opts[new] ~= nil then
        M.raisef("%s: give '%s' or its deprecated name '%s', not both", fname, new, old)
      end
      if not out then
        out = {}
        for k, x in pairs(opts) do out[k] = x end
      end
      out[old] = nil
      if r.convert and type(v) == "number" then v = r.convert(v) end
      out[new] = v
      require("perfev.warn").deprecated(("%s: option '%s' is now '%s'%s; '%s' goes in the next release")
                                        :format(fname, old, new, r.note or "", old), 2)
    end
  end
  return out or opts
end

return M
