-- The Lua methods of the C ring class (ev:mmap's ring, csrc/ring/ring.c): the
-- iteration API every source of records has (lua/perfev/iterate.lua),
--   ring:records([{ into = t }])              tables
--   ring:samples(field, ...) / ring:values()  the fields' values of each sample
--   ring:tally(field, ... [, { on_record = fn, into = t }])   tallies
-- added to the class's method table, which the core exports as
-- core.ring_methods (installed by perfev's init.lua).
local core = require "perfev.core"
local iterate = require "perfev.iterate"
local options = require "perfev.options"

local M = {}

-- what a wrong self is, as the core's own methods say it: a class's name,
-- "integer 1", "string 'x'", "no value"
local function got(v, n)
  if n == 0 then return "no value" end
  local mt = getmetatable(v)
  if (type(v) == "userdata" or type(v) == "table") and type(mt) == "table"
     and type(rawget(mt, "__name")) == "string" then
    return rawget(mt, "__name")
  end
  return options.describe(v)
end

-- check(ring, n, method): the core's bad-self error, at the caller's line
local function check(ring, n, method)
  if not options.of_class(ring, core.ring_methods) then
    options.raisef("perfev.ring: bad self for %s (expected a perfev.ring, got %s): call it as obj:%s(...)",
                   method, got(ring, n), method)
  end
end

-- install(): adds the methods once.
function M.install()
  local methods = core.ring_methods
  if rawget(methods, "tally") then return end
  local records, samples = methods.records, methods.samples

  -- ring:records([opts]): `fields` without `into` and `tally` are the
  -- deprecated forms of samples and tally (they still work)
  methods.records = function(...)
    local ring, opts = ...
    check(ring, select("#", ...), "records")
    iterate.deprecated_forms(opts, "ring:records")
    return options.call(records, ring, opts)
  end

  -- ring:values(...): ring:samples(...)
  methods.values = samples

  -- ring:tally(field, ... [, opts]) -> count, weight, values... for each
  -- distinct set of values of the samples available now
  methods.tally = function(...)
    local ring = ...
    check(ring, select("#", ...), "tally")
    local fields, opts = iterate.split("ring:tally", select(2, ...))
    opts = options.check(opts, iterate.TALLY_OPTIONS, "ring:tally")
    local it = options.call(records, ring, { fields = fields, tally = true, into = opts.into })
    return iterate.tallies(it, opts.on_record)
  end
end

return M
