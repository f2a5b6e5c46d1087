-- tools/check-user/readme.lua README.md DIR [--no-close]: writes each ```lua
-- block of README.md that is a program (not one marked as a fragment by a
-- line `<!-- check-user: fragment -->` before it) to DIR/readme-LINE.lua,
-- after a prelude giving what the tour leaves to the reader: `perfev`, a
-- `work` function, an `arg`, and the `bytes`, `attr` of a decoding.
-- --no-close drops the <close>/<const> attributes (Lua 5.3 and LuaJIT have
-- none: there, a user writes ev:close() instead).
local readme, dir, flag = arg[1], arg[2], arg[3]
local PRELUDE = table.concat({
  'local perfev = require "perfev"',
  'local function work() local t = {} for i = 1, 200000 do t[i] = tostring(i) end return #t end',
  'local bytes, attr = "", perfev.attr { type = "software", config = "cpu-clock" }',
  "", }, " ")

local lineno, block, start, fragment, count = 0, nil, nil, false, 0
for line in io.lines(readme) do
  lineno = lineno + 1
  if block then
    if line:match("^```") then
      local code = table.concat(block, "\n") .. "\n"
      if flag == "--no-close" then code = code:gsub(" <close>", ""):gsub(" <const>", "") end
      local f = assert(io.open(("%s/readme-%d.lua"):format(dir, start), "w"))
      f:write(PRELUDE, code)   -- the prelude on the block's first line: errors name README's lines - 1
      f:close()
      count, block = count + 1, nil
    else
      block[#block + 1] = line
    end
  elseif line:match("^```lua") then
    if not fragment then block, start = {}, lineno + 1 end
    fragment = false
  elseif line:match("^<!%-%- check%-user: fragment %-%->") then
    fragment = true
  elseif line:match("%S") then
    fragment = false
  end
end
print(("readme.lua: %d blocks written to %s"):format(count, dir))
