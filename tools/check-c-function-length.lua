-- No C function of the core longer than a bound (default 80 lines), so
-- that a function that grows past what one reads at once is split by what
-- it does, as tools/check-function-length.lua does for Lua. A function is
-- a top-level `{` whose header ends in `)` (not an initializer, a struct
-- or an enum), to its matching `}`: its lines counted from the `{` line
-- to the `}` line. Comments, strings and preprocessor lines are left out
-- of the brace count. `make lint` runs it.
--   lua tools/check-c-function-length.lua MAX FILE...   (exit 1, with each long one)
local ccode = dofile((arg[0]:match("^(.*/)") or "") .. "c-code.lua")
local max = tonumber(arg[1])

-- Preprocessor lines (with their continuations) blanked, newlines kept.
local function no_directives(s)
  local out, cont = {}, false
  for line in (s .. "\n"):gmatch("(.-)\n") do
    local directive = cont or line:match("^%s*#") ~= nil
    cont = directive and line:sub(-1) == "\\"
    out[#out + 1] = directive and "" or line
  end
  return table.concat(out, "\n")
end

-- Each function of the C text s: calls found(name, first line, lines).
local function functions(s, found)
  local depth, line, header, start, name = 0, 1, {}, nil, nil
  for i = 1, #s do
    local c = s:sub(i, i)
    if c == "\n" then
      line = line + 1
    elseif c == "{" then
      if depth == 0 then
        local h = table.concat(header)
        name = h:match("([%w_]+)%s*%b()%s*$")
        if name and not h:find("=") then start = line else name = nil end
      end
      depth = depth + 1
    elseif c == "}" then
      depth = depth - 1
      if depth == 0 then
        if name then found(name, start, line - start + 1) end
        header, name = {}, nil
      end
    elseif depth == 0 then
      if c == ";" then header = {} else header[#header + 1] = c end
    end
  end
end

local bad = 0
for i = 2, #arg do
  local path = arg[i]
  functions(ccode.strip(no_directives(ccode.read(path))), function(name, first, n)
    if n > max then
      io.stderr:write(("%s:%d: %s, a function of %d lines (at most %d: split it by what it does)\n")
                      :format(path, first, name, n, max))
      bad = bad + 1
    end
  end)
end
if bad > 0 then os.exit(1) end
