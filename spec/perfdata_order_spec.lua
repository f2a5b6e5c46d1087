-- Time order over a mapped perf.data file (records queued by position)
-- against the same file read through stdio (records queued as copies) and
-- against perf's own order (`perf script -D`, whose listing is what perf
-- report and perf script deliver), on a recording of every cpu (perf
-- record -a) where records of several ring buffers interleave by time.
local pd = require "perfev.perfdata"
local P = require "spec.support.perfdata"

-- type, file offset, time, cpu, tid and ip of every record, in the order given.
local function listing(path, opts, order)
  local f = assert(pd.open(path, opts))
  local out = {}
  for rec in f:records { order = order, offsets = true } do
    out[#out + 1] = { rec.type, rec.offset, rec.time or false, rec.cpu or false, rec.tid or false,
                      rec.ip or false }
  end
  f:close()
  return out
end

describe("perfev.perfdata time order, mapped and streamed", function()
  if not P.have_perf() then
    pending("the perf tool is not installed (Debian: linux-perf)")
    return
  end
  local dir, path
  local record = P.recorder(function() return dir end)

  setup(function()
    dir = P.tmpdir()
    -- two busy loops over the 2 cpus; -m 4: many small buffers, many rounds
    path = record("all.data", "-a -e cpu-clock -c 200000 -m 4 --sample-cpu -- sh -c '"
                  .. P.busy(60000):gsub("'", "'\\''") .. " & "
                  .. P.busy(60000):gsub("'", "'\\''") .. "; wait'")
  end)
  teardown(function() P.rmdir(dir) end)

  it("records several cpus' samples interleaved in the file", function()
    assert.truthy(path)
    local cpus, back = {}, 0
    local last = 0
    local f = assert(pd.open(path))
    for rec in f:records { types = { "sample" } } do
      cpus[rec.cpu] = true
      if rec.time < last then back = back + 1 end
      last = rec.time
    end
    f:close()
    local n = 0
    for _ in pairs(cpus) do n = n + 1 end
    assert.is_true(n >= 2, "samples of " .. n .. " cpu(s)")
    assert.is_true(back > 0, "the file is already in time order: nothing to test")
  end)

  it("gives the same time order mapped as through stdio", function()
    local mapped = listing(path, nil, "time")
    assert.is_true(#mapped > 100)
    assert.same(listing(path, { mmap = false }, "time"), mapped)
    assert.same(listing(path, { mmap = false }, "file"), listing(path, nil, "file"))
  end)

  it("gives the same order mapped as through stdio when the queue outgrows max_queue", function()
    local opts = { max_queue = 4096 }
    local mapped = listing(path, opts, "time")
    assert.same(listing(path, { max_queue = 4096, mmap = false }, "time"), mapped)
    assert.equal(#listing(path, nil, "time"), #mapped)
  end)

  it("gives perf script -D's order, record by record", function()
    local dump = P.dump(path)
    local mine = listing(path, nil, "time")
    assert.equal(#dump, #mine)
    local samples = 0
    for i, d in ipairs(dump) do
      local m = mine[i]
      local mtype = m[1] == "header_feature" and "feature" or m[1]
      assert.same({ i, d.type, d.offset }, { i, mtype, m[2] })
      if d.type == "sample" then
        samples = samples + 1
        assert.same({ i, d.time, d.cpu, d.tid, d.ip }, { i, m[3], m[4], m[5], m[6] })
      end
    end
    assert.is_true(samples > 100)
  end)

  it("releases a compressed (perf record -z) file's records in the same order as perf", function()
    local z = record("z.data", "-a -z -e cpu-clock -c 200000 -m 4 -- " .. P.busy(30000))
    if not z then
      pending("perf record -z failed: this perf was built without zstd")
      return
    end
    local ok, mine = pcall(listing, z, nil, "time")
    if not ok then
      pending(tostring(mine))
      return
    end
    local dump = P.dump(z)
    assert.equal(#dump, #mine)
    for i, d in ipairs(dump) do
      if d.type == "sample" then
        assert.same({ i, d.time, d.cpu, d.tid, d.ip }, { i, mine[i][3], mine[i][4], mine[i][5], mine[i][6] })
      end
    end
  end)

  it("refuses an order that is neither file nor time, in the Lua layer and in the core's reader", function()
    local f = assert(pd.open("spec/fixtures/perfdata/small.data"))
    local ok, err = pcall(f.records, f, { order = "tim" })
    assert.is_false(ok)
    assert.matches([[order must be "file" or "time", got string 'tim']], err, 1, true)
    -- the core's reader under it: it read every order but "time" as file order
    ok, err = pcall(f.r.records, f.r, { order = "tim" })
    assert.is_false(ok)
    assert.matches([[option 'order' must be "file" or "time", got string 'tim']], err, 1, true)
    ok, err = pcall(f.r.records, f.r, { order = 1 })
    assert.is_false(ok)
    assert.matches("got number", err, 1, true)
    local n = 0
    for _ in f.r:records { order = "file" } do n = n + 1 end
    assert.is_true(n > 0)
    f:close()
  end)
end)
