-- The perf.data file header (struct perf_file_header), the attrs section
-- with each attr's ids, and the feature sections, read through a Lua file
-- handle and checked against the file's size: every offset and size that
-- points outside the file is an error naming the field and its offset.
local core = require "perfev.core"
local features = require "perfev.perfdata.features"
local compat = require "perfev.compat"

local unpack = compat.fast.unpack
local M = {}

M.FILE_HEADER = 104   -- magic, size, attr_size, attrs, data, event_types, 256 feature bits
M.OLD_HEADER = 72     -- the same without the feature bits (perf before 2.6.37)
M.PIPE_HEADER = 16    -- magic and size
local MIN_ATTR = core.ATTR_SIZE.VER0
local FEATURE = core.PERFDATA.FEATURE
local HOST_LITTLE = compat.fast.pack("=I2", 1):byte() == 1

-- The byte order the magic says: "<" or ">", or nil and why not.
function M.endian(magic)
  -- the u64 0x32454c4946524550 in the writer's byte order
  if magic == "PERFILE2" then return "<" end
  if magic == "2ELIFREP" then return ">" end
  if magic == "PERFFILE" or magic == "ELIFFREP" then
    return nil, "version 1 perf.data (magic PERFFILE) is not supported: it is the format " ..
                "perf wrote before Linux 2.6.37; perf itself no longer writes it"
  end
  return nil, ("not a perf.data file: the magic at offset 0 is %q, not \"PERFILE2\""):format(magic)
end

local function read_at(fh, off, n)
  if not fh:seek("set", off) then return "" end
  return fh:read(n) or ""
end

-- Reads the first 16 bytes: { endian, swap, size, pipe }, or nil, message.
function M.start(fh)
  local s = fh:read(16) or ""
  if #s < 16 then
    return nil, ("truncated: the file has %d bytes, and a perf.data header starts with 16 " ..
                 "(magic and size)"):format(#s)
  end
  local e, why = M.endian(s:sub(1, 8))
  if not e then return nil, why end
  local size = unpack(e .. "i8", s, 9)
  local h = { magic = s:sub(1, 8), endian = e == "<" and "little" or "big", e = e,
              swap = (e == "<") ~= HOST_LITTLE, size = size, warnings = {} }
  if size == M.PIPE_HEADER then
    h.pipe = true
    return h
  end
  if size ~= M.FILE_HEADER and size ~= M.OLD_HEADER then
    return nil, ("the header's size field (offset 8) is %d: neither %d (a perf.data file) nor %d " ..
                 "(pipe mode)"):format(size, M.FILE_HEADER, M.PIPE_HEADER)
  end
  h.pipe = false
  return h
end

-- A section { offset, size } at byte `at` of s; it must lie in the file.
local function section(h, s, at, what)
  local off, size = unpack(h.e .. "i8i8", s, at + 1)
  if off < 0 or size < 0 or off > h.file_size or size > h.file_size - off then
    error({ perfdata = ("the %s section (offset field at %d: %d, size field at %d: %d) runs past " ..
                        "the end of the file (%d bytes): the file is truncated or corrupt")
                       :format(what, at, off, at + 8, size, h.file_size) }, 0)
  end
  return { offset = off, size = size }
end

local function fail(fmt, ...)
  error({ perfdata = fmt:format(...) }, 0)
end

-- The rest of a file-mode header: attr_size, the sections, the feature
-- bits and the feature section table.
local function file_header(fh, h)
  h.file_size = fh:seek("end")
  if not h.file_size then
    fail("a perf.data file that is not in pipe mode must be seekable (a pipe carries the " ..
         "pipe-mode format, `perf record -o -`)")
  end
  if h.file_size < h.size then
    fail("truncated: the header is %d bytes and the file %d", h.size, h.file_size)
  end
  local s = read_at(fh, 0, h.size)
  h.attr_size = unpack(h.e .. "i8", s, 17)
  if h.attr_size < MIN_ATTR + 16 or h.attr_size > 4096 or h.attr_size % 8 ~= 0 then
    fail("the header's attr_size field (offset 16) is %d: an attr of %d bytes or more and its " ..
         "16-byte ids section, a multiple of 8", h.attr_size, MIN_ATTR)
  end
  h.attrs = section(h, s, 24, "attrs")
  h.data = section(h, s, 40, "data")
  h.event_types = section(h, s, 56, "event_types")
  if h.attrs.size % h.attr_size ~= 0 then
    fail("the attrs section's size (offset 32) %d is not a multiple of attr_size %d",
         h.attrs.size, h.attr_size)
  end
  for _, k in ipairs { "attrs", "data" } do
    if h[k].size > 0 and h[k].offset < h.size then
      fail("the %s section's offset (field at %d) %d is inside the %d-byte header", k,
           k == "attrs" and 24 or 40, h[k].offset, h.size)
    end
  end
  h.feature_bits = {}
  if h.size == M.FILE_HEADER then
    for bit = 1, 255 do
      local word = unpack(h.e .. "i8", s, 73 + 8 * (compat.idiv(bit, 64)))
      if compat.band(word, compat.lshift(1, bit % 64)) ~= 0 then h.feature_bits[#h.feature_bits + 1] = bit end
    end
  end
  if h.data.size == 0 then
    h.warnings[#h.warnings + 1] = "the data size field (offset 48) is 0: perf record did not " ..
      "finish writing the file; the records are read to the end of the file and the " ..
      "features are not read"
    h.feature_bits = {}
    h.data.size = nil
    return
  end
  local at = h.data.offset + h.data.size
  local n = #h.feature_bits
  if n * 16 > h.file_size - at then
    fail("the feature section table (%d entries at offset %d: data offset + data size) runs " ..
         "past the end of the file (%d bytes): the file is truncated", n, at, h.file_size)
  end
  local tbl = read_at(fh, at, n * 16)
  h.sections = {}
  for i, bit in ipairs(h.feature_bits) do
    local off, size = unpack(h.e .. "i8i8", tbl, 16 * (i - 1) + 1)
    local name = FEATURE[bit] or ("feature " .. bit)
    if off < 0 or size < 0 or off > h.file_size or size > h.file_size - off then
      fail("the %s feature section (table entry at offset %d: offset %d, size %d) runs past the " ..
           "end of the file (%d bytes)", name, at + 16 * (i - 1), off, size, h.file_size)
    end
    h.sections[i] = { bit = bit, name = FEATURE[bit], offset = off, size = size }
  end
end

-- Reads the file header after M.start: h completed, or nil, message.
function M.read(fh, h)
  local ok, err = pcall(file_header, fh, h)
  if ok then return h end
  if type(err) == "table" and err.perfdata then return nil, err.perfdata end
  error(err, 0)
end

-- The attrs section: { { attr =, ids = }, ... }, or nil, message.
function M.attrs(fh, h)
  local out, n = {}, compat.idiv(h.attrs.size, h.attr_size)
  local room = h.attr_size - 16
  for i = 1, n do
    local at = h.attrs.offset + (i - 1) * h.attr_size
    local s = read_at(fh, at, h.attr_size)
    if #s < h.attr_size then return nil, ("attr %d at offset %d is truncated"):format(i, at) end
    local size = unpack(h.e .. "I4", s, 5)
    if size == 0 then size = MIN_ATTR end
    if size < MIN_ATTR or size > room then
      return nil, ("attr %d: its size field (offset %d) is %d, outside %d..%d (attr_size %d " ..
                   "less its ids section)"):format(i, at + 4, size, MIN_ATTR, room, h.attr_size)
    end
    local attr = core.attr_from_bytes(s:sub(1, size), h.swap)
    local ioff, isize = unpack(h.e .. "i8i8", s, room + 1)
    if ioff < 0 or isize < 0 or isize % 8 ~= 0 or ioff > h.file_size or isize > h.file_size - ioff then
      return nil, ("attr %d: its ids section (offset field at %d: %d, size %d) runs past the end " ..
                   "of the file (%d bytes) or is not whole u64s"):format(i, at + room, ioff,
                                                                        isize, h.file_size)
    end
    local ids, raw = {}, read_at(fh, ioff, isize)
    for j = 1, compat.idiv(isize, 8) do ids[j] = unpack(h.e .. "i8", raw, 8 * j - 7) end
    out[i] = { attr = attr, ids = ids }
  end
  return out
end

-- The feature sections by name (unknown bits skipped by their size);
-- a section that does not parse is left out with a warning.
function M.features(fh, h)
  local t, ctx = {}, { swap = h.swap }
  for _, sec in ipairs(h.sections or {}) do
    if sec.name then M.add_feature(h, t, ctx, sec.name, read_at(fh, sec.offset, sec.size)) end
  end
  return t
end

-- Parses the bytes of feature `name` into t[name] (and ctx[name], which the
-- features parsed after it see), or adds a warning to h when they do not
-- parse. Also for the header_feature records of pipe mode.
function M.add_feature(h, t, ctx, name, bytes)
  local v, why = features.parse(name, bytes, h.e, ctx)
  if v == nil then
    h.warnings[#h.warnings + 1] = why
  else
    t[name], ctx[name] = v, v
  end
end

return M
