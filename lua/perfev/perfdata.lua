-- perfev.perfdata: read the perf.data files `perf record` writes (and the
-- pipe-mode stream of `perf record -o -`).
--
--   local pd = require "perfev.perfdata"
--   local f = assert(pd.open("perf.data"))     -- or pd.open("-"), pd.open(io_file)
--   for rec in f:records() do ... end          -- { order = "time", types = { "sample" } }
--   for ip, tid, time in f:samples("ip", "tid", "time") do ... end   -- no table per sample
--   for n, weight, ip in f:tally("ip") do ... end   -- samples counted by their values
--   f:attrs() ; f:features() ; f:header() ; f:close()
--
-- The header, attrs and features are read here; the records stream
-- through the C reader (csrc/perfdata/*.c) in fixed-size chunks.
local core = require "perfev.core"
local header = require "perfev.perfdata.header"
local names = require "perfev.names"
local options = require "perfev.options"
local iterate = require "perfev.iterate"

local M = {}

-- Record type numbers by name: the kernel's (core.RECORD, lower case) and
-- perf's own (core.PERFDATA.RECORD).
local TYPES = {}
for k, v in pairs(core.RECORD) do TYPES[k:lower()] = v end
for k, v in pairs(core.PERFDATA.RECORD) do TYPES[k] = v end
M.TYPES = TYPES
M.FEATURES = core.PERFDATA.FEATURE

local File = {}
File.__index = File
M.File = File

local function errmsg(name, msg)
  return ("perfev.perfdata: %s: %s"):format(name, msg)
end

-- Event names: event_desc's (by id, else by position), else perf's name
-- of the type and config.
local function name_events(entries, desc)
  local by_id = {}
  for _, d in ipairs(desc or {}) do
    for _, id in ipairs(d.ids) do by_id[id] = d.name end
  end
  for i, e in ipairs(entries) do
    local n = e.ids[1] and by_id[e.ids[1]] or (desc and desc[i] and desc[i].name)
    if not n or n == "" then
      n = e.name or names.name_of(e.attr.type, e.attr.config) or
          ("%d:%d"):format(e.attr.type, e.attr.config)
    end
    e.name = n
  end
  return entries
end

-- Gives reader r its events, named (from event_desc when the file has
-- it): r, feats, or nil and why (r closed).
local function set_attrs(r, entries, feats)
  name_events(entries, feats.event_desc)
  local ok, err = pcall(r.set_attrs, r, entries)
  if not ok then
    r:close()
    return nil, tostring(err)
  end
  return r, feats
end

local function open_file(fh, h, name, opts)
  local ok, msg = header.read(fh, h)
  if not ok then return nil, msg end
  local entries, why = header.attrs(fh, h)
  if not entries then return nil, why end
  local feats = header.features(fh, h)
  local r = core.perfdata_reader(fh, { name = name, start = h.data.offset, size = h.data.size,
                                       swap = h.swap, seekable = true, bufsize = opts.bufsize,
                                       max_queue = opts.max_queue, mmap = opts.mmap })
  return set_attrs(r, entries, feats)
end

-- Pipe mode: attrs and features come as records; they are read ahead here
-- (and given again by records()).
local function open_pipe(fh, h, name, opts)
  local seekable = fh:seek("cur") ~= nil
  local r = core.perfdata_reader(fh, { name = name, start = header.PIPE_HEADER, pipe = true,
                                       swap = h.swap, seekable = seekable,
                                       bufsize = opts.bufsize, max_queue = opts.max_queue,
                                       warnings = h.warnings })
  local ok, list = pcall(r.preread, r)
  if not ok then
    r:close()
    return nil, tostring(list)
  end
  local feats, ctx = {}, { swap = h.swap }
  for _, rec in ipairs(list) do
    if rec.type == "header_feature" and rec.feature then
      header.add_feature(h, feats, ctx, rec.feature, rec.data)
    end
  end
  return set_attrs(r, r:attrs(), feats)
end

-- pd.open(path | "-" | file handle[, opts]) -> file | nil, message, errno
-- (errno: the system's, when opening the file was refused; nil when the
-- file is not a perf.data file)
-- opts: bufsize (bytes read at a time, default 1 MiB), max_queue (bytes
-- that time ordering may hold before it releases the older half, 256 MiB),
-- mmap (false: read a regular file through stdio instead of mapping it).
local OPTIONS = { bufsize = "positive", max_queue = "positive", mmap = "boolean" }

function M.open(src, opts)
  opts = options.check(opts, OPTIONS, "perfev.perfdata.open")
  local fh, owned, name
  if src == "-" then
    fh, name = io.stdin, "<stdin>"
  elseif io.type(src) == "file" then
    fh, name = src, "<file>"
  elseif type(src) == "string" then
    local err, errno
    fh, err, errno = io.open(src, "rb")
    if not fh then return nil, errmsg(src, err), errno end
    owned, name = true, src
  else
    options.raisef("perfev.perfdata.open: expected a path, \"-\" or a file handle, got %s", options.describe(src))
  end
  local function fail(msg)
    if owned then fh:close() end
    return nil, errmsg(name, msg)
  end
  local h, why = header.start(fh)
  if not h then return fail(why) end
  local r, feats
  if h.pipe then r, feats = open_pipe(fh, h, name, opts)
  else r, feats = open_file(fh, h, name, opts) end
  if not r then
    if feats and feats:match("^perfev%.") then
      if owned then fh:close() end
      return nil, feats
    end
    return fail(feats)
  end
  return setmetatable({ fh = fh, owned = owned, name = name, h = h, r = r, feats = feats }, File)
end

local function check(self, method)
  options.self(self, File, "perfev.perfdata.file", method)
  if not self.r then options.raise("perfev.perfdata: the file is closed") end
end

-- The reader's records(o), its errors (a field name the selection does
-- not know) raised at the caller's line.
local function reader_records(self, o)
  local ok, it = pcall(self.r.records, self.r, o)
  if not ok then options.raise(options.strip(it)) end
  return it
end

-- The reader's options from the caller's: order checked, types by name.
local function reader_options(opts, fname)
  local o = { offsets = opts.offsets, into = opts.into, fields = opts.fields, tally = opts.tally }
  if opts.order ~= nil and opts.order ~= "file" and opts.order ~= "time" then
    options.raisef("%s: order must be \"file\" or \"time\", got %s", fname, options.describe(opts.order))
  end
  o.order = opts.order
  if opts.types ~= nil then
    o.types = {}
    for i, t in ipairs(opts.types) do
      local n = options.is_integer(t) and t or TYPES[t]
      if not n then
        options.unknown(fname .. ": types[" .. i .. "]", "record type", t, TYPES)
      end
      o.types[i] = n
    end
  end
  return o
end

-- f:records([{ order = "file" | "time", types = { "sample", "mmap2", ... },
-- offsets = true, into = t, fields = { "ip", "tid", ... } }]) -> iterator of
-- record tables (with fields and into: a sample holds only those fields).
-- `fields` without `into` (values) and `tally = true` are the deprecated
-- forms of f:samples and f:tally (doc/decoding.md).
local RECORDS_OPTIONS = { order = "string", types = "table", offsets = "boolean", into = "table",
                          fields = "table", tally = "boolean" }

function File:records(opts)
  check(self, "records")
  if opts == nil then return self.r:records() end
  options.check(opts, RECORDS_OPTIONS, "perfev.perfdata: records()")
  iterate.deprecated_forms(opts, "f:records")
  return reader_records(self, reader_options(opts, "perfev.perfdata: records()"))
end

-- f:samples(field, ... [, { order = "time" }]) -> iterator of the fields'
-- values of every sample, in file order (or time order): no table per
-- sample. f:values(...) is the same.
function File:samples(...)
  check(self, "samples")
  local fields, opts = iterate.split("perfev.perfdata: samples()", ...)
  opts = options.check(opts, { order = "string" }, "perfev.perfdata: samples()")
  return reader_records(self, reader_options({ fields = fields, order = opts.order, types = { "sample" } },
                                             "perfev.perfdata: samples()"))
end
File.values = File.samples

-- f:tally(field, ... [, { order, types, offsets, on_record, into }]) ->
-- iterator of count, weight, values... for each distinct set of the
-- fields' values of the samples (doc/decoding.md). The records of `types`
-- other than samples (all of them when on_record is given without types;
-- none without on_record) go to on_record(rec) in their place: after the
-- sets of the samples before them.
local TALLY_OPTIONS = iterate.with(iterate.TALLY_OPTIONS, { order = "string", types = "table",
                                                           offsets = "boolean" })

function File:tally(...)
  check(self, "tally")
  local fields, opts = iterate.split("perfev.perfdata: tally()", ...)
  opts = options.check(opts, TALLY_OPTIONS, "perfev.perfdata: tally()")
  local types = opts.types
  if not opts.on_record then
    types = { "sample" }
  elseif types then
    local with_samples = { "sample" }
    for _, t in ipairs(types) do
      if t ~= "sample" and t ~= TYPES.sample then with_samples[#with_samples + 1] = t end
    end
    types = with_samples
  end
  local o = reader_options({ order = opts.order, types = types, offsets = opts.offsets, into = opts.into,
                             fields = fields, tally = true }, "perfev.perfdata: tally()")
  return iterate.tallies(reader_records(self, o), opts.on_record)
end

-- { { attr = <perfev.attr>, ids = { ... }, name = "cpu-clock" }, ... }
function File:attrs()
  check(self, "attrs")
  return self.r:attrs()
end

-- The features by name: hostname, osrelease, version, arch, nrcpus =
-- { online, available }, cpudesc, cpuid, total_mem, cmdline, event_desc,
-- cpu_topology, numa_topology, pmu_mappings, group_desc, cache,
-- sample_time = { first, last }, mem_topology, clockid, clock_data,
-- compressed, hybrid_topology, pmu_caps, build_id, ...
function File:features()
  check(self, "features")
  return self.feats
end

-- The header's fields: magic, size, attr_size, attrs/data/event_types
-- { offset, size }, feature_bits, sections, endian, swap, pipe, file_size,
-- warnings.
function File:header()
  check(self, "header")
  return self.h
end

function File:close()
  options.self(self, File, "perfev.perfdata.file", "close")
  if self.r then
    self.r:close()
    self.r = nil
    if self.owned then self.fh:close() end
  end
end

-- No __gc: a loop `for rec in pd.open(p):records() do` holds the reader
-- alone, and the File may be collected while it runs. The reader (which
-- keeps its file handle in its uservalue) and the handle free themselves
-- when nothing holds them.
File.__close = File.close

function File:__tostring()
  options.self(self, File, "perfev.perfdata.file", "__tostring")
  return ("perfev.perfdata.file (%s%s)"):format(self.name, self.r and "" or ", closed")
end

-- pd.create(path | "-" | file handle, attrs[, opts]) -> writer: see
-- perfev/perfdata/writer.lua and doc/perfdata-write.md.
function M.create(dest, attrs, opts)
  return require("perfev.perfdata.writer").create(dest, attrs, opts)
end

-- perfev.perfdata is this module, called: perfev.perfdata(src[, opts]) is
-- open (the reader); create makes a writer
return setmetatable(M, { __call = function(_, src, opts) return M.open(src, opts) end })
