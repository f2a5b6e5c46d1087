-- The Lua methods of the C ring class (ev:mmap's ring, csrc/ring.c): the
-- iteration API every source of records has (lua/perfev/iterate.lua),
--   ring:records([{ into = t }])              tables
--   ring:samples(field, ...) / ring:values()  the fields' values of each sample
--   ring:tally(field, ... [, { on_record = fn, into = t }])   tallies
-- added to the class's method table, which the core registers as
-- "perfev.ring" (loaded by perfev's init.lua).
local iterate = require "perfev.iterate"
local options = require "perfev.options"

local M = {}

-- install(): adds the methods once; the class's table from the registry
-- (the core keeps its metatables there, under their names).
function M.install()
  local mt = debug.getregistry()["perfev.ring"]
  local methods = type(mt) == "table" and rawget(mt, "__index")
  if type(methods) ~= "table" or rawget(methods, "tally") then return end
  local records, samples = methods.records, methods.samples

  -- ring:records([opts]): `fields` without `into` and `tally` are the
  -- deprecated forms of samples and tally (they still work)
  methods.records = function(ring, opts)
    iterate.deprecated_forms(opts, "ring:records")
    return options.call(records, ring, opts)
  end

  -- ring:values(...): ring:samples(...)
  methods.values = samples

  -- ring:tally(field, ... [, opts]) -> count, weight, values... for each
  -- distinct set of values of the samples available now
  methods.tally = function(ring, ...)
    local fields, opts = iterate.split("ring:tally", ...)
    opts = options.check(opts, iterate.TALLY_OPTIONS, "ring:tally")
    local it = options.call(records, ring, { fields = fields, tally = true, into = opts.into })
    return iterate.tallies(it, opts.on_record)
  end
end

return M
