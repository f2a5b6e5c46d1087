-- The check of an options table that perfev.sampler and perfev.record
-- share: every key known, every value of its kind. Each caller raises its
-- own error with the message this returns.
local M = {}

-- Kinds beyond a plain type() name.
local KINDS = {
  any = function() return true end,
  integer = function(v) return math.type(v) == "integer" end,
  -- an event: a string, a table of attr fields or an attr userdata
  spec = function(v) local t = type(v) return t == "string" or t == "table" or t == "userdata" end,
  -- a sample_type-like mask: names, a list of names or a number
  mask = function(v) local t = type(v) return t == "string" or t == "table" or math.type(v) == "integer" end,
}

-- check(opts, kinds, is) -> nil when opts is a table whose every key is
-- in kinds and every value of its kind, else what is wrong: "options are a
-- table, got ...", "unknown option 'k'" or "option 'k' <is> <kind>, got
-- <type>" (is: the caller's wording, "is a" or "must be a").
-- kinds: { [key] = "integer" | "any" | "spec" | "mask" | a type() name }.
function M.check(opts, kinds, is)
  if type(opts) ~= "table" then return ("options are a table, got %s"):format(type(opts)) end
  for k, v in pairs(opts) do
    local want = kinds[k]
    if not want then return ("unknown option '%s'"):format(tostring(k)) end
    local fits = KINDS[want]
    if not (fits and fits(v) or type(v) == want) then
      return ("option '%s' %s %s, got %s"):format(k, is, want, type(v))
    end
  end
  return nil
end

return M
