-- The attrs the fuzz targets decode under, chosen by an input's first byte
-- (its low 6 bits, modulo their number). `fields` is what the decoder reads (sample_type,
-- read_format, branch_sample_type, the register masks, sample_id_all), in
-- the names perfev.core's attr takes; `map` is a stream of several events
-- by id; `open` adds what fuzz/seed.lua needs to sample with the entry
-- (seed files start with the entry's index - 1, so that they decode with
-- the attr they were recorded under). Shared by decode_fuzz.c,
-- roundtrip_fuzz.c (embedded at build time) and seed.lua.
local ALL = { "identifier", "ip", "tid", "time", "addr", "id", "stream_id", "cpu", "period",
              "read", "callchain", "raw", "branch_stack", "regs_user", "stack_user", "weight",
              "data_src", "transaction", "regs_intr", "phys_addr", "cgroup", "data_page_size",
              "code_page_size", "aux" }

local function with(list, extra)
  local out = {}
  for _, v in ipairs(list) do out[#out + 1] = v end
  for _, v in ipairs(extra) do out[#out + 1] = v end
  return out
end

return {
  { name = "cpu-clock",
    fields = { sample_type = { "identifier", "ip", "tid", "time", "cpu", "period", "callchain" },
               read_format = { "id", "lost" }, sample_id_all = true },
    open = { type = "software", config = "cpu-clock", sample_period = 100000, comm = true,
             comm_exec = true, mmap = true, mmap2 = true, mmap_data = true, task = true,
             context_switch = true, namespaces = true, cgroup = true } },
  { name = "task-clock-regs",
    fields = { sample_type = { "ip", "tid", "time", "read", "regs_user", "stack_user", "addr",
                               "phys_addr", "data_page_size", "code_page_size", "cgroup" },
               read_format = { "total_time_enabled", "total_time_running", "id", "lost" },
               sample_regs_user = { "ax", "bx", "sp", "bp", "ip", "flags" }, sample_id_all = true },
    open = { type = "software", config = "task-clock", sample_period = 200000,
             sample_stack_user = 128, comm = true, task = true, mmap2 = true, context_switch = true } },
  { name = "everything, group read",
    fields = { sample_type = ALL, read_format = { "group", "id", "lost", "total_time_enabled",
                                                  "total_time_running" },
               branch_sample_type = { "any", "hw_index" },
               sample_regs_user = 0x3000003ff, sample_regs_intr = 0xff, sample_id_all = true } },
  { name = "everything, weight_struct, branch counters",
    fields = { sample_type = with(ALL, { "weight_struct" }), read_format = { "id", "total_time_running" },
               branch_sample_type = (1 << 3) | (1 << 19),   -- ANY | COUNTERS
               sample_regs_user = -1, sample_regs_intr = 0xffffffff00000000, sample_id_all = true } },
  { name = "ip only, no sample_id_all", fields = { sample_type = { "ip" } } },
  { name = "no sample_type", fields = { sample_type = 0, sample_id_all = true } },
  { name = "id, not identifier",
    fields = { sample_type = { "tid", "time", "id", "stream_id", "cpu", "raw" }, sample_id_all = true } },
  { name = "a stream of two events",
    map = { [1] = { sample_type = { "identifier", "ip", "tid" }, sample_id_all = true },
            [2] = { sample_type = { "identifier", "ip", "period", "read", "callchain" },
                    read_format = { "group", "id" }, sample_id_all = true } } },
}
