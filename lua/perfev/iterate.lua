-- Iteration by purpose, the same on the three sources of records: a ring
-- (ring:records), a byte string (perfev.decode) and a perf.data file
-- (f:records). Each source has
--   :records([opts])          tables (a new one per record, or opts.into)
--   :samples(field, ... [, opts]) and its other name :values(...): the
--                             fields' values of each sample, no table
--   :tally(field, ... [, opts]) count, weight, values... for each distinct
--                             set of the fields' values (doc/decoding.md)
-- over the core's one iterator (csrc/), whose `fields` and `tally` options
-- these replace; those option forms of records() still work for one
-- release and say so once through the warning channel (perfev.warn).
local options = require "perfev.options"
local warn = require "perfev.warn"

local M = {}

-- split(fname, ...) -> { field, ... }, opts: the fields named, and an
-- options table after them if the last argument is one; raises when no
-- field is named or one is not a string.
function M.split(fname, ...)
  local n = select("#", ...)
  local fields = { ... }
  local opts
  if type(fields[n]) == "table" then
    opts = fields[n]
    fields[n] = nil
    n = n - 1
  end
  if n == 0 then
    options.raisef("%s: name the fields (e.g. %s(\"ip\", \"tid\"))", fname, fname)
  end
  for i = 1, n do
    if type(fields[i]) ~= "string" then
      options.raisef("%s: field #%d must be a string, got %s", fname, i, options.describe(fields[i]))
    end
  end
  return fields, opts
end

-- deprecated_forms(opts, fname): the options of records() that asked for
-- values (`fields` without `into`) or tallies (`tally`), said once per
-- call site; they still work.
function M.deprecated_forms(opts, fname)
  if type(opts) ~= "table" then return end
  if opts.tally then
    warn.deprecated(fname .. "{ fields = ..., tally = true } is now :tally(field, ...)", 2)
  elseif opts.fields ~= nil and opts.into == nil then
    warn.deprecated(fname .. "{ fields = ... } (values) is now :samples(field, ...)", 2)
  end
end

-- tallies(it, on_record) -> an iterator of count, weight, values... over
-- the core's tally iterator it, whose records of other types (tables)
-- go to on_record(rec) in their place in the stream, or are skipped.
function M.tallies(it, on_record)
  local function pass(n, ...)
    if type(n) == "table" then
      if on_record then on_record(n) end
      return pass(it())
    end
    return n, ...
  end
  return function() return pass(it()) end
end

-- The options a tally takes beside the fields (each source adds its own).
M.TALLY_OPTIONS = { into = "table", on_record = "function" }

-- with(schema, extra) -> a new schema: schema's keys and extra's
function M.with(schema, extra)
  local out = {}
  for k, v in pairs(schema) do out[k] = v end
  for k, v in pairs(extra or {}) do out[k] = v end
  return out
end

return M
