-- perf report's `trace` sort key: a tracepoint sample's raw data printed
-- through its event's "print fmt", as perf 6.1 prints it with
-- libtraceevent (tep_print_event ... TEP_PRINT_INFO). The event's format
-- comes from this machine's tracefs (events/SYS/NAME/format): a file
-- recorded on another kernel may print differently.
--
--   local trace = require "perfev.report.trace"
--   local ev = assert(trace.event("sched:sched_switch"))
--   print(ev:render(rec.raw))         -- "prev_comm=sh prev_pid=12 ... ==> next_comm=..."
--
-- The print fmt's arguments are C expressions: REC->field, numbers,
-- strings, casts, the arithmetic, bit, comparison and logical operators,
-- ?:, __get_str(), __print_flags(), __print_symbolic(). An event that uses
-- anything else is refused by name (its helper is not evaluated).
local compat = require "perfev.compat"
local tracepoint = require "perfev.tracepoint"

local M = {}

local Event = {}
Event.__index = Event

-- ---- the format file ----

local function parse_fields(text)
  local fields = {}
  for decl, off, size, signed in text:gmatch("field:([^;]+);%s*offset:(%d+);%s*size:(%d+);%s*signed:(%d+);") do
    local name = decl:match("([%w_]+)%s*%[[^%]]*%]%s*$") or decl:match("([%w_]+)%s*$")
    local f = { name = name, decl = decl, offset = tonumber(off), size = tonumber(size), signed = signed == "1" }
    f.array = decl:find("%[") ~= nil
    f.data_loc = decl:find("__data_loc", 1, true) ~= nil
    f.char = decl:find("char", 1, true) ~= nil
    if name then fields[name] = f end
  end
  return fields
end

-- ---- the print fmt's expressions ----

local function tokenize(s)
  local toks, i, n = {}, 1, #s
  local OPS = { "->", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||" }
  while i <= n do
    local c = s:sub(i, i)
    if c:match("%s") then
      i = i + 1
    elseif c == '"' then
      local j, buf = i + 1, {}
      while j <= n and s:sub(j, j) ~= '"' do
        local ch = s:sub(j, j)
        if ch == "\\" then
          local e = s:sub(j + 1, j + 1)
          buf[#buf + 1] = ({ n = "\n", t = "\t", ['"'] = '"', ["\\"] = "\\" })[e] or e
          j = j + 2
        else
          buf[#buf + 1] = ch
          j = j + 1
        end
      end
      toks[#toks + 1] = { t = "str", v = table.concat(buf) }
      i = j + 1
    elseif s:match("^0[xX]%x+", i) then
      local h = s:match("^0[xX](%x+)", i)
      local digits = h:gsub("^0+", "")
      toks[#toks + 1] = { t = "num", v = #digits <= 13 and tonumber(h, 16) or compat.hex64("0x" .. h) }
      i = i + 2 + #h
      i = i + #(s:match("^[uUlL]*", i))
    elseif c:match("%d") then
      local d = s:match("^%d+", i)
      toks[#toks + 1] = { t = "num", v = tonumber(d) }
      i = i + #d
      i = i + #(s:match("^[uUlL]*", i))
    elseif c:match("[%a_]") then
      local w = s:match("^[%w_]+", i)
      toks[#toks + 1] = { t = "id", v = w }
      i = i + #w
    else
      local op
      for _, o in ipairs(OPS) do
        if s:sub(i, i + #o - 1) == o then op = o; break end
      end
      op = op or c
      toks[#toks + 1] = { t = "op", v = op }
      i = i + #op
    end
  end
  return toks
end

local TYPE_WORDS = { unsigned = true, signed = true, long = true, int = true, char = true, short = true,
  u8 = true, u16 = true, u32 = true, u64 = true, s8 = true, s16 = true, s32 = true, s64 = true,
  size_t = true, pid_t = true, bool = true, void = true, const = true, ["__u64"] = true, ["__u32"] = true }

local BINARY = {
  ["||"] = 1, ["&&"] = 2, ["|"] = 3, ["^"] = 4, ["&"] = 5, ["=="] = 6, ["!="] = 6,
  ["<"] = 7, [">"] = 7, ["<="] = 7, [">="] = 7, ["<<"] = 8, [">>"] = 8, ["+"] = 9, ["-"] = 9,
  ["*"] = 10, ["/"] = 10, ["%"] = 10,
}

local Parser = {}
Parser.__index = Parser

function Parser:peek(k) return self.toks[self.i + (k or 0)] end
function Parser:next()
  local t = self.toks[self.i]
  self.i = self.i + 1
  return t
end
function Parser:expect(v)
  local t = self:next()
  if not t or t.v ~= v then error(("print fmt: '%s' expected"):format(v), 0) end
end

-- a cast: "(" type words ["*"] ")"
function Parser:cast()
  local j = self.i + 1
  local words = {}
  while self.toks[j] and self.toks[j].t == "id" and (TYPE_WORDS[self.toks[j].v] or self.toks[j].v:match("_t$")) do
    words[#words + 1] = self.toks[j].v
    j = j + 1
  end
  local ptr = false
  while self.toks[j] and self.toks[j].v == "*" do ptr = true; j = j + 1 end
  if #words == 0 or not self.toks[j] or self.toks[j].v ~= ")" then return nil end
  self.i = j + 1
  local ty = table.concat(words, " ")
  local size
  local signed = true
  if ptr then size, signed = 8, false
  elseif ty:find("char") or ty == "u8" or ty == "s8" or ty == "bool" then size = 1
  elseif ty:find("short") or ty:find("16") then size = 2
  elseif ty == "gfp_t" or ty == "pid_t" then size = 4
  elseif ty:find("long") or ty:find("64") or ty:match("_t$") then size = 8
  else size = 4 end
  if ty:find("unsigned") or ty:match("^u%d") or ty:match("^__u") or ty == "bool"
     or (ty:match("_t$") and ty ~= "pid_t") then signed = false end
  return { size = size, signed = signed }
end

function Parser:primary()
  local t = self:next()
  if not t then error("print fmt: unexpected end", 0) end
  if t.t == "num" then return { k = "num", v = t.v } end
  if t.t == "str" then
    local s = t.v
    while self:peek() and self:peek().t == "str" do s = s .. self:next().v end   -- "a" "b"
    return { k = "str", v = s }
  end
  if t.v == "(" then
    self.i = self.i - 1
    local c = self:cast()
    if c then return { k = "cast", size = c.size, signed = c.signed, e = self:unary() } end
    self.i = self.i + 1
    local e = self:expr()
    self:expect(")")
    return e
  end
  if t.v == "{" then
    local items = {}
    repeat
      items[#items + 1] = self:expr()
      local sep = self:next()
    until sep.v == "}"
    return { k = "list", items = items }
  end
  if t.t == "id" then
    if t.v == "REC" then
      self:expect("->")
      return { k = "field", name = self:next().v }
    end
    if self:peek() and self:peek().v == "(" then
      self:next()
      local args = {}
      if self:peek().v ~= ")" then
        repeat
          args[#args + 1] = self:expr()
          local sep = self:next()
          if sep.v ~= "," and sep.v ~= ")" then error("print fmt: ',' or ')' expected", 0) end
        until sep.v == ")"
      else
        self:next()
      end
      return { k = "call", name = t.v, args = args }
    end
    return { k = "id", name = t.v }
  end
  error(("print fmt: unexpected '%s'"):format(tostring(t.v)), 0)
end

function Parser:unary()
  local t = self:peek()
  if t and t.t == "op" and (t.v == "!" or t.v == "~" or t.v == "-") then
    self:next()
    return { k = "unary", op = t.v, e = self:unary() }
  end
  return self:primary()
end

function Parser:binary(min)
  local left = self:unary()
  while true do
    local t = self:peek()
    local p = t and t.t == "op" and BINARY[t.v]
    if not p or p < min then return left end
    self:next()
    left = { k = "bin", op = t.v, a = left, b = self:binary(p + 1) }
  end
end

function Parser:expr()
  local cond = self:binary(1)
  local t = self:peek()
  if t and t.v == "?" then
    self:next()
    local a = self:expr()
    self:expect(":")
    local b = self:expr()
    return { k = "cond", c = cond, a = a, b = b }
  end
  return cond
end

-- ---- evaluation (integers as 64-bit values through perfev.compat) ----

local band, bor, bxor, bnot = compat.band, compat.bor, compat.bxor, compat.bnot
local lshift, rshift = compat.lshift, compat.rshift

-- the low `size` bytes of v, signed or not
local function truncate(v, size, signed)
  if type(v) ~= "number" and not compat.isinteger(v) then return v end
  if size >= 8 then
    if not signed then return v end
    return v
  end
  local bits = size * 8
  local mask = lshift(1, bits) - 1
  v = band(v, mask)
  if signed and v >= lshift(1, bits - 1) then v = v - lshift(1, bits) end
  return v
end

local function cstring(raw, off, max)
  local s = raw:sub(off + 1, off + max)
  return (s:match("^[^%z]*"))
end

local function read_field(self, raw, name)
  local f = self.fields[name]
  if not f then error(("print fmt: no field '%s' in %s"):format(name, self.name), 0) end
  if f.data_loc then
    local loc = compat.fast.unpack("<I4", raw, f.offset + 1)
    local off, len = loc % 65536, math.floor(loc / 65536)
    return cstring(raw, off, len), f
  end
  if f.array and f.char then return cstring(raw, f.offset, f.size), f end
  if f.size == 1 or f.size == 2 or f.size == 4 or f.size == 8 then
    local code = (f.signed and "i" or "I") .. f.size
    return compat.fast.unpack("<" .. code, raw, f.offset + 1), f
  end
  error(("print fmt: field '%s' (%s) cannot be read as a number"):format(name, f.decl), 0)
end

local function truth(v)
  if type(v) == "string" then return true end
  return v ~= 0
end

local eval

-- a list entry's value; nil for a name the format leaves unresolved (an
-- enum the kernel did not map: libtraceevent skips that entry)
local function entry_value(self, raw, e)
  if e.k == "id" then return nil end
  return eval(self, raw, e)
end

local function flags(self, raw, args)
  local v = eval(self, raw, args[1])
  local delim = eval(self, raw, args[2])
  local out = {}
  if v == 0 then
    for i = 3, #args do
      local pair = args[i].items
      if entry_value(self, raw, pair[1]) == 0 then return eval(self, raw, pair[2]) end
    end
    return ""
  end
  for i = 3, #args do
    local pair = args[i].items
    local fv = entry_value(self, raw, pair[1])
    if fv and fv ~= 0 and band(v, fv) == fv then
      out[#out + 1] = eval(self, raw, pair[2])
      v = band(v, bnot(fv))
    end
  end
  if v ~= 0 then out[#out + 1] = "0x" .. compat.hex(v) end
  return table.concat(out, delim)
end

local function symbolic(self, raw, args)
  local v = eval(self, raw, args[1])
  for i = 2, #args do
    local pair = args[i].items
    if entry_value(self, raw, pair[1]) == v then return eval(self, raw, pair[2]) end
  end
  return "0x" .. compat.hex(v)
end

local CALLS = {
  __get_str = function(self, raw, args) return (read_field(self, raw, args[1].name)) end,
  __print_flags = flags,
  __print_symbolic = symbolic,
}

local OPS = {
  ["+"] = function(a, b) return a + b end, ["-"] = function(a, b) return a - b end,
  ["*"] = function(a, b) return a * b end,
  ["/"] = function(a, b) return compat.idiv(a, b) end,
  ["%"] = function(a, b) return a - compat.idiv(a, b) * b end,
  ["&"] = band, ["|"] = bor, ["^"] = bxor, ["<<"] = lshift, [">>"] = rshift,
  ["=="] = function(a, b) return a == b and 1 or 0 end, ["!="] = function(a, b) return a ~= b and 1 or 0 end,
  ["<"] = function(a, b) return a < b and 1 or 0 end, [">"] = function(a, b) return a > b and 1 or 0 end,
  ["<="] = function(a, b) return a <= b and 1 or 0 end, [">="] = function(a, b) return a >= b and 1 or 0 end,
}

eval = function(self, raw, e)
  local k = e.k
  if k == "num" or k == "str" then return e.v end
  if k == "field" then return (read_field(self, raw, e.name)) end
  if k == "cast" then return truncate(eval(self, raw, e.e), e.size, e.signed) end
  if k == "cond" then
    if truth(eval(self, raw, e.c)) then return eval(self, raw, e.a) end
    return eval(self, raw, e.b)
  end
  if k == "unary" then
    local v = eval(self, raw, e.e)
    if e.op == "!" then return truth(v) and 0 or 1 end
    if e.op == "~" then return bnot(v) end
    return -v
  end
  if k == "bin" then
    if e.op == "&&" then return (truth(eval(self, raw, e.a)) and truth(eval(self, raw, e.b))) and 1 or 0 end
    if e.op == "||" then return (truth(eval(self, raw, e.a)) or truth(eval(self, raw, e.b))) and 1 or 0 end
    return OPS[e.op](eval(self, raw, e.a), eval(self, raw, e.b))
  end
  if k == "call" then
    local f = CALLS[e.name]
    if not f then error(("print fmt: %s() is not supported by perfev"):format(e.name), 0) end
    return f(self, raw, e.args)
  end
  error(("print fmt: '%s' cannot be evaluated"):format(tostring(e.name or k)), 0)
end

-- ---- C's printf over the evaluated arguments ----

-- the conversions of a format string: literal text and { flags, width, prec, len, conv }
local function parse_printf(fmt)
  local parts, i = {}, 1
  while i <= #fmt do
    local j = fmt:find("%", i, true)
    if not j then parts[#parts + 1] = fmt:sub(i); break end
    if j > i then parts[#parts + 1] = fmt:sub(i, j - 1) end
    if fmt:sub(j + 1, j + 1) == "%" then
      parts[#parts + 1] = "%"
      i = j + 2
    else
      local fl, w, p, len, conv = fmt:match("^%%([%-+ #0]*)(%d*)(%.?%d*)([hlzjtL]*)([diouxXcspP])", j)
      if not conv then error(("print fmt: cannot read the conversion at '%s'"):format(fmt:sub(j, j + 5)), 0) end
      local whole = "%" .. fl .. w .. p .. len .. conv
      local ext
      if conv == "p" and fmt:match("^[%a]", j + #whole) then
        ext = fmt:sub(j + #whole, j + #whole)
        if ext ~= "S" and ext ~= "s" and ext ~= "F" and ext ~= "f" then
          error(("print fmt: %%p%s is not supported by perfev"):format(ext), 0)
        end
      end
      parts[#parts + 1] = { flags = fl, width = w, prec = p, len = len, conv = conv, sym = ext }
      i = j + #whole + (ext and 1 or 0)
    end
  end
  return parts
end

-- C's width and flags over the digits of a number ("-12", "ff")
local function pad_number(spec, digits)
  local w = tonumber(spec.width) or 0
  local fl = spec.flags
  local sign = ""
  if digits:sub(1, 1) == "-" then sign, digits = "-", digits:sub(2)
  elseif fl:find("+", 1, true) then sign = "+"
  elseif fl:find(" ", 1, true) then sign = " " end
  local prec = tonumber(spec.prec:sub(2))
  if prec and #digits < prec then digits = ("0"):rep(prec - #digits) .. digits end
  local body = sign .. digits
  if #body >= w then return body end
  if fl:find("-", 1, true) then return body .. (" "):rep(w - #body) end
  if fl:find("0", 1, true) and not prec then return sign .. ("0"):rep(w - #body) .. digits end
  return (" "):rep(w - #body) .. body
end

-- %pS (function+0xoffset) and %ps (function) through the kernel's
-- symbols, as perf's resolver gives them to libtraceevent
local function kernel_symbol(resolve, spec, v)
  local name, off
  if resolve then name, off = resolve(v) end
  if not name then return "0x" .. compat.hex(v) end
  if (spec.sym == "S" or spec.sym == "F") and off ~= 0 then return ("%s+0x%s"):format(name, compat.hex(off)) end
  return name
end

local function format_one(spec, v, resolve)
  local conv = spec.conv
  if spec.sym then return kernel_symbol(resolve, spec, v) end
  local head = "%" .. spec.flags .. spec.width .. spec.prec
  if conv == "s" then return (head .. "s"):format(tostring(v)) end
  if conv == "c" then return (head .. "s"):format(string.char(tonumber(v) % 256)) end
  local long = spec.len:find("l") ~= nil or spec.len == "z"
  if type(v) == "string" then return (head .. "s"):format(v) end
  if conv == "d" or conv == "i" then
    if not long then v = truncate(v, 4, true) end
    return pad_number(spec, compat.tostring(v))
  end
  if conv == "u" then
    if not long then v = truncate(v, 4, false) end
    return pad_number(spec, compat.udec(v))
  end
  if conv == "x" or conv == "X" or conv == "p" or conv == "o" then
    if not long and conv ~= "p" then v = truncate(v, 4, false) end
    local h = compat.hex(v)
    if conv == "X" then h = h:upper() end
    if conv == "p" then return (head .. "s"):format("0x" .. h) end
    if conv == "o" then h = ("%o"):format(tonumber(v)) end
    local prefix = (spec.flags:find("#", 1, true) and v ~= 0) and "0x" or ""
    local body = pad_number({ flags = spec.flags:gsub("#", ""), width = tostring(math.max(0, (tonumber(spec.width)
                              or 0) - #prefix)), prec = spec.prec }, h)
    if body:sub(1, 1) == " " then return (" "):rep(#prefix) .. body:gsub("^(%s*)", "%1" .. prefix):sub(#prefix + 1) end
    return prefix .. body
  end
  return tostring(v)
end

-- ---- events ----

-- event(name[, root]) -> event | nil, message. name: "sys:event".
function M.event(name, root)
  local sys, ev = tostring(name):match("^([^:]+):(.+)$")
  if not sys then return nil, ("'%s' is not a tracepoint name (sys:event)"):format(tostring(name)) end
  local r, msg = tracepoint.root(root)
  if not r then return nil, msg end
  local f = io.open(("%s/events/%s/%s/format"):format(r, sys, ev), "r")
  if not f then return nil, ("no format for tracepoint %s in %s"):format(name, r) end
  local text = f:read("a")
  f:close()
  return M.parse(name, text)
end

-- parse(name, text of a format file) -> event | nil, message
function M.parse(name, text)
  local pf = text:match("print fmt: (.*)$")
  if not pf then return nil, ("tracepoint %s: its format has no print fmt"):format(name) end
  local self = setmetatable({ name = name, fields = parse_fields(text) }, Event)
  local ok, err = pcall(function()
    local p = setmetatable({ toks = tokenize(pf), i = 1 }, Parser)
    local first = p:next()
    if not first or first.t ~= "str" then error("print fmt: no format string", 0) end
    local s = first.v
    while p:peek() and p:peek().t == "str" do s = s .. p:next().v end
    self.parts = parse_printf(s)
    self.args = {}
    while p:peek() do
      p:expect(",")
      self.args[#self.args + 1] = p:expr()
    end
  end)
  if not ok then return nil, ("tracepoint %s: %s"):format(name, err) end
  return self
end

-- ev:render(raw[, resolve]) -> the text perf prints for a sample's raw
-- data. resolve(address) -> name, offset: the kernel symbol for %pS.
function Event:render(raw, resolve)
  local out, a = {}, 0
  for _, part in ipairs(self.parts) do
    if type(part) == "string" then
      out[#out + 1] = part
    else
      a = a + 1
      local e = self.args[a]
      if not e then error(("tracepoint %s: print fmt has fewer arguments than conversions"):format(self.name), 0) end
      out[#out + 1] = format_one(part, eval(self, raw, e), resolve)
    end
  end
  return table.concat(out)
end

return M
