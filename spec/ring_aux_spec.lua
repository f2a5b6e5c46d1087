-- ring:aux(pages): the AUX area. No PMU of this machine has one (software
-- events refuse it with EOPNOTSUPP), so the kernel is asked for the error
-- path and the argument checks; a real AUX area is mapped and read only
-- where a tracing PMU (intel_pt, arm_spe, cs_etm) exists. PERF_RECORD_AUX,
-- which announces AUX data in the ring, is decoded from synthetic records.
local perfev = require "perfev"
local core = require "perfev.core"
local u = require "spec.support.util"
local compat = require "perfev.compat"

local function sampler()
  return assert(perfev.open { type = "software", config = "cpu-clock", sample_period = 100000,
                              sample_type = { "ip", "tid" }, disabled = true })
end

-- The first PMU with an AUX area this machine has, or nil.
local function aux_pmu()
  for _, name in ipairs { "intel_pt", "arm_spe_0", "cs_etm", "intel_bts" } do
    local t = u.read_file("/sys/bus/event_source/devices/" .. name .. "/type")
    if t then return name, assert(tonumber(t)) end
  end
  return nil
end

describe("ring:aux", function()
  it("a software event's PMU has no AUX area: nil, an actionable message, EOPNOTSUPP", function()
    local ev = sampler()
    local ring = assert(ev:mmap(4))
    local aux, msg, errno = ring:aux(4)
    assert.is_nil(aux)
    assert.equal(u.E.EOPNOTSUPP, errno)
    assert.matches("this event's PMU has no AUX area %(intel_pt", msg)
    -- the offset and size written for the kernel are taken back
    local info = ring:info()
    assert.same({ 0, 0 }, { info.aux_offset, info.aux_size })
    -- and the ring works as before
    ev:enable(); u.spin(5e6); ev:disable()
    local n = 0
    for _ in ring:records() do n = n + 1 end
    assert.is_true(n > 0)
    ring:close(); ev:close()
  end)

  it("takes a power of two, and a read-write ring of an open event", function()
    local ev = sampler()
    local ring = assert(ev:mmap(1))
    for _, bad in ipairs { 0, 3, -4, compat.lshift(1, 21) } do
      local ok, err = pcall(ring.aux, ring, bad)
      assert.is_false(ok)
      assert.matches("power of two", err)
    end
    assert.has_error(function() ring:aux() end)
    assert.has_error(function() ring:aux(1.5) end)
    ring:close()
    assert.has_error(function() ring:aux(1) end, "perfev.ring: attempt to use a closed ring")
    ev:close()

    local bev = assert(perfev.open { type = "software", config = "cpu-clock", sample_period = 100000,
                                     write_backward = true, disabled = true })
    local bring = assert(bev:mmap(1))
    local ok, err = pcall(bring.aux, bring, 1)
    assert.is_false(ok)
    assert.matches("an overwrite ring maps its metadata page read%-only", err)
    bring:close(); bev:close()

    local cev = sampler()
    local cring = assert(cev:mmap(1))
    cev:close()
    assert.has_error(function() cring:aux(1) end, "perfev.ring: its event is closed")
    cring:close()
  end)

  it("PERF_RECORD_AUX with every flag decodes (the ring's announcement of AUX data)", function()
    local attr = perfev.attr { sample_type = { "tid" }, sample_id_all = true }
    local F = core.AUX_FLAG
    local flags = compat.bor(F.TRUNCATED, F.OVERWRITE, F.PARTIAL, F.COLLISION, compat.band(0x0100,
        F.PMU_FORMAT_TYPE_MASK))
    local body = compat.pack("=I8I8I8I4I4", 8192, 4096, flags, 77, 78)
    local bytes = compat.pack("=I4I2I2", core.RECORD.AUX, 0, 8 + #body) .. body
    local n = 0
    for rec in perfev.decode(bytes, attr) do
      n = n + 1
      assert.same({ "aux", 8192, 4096, flags, 77, 78 },
                  { rec.type, rec.aux_offset, rec.aux_size, rec.flags, rec.pid, rec.tid })
      assert.is_true(rec.truncated and rec.overwrite and rec.partial and rec.collision)
    end
    assert.equal(1, n)
  end)

  it("maps, reads and unmaps a real AUX area", function()
    local name, pmu_type = aux_pmu()
    if not name then
      pending("no PMU with an AUX area here (intel_pt, arm_spe, cs_etm, intel_bts)")
      return
    end
    local ev = assert(perfev.open { type = pmu_type, config = 0, exclude_kernel = true, disabled = true })
    local ring = assert(ev:mmap(8))
    local aux = assert(ring:aux(16))
    local info = aux:info()
    assert.equal(ring:info().data_offset + ring:info().data_size, info.aux_offset)
    assert.equal(16 * ring:info().data_offset, info.aux_size)
    ev:enable(); u.spin(2e7); ev:disable()
    local pending_bytes = aux:pending()
    local bytes = aux:read()
    assert.equal(pending_bytes, #bytes)
    assert.is_true(#bytes > 0)
    assert.equal(aux:info().aux_head, aux:info().aux_tail)
    local announced = 0
    for rec in ring:records() do
      if rec.type == "aux" then announced = announced + rec.aux_size end
    end
    assert.is_true(announced > 0)
    assert.is_true(aux:close())
    assert.is_true(aux:closed())
    ring:close(); ev:close()
  end)
end)
