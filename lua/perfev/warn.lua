-- The one warning channel: what perfev says without failing (a sampling
-- rate above the kernel's limit, as perf record warns). Each warning goes
-- to io.stderr as "perfev: warning: MESSAGE" unless the caller sets a
-- handler with perfev.on_warning(fn): fn(message) receives each one
-- instead; false silences them; nil restores io.stderr.
--
-- Deprecations (an old option or function name that still works for one
-- release) go through the same handler when one is set; otherwise through
-- Lua's own warning channel, warn(): Lua 5.4's (silent until warnings are
-- on: `lua -W`, or warn("@on")), or a global warn a compatibility library
-- defines; else (Lua 5.3 and LuaJIT have none) to io.stderr. Each is said
-- once per call site.
local options = require "perfev.options"

local M = {}

-- The handler is the process's one channel, as perf's stderr is.
local handler = nil

-- on_warning(fn | false | nil) -> the previous handler
function M.on_warning(fn)
  if fn ~= nil and fn ~= false and type(fn) ~= "function" then
    options.raisef("perfev.on_warning: expected a function, false or nil, got %s", options.describe(fn))
  end
  local previous = handler
  handler = fn
  return previous
end

-- emit(message): one warning through the channel
function M.emit(message)
  if handler == false then return end
  if handler then return handler(message) end
  io.stderr:write("perfev: warning: ", message, "\n")
end

-- deprecated(message, level): one deprecation warning, said once for the
-- caller's line (level: as error's, 1 = the function calling deprecated;
-- the first frame outside the library is taken from there), as
-- "perfev: deprecated: MESSAGE (at FILE:LINE)".
local said = {}
function M.deprecated(message, level)
  local where = options.where((level or 1) + 1) or "?"
  local key = message .. "\0" .. where
  if said[key] then return end
  said[key] = true
  local text = ("deprecated: %s (at %s)"):format(message, where)
  if handler == false then return end
  if handler then return handler(text) end
  local lua_warn = rawget(_G, "warn")
  if type(lua_warn) == "function" then return lua_warn("perfev: ", text) end
  io.stderr:write("perfev: ", text, "\n")
end

return M
