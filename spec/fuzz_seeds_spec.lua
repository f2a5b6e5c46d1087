-- The fuzz targets' seeds are worth fuzzing from: every perf.data seed is
-- read whole by the reader (a seed refused at its first record teaches the
-- fuzzer nothing past it), in file and in time order, and the recorded
-- seeds cover each kind the reader handles.
local pd = require "perfev.perfdata"
local u = require "spec.support.util"

local DIR = "fuzz/corpus/perfdata"
local MAX_LEN = 1048576   -- the Makefile's FUZZ_PERFDATA_MAX_LEN

local function seeds()
  local t = {}
  for name in u.sh("ls " .. DIR):gmatch("%S+") do t[#t + 1] = name end
  return t
end

describe("fuzz seeds", function()
  it("every perf.data seed reads whole, in file and time order, within max_len", function()
    local names = seeds()
    assert.is_true(#names >= 9, "fewer seeds than kinds")
    for _, name in ipairs(names) do
      local path = DIR .. "/" .. name
      local f = assert(io.open(path, "rb"))
      local size = f:seek("end")
      f:close()
      assert.is_true(size <= MAX_LEN, name .. " is larger than the fuzz target's max_len")
      local counts = {}
      for _, order in ipairs { "file", "time" } do
        local r = assert(pd.open(path))
        local n = 0
        local ok, err = pcall(function() for _ in r:records { order = order } do n = n + 1 end end)
        assert(ok, ("%s (%s order): %s"):format(name, order, tostring(err)))
        r:close()
        counts[order] = n
      end
      assert.is_true(counts.file > 0, name .. " has no records")
      assert.equal(counts.file, counts.time, name)
    end
  end)

  it("the seeds cover callchains, dwarf stacks, a tracepoint, several events, zstd, pipe mode, both orders",
     function()
    local have = {}
    for _, name in ipairs(seeds()) do have[name:gsub("%.data$", "")] = true end
    for _, kind in ipairs { "callchain", "dwarf", "tracepoint", "multi-event", "zstd", "pipe", "group-read",
                            "synthetic-le", "synthetic-be" } do
      assert.is_true(have[kind], "no seed " .. kind)
    end
  end)
end)
