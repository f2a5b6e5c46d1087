-- Lua 5.4's to-be-closed variables (`local x <close> = v`), for the specs
-- that test __close itself: their code is compiled by load(), so that the
-- spec files still parse on Lua 5.3 and LuaJIT, where those tests are
-- pending with the reason.
--   local tbc = require "spec.support.tbc"
--   if not tbc.available then pending(tbc.reason) return end
--   tbc.run([[ local open = ... do local ev <close> = open() end ]], open)
local M = {}

M.available = _VERSION == "Lua 5.4" and type(rawget(_G, "jit")) ~= "table"
M.reason = "to-be-closed variables (<close>) are Lua 5.4 syntax; "
  .. (type(rawget(_G, "jit")) == "table" and rawget(_G, "jit").version or _VERSION) .. " has none"

-- Compiles src (Lua 5.4 code that takes its values from ...) and runs it.
function M.run(src, ...)
  return assert(load(src, "=(<close> spec code)"))(...)
end

return M
