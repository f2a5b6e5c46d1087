-- Single-bit tests and updates of a mask without the bitwise operators
-- (which LuaJIT lacks as syntax): for the sample_type and read_format
-- masks the Lua layer adjusts (bits below 2^52).
local M = {}

-- has(mask, bit) -> whether the one-bit value bit is set in mask
function M.has(mask, bit)
  return mask % (2 * bit) >= bit
end

-- set(mask, bit) -> mask with bit set
function M.set(mask, bit)
  if M.has(mask, bit) then return mask end
  return mask + bit
end

-- clear(mask, bit) -> mask with bit cleared
function M.clear(mask, bit)
  if M.has(mask, bit) then return mask - bit end
  return mask
end

-- union(a, b) -> a with every bit of b set
function M.union(a, b)
  local bit = 1
  while bit <= b do
    if M.has(b, bit) then a = M.set(a, bit) end
    bit = bit * 2
  end
  return a
end

-- any(mask, ...) -> whether any of the bits is set
function M.any(mask, ...)
  for i = 1, select("#", ...) do
    if M.has(mask, (select(i, ...))) then return true end
  end
  return false
end

return M
