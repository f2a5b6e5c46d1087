-- tools/png-stats.lua FILE.png: prints "WIDTH HEIGHT COLOURS", the number of
-- distinct colours of an 8-bit RGB or RGBA PNG (what a screenshot check
-- needs to tell a drawn flame chart from a blank or error page).
local zlib = require "zlib"

local f = assert(io.open(assert(arg[1], "usage: png-stats.lua FILE.png"), "rb"))
local s = f:read("a")
f:close()
assert(s:sub(1, 8) == "\137PNG\r\n\26\n", "not a PNG")

local function u32(p) local a, b, c, d = s:byte(p, p + 3) return ((a * 256 + b) * 256 + c) * 256 + d end

local pos, idat, w, h, depth, ctype = 9, {}, nil, nil, nil, nil
while pos <= #s do
  local len, typ = u32(pos), s:sub(pos + 4, pos + 7)
  local body = s:sub(pos + 8, pos + 7 + len)
  if typ == "IHDR" then
    w, h, depth, ctype = u32(pos + 8), u32(pos + 12), body:byte(9), body:byte(10)
  elseif typ == "IDAT" then idat[#idat + 1] = body end
  pos = pos + 12 + len
end
assert(depth == 8 and (ctype == 2 or ctype == 6), "only 8-bit RGB/RGBA PNGs")
local bpp = ctype == 6 and 4 or 3
local raw = zlib.inflate()(table.concat(idat))
local stride = w * bpp
local prev, colours, n = {}, {}, 0
for i = 0, stride - 1 do prev[i] = 0 end
for y = 0, h - 1 do
  local base = y * (stride + 1) + 1
  local filter = raw:byte(base)
  local cur = {}
  for x = 0, stride - 1 do
    local v = raw:byte(base + 1 + x)
    local a = x >= bpp and cur[x - bpp] or 0
    local b = prev[x]
    local c = x >= bpp and prev[x - bpp] or 0
    if filter == 1 then v = v + a
    elseif filter == 2 then v = v + b
    elseif filter == 3 then v = v + math.floor((a + b) / 2)
    elseif filter == 4 then
      local p = a + b - c
      local pa, pb, pc = math.abs(p - a), math.abs(p - b), math.abs(p - c)
      v = v + ((pa <= pb and pa <= pc) and a or (pb <= pc and b or c))
    end
    cur[x] = v % 256
  end
  for x = 0, stride - 1, bpp do
    local k = (cur[x] * 256 + cur[x + 1]) * 256 + cur[x + 2]
    if not colours[k] then colours[k] = true n = n + 1 end
  end
  prev = cur
end
print(w, h, n)
