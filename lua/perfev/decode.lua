-- perfev.decode: the record decoder over a byte string (the kernel's
-- records, a perf.data file's data section), as a callable module with
-- the iteration API every source of records has (lua/perfev/iterate.lua):
--
--   for rec in perfev.decode(bytes, attrs[, { into = t, swap = true }]) do end
--   for rec in perfev.decode.records(bytes, attrs[, opts]) do end     -- the same
--   for ip, tid in perfev.decode.samples(bytes, attrs, "ip", "tid"[, { swap = true }]) do end
--   for n, weight, ip in perfev.decode.tally(bytes, attrs, "ip"[, opts]) do end
--
-- attrs: an attr, an event, a table of attr fields, or a list of them
-- (doc/decoding.md). The decoding is the C core's (core.decode).
local core = require "perfev.core"
local options = require "perfev.options"
local iterate = require "perfev.iterate"

local M = {}

-- records(bytes, attrs[, opts]) -> iterator of record tables. opts: into,
-- swap; `fields` with `into` (only those fields in the table). `fields`
-- alone (values) and `tally` are the deprecated forms of samples and tally.
function M.records(bytes, attrs, opts)
  iterate.deprecated_forms(opts, "perfev.decode")
  return options.call(core.decode, bytes, attrs, opts)
end

local SAMPLES_OPTIONS = { swap = "boolean" }

-- samples(bytes, attrs, field, ... [, { swap = true }]) -> iterator of the
-- fields' values of each sample (other records are stepped over). On
-- LuaJIT a plan of fixed-offset integers is read through the FFI in a
-- loop the compiler takes whole (lua/perfev/decode_jit.lua).
function M.samples(bytes, attrs, ...)
  local fields, opts = iterate.split("perfev.decode.samples", ...)
  opts = options.check(opts, SAMPLES_OPTIONS, "perfev.decode.samples")
  return options.call(core.decode, bytes, attrs, { fields = fields, swap = opts.swap })
end
M.values = M.samples

local TALLY_OPTIONS = iterate.with(iterate.TALLY_OPTIONS, { swap = "boolean" })

-- tally(bytes, attrs, field, ... [, { swap, on_record, into }]) -> iterator
-- of count, weight, values... for each distinct set of the fields' values
-- of the samples, in the order of their first sample; a record of another
-- type goes to on_record(rec) (into opts.into when given) after the sets
-- of the samples before it, or is skipped.
function M.tally(bytes, attrs, ...)
  local fields, opts = iterate.split("perfev.decode.tally", ...)
  opts = options.check(opts, TALLY_OPTIONS, "perfev.decode.tally")
  local it = options.call(core.decode, bytes, attrs, { fields = fields, tally = true, swap = opts.swap,
                                                      into = opts.into })
  return iterate.tallies(it, opts.on_record)
end

-- perfev.decode(bytes, attrs[, opts]) is records
return setmetatable(M, { __call = function(_, bytes, attrs, opts) return M.records(bytes, attrs, opts) end })
