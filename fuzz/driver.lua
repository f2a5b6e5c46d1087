-- What the fuzz targets run for each input (embedded in them at build
-- time): called with perfev.core, the entries of fuzz/attrs.lua and the
-- mode, it returns function(bytes, selector); the selector is an input's
-- first byte.
--   decode:    decodes bytes under the selected attr (and, by a bit of the
--              selector, only some fields); errors are expected
--              (malformed input) and ignored by the C side: only crashes
--              and sanitizer reports are bugs.
--   roundtrip: for every record that decodes, encode must not raise,
--              decode(encode(rec)) must equal rec, and encoding that again
--              must give the same bytes; any error escaping is a bug.
local core, entries, mode = ...

local attrs = {}
for i, e in ipairs(entries) do
  if e.map then
    local m = {}
    for id, f in pairs(e.map) do m[id] = core.attr(f) end
    attrs[i] = m
  else
    attrs[i] = core.attr(e.fields)
  end
end

local function same(a, b)
  if type(a) ~= "table" or type(b) ~= "table" then
    return a == b or (a ~= a and b ~= b)
  end
  for k, v in pairs(a) do if not same(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

local function dump(v, indent)
  indent = indent or ""
  if type(v) ~= "table" then return type(v) == "string" and ("%q"):format(v) or tostring(v) end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys, function(x, y) return tostring(x) < tostring(y) end)
  local out = {}
  for _, k in ipairs(keys) do out[#out + 1] = indent .. "  " .. tostring(k) .. " = " .. dump(v[k], indent .. "  ") end
  return "{\n" .. table.concat(out, ",\n") .. "\n" .. indent .. "}"
end

-- The selector byte: its low bits pick the attr, bit 7 the decoder's swap
-- option (records of the other byte order), bit 6 its into option (one
-- table refilled by every record).
local function options(sel, into)
  local o = {}
  if sel & 0x80 ~= 0 then o.swap = true end
  if into and sel & 0x40 ~= 0 then o.into = {} end
  return o
end

-- With bit 5 of the selector, the decode target selects fields (values,
-- or with into the table of those fields): the selection's in-place reads
-- and its walks over the rows asked for, on the same malformed input.
local FIELDS = { "type", "ip", "tid", "time", "callchain", "callchain_contexts", "raw", "read",
                 "branch_stack", "regs_user", "regs_intr", "stack_user", "dyn_size", "weight", "var2_w",
                 "data_src", "mem", "period", "cpu", "id", "stream_id", "addr", "aux", "cpumode",
                 "exact_ip", "size", "phys_addr" }

if mode == "decode" then
  return function(bytes, sel)
    local o = options(sel, true)
    if sel & 0x20 ~= 0 then o.fields = FIELDS end
    for _ in core.decode(bytes, attrs[(sel & 0x3f) % #attrs + 1], o) do end
  end
end

assert(mode == "roundtrip", "mode is decode or roundtrip")
-- Streams of several events too: the decoder picks a side-band record's
-- attr by the trailer's id, which rec.sample_id keeps when a body field
-- (lost's id, throttle's) hides it, and encode picks it back from there.
return function(bytes, sel)
  local a, o = attrs[(sel & 0x3f) % #attrs + 1], options(sel, false)
  local it = core.decode(bytes, a, o)
  while true do
    local ok, rec = pcall(it)
    if not ok or rec == nil then return end
    local b = core.encode(rec, a, o)
    if #b ~= rec.size then
      error(("ROUNDTRIP: encode gave %d bytes for a record of size %d"):format(#b, rec.size))
    end
    local back = core.decode(b, a, o)()
    if not same(rec, back) then
      error("ROUNDTRIP: decode(encode(rec)) differs\nrec = " .. dump(rec) .. "\nback = " .. dump(back))
    end
    if core.encode(back, a, o) ~= b then
      error("ROUNDTRIP: encoding the decoded record again gives other bytes")
    end
  end
end
