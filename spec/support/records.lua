-- Record bytes built by hand, and decoding helpers, shared by the decoder
-- and encoder specs (not a spec itself: no _spec in the name).
--   local rb = require "spec.support.records"
local perfev = require "perfev"
local assert = require "luassert"
local compat = require "perfev.compat"

local pack = compat.pack
local M = {}

-- A record: header (type, misc, size) and a body padded to 8 bytes.
function M.record(rtype, misc, body)
  body = body .. ("\0"):rep((8 - #body % 8) % 8)
  return pack("=I4I2I2", rtype, misc or 0, 8 + #body) .. body
end

function M.u64(...) return pack(("=" .. ("I8"):rep(select("#", ...))), ...) end
function M.u32(...) return pack(("=" .. ("I4"):rep(select("#", ...))), ...) end
-- A string as the kernel writes it: NUL-terminated, padded to 8 bytes.
function M.cstr(s) return s .. "\0" .. ("\0"):rep((8 - (#s + 1) % 8) % 8) end

function M.decode_all(bytes, attrs)
  local out = {}
  for rec in perfev.decode(bytes, attrs) do out[#out + 1] = rec end
  return out
end

-- The one record bytes hold.
function M.decode1(bytes, attrs)
  local recs = M.decode_all(bytes, attrs)
  assert.equal(1, #recs)
  return recs[1]
end

return M
