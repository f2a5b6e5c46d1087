-- Builds small perf.data files byte by byte with string.pack, in either
-- byte order, for the specs that need what perf cannot write here (a
-- big-endian file, every perf record type, exact corruptions).
--   local B = require "spec.support.perfdata_build"
--   local bytes = B.file(">", { attrs = {...}, records = {...}, features = {...} })
local compat = require "perfev.compat"
local core = require "perfev.core"
local pack = compat.pack
local S = core.SAMPLE

local M = {}

local function rev8(b)
  local r = 0
  for k = 0, 7 do if compat.band(b, compat.lshift(1, k)) ~= 0 then r = compat.bor(r, compat.lshift(1, 7 - k)) end end
  return r
end

-- The attr's flag word (bit k = the k-th bitfield) as a machine of byte
-- order e lays it out: a big-endian one fills each byte from its top bit.
local function flag_bytes(e, flags)
  local s = pack("<I8", flags)
  if e == "<" then return s end
  return (s:gsub(".", function(c) return string.char(rev8(c:byte())) end))
end
M.flag_bytes = flag_bytes

-- A 136-byte attr: a = { type, config, sample_period, sample_type,
-- read_format, flags (the bitfield word), wakeup_events, bp_type, config1,
-- config2, branch_sample_type, sample_regs_user, sample_stack_user,
-- clockid, sample_regs_intr, aux_watermark, sample_max_stack,
-- aux_sample_size, aux_action (its bitfields as flags: bit k), sig_data,
-- config3 }.
function M.attr(e, a)
  local function g(k) return a[k] or 0 end
  local aux = pack("<I4", g "aux_action")
  if e == ">" then aux = aux:gsub(".", function(c) return string.char(rev8(c:byte())) end) end
  return pack(e .. "I4I4i8i8i8i8", g "type", a.size or 136, g "config", g "sample_period",
              g "sample_type", g "read_format")
      .. flag_bytes(e, g "flags")
      .. pack(e .. "I4I4i8i8i8i8I4i4i8I4I2I2I4", g "wakeup_events", g "bp_type", g "config1",
              g "config2", g "branch_sample_type", g "sample_regs_user", g "sample_stack_user",
              g "clockid", g "sample_regs_intr", g "aux_watermark", g "sample_max_stack", 0,
              g "aux_sample_size")
      .. aux .. pack(e .. "i8i8", g "sig_data", g "config3")
end

local function pad8(s) return s .. ("\0"):rep((8 - #s % 8) % 8) end
M.pad8 = pad8

-- A record: header (type, misc, size) and its body, padded to 8 bytes.
function M.record(e, rtype, misc, body)
  body = pad8(body)
  return pack(e .. "I4I2I2", rtype, misc or 0, 8 + #body) .. body
end

function M.cstr(s) return pad8(s .. "\0") end

-- ---- samples and sample_id trailers of a sample_type ----

local SAMPLE_BUILT = compat.bor(S.IDENTIFIER, S.IP, S.TID, S.TIME, S.ADDR, S.ID, S.STREAM_ID, S.CPU,
                                S.PERIOD, S.CALLCHAIN, S.RAW)

local function has(st, bit) return compat.band(st, bit) ~= 0 end

-- The body of a sample of sample_type st (the bits of SAMPLE_BUILT), its
-- fields from f = { id, ip, pid, tid, time, addr, stream_id, cpu, period,
-- callchain = { ... }, raw = bytes }, in the kernel's order; absent: 0.
function M.sample_body(e, st, f)
  assert(compat.band(st, compat.bnot(SAMPLE_BUILT)) == 0, "perfdata_build.sample: a sample_type bit not built here")
  local out = {}
  local function u64(v) out[#out + 1] = pack(e .. "i8", v or 0) end
  local function u32x2(a, b) out[#out + 1] = pack(e .. "I4I4", a or 0, b or 0) end
  if has(st, S.IDENTIFIER) then u64(f.id) end
  if has(st, S.IP) then u64(f.ip) end
  if has(st, S.TID) then u32x2(f.pid, f.tid) end
  if has(st, S.TIME) then u64(f.time) end
  if has(st, S.ADDR) then u64(f.addr) end
  if has(st, S.ID) then u64(f.id) end
  if has(st, S.STREAM_ID) then u64(f.stream_id) end
  if has(st, S.CPU) then u32x2(f.cpu, 0) end
  if has(st, S.PERIOD) then u64(f.period) end
  if has(st, S.CALLCHAIN) then
    local chain = f.callchain or {}
    u64(#chain)
    for _, v in ipairs(chain) do u64(v) end
  end
  if has(st, S.RAW) then   -- u32 size, then the data padded so that both end at 8 bytes
    local raw = f.raw or ""
    raw = raw .. ("\0"):rep((8 - (4 + #raw) % 8) % 8)
    out[#out + 1] = pack(e .. "I4", #raw) .. raw
  end
  return table.concat(out)
end

-- A sample record (misc: 2, user, unless given).
function M.sample(e, st, f, misc)
  return M.record(e, core.RECORD.SAMPLE, misc or 2, M.sample_body(e, st, f))
end

-- The sample_id trailer of a side-band record for sample_type st: pid,
-- tid, time, id, stream_id, cpu, identifier as st selects them, from f.
function M.trailer(e, st, f)
  local out = {}
  if has(st, S.TID) then out[#out + 1] = pack(e .. "I4I4", f.pid or 0, f.tid or 0) end
  if has(st, S.TIME) then out[#out + 1] = pack(e .. "i8", f.time or 0) end
  if has(st, S.ID) then out[#out + 1] = pack(e .. "i8", f.id or 0) end
  if has(st, S.STREAM_ID) then out[#out + 1] = pack(e .. "i8", f.stream_id or 0) end
  if has(st, S.CPU) then out[#out + 1] = pack(e .. "I4I4", f.cpu or 0, 0) end
  if has(st, S.IDENTIFIER) then out[#out + 1] = pack(e .. "i8", f.id or 0) end
  return table.concat(out)
end

-- struct perf_header_string: u32 len, then len bytes (NUL, padded to 64)
function M.hstr(e, s)
  local n = #s + 1
  n = n + (64 - n % 64) % 64
  return pack(e .. "I4", n) .. s .. ("\0"):rep(n - #s)
end

-- A perf.data file: opts.attrs = { { attr = bytes, ids = { ... } } },
-- opts.data = bytes of records, opts.features = { { bit, bytes } } (in
-- bit order). Returns the bytes and where each part landed.
function M.file(e, opts)
  local attr_size = #opts.attrs[1].attr + 16
  local at = 104
  local ids_off, ids_parts = {}, {}
  for i, a in ipairs(opts.attrs) do
    local s = ""
    for _, id in ipairs(a.ids) do s = s .. pack(e .. "i8", id) end
    ids_off[i] = at
    ids_parts[#ids_parts + 1] = s
    at = at + #s
  end
  local attrs_off, attrs = at, {}
  for i, a in ipairs(opts.attrs) do
    attrs[#attrs + 1] = a.attr .. pack(e .. "i8i8", ids_off[i], #ids_parts[i])
  end
  local attrs_bytes = table.concat(attrs)
  local data_off = attrs_off + #attrs_bytes
  local data = opts.data
  local feat = opts.features or {}
  local words = { 0, 0, 0, 0 }
  for _, f in ipairs(feat) do words[compat.idiv(f[1], 64) + 1] = compat.bor(words[compat.idiv(f[1], 64) + 1],
      compat.lshift(1, f[1] % 64)) end
  local tbl_off = data_off + #data
  local sec_at = tbl_off + 16 * #feat
  local tbl, secs = {}, {}
  for _, f in ipairs(feat) do
    tbl[#tbl + 1] = pack(e .. "i8i8", sec_at, #f[2])
    secs[#secs + 1] = f[2]
    sec_at = sec_at + #f[2]
  end
  local header = "PERFILE2"
  if e == ">" then header = header:reverse() end
  header = header .. pack(e .. "i8i8i8i8i8i8i8i8i8i8i8i8", 104, attr_size, attrs_off, #attrs_bytes,
                          data_off, #data, 0, 0, words[1], words[2], words[3], words[4])
  local bytes = header .. table.concat(ids_parts) .. attrs_bytes .. data .. table.concat(tbl) ..
                table.concat(secs)
  return bytes, { attrs = attrs_off, data = data_off, size = #data, features = tbl_off }
end

-- A pipe-mode stream: the 16-byte header, then the records.
function M.pipe(e, records)
  local magic = e == ">" and ("PERFILE2"):reverse() or "PERFILE2"
  return magic .. pack(e .. "i8", 16) .. records
end

function M.write(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
  return path
end

return M
