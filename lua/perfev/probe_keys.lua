-- The keys of perfev.uprobe / perfev.kprobe and of the probe PMUs' terms
-- in event strings (uprobe/path=...,func=.../), as data: the parser reads
-- them without loading perfev.probe and the ELF reader.
local M = {}

-- key -> kind, per probe PMU
M.KEYS = {
  uprobe = { path = "string", func = "string", offset = "integer", addr = "integer",
             ret = "boolean", ref_ctr_offset = "integer" },
  kprobe = { func = "string", offset = "integer", addr = "integer", ret = "boolean" },
}

-- Keys given as PMU format terms (config bits), by the PMU's format/ file name.
M.FORMAT_KEYS = { ret = "retprobe", ref_ctr_offset = "ref_ctr_offset" }

return M
