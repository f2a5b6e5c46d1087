-- A small program of a user's, not written for the specs: a JSON-like
-- encoder and parser exercised in a loop (check-user profiles it and looks
-- for its function names). Runs on Lua 5.3, 5.4 and LuaJIT.
--   lua app.lua [seconds]   (default 1.5)
local seconds = tonumber(arg and arg[1]) or 1.5

local function encode(v)
  local t = type(v)
  if t == "number" then return tostring(v) end
  if t == "string" then return '"' .. v .. '"' end
  local parts = {}
  if #v > 0 then
    for i = 1, #v do parts[i] = encode(v[i]) end
    return "[" .. table.concat(parts, ",") .. "]"
  end
  for k, x in pairs(v) do parts[#parts + 1] = '"' .. k .. '":' .. encode(x) end
  return "{" .. table.concat(parts, ",") .. "}"
end

local Parser = {}
Parser.__index = Parser

function Parser.new(s) return setmetatable({ s = s, i = 1 }, Parser) end

function Parser:skip_space()
  self.i = self.s:find("[^ \n]", self.i) or #self.s + 1
end

function Parser:number()
  local a, b = self.s:find("^-?%d+%.?%d*", self.i)
  self.i = b + 1
  return tonumber(self.s:sub(a, b))
end

function Parser:string()
  local b = self.s:find('"', self.i + 1, true)
  local v = self.s:sub(self.i + 1, b - 1)
  self.i = b + 1
  return v
end

function Parser:array()
  local out = {}
  self.i = self.i + 1
  while true do
    self:skip_space()
    if self.s:sub(self.i, self.i) == "]" then self.i = self.i + 1 return out end
    out[#out + 1] = self:value()
    if self.s:sub(self.i, self.i) == "," then self.i = self.i + 1 end
  end
end

function Parser:object()
  local out = {}
  self.i = self.i + 1
  while true do
    self:skip_space()
    if self.s:sub(self.i, self.i) == "}" then self.i = self.i + 1 return out end
    local k = self:string()
    self.i = self.i + 1   -- ':'
    out[k] = self:value()
    if self.s:sub(self.i, self.i) == "," then self.i = self.i + 1 end
  end
end

function Parser:value()
  self:skip_space()
  local c = self.s:sub(self.i, self.i)
  if c == "[" then return self:array() end
  if c == "{" then return self:object() end
  if c == '"' then return self:string() end
  return self:number()
end

local function make_document(n)
  local doc = {}
  for i = 1, n do
    doc[i] = { id = i, name = "item" .. i, tags = { "a", "b", "c" }, score = i * 1.5 }
  end
  return doc
end

local function round_trip(doc)
  local text = encode(doc)
  return Parser.new(text):value(), #text
end

local t0, rounds, bytes = os.clock(), 0, 0
local doc = make_document(200)
repeat
  local back, n = round_trip(doc)
  assert(#back == #doc)
  rounds, bytes = rounds + 1, bytes + n
until os.clock() - t0 >= seconds
print(("app.lua: %d round trips, %d bytes"):format(rounds, bytes))
