-- C source as the lint tools read it (tools/check-layers.lua,
-- tools/check-c-function-length.lua): the code alone, comments, strings
-- and character constants blanked with their newlines kept, line
-- continuations joined.
--   local ccode = dofile(tools_dir .. "c-code.lua")
local M = {}

function M.read(path)
  local f = assert(io.open(path, "r"))
  local s = f:read("*a")
  f:close()
  return s
end

function M.strip(s)
  s = s:gsub("\\\n", " ")
  local out, i, n = {}, 1, #s
  while i <= n do
    local c, c2 = s:sub(i, i), s:sub(i, i + 1)
    if c2 == "/*" then
      local j = s:find("*/", i + 2, true) or n
      out[#out + 1] = (s:sub(i, j + 1):gsub("[^\n]", " "))
      i = j + 2
    elseif c2 == "//" then
      local j = s:find("\n", i, true) or n + 1
      i = j
    elseif c == '"' or c == "'" then
      local j = i + 1
      while j <= n and s:sub(j, j) ~= c do
        if s:sub(j, j) == "\\" then j = j + 1 end
        j = j + 1
      end
      out[#out + 1] = c .. c
      i = j + 1
    else
      out[#out + 1] = c
      i = i + 1
    end
  end
  return table.concat(out)
end

return M
