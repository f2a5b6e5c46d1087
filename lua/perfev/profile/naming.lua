-- The names of a profile's Lua functions, by their definition: the line a
-- function is defined on (debug.getinfo's linedefined) read from its
-- source, so that a function has one name wherever it is called from and
-- however (a local, an alias, a field, a method, pcall, a tail call).
-- debug.getinfo's "n" is the caller's name for the callee, and LuaJIT's is
-- the name of the call that made the frame below: after a tail call, the
-- name of the function that made it (issue 19: every row of a parser named
-- `value`). And which frames are perfev's own (its modules' files).
local M = {}

local IDENT = "[%a_][%w_]*"

-- The definitions a line can hold, the name captured after a position:
-- `local function f(`, `function a.b:f(` (its last part, as Lua's own
-- call names give it), `f = function(`, `a.b.f = function(`,
-- `{ f = function(`, and `f = coroutine.wrap(function(` (the body the function f
-- runs). An assignment's name is taken where it is the only target: not
-- `a, b = function` (a gets it), unless in a table constructor.
local IDENT_AT = "()(" .. IDENT .. ")"
local PATTERNS = {
  { "^%s*local%s+function%s+()(" .. IDENT .. ")%s*%(" },
  { "function%s+[%w_.:]-" .. IDENT_AT .. "%s*%(" },
  { IDENT_AT .. "%s*=%s*function%s*%(", assignment = true },
  { IDENT_AT .. "%s*=%s*coroutine%.wrap%s*%(%s*function%s*%(", assignment = true },
}

-- The line's code: strings emptied and the comment cut, so that a
-- `function` in either is not counted (a long string or comment that
-- spans lines is not followed: its lines hold no definition found here).
local function code_of(line)
  local out, i, n = {}, 1, #line
  while i <= n do
    local ch = line:sub(i, i)
    if ch == "-" and line:sub(i + 1, i + 1) == "-" then break end
    if ch == '"' or ch == "'" then
      local j = i + 1
      while j <= n and line:sub(j, j) ~= ch do
        if line:sub(j, j) == "\\" then j = j + 1 end
        j = j + 1
      end
      out[#out + 1] = ch .. ch
      i = j + 1
    else
      out[#out + 1] = ch
      i = i + 1
    end
  end
  return table.concat(out)
end

-- whether the name at `at` is an assignment's only target: not after a
-- comma, unless inside braces (a table constructor's field)
local function only_target(code, at)
  local before = code:sub(1, at - 1)
  if not before:match(",%s*[%w_.]*$") then return true end
  local _, open = before:gsub("{", "")
  local _, close = before:gsub("}", "")
  return open > close
end

-- name_in(line) -> the name of the one function defined on the line, or
-- nil: none named, or more than one `function` on it (which of them is
-- not known: its linedefined is the same).
function M.name_in(line)
  local code = code_of(line)
  local count = 0
  for pre in code:gmatch("()function") do
    local before, after = code:sub(pre - 1, pre - 1), code:sub(pre + 8, pre + 8)
    if not before:match("[%w_]") and not after:match("[%w_]") then count = count + 1 end
  end
  if count ~= 1 then return nil end
  for _, p in ipairs(PATTERNS) do
    local at, name = code:match(p[1])
    if name and name ~= "function" and (not p.assignment or only_target(code, at)) then return name end
  end
  return nil
end

-- The lines of a source: "@path" (or a path as short_src gives it, when
-- not cut: "...tail") read from the file, a chunk loaded from a string
-- (LuaJIT's and Lua's debug.getinfo source) taken as it is; nil for
-- "=name", "[string ...]", "[C]" and a file that cannot be read.
local function lines_of(source)
  local text
  local c = source:sub(1, 1)
  if c == "=" or c == "[" or source:sub(1, 3) == "..." or source == "" then return nil end
  if c == "@" or not source:find("\n", 1, true) then
    local path = c == "@" and source:sub(2) or source
    local f = io.open(path, "r")
    if not f then return nil end
    text = f:read("*a")
    f:close()
  else
    text = source
  end
  local lines = {}
  for l in (text .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
  return lines
end

-- namer() -> definition(source, linedefined) -> name | nil, each source
-- read once (a namer is made for each profile built: a file edited since
-- is read again).
function M.namer()
  local cache = {}
  return function(source, linedefined)
    if type(source) ~= "string" or not linedefined or linedefined <= 0 then return nil end
    local lines = cache[source]
    if lines == nil then
      lines = lines_of(source) or false
      cache[source] = lines
    end
    local line = lines and lines[linedefined]
    return line and M.name_in(line) or nil
  end
end

-- The directory of perfev's modules ("/x/lua/perfev/"), from this file's.
local OWN_DIR = (debug.getinfo(1, "S").source:match("^@(.*/)profile/naming%.lua$"))

-- own(short_src) -> whether the source is one of perfev's module files:
-- the path of one (by any way to it: bin/../lua/perfev/x.lua), or "..."
-- and the tail of one (short_src cut at LUA_IDSIZE).
local owns = {}
function M.own(src)
  if not OWN_DIR or type(src) ~= "string" then return false end
  local known = owns[src]
  if known ~= nil then return known end
  local yes = false
  local rel = src:match("perfev/([%w_/]+%.lua)$")
  if rel then
    local full = OWN_DIR .. rel
    local f = io.open(full, "r")
    if f then
      f:close()
      if src:sub(1, 3) == "..." then
        local tail = src:sub(4)
        yes = #tail > 0 and full:sub(-#tail) == tail
      else
        yes = src:sub(-#("perfev/" .. rel)) == "perfev/" .. rel
      end
    end
  end
  owns[src] = yes
  return yes
end

return M
