-- perfev.perfdata's writer: perf.data files that perf report, perf script
-- and perf report -D read, from records as the reader (or a ring, or a
-- sampler) gives them. See doc/perfdata-write.md.
--
--   local pd = require "perfev.perfdata"
--   local w = assert(pd.create("out.data", f:attrs(), { features = f }))
--   for rec in f:records() do w:write(rec) end
--   w:close()
--
-- File mode: the header, each attr's ids, the attrs and the records are
-- written as they come; close() appends the feature sections and rewrites
-- the header with the data size and the feature bits. Pipe mode (a pipe,
-- "-", or opts.pipe): the 16-byte header, a header_attr record per attr
-- and a header_feature record per feature, then the records; nothing is
-- rewritten.
local core = require "perfev.core"
local options = require "perfev.options"
local names = require "perfev.names"
local usrec = require "perfev.perfdata.usrec"
local featwrite = require "perfev.perfdata.featwrite"
local host = require "perfev.perfdata.host"
local buildid = require "perfev.perfdata.buildid"
local compat = require "perfev.compat"

local pack = compat.fast.pack
local encode = core.encode

local M = {}

local W = {}
W.__index = W
M.Writer = W

local FILE_HEADER, PIPE_HEADER = 104, 16
-- Bytes of records between the finished_round records the writer adds on
-- its own (rounds = "auto"): perf report holds about two rounds in memory.
M.ROUND_BYTES = compat.lshift(1, 20)
local FINISHED_ROUND = usrec.encode({ type = "finished_round" })
local MISC_KERNEL, MISC_USER = core.MISC.KERNEL, core.MISC.USER
local OPTIONS = { pipe = "boolean", features = "table", raw_features = "table",
                  build_ids = "boolean", rounds = "string", host = "boolean", name = "string" }

local function fail(fmt, ...)
  options.raise("perfev.perfdata.create: " .. fmt:format(...))
end

local function is_attr(v)
  return type(v) == "userdata" and (getmetatable(v) or {}).__name == "perfev.attr"
end

local function is_event(v)
  return type(v) == "userdata" and (getmetatable(v) or {}).__name == "perfev.event"
end

-- ---- the attrs ----

local function name_of(a)
  return names.name_of(a.type, a.config) or ("%d:%d"):format(a.type, a.config)
end

-- The attrs argument as { { attr, ids, name } }: a list like f:attrs()
-- gives (or of plain attrs), a perfdata file, a sampler session, an event
-- or a list of events (events with equal attrs share an entry), or an attr.
local function entries_of(attrs)
  if is_attr(attrs) then return { { attr = attrs, ids = {}, name = name_of(attrs) } } end
  if is_event(attrs) then attrs = { attrs } end
  if type(attrs) ~= "table" then fail("attrs must be a list of { attr, ids, name }, got %s", type(attrs)) end
  if type(attrs.attrs) == "function" and attrs.records then return entries_of(attrs:attrs()) end
  if attrs.by_spec and attrs.events then         -- a perfev.sampler session
    local out = {}
    for i, evs in ipairs(attrs.by_spec) do
      local ids = {}
      for j, ev in ipairs(evs) do ids[j] = ev:id() end
      out[i] = { attr = evs[1]:attr(), ids = ids, name = attrs.names[i] }
    end
    return out
  end
  local out = {}
  for i, e in ipairs(attrs) do
    if is_event(e) then
      local a, id = e:attr(), e:id()
      local merged = false
      for _, o in ipairs(out) do
        if o.attr == a then o.ids[#o.ids + 1] = id; merged = true; break end
      end
      if not merged then out[#out + 1] = { attr = a, ids = { id }, name = e:data().name or name_of(a) } end
    elseif is_attr(e) then                      -- a plain attr, as pd.create(path, attr) takes
      out[#out + 1] = { attr = e, ids = {}, name = name_of(e) }
    elseif type(e) == "table" and is_attr(e.attr) then
      local ids = e.ids or {}
      if type(ids) ~= "table" then fail("attrs[%d].ids must be a list of integers", i) end
      for j, id in ipairs(ids) do
        if compat.math_type(id) ~= "integer" then fail("attrs[%d].ids[%d] must be an integer", i, j) end
      end
      out[#out + 1] = { attr = e.attr, ids = ids, name = e.name or name_of(e.attr) }
    else
      fail("attrs[%d] must be { attr = <perfev.attr>, ids = {...}, name = ... }, an attr or an event", i)
    end
  end
  if #out == 0 then fail("attrs is an empty list: a perf.data file needs at least one event") end
  return out
end

-- What perf requires of several events (evlist__valid_sample_type and
-- _sample_id_all): each sample and side-band record says its event's id,
-- at the same place for all.
local function check_entries(list)
  local seen = {}
  for i, e in ipairs(list) do
    for _, id in ipairs(e.ids) do
      if seen[id] then fail("id %d is in attrs[%d] and attrs[%d]", id, seen[id], i) end
      seen[id] = i
    end
  end
  if #list == 1 then return end
  local a1 = list[1].attr
  local id1, is1 = core.id_positions(a1)       -- the decoder's positions of the id
  for i, e in ipairs(list) do
    local id, is = core.id_positions(e.attr)
    if id < 0 or id ~= id1 or is ~= is1 then
      fail("attrs[%d] ('%s'): with several events every sample_type needs 'identifier' (or 'id' at " ..
           "the same place in all), as perf requires to tell the events apart", i, e.name)
    end
    if e.attr.sample_id_all ~= a1.sample_id_all then
      fail("attrs[%d] ('%s'): sample_id_all differs from attrs[1]'s; perf requires it equal", i, e.name)
    end
  end
end

-- The attr's bytes in `size` bytes, with that size in its size field.
local function attr_bytes(a, size)
  local b = a:bytes()
  b = b:sub(1, size) .. ("\0"):rep(size - math.min(#b, size))
  return b:sub(1, 4) .. pack("=I4", size) .. b:sub(9)
end

-- The size the attrs are written with. perf refuses an attr whose size
-- field is larger than its own struct, whatever the extra bytes hold
-- (perf 6.1: 128 bytes, the kernel's PERF_ATTR_SIZE_VER7), so the size is
-- the attrs' own (at most 128), or more only when a field beyond is set.
local PERF_ATTR_SIZE_VER7 = 128
local function attr_size(entries)
  local own, needed = 64, 64
  for _, e in ipairs(entries) do
    local b = e.attr:bytes()
    local last = #b - #b:match("%z*$")            -- the last byte that is not zero
    needed = math.max(needed, compat.idiv(last + 7, 8) * 8)
    own = math.max(own, e.attr.size)
  end
  return math.max(needed, math.min(own, PERF_ATTR_SIZE_VER7))
end

-- ---- output ----

local function put(self, s)
  local ok, err, errno = self.fh:write(s)
  if not ok then
    self.err = { ("perfev.perfdata: %s: write failed: %s"):format(self.name, tostring(err)), errno }
    return nil
  end
  self.pos = self.pos + #s
  return true
end

local function ioerr(self)
  return nil, self.err[1], self.err[2]
end

local function header(self, data_size, bits)
  local words = { 0, 0, 0, 0 }
  for _, bit in ipairs(bits or {}) do
    words[compat.idiv(bit, 64) + 1] = compat.bor(words[compat.idiv(bit, 64) + 1], compat.lshift(1, bit % 64))
  end
  return "PERFILE2" .. pack("=i8i8i8i8i8i8i8i8i8i8i8i8", FILE_HEADER, self.attr_size,
    self.attrs_at, #self.entries * self.attr_size, self.data_at, data_size, 0, 0,
    words[1], words[2], words[3], words[4])
end

-- File mode: the header (data size 0 until close), each attr's ids, the
-- attrs; the data follows. Pipe mode: the pipe header, then a
-- header_attr record per attr.
local function start(self)
  if self.pipe then
    if not put(self, "PERFILE2" .. pack("=i8", PIPE_HEADER)) then return false end
    for _, e in ipairs(self.entries) do
      local b = usrec.encode({ type = "header_attr", attr = core.attr_from_bytes(
        attr_bytes(e.attr, self.attr_sz)), ids = e.ids })
      if not put(self, b) then return false end
    end
    return true
  end
  local at, ids_at, parts = FILE_HEADER, {}, {}
  for i, e in ipairs(self.entries) do
    local s = {}
    for j, id in ipairs(e.ids) do s[j] = pack("=i8", id) end
    parts[i] = table.concat(s)
    ids_at[i] = at
    at = at + #parts[i]
  end
  self.attrs_at = at
  for i, e in ipairs(self.entries) do
    parts[#parts + 1] = attr_bytes(e.attr, self.attr_sz) .. pack("=i8i8", ids_at[i], #parts[i])
  end
  self.data_at = at + #self.entries * self.attr_size
  return put(self, header(self, 0)) and put(self, table.concat(parts))
end

-- ---- features ----

-- The raw feature sections of a perfdata file in this machine's byte order.
local function raw_sections(f)
  local h = f:header()
  local out = {}
  if h.pipe or h.swap then return out end
  local fh = f.fh
  local back = fh:seek("cur")
  for _, sec in ipairs(h.sections or {}) do
    if sec.name and fh:seek("set", sec.offset) then out[sec.name] = fh:read(sec.size) or "" end
  end
  if back then fh:seek("set", back) end
  return out
end

-- The features written: this machine's (unless opts.host is false), the
-- ones given (by value, or a perfdata file's, copied), and those the writer
-- knows better: event_desc always; sample_time, build_id and clockid when
-- not given.
local function gather_features(self, opts)
  local vals, raw = {}, {}
  if opts.host ~= false then vals = host.features() end
  local given = opts.features
  if given and type(given.features) == "function" and given.header then
    for k, v in pairs(raw_sections(given)) do raw[k] = v end
    given = given:features()
  end
  for k, v in pairs(given or {}) do
    if not featwrite.BIT[k] then fail("opts.features: unknown feature '%s'", tostring(k)) end
    if v == false then vals[k] = nil; raw[k] = nil else vals[k] = v end
  end
  for k, v in pairs(opts.raw_features or {}) do
    if not featwrite.BIT[k] then fail("opts.raw_features: unknown feature '%s'", tostring(k)) end
    if type(v) ~= "string" then fail("opts.raw_features.%s must be a string of bytes", k) end
    raw[k] = v
  end
  for k in pairs(featwrite.NOT_COPIED) do vals[k], raw[k] = nil, nil end
  local desc = {}
  for i, e in ipairs(self.entries) do
    desc[i] = { attr = core.attr_from_bytes(attr_bytes(e.attr, self.attr_sz)), ids = e.ids, name = e.name }
  end
  vals.event_desc, raw.event_desc = desc, nil
  self.given = {}
  for k in pairs(vals) do self.given[k] = true end
  for k in pairs(raw) do self.given[k] = true end
  for _, e in ipairs(self.entries) do
    if e.attr.use_clockid ~= 0 and not self.given.clockid then
      vals.clockid = { res_ns = 1 }   -- Linux's clocks for perf have 1 ns resolution
    end
  end
  self.feat_vals, self.feat_raw = vals, raw
end

-- Build ids of the files the mmap records named, unless given.
local function build_ids(self)
  local out = {}
  for _, b in ipairs(self.bids) do
    if b.build_id then
      out[#out + 1] = { pid = -1, build_id = b.build_id, filename = b.filename, misc = b.misc }
    end
  end
  return out
end

-- The feature sections, in bit order: { { bit, bytes } }.
local function feature_sections(self)
  local vals, raw = self.feat_vals, self.feat_raw
  if not self.pipe then
    -- a property of the samples written, whatever a source file said
    if self.first_time then
      vals.sample_time, raw.sample_time = { first = self.first_time, last = self.last_time }, nil
    end
    if not self.given.build_id and self.build_ids and #self.bids > 0 then
      vals.build_id = build_ids(self)
    end
  end
  local out = {}
  for bit, name in pairs(core.PERFDATA.FEATURE) do
    local bytes = not (self.pipe and featwrite.NOT_IN_PIPE[name]) and raw[name] or nil
    if bytes == nil and vals[name] ~= nil and featwrite.writable(name) and
       not (self.pipe and featwrite.NOT_IN_PIPE[name]) then
      bytes = featwrite.encode(name, vals[name])
    end
    if bytes then out[#out + 1] = { bit, bytes } end
  end
  table.sort(out, function(a, b) return a[1] < b[1] end)
  return out
end

-- ---- build ids of mapped files ----

-- Notes a file an mmap record names; its build id (from the record, else
-- from the file or /sys/kernel/notes) is looked up once.
local function note_mapping(self, rec)
  local fname = rec.filename
  if type(fname) ~= "string" or self.bid_seen[fname] then return nil end
  local kernel = fname:match("^%[kernel%.kallsyms%]") ~= nil
  if not (kernel or fname:sub(1, 1) == "/") or fname:sub(1, 2) == "//" then return nil end
  local filename = kernel and "[kernel.kallsyms]" or fname
  if kernel and self.bid_seen[filename] then return nil end
  self.bid_seen[fname], self.bid_seen[filename] = true, true
  local id
  if type(rec.build_id) == "string" then id = rec.build_id
  elseif kernel then id = buildid.of_kernel()
  else id = buildid.of_file(fname) end
  -- every field in the constructor (doc/runtimes.md: LuaJIT's template forwarding)
  local b = { filename = filename, misc = kernel and MISC_KERNEL or MISC_USER, build_id = id }
  self.bids[#self.bids + 1] = b
  return b
end

-- ---- creating ----

-- pd.create(path | "-" | file handle, attrs[, opts]) -> writer | nil, message, errno
function M.create(dest, attrs, opts)
  opts = options.check(opts, OPTIONS, "perfev.perfdata.create")
  if opts.rounds and opts.rounds ~= "auto" and opts.rounds ~= "manual" then
    fail("option 'rounds' must be \"auto\" or \"manual\", got %q", opts.rounds)
  end
  local entries = entries_of(attrs)
  check_entries(entries)
  local fh, owned, name, pipe = nil, false, opts.name, opts.pipe
  if dest == "-" then
    fh, name, pipe = io.stdout, name or "<stdout>", true
  elseif io.type(dest) == "file" then
    fh, name = dest, name or "<file>"
    local at = fh:seek("cur")
    if at == nil then pipe = true
    elseif at ~= 0 and not pipe then
      -- the header is rewritten at offset 0, and every offset in it is the file's
      fail("the file handle is at offset %d: a perf.data file starts at 0 (pipe = true writes a " ..
           "stream from here)", at)
    end
  elseif type(dest) == "string" then
    local err, errno
    fh, err, errno = io.open(dest, "wb")
    if not fh then return nil, "perfev.perfdata: " .. err, errno end
    owned, name = true, name or dest
  else
    fail("expected a path, \"-\" or a file handle, got %s", type(dest))
  end
  local sz = attr_size(entries)
  local self = setmetatable({
    fh = fh, owned = owned, name = name, pipe = pipe == true, entries = entries,
    attr_sz = sz, attr_size = sz + 16, by_id = {}, pos = 0,
    rounds = opts.rounds or "auto", build_ids = opts.build_ids ~= false,
    ordered = true, since_round = 0, bids = {}, bid_seen = {},
    st = { records = 0, samples = 0, bytes = 0, rounds = 0, types = {}, skipped = {},
           unordered = 0 },
  }, W)
  for _, e in ipairs(entries) do
    for _, id in ipairs(e.ids) do self.by_id[id] = e.attr end
  end
  self.first = entries[1].attr
  if #entries == 1 then self.single = self.first end
  gather_features(self, opts)
  local ok = start(self)
  if ok and self.pipe then
    for _, sec in ipairs(feature_sections(self)) do
      ok = put(self, usrec.encode({ type = "header_feature", feat_id = sec[1], data = sec[2] }))
      if not ok then break end
    end
    -- tracepoint formats: a tracing_data record (its size field says 12
    -- bytes), then the data, padded to 8 bytes
    local td = self.feat_raw.tracing_data
    if ok and td then
      local n = #td + (8 - #td % 8) % 8
      ok = put(self, pack("=I4I2I2I4", usrec.TYPE.tracing_data, 0, 12, n) .. td ..
                     ("\0"):rep(n - #td))
    end
  end
  if not ok then
    local _, msg, errno = ioerr(self)
    if owned then fh:close() end
    self.closed = true
    return nil, msg, errno
  end
  self.data_start = self.pos
  return self
end

-- ---- writing ----

local function check_open(self, method)
  options.self(self, W, "perfev.perfdata.writer", method)
  if self.closed then options.raise("perfev.perfdata: the writer is closed") end
end

local function count(t, k)
  t[k] = (t[k] or 0) + 1
end

local function emit(self, bytes, rtype)
  if not put(self, bytes) then return ioerr(self) end
  local st = self.st
  st.records = st.records + 1
  st.bytes = st.bytes + #bytes
  count(st.types, rtype)
  self.since_round = self.since_round + #bytes
  return true
end

-- A finished_round record: every record written after the next one is no
-- older than the newest written before this one (perf's ordering rule).
function W:round()
  check_open(self, "round")
  local ok, msg, errno = emit(self, FINISHED_ROUND, "finished_round")
  if not ok then return nil, msg, errno end
  self.st.rounds = self.st.rounds + 1
  self.since_round = 0
  return true
end

-- Records the writer makes itself, or cannot write: skipped, and counted.
local SKIP = {
  header_attr = true, header_feature = true,   -- the writer writes its own
  tracing_data = true, auxtrace = true,         -- the reader does not keep their payload
}

local function attr_for(self, rec)
  if self.single then return self.single end
  local id = rec.id
  if id == nil and type(rec.sample_id) == "table" then id = rec.sample_id.id end
  return id and self.by_id[id] or self.first
end

-- w:write(rec) -> true | nil, message, errno. rec: a record table as the
-- reader, a ring or a sampler gives it; or { bytes = <a whole record> }.
function W:write(rec)
  check_open(self, "write")
  if type(rec) ~= "table" then
    options.raisef("perfev.perfdata: write takes a record table, got %s", options.describe(rec))
  end
  local t, bytes = rec.type, rec.bytes
  if bytes ~= nil then
    if type(bytes) ~= "string" or #bytes < 8 or compat.fast.unpack("=I2", bytes, 7) ~= #bytes then
      options.raise("perfev.perfdata: write: rec.bytes must be one whole record (its size field = its length)")
    end
    t = t or compat.fast.unpack("=I4", bytes, 1)
  elseif t == nil then
    options.raise("perfev.perfdata: write: the record has no 'type'")
  elseif SKIP[t] then
    count(self.st.skipped, t)
    return true
  elseif t == "finished_round" then
    self.input_rounds = true
    local ok, msg, errno = emit(self, FINISHED_ROUND, t)
    if ok then self.st.rounds = self.st.rounds + 1; self.since_round = 0 end
    return ok, msg, errno
  elseif usrec.is_user(rec) then
    local ok, b = pcall(usrec.encode, rec)
    if not ok then options.raise(options.strip(b)) end
    bytes = b
  else
    local ok, b = pcall(encode, rec, attr_for(self, rec))
    if not ok then options.raise(options.strip(b)) end
    bytes = b
  end
  if (t == "mmap" or t == "mmap2") and self.build_ids then
    local b = note_mapping(self, rec)
    if b and b.build_id and self.pipe then
      local ok, msg, errno = emit(self, usrec.encode({ type = "build_id", pid = -1, misc = b.misc,
                                                       build_id = b.build_id,
                                                       filename = b.filename }), "build_id")
      if not ok then return nil, msg, errno end
    end
  end
  local time = rec.time
  if compat.math_type(time) == "integer" then
    if self.max_time and compat.fast.ult(time, self.max_time) then
      self.ordered = false
      self.st.unordered = self.st.unordered + 1
    elseif not self.max_time or compat.fast.ult(self.max_time, time) then
      self.max_time = time
    end
    if t == "sample" then
      if not self.first_time or compat.fast.ult(time, self.first_time) then self.first_time = time end
      if not self.last_time or compat.fast.ult(self.last_time, time) then self.last_time = time end
    end
  end
  if t == "sample" then self.st.samples = self.st.samples + 1 end
  local ok, msg, errno = emit(self, bytes, t)
  if not ok then return nil, msg, errno end
  if self.rounds == "auto" and self.ordered and not self.input_rounds and
     self.since_round >= M.ROUND_BYTES then
    return self:round()
  end
  return true
end

-- w:stats() -> { records, samples, bytes, rounds, types = { [type] = n },
-- skipped = { [type] = n }, unordered, first_time, last_time }
function W:stats()
  options.self(self, W, "perfev.perfdata.writer", "stats")
  local st = self.st
  st.first_time, st.last_time = self.first_time, self.last_time
  return st
end

-- An I/O call's failure as the writer's error (the first one is kept).
local function check_io(self, ok, err, errno)
  if not ok and not self.err then
    self.err = { ("perfev.perfdata: %s: %s"):format(self.name, tostring(err)), errno }
  end
  return ok and not self.err
end

-- w:close() -> stats | nil, message, errno. File mode: the feature
-- sections after the data, then the header again with the data size and
-- the feature bits. Also __close and __gc.
function W:close()
  options.self(self, W, "perfev.perfdata.writer", "close")
  if self.closed then
    if self.err then return ioerr(self) end
    return self:stats()
  end
  self.closed = true
  local fh = self.fh
  if not self.pipe and not self.err then
    -- a data size of 0 means "perf record did not finish" to perf and to
    -- perfev's reader: an empty file gets a finished_round record
    if self.pos == self.data_start then emit(self, FINISHED_ROUND, "finished_round") end
    local data_size = self.pos - self.data_start
    local secs = feature_sections(self)
    local at = self.pos + 16 * #secs
    local tbl, bits = {}, {}
    for i, sec in ipairs(secs) do
      tbl[i] = pack("=i8i8", at, #sec[2])
      bits[i] = sec[1]
      at = at + #sec[2]
    end
    local ok = put(self, table.concat(tbl))
    for _, sec in ipairs(secs) do ok = ok and put(self, sec[2]) end
    ok = ok and check_io(self, fh:seek("set", 0))
    ok = ok and put(self, header(self, data_size, bits))
    if ok then check_io(self, fh:seek("end")) end
  end
  if not self.err then check_io(self, fh:flush()) end
  if self.owned then check_io(self, fh:close()) end
  if self.err then return ioerr(self) end
  return self:stats()
end

W.__close = W.close
W.__gc = function(self)
  if getmetatable(self) ~= W then return end   -- a finalizer never raises (another self: nothing to do)
  if not self.closed then pcall(W.close, self) end
end

function W:__tostring()
  options.self(self, W, "perfev.perfdata.writer", "__tostring")
  return ("perfev.perfdata.writer (%s%s%s)"):format(self.name, self.pipe and ", pipe" or "",
                                                    self.closed and ", closed" or "")
end

return M
