-- obj:measure(fn, ...) for events, tool events and groups alike: reset,
-- enable, call fn with the arguments, disable (also when fn raises, whose
-- error is then raised again unchanged), and return obj:read().
local options = require "perfev.options"

return function(obj, fn, ...)
  if type(fn) ~= "function" then
    local mt = getmetatable(fn)
    if not (mt and type(mt) == "table" and mt.__call) then
      options.raisef("perfev: measure: expects a function to call, got %s", options.describe(fn))
    end
  end
  assert(obj:reset())
  assert(obj:enable())
  local ok, err = pcall(fn, ...)
  obj:disable()
  if not ok then error(err, 0) end
  return obj:read()
end
