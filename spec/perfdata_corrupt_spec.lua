-- Truncated and corrupted perf.data files: every truncation length and
-- every byte of the header, the attrs and the feature table changed give an
-- error naming what is wrong (from pd.open, or from the iterator for the
-- records), never a crash; under `make check-asan` never a memory error.
local pd = require "perfev.perfdata"
local B = require "spec.support.perfdata_build"
local core = require "perfev.core"
local shell = require "spec.support.shell"
local compat = require "perfev.compat"

local FIXTURE = "spec/fixtures/perfdata/small.data"        -- perf record -e page-faults -c 20 -g -- true
local PIPE_FIXTURE = "spec/fixtures/perfdata/small-pipe.data"

-- thousands of small files: in memory when /dev/shm is there
local tmp
do
  local probe = io.open("/dev/shm/.perfev-probe", "w")
  if probe then
    probe:close()
    os.remove("/dev/shm/.perfev-probe")
    tmp = ("/dev/shm/perfev-corrupt-%d-%s"):format(os.time(), tostring({}):match("0x(%x+)"))
  else
    tmp = os.tmpname()
  end
end

local function read(path) return assert(shell.read_file(path)) end

-- Opens the bytes and reads every record in both orders. Returns "ok",
-- or "open" / "records" and the message, which must be perfev's.
local function try(bytes)
  B.write(tmp, bytes)
  local ok, f, msg = pcall(pd.open, tmp, { bufsize = 1 })
  assert(ok, "pd.open raised: " .. tostring(f))
  if not f then
    assert(type(msg) == "string" and msg:find("^perfev%.perfdata: "), "bad message: " .. tostring(msg))
    return "open", msg
  end
  for _, order in ipairs { "file", "time" } do
    local okr, err = pcall(function()
      for _ in f:records { order = order } do end
    end)
    if not okr then
      f:close()
      assert(type(err) == "string" and err:find("perfev%.%a+: "), "bad error: " .. tostring(err))
      return "records", err
    end
  end
  local warnings = f:header().warnings
  f:close()
  return "ok", nil, warnings
end

local function set_u64(bytes, at, v)
  return bytes:sub(1, at) .. compat.pack("<i8", v) .. bytes:sub(at + 9)
end

local function synthetic()
  local e = "<"
  local attr = B.attr(e, { type = 1, sample_period = 1000, sample_type = compat.bor(0x7, 0x100),
                           flags = compat.lshift(1, 18) })
  local data = B.record(e, 9, 2, compat.pack("<i8I4I4i8i8", 0x401000, 1, 2, 100, 1000))
            .. B.record(e, 68, 0, "")
  return B.file(e, { attrs = { { attr = attr, ids = { 5 } } }, data = data,
                     features = { { 3, B.hstr(e, "box") }, { 7, compat.pack("<I4I4", 2, 2) } } })
end

describe("perfev.perfdata on damaged files", function()
  teardown(function() os.remove(tmp) end)

  it("reads the undamaged files whole", function()
    assert.equal("ok", (try(read(FIXTURE))))
    assert.equal("ok", (try(read(PIPE_FIXTURE))))
    assert.equal("ok", (try(synthetic())))
  end)

  it("refuses every truncation of a file, naming the cause", function()
    for _, bytes in ipairs { synthetic(), read(FIXTURE) } do
      -- every length through the header and attrs, then every 13th
      local lens = {}
      for len = 0, #bytes - 1 do
        if len < 1024 or len % 13 == 0 or len > #bytes - 64 then lens[#lens + 1] = len end
      end
      for _, len in ipairs(lens) do
        local where, msg = try(bytes:sub(1, len))
        assert.are_not.equal("ok", where, "truncated to " .. len .. " bytes: read as whole")
        if len < 16 then assert.matches("truncated: the file has " .. len .. " bytes", msg) end
      end
    end
  end)

  it("reads a truncated pipe-mode stream up to the cut and says where it is", function()
    local bytes = read(PIPE_FIXTURE)
    local warned = 0
    for len = 16, #bytes - 1, 3 do
      local where, msg, warnings = try(bytes:sub(1, len))
      -- a cut between records is a shorter stream; inside one, the stream
      -- ends there with a warning, as perf ends it
      if where ~= "ok" then assert.matches("perfev%.perfdata: .*offset %d+", msg) end
      if where == "ok" and #warnings > 0 then
        assert.equal(1, #warnings)
        assert.matches("^the stream ends with %d+ bytes that are not a whole record at offset %d+", warnings[1])
        warned = warned + 1
      end
    end
    assert.is_true(warned > 0)
  end)

  it("survives every byte of the header, attrs and feature table changed", function()
    for _, bytes in ipairs { synthetic(), read(FIXTURE) } do
      local attrs_end = compat.unpack("<i8", bytes, 25) + compat.unpack("<i8", bytes, 33)
      local feat = compat.unpack("<i8", bytes, 41) + compat.unpack("<i8", bytes, 49)
      local spots = {}
      for i = 1, attrs_end do spots[#spots + 1] = i end
      for i = feat + 1, math.min(#bytes, feat + 64) do spots[#spots + 1] = i end
      for _, i in ipairs(spots) do
        for _, v in ipairs { 0x00, 0xff, 0x7f, compat.bxor(bytes:byte(i), 0x01) } do
          try(bytes:sub(1, i - 1) .. string.char(v) .. bytes:sub(i + 1))
        end
      end
    end
  end)

  it("survives every byte of the records changed", function()
    local bytes = synthetic()
    local data = compat.unpack("<i8", bytes, 41)
    local size = compat.unpack("<i8", bytes, 49)
    for i = data + 1, data + size do
      for _, v in ipairs { 0x00, 0xff, compat.bxor(bytes:byte(i), 0x80) } do
        try(bytes:sub(1, i - 1) .. string.char(v) .. bytes:sub(i + 1))
      end
    end
    local fixture = read(FIXTURE)
    data, size = compat.unpack("<i8", fixture, 41), compat.unpack("<i8", fixture, 49)
    for i = data + 1, data + size, 5 do
      try(fixture:sub(1, i - 1) .. string.char(compat.bxor(fixture:byte(i), 0xff)) .. fixture:sub(i + 1))
    end
  end)

  describe("says what is wrong", function()
    local good = synthetic()
    local function fails(bytes, pattern)
      local where, msg = try(bytes)
      assert.are_not.equal("ok", where)
      assert.matches(pattern, msg)
    end

    it("an old or foreign magic", function()
      fails("PERFFILE" .. good:sub(9), "version 1 perf%.data %(magic PERFFILE%) is not supported")
      fails("NOTPERF!" .. good:sub(9), "not a perf%.data file: the magic at offset 0 is \"NOTPERF!\"")
    end)

    it("a header size that is neither a file's nor a pipe's", function()
      fails(set_u64(good, 8, 99), "the header's size field %(offset 8%) is 99")
    end)

    it("attr_size", function()
      fails(set_u64(good, 16, 7), "the header's attr_size field %(offset 16%) is 7")
    end)

    it("a section past the end of the file", function()
      fails(set_u64(good, 24, compat.lshift(1, 40)), "the attrs section %(offset field at 24: 1099511627776")
      fails(set_u64(good, 48, #good), "the data section %(offset field at 40: %d+, size field at 48: %d+%) " ..
                                      "runs past the end of the file")
      fails(set_u64(good, 56, compat.lshift(1, 50)), "the event_types section")
    end)

    it("a feature table or section past the end of the file", function()
      local feat = compat.unpack("<i8", good, 41) + compat.unpack("<i8", good, 49)
      fails(set_u64(good, feat + 8, compat.lshift(1, 30)),
          "the hostname feature section %(table entry at offset " .. feat)
      fails(set_u64(good, 72, -1), "the feature section table %(%d+ entries at offset " .. feat)
    end)

    it("an attr's size or its ids section", function()
      local attrs = compat.unpack("<i8", good, 25)
      fails(good:sub(1, attrs + 4) .. compat.pack("<I4", 4000) .. good:sub(attrs + 9),
            "attr 1: its size field %(offset " .. (attrs + 4) .. "%) is 4000")
      fails(set_u64(good, attrs + 136, compat.lshift(1, 40)), "attr 1: its ids section")
    end)

    it("a record shorter than its header, or past the data's end", function()
      local data = compat.unpack("<i8", good, 41)
      fails(good:sub(1, data + 6) .. "\0\0" .. good:sub(data + 9),
            "the record at offset " .. data .. " %(type 9%) has size 0, less than its 8%-byte header")
      fails(good:sub(1, data + 6) .. compat.pack("<I2", 0x4000) .. good:sub(data + 9),
            "runs past the end of the data section")
    end)

    it("a data size of 0 (perf record killed) reads to the end, with a warning", function()
      local f = assert(pd.open(B.write(tmp, set_u64(good, 48, 0))))
      assert.matches("data size field %(offset 48%) is 0", f:header().warnings[1])
      local ok = pcall(function() for _ in f:records() do end end)
      assert.is_false(ok)   -- the feature sections are read as records, and refused
      f:close()
    end)
  end)

  it("core.perfdata_reader refuses a closed file", function()
    local fh = io.tmpfile()
    fh:close()
    assert.has_error(function() core.perfdata_reader(fh, {}) end)
  end)
end)

-- The selections that read a sample in place (a report's tallies, the
-- values of `fields`) and a full decode agree on every record (issue 20
-- #7): a MMAP2 record of a --call-graph dwarf recording typed SAMPLE was
-- refused by records() (its stack_user size overflows the record) and
-- counted by perfev report's tally, which read the fields before it only:
-- 30 samples instead of 29, no word. Every non-sample record of such a
-- recording, typed SAMPLE in turn: the three read the file whole, or
-- raise the same error.
describe("perfev.perfdata's selections and full decode", function()
  it("agree on every record typed SAMPLE by mistake (a dwarf recording) #perf_heavy", function()
    if not shell.have("perf") then pending("the perf tool is not installed") return end
    local src = os.tmpname()
    local _, recorded = shell.sh(("perf record -q --call-graph dwarf -e cpu-clock -c 200000 -o %s -- "
                                  .. "sh -c 'i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done' 2>&1"):format(src))
    if not recorded then os.remove(src) pending("perf record --call-graph dwarf failed here") return end
    local bytes = read(src)
    os.remove(src)
    B.write(tmp, bytes)
    local f = assert(pd.open(tmp))
    local offsets = {}
    for rec in f:records { order = "file", offsets = true } do
      if rec.type ~= "sample" and rec.sample_id and #offsets < 40 then offsets[#offsets + 1] = rec.offset end
    end
    f:close()
    assert.truthy(#offsets >= 5, #offsets .. " records")
    local function whole(opts)
      local g = assert(pd.open(tmp))
      local ok, err = pcall(function() for _ in g:records(opts) do end end)
      g:close()
      return ok, ok and "" or tostring(err)
    end
    local refused = 0
    for _, at in ipairs(offsets) do
      B.write(tmp, bytes:sub(1, at) .. "\9\0\0\0" .. bytes:sub(at + 5))
      local ok, err = whole(nil)
      local what = "record at " .. at
      for _, opts in ipairs {
        { fields = { "event", "ip", "pid", "tid", "cpu", "cpumode" }, tally = true },   -- perfev report's
        { fields = { "ip", "tid" } },                                                   -- values, in place
        { fields = { "ip", "callchain" } },
      } do
        local ok2, err2 = whole(opts)
        assert.equal(ok, ok2, what .. ": " .. err .. " / " .. err2)
        assert.equal(err, err2, what)
      end
      if not ok then refused = refused + 1 end
    end
    assert.truthy(refused > 0, "no record was refused: the case is not here")
    os.remove(tmp)
  end)
end)
