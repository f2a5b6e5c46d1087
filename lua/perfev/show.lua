-- How perfev's plain result tables print (tostring, the REPL): the event
-- tables perfev.parse returns and the readings ev:read_raw() returns. Each
-- gets a metatable holding only __tostring, so its contents, pairs and
-- equality stay those of a plain table.
local compat = require "perfev.compat"

local M = {}

-- value(v) -> v as a message shows it: integers in decimal (cdata
-- included), a table of terms as {k=v,...}
local function value(v)
  if type(v) == "table" then
    local out = {}
    for k, x in pairs(v) do out[#out + 1] = tostring(k) .. "=" .. tostring(x) end
    table.sort(out)
    return "{" .. table.concat(out, ",") .. "}"
  end
  if type(v) == "cdata" then return compat.udec(v) end
  return tostring(v)
end

---------------------------------------------------------------------------
-- perfev.parse's event tables

-- Fields shown first, in this order; every other field follows sorted,
-- a true boolean by its name alone, false, 0 and the name left out.
local FIRST = { "type", "config" }
local SKIP = { name = true, type = true, config = true }

-- own(t, class, cname): the check at the top of each __tostring (options.self)
local function own(t, class, cname)
  if getmetatable(t) ~= class then require("perfev.options").self(t, class, cname, "__tostring") end
end

local Event = {}
function Event.__tostring(t)
  own(t, Event, "perfev.parse.event")
  local out = {}
  for _, k in ipairs(FIRST) do
    local v = rawget(t, k)
    if v ~= nil then
      out[#out + 1] = k == "config" and (type(v) == "number" or type(v) == "cdata") and "config 0x" .. compat.hex(v)
                      or (k .. " " .. value(v))
    end
  end
  local rest = {}
  for k, v in pairs(t) do
    if not SKIP[k] and v ~= false and v ~= 0 then rest[#rest + 1] = k end
  end
  table.sort(rest, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(rest) do
    local v = rawget(t, k)
    out[#out + 1] = v == true and tostring(k) or (tostring(k) .. " " .. value(v))
  end
  return ("perfev.parse.event(%s: %s)"):format(tostring(rawget(t, "name")), table.concat(out, ", "))
end

-- A list of them: the names, up to SHOWN of them.
M.SHOWN = 12
local List = {}
function List.__tostring(t)
  own(t, List, "perfev.parse.list")
  local names = {}
  for i = 1, math.min(#t, M.SHOWN) do names[i] = tostring(rawget(t[i], "name")) end
  local more = #t > M.SHOWN and (", and %d more"):format(#t - M.SHOWN) or ""
  return ("perfev.parse.list(%d event%s: %s%s)"):format(#t, #t == 1 and "" or "s",
                                                        table.concat(names, ", "), more)
end

-- event(t) -> t, printing as perfev.parse.event(name: fields)
-- (a value that is not a table refused at the caller's line)
local function tbl(t, fname)
  if type(t) ~= "table" then require("perfev.options").arg(t, "table", "perfev.show." .. fname, "its argument") end
end

function M.event(t)
  tbl(t, "event")
  return setmetatable(t, Event)
end

-- list(t) -> t (a list of event tables), printing as perfev.parse.list(...)
function M.list(t)
  tbl(t, "list")
  return setmetatable(t, List)
end

---------------------------------------------------------------------------
-- ev:read_raw()'s readings: { value, id, lost, time_enabled, time_running }
-- for one event; a group leader's: { {value, id, lost}, ..., nr, ... }

local ENTRY = { "value", "id", "lost" }

local function entry(t, out)
  for _, k in ipairs(ENTRY) do
    local v = rawget(t, k)
    if v ~= nil then out[#out + 1] = k .. " = " .. value(v) end
  end
end

local Reading = {}
function Reading.__tostring(t)
  own(t, Reading, "perfev.reading")
  local out = {}
  local nr = rawget(t, "nr")
  if nr then
    out[1] = "nr = " .. value(nr)
    for i = 1, #t do
      local e = {}
      entry(t[i], e)
      out[#out + 1] = "{" .. table.concat(e, ", ") .. "}"
    end
  else
    entry(t, out)
  end
  for _, k in ipairs { "time_enabled", "time_running" } do
    local v = rawget(t, k)
    if v ~= nil then out[#out + 1] = k .. " = " .. value(v) end
  end
  return "perfev.reading(" .. table.concat(out, ", ") .. ")"
end

-- reading(t) -> t, printing as perfev.reading(value = ..., ...); t may be
-- nil (a failed read passes through)
function M.reading(t, ...)
  if type(t) == "table" then setmetatable(t, Reading) end
  return t, ...
end

return M
