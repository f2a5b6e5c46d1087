-- The one warning channel: what perfev says without failing (a sampling
-- rate above the kernel's limit, as perf record warns). Each warning goes
-- to io.stderr as "perfev: warning: MESSAGE" unless the caller sets a
-- handler with perfev.on_warning(fn): fn(message) receives each one
-- instead; false silences them; nil restores io.stderr.
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

return M
