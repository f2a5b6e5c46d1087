-- The cursor over an event string: whitespace, words, numbers, modifier
-- letters, and the terms between '/'s; every mistake raised with its
-- position (at the caller's line).
local options = require "perfev.options"
local V = require "perfev.parse.vocab"
local compat = require "perfev.compat"

local MOD, MOD_CHARS, MOD_SET = V.MOD, V.MOD_CHARS, V.MOD_SET

local M = {}

---------------------------------------------------------------------------
-- the cursor

local P = {}
P.__index = P

-- A mistake in the string: raised at the caller's line, with its position
-- (and a tail after it: where to look).
local function fail(pos, msg, tail)
  options.raisef("perfev.parse: %s at position %d%s", msg, pos, tail or "")
end

function P:peek(n) return self.s:sub(self.i, self.i + (n or 1) - 1) end
function P:eof() return self.i > #self.s end
function P:fail(msg, pos) fail(pos or self.i, msg) end

-- Skips whitespace; true when there was some.
function P:ws()
  local _, e = self.s:find("^%s+", self.i)
  if e then self.i = e + 1 end
  return e ~= nil
end

function P:expect(c, what)
  if self:peek() ~= c then
    self:fail(("expected %s, found %s"):format(what or ("'" .. c .. "'"), self:found()))
  end
  self.i = self.i + 1
end

function P:found()
  if self:eof() then return "the end" end
  return "'" .. self:peek() .. "'"
end

local WORD = "^[%w_%.%-%*%?]+"

function P:word()
  local w = self.s:match(WORD, self.i)
  if w then self.i = self.i + #w end
  return w
end

-- A number: 0x hex or decimal, as a 64-bit integer.
function P:number(what)
  local start = self.i
  local hex = self.s:match("^0[xX](%x+)", self.i)
  local v
  if hex then
    if self.s:sub(self.i + 1, self.i + 1) == "X" then self:fail("expected " .. what) end
    v = compat.parse_u64("0x" .. hex)
    if not v then self:fail(what .. " does not fit in 64 bits", start) end
    self.i = self.i + 2 + #hex
  else
    local dec = self.s:match("^%d+", self.i)
    if not dec then self:fail(("expected %s, found %s"):format(what, self:found())) end
    v = compat.parse_u64(dec)
    if not v then self:fail(what .. " does not fit in 64 bits", start) end
    self.i = self.i + #dec
  end
  return v
end

-- Modifier characters at the cursor: returns the string and its position,
-- after checking duplicates. required: nil (none is fine), "strict" (at
-- least one), true (at least one unless the event ends here).
function P:modifiers(required)
  local start = self.i
  local seen = {}
  while not self:eof() do
    local c = self:peek()
    local m = MOD[c]
    if not m then break end
    seen[c] = (seen[c] or 0) + 1
    if seen[c] > (m.max or 1) then
      if m.max then
        self:fail(("modifier '%s' more than %d times"):format(c, m.max))
      end
      self:fail(("duplicate modifier '%s'"):format(c))
    end
    self.i = self.i + 1
  end
  -- perf takes an empty modifier after an event ("cycles:"), not after a group
  local next_c = self.s:match("^%s*(.?)", self.i)
  local at_end = next_c == "" or next_c == "," or next_c == "}"
  if required and self.i == start and (required == "strict" or not at_end) then
    self:fail(("expected a modifier (one of %s), found %s"):format(MOD_CHARS, self:found()))
  end
  return self.s:sub(start, self.i - 1), start
end

-- The end of an event: end of string, ',' or (in a group) '}'.
function P:event_end(in_group)
  self:ws()
  if self:eof() or self:peek() == "," or (in_group and self:peek() == "}") then return end
  self:fail(("unexpected %s: expected ','%s or the end"):format(self:found(), in_group and ", '}'" or ""))
end

---------------------------------------------------------------------------
-- terms: key[=value] {, key[=value]} up to '/'

-- is_string(key, special): does the term take a string value?
local function is_string(key, special)
  local t = require("perfev.parse.terms").TERMS[key]
  return (t and t[1] == "str") or (special and special.keys[key] == "string") or false
end

-- An unquoted path (uprobe/path=/bin/ls,func=main/) runs to the next ','
-- (or '}' or space); when the path is the last term, the last '/' of that
-- run closes the terms (what follows it must be modifiers), unless the run
-- is followed by ',' and another term of the probe.
function P:path_value(special)
  local run = self.s:match("^[^,%s}]*", self.i)
  local value = run
  local last = run:match(".*()/")
  if last and run:sub(last + 1):match(MOD_SET) then
    local key = self.s:match("^%s*,%s*([%a_][%w_%-%.]*)", self.i + #run)
    if not (key and special.known[key]) then value = run:sub(1, last - 1) end
  end
  if value == "" then self:fail("expected a path for 'path'") end
  self.i = self.i + #value
  return value
end

-- special: for the probe PMUs, { keys = probe keys -> kind, known = every
-- term key of the PMU }.
function P:terms(special)
  local list = {}
  self:ws()
  if self:peek() == "/" then return list end
  while true do
    self:ws()
    local start = self.i
    local key = self.s:match("^[%a_][%w_%-%.]*", self.i)
    if not key then self:fail(("expected a term (key or key=value), found %s"):format(self:found())) end
    self.i = self.i + #key
    local term = { key = key, pos = start }
    self:ws()
    if self:peek() == "=" then
      self.i = self.i + 1
      self:ws()
      term.vpos = self.i
      local c = self:peek()
      local probe_str = special and special.keys[key] == "string"
      if c == "'" or c == '"' then
        local close = self.s:find(c, self.i + 1, true)
        if not close then self:fail("unterminated quoted value") end
        local v = self.s:sub(self.i + 1, close - 1)
        if not probe_str then
          if c == '"' then
            self:fail("term values are quoted with single quotes ('...'), as in perf")
          end
          if v == "" or v:find("[%s/]") then
            self:fail("a quoted term value cannot be empty or hold spaces or '/' (as in perf)")
          end
        end
        term.str, term.quoted = v, true
        self.i = close + 1
      elseif probe_str and key == "path" then
        term.str = self:path_value(special)
      elseif c:match("%d") then
        term.value = self:number("a number")
        local more = self.s:match("^[^,/%s]+", self.i)
        if more then
          if is_string(key, special) then
            term.str, term.value = self.s:sub(term.vpos, self.i + #more - 1), nil
            self.i = self.i + #more
          else
            self:fail(("expected ',' or '/' after the value of '%s', found %s"):format(key, self:found()))
          end
        end
      else
        local s = self.s:match("^[^,/%s'\"]+", self.i)
        if not s then self:fail(("expected a value for '%s', found %s"):format(key, self:found())) end
        term.str = s
        self.i = self.i + #s
      end
    end
    list[#list + 1] = term
    self:ws()
    if self:peek() == "," then
      self.i = self.i + 1
    elseif self:peek() == "/" then
      return list
    else
      self:fail(("expected ',' or '/' in the terms, found %s"):format(self:found()))
    end
  end
end

-- Parse a terms string from sysfs (an events/ file): "event=0x3c,umask=0x1".
local function sysfs_terms(s, where)
  local q = setmetatable({ s = s .. "/", i = 1, opts = {} }, P)
  local ok, list = pcall(P.terms, q)
  if not ok then
    options.raisef("perfev.parse: bad event file %s ('%s'): %s", where, s, options.strip_where(list))
  end
  return list
end

M.P, M.fail, M.WORD, M.sysfs_terms = P, fail, WORD, sysfs_terms

return M
