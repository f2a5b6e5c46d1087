-- Writes the fuzz targets' seed corpus: records of this process sampled by
-- the kernel (cpu-clock and task-clock, with comm, mmap, task, switch,
-- namespaces and cgroup side-band records), and synthetic records of every
-- type and sample field for the attrs this machine cannot sample with.
-- Each file is one selector byte (the index of its attr in fuzz/attrs.lua,
-- minus one) and one to three records, their bytes given by perfev.encode.
--   make fuzz-seed    (lua5.4 fuzz/seed.lua DIR, from the repo root, as root)
local perfev = require "perfev"
local compat = require "perfev.compat"
local entries = dofile("fuzz/attrs.lua")

local dir = assert(arg[1], "usage: seed.lua DIR")
local MAX_FILES = 150
local nfiles = 0

local function write(sel, name, bytes)
  if nfiles >= MAX_FILES then return end
  nfiles = nfiles + 1
  local f = assert(io.open(("%s/%s-%03d"):format(dir, name, nfiles), "wb"))
  f:write(string.char(sel - 1), bytes)
  f:close()
end

local function burn(ms)
  local stop, x, t = os.clock() + ms / 1000, 0, {}
  while os.clock() < stop do
    for i = 1, 1000 do x = x + i % 7 end
    t[#t + 1] = { x }   -- page faults and mmaps, for side-band records
    if #t > 5000 then t = {} end
  end
  return x
end

-- ---- records sampled by the kernel ----
local function sampled(sel, per_type)
  local e = entries[sel]
  local t = {}
  for k, v in pairs(e.open) do t[k] = v end
  for k, v in pairs(e.fields) do t[k] = v end
  t.disabled = true
  local ev, err = perfev.open(t)
  if not ev then
    io.stderr:write(("seed: %s: cannot sample (%s), skipped\n"):format(e.name, err))
    return
  end
  local ring = assert(ev:mmap(64))
  ev:enable()
  burn(60)
  os.execute("true")   -- a fork and an exit, seen by the task records
  ev:disable()
  local by_type, out = {}, {}
  for rec in ring:records() do
    local n = (by_type[rec.type] or 0) + 1
    by_type[rec.type] = n
    rec.event = nil
    if n <= per_type then out[#out + 1] = perfev.encode(rec, ev) end
  end
  ring:close()
  ev:close()
  -- one to three records a file, so that the fuzzer sees record sequences
  local i = 1
  while i <= #out do
    local k = math.min(#out - i + 1, 1 + (i % 3))
    write(sel, "kernel", table.concat(out, "", i, i + k - 1))
    i = i + k
  end
end
sampled(1, 6)
sampled(2, 6)

-- ---- synthetic records, for what this machine cannot produce ----
local trailer = { pid = 11, tid = 12, time = 13, id = 1, stream_id = 15, cpu = 1 }
local function with_trailer(rec)
  for k, v in pairs(trailer) do if rec[k] == nil then rec[k] = v end end
  return rec
end

local branch = { hw_idx = 7,
  { from = 0x401000, to = 0x402000, mispred = true, cycles = 30, type = 1, counters = 3 },
  { from = 0x402010, to = 0x401000, predicted = true, in_tx = true, priv = 2, counters = 4 } }
-- registers for a mask, by the names the decoder gives them
local function regs(mask)
  local a = perfev.attr { sample_type = { "regs_user" }, sample_regs_user = mask }
  local words = { 2 }
  for i = 0, 63 do if compat.band(mask, compat.lshift(1, i)) ~= 0 then words[#words + 1] = 0x1000 + i end end
  local body = compat.pack("=" .. ("I8"):rep(#words), compat.table_unpack(words))
  return perfev.decode(compat.pack("=I4I2I2", 9, 0, 8 + #body) .. body, a)().regs_user
end
local function everything(sel, group)
  local f = entries[sel].fields
  return with_trailer { type = "sample", cpumode = "kernel", exact_ip = true, ip = compat.hex64("0xffffffff81000010"),
    addr = 0xdead000, period = 4000, raw = "RAW!", stack_user = ("s"):rep(16), dyn_size = 12,
    weight = 300, var2_w = 5, var3_w = 6, data_src = 0x29080142, transaction = 3,
    phys_addr = 0x1234000, cgroup = 55, data_page_size = 4096, code_page_size = 4096, aux = "AUXDATA!",
    read = group and { time_enabled = 9, time_running = 8, { value = 1, id = 1, lost = 0 },
                                                           { value = 2, id = 2, lost = 1 } }
                  or { value = 5, time_running = 8, id = 1 },
    callchain = { compat.hex64("0xffffffff81000010"), 0x401000, 0x401100 },
    callchain_contexts = { { context = "kernel", first = 1 }, { context = "user", first = 2 } },
    branch_stack = branch, regs_user = regs(f.sample_regs_user), regs_intr = regs(f.sample_regs_intr) }
end

local side = {
  { type = "mmap", cpumode = "user", addr = 0x400000, len = 4096, pgoff = 0, filename = "/bin/true" },
  { type = "lost", lost = 17 },
  { type = "comm", comm_exec = true, comm = "lua5.4" },
  { type = "exit", ppid = 1, ptid = 1 }, { type = "fork", ppid = 1, ptid = 1 },
  { type = "throttle" }, { type = "unthrottle" },
  { type = "read", values = { nr = 2, time_enabled = 9, time_running = 8, { value = 1, id = 1, lost = 0 },
                                                                    { value = 2, id = 2, lost = 0 } } },
  { type = "mmap2", addr = 0x1000, len = 0x2000, pgoff = 0, maj = 8, min = 1, ino = 424242,
    ino_generation = 3, prot = 5, flags = 2, filename = "/usr/lib/libc.so.6" },
  { type = "mmap2", addr = 0x1000, len = 0x2000, pgoff = 0, build_id = ("\xab"):rep(20), prot = 5, flags = 2,
    filename = "/x" },
  { type = "aux", aux_offset = 4096, aux_size = 512, flags = 5 }, { type = "itrace_start" },
  { type = "lost_samples", lost = 3 }, { type = "switch", switch_out = true, switch_out_preempt = true },
  { type = "switch_cpu_wide", next_prev_pid = 20, next_prev_tid = 21 },
  { type = "namespaces", namespaces = { { dev = 4, inode = 0xf0000098 }, { dev = 4, inode = 0xeffffffe } } },
  { type = "ksymbol", addr = compat.hex64("0xffffffffc0000000"), len = 256, ksym_type = 1, flags = 0,
      name = "bpf_prog_x" },
  { type = "bpf_event", bpf_type = 1, flags = 0, prog_id = 77, tag = "TAGTAG!!" },
  { type = "cgroup", cgroup_id = 9, path = "/user.slice" },
  { type = "text_poke", addr = compat.hex64("0xffffffff81000000"), old_bytes = "\x90\x90", new_bytes = "\xe8\1\2\3\4" },
  { type = "aux_output_hw_id", hw_id = 6 },
  { type = "callchain_deferred", cookie = 42, callchain = { 0x401000, 0x402000 },
    callchain_contexts = { { context = "user", first = 1 } } },
  { type = 200, data = "abcdefgh" },
}

local function encode(sel, recs)
  local e = entries[sel]
  local attrs = e.map and {} or perfev.attr(e.fields)
  for id, f in pairs(e.map or {}) do attrs[id] = perfev.attr(f) end
  return perfev.encode(recs, attrs)
end

write(3, "sample-all", encode(3, { everything(3, true) }))
write(4, "sample-all", encode(4, { everything(4, false) }))
for _, rec in ipairs(side) do
  write(3, "side-" .. rec.type, encode(3, { with_trailer(rec) }))
end
write(5, "ip", encode(5, { { type = "sample", ip = 0x401000 }, { type = "comm", pid = 1, tid = 1, comm = "x" } }))
write(6, "none", encode(6, { { type = "sample" }, with_trailer { type = "lost", id = 1, lost = 2 } }))
write(7, "raw", encode(7, { with_trailer { type = "sample", raw = ("t"):rep(36) } }))
write(8, "stream", encode(8, {
  { type = "sample", id = 1, ip = 0x10, pid = 1, tid = 1 },
  { type = "sample", id = 2, ip = 0x20, period = 99, read = { { value = 5, id = 2 } },
    callchain = { 0x401000 }, callchain_contexts = { { context = "user", first = 1 } } },
  { type = "switch", id = 2 } }))
print(("seed: %d files in %s"):format(nfiles, dir))
