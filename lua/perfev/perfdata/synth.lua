-- The side-band records perf synthesizes at the start of a recording for
-- what existed before its events were opened (tools/perf/util/
-- synthetic-events.c): a comm per thread and an mmap2 per executable
-- mapping of the process, from /proc, and an mmap of the kernel's text.
-- Without them perf report cannot name the process nor resolve a sample
-- in a library mapped before the recording started.
--
--   local synth = require "perfev.perfdata.synth"
--   for _, rec in ipairs(synth.process(pid)) do w:write(rec) end
--   local k = synth.kernel()        -- nil when /proc/kallsyms hides addresses
--
-- As perf does, the records carry an all-zero sample_id trailer (time 0,
-- id 0: read with the first event's attr) and come before every record
-- the kernel wrote.
local core = require "perfev.core"
local fs = require "perfev.fs"
local compat = require "perfev.compat"

local M = {}

local MISC_KERNEL, MISC_USER, MISC_MMAP_DATA = core.MISC.KERNEL, core.MISC.USER, core.MISC.MMAP_DATA
local PROT = { r = 1, w = 2, x = 4 }
local MAP_SHARED, MAP_PRIVATE = 1, 2
-- the trailer perf writes on synthesized records: all zero
local function zero_id()
  return { pid = 0, tid = 0, time = 0, id = 0, stream_id = 0, cpu = 0, res = 0 }
end

-- comm records for every thread of pid (/proc/PID/task/*/comm).
function M.comms(pid)
  local out = {}
  local tids = fs.dir(("/proc/%d/task"):format(pid)) or { tostring(pid) }
  for _, t in ipairs(tids) do
    local tid = compat.tointeger(tonumber(t))
    local comm = tid and fs.read(("/proc/%d/task/%d/comm"):format(pid, tid))
    if comm then
      out[#out + 1] = { type = "comm", misc = 0, pid = pid, tid = tid, comm = comm,
                        sample_id = zero_id() }
    end
  end
  return out
end

-- /proc/PID/maps as mmap2 records: executable mappings (all of them with
-- opts.data, marked mmap_data as perf marks them), anonymous ones named
-- "//anon" as the kernel names them.
function M.mmaps(pid, opts)
  opts = opts or {}
  local f = io.open(("/proc/%d/maps"):format(pid), "r")
  if not f then return {} end
  local out = {}
  for line in f:lines() do
    local lo, hi, perms, off, maj, min, ino, path =
      line:match("^(%x+)%-(%x+) (%S+) (%x+) (%x+):(%x+) (%d+)%s*(.*)$")
    if lo then
      local exec = perms:sub(3, 3) == "x"
      if exec or opts.data then
        local prot = 0
        for c in perms:sub(1, 3):gmatch("[rwx]") do prot = compat.bor(prot, PROT[c]) end
        if path == "" then path = "//anon" end
        -- exact on every runtime: the vsyscall page is 0xffffffffff600000
        local addr = compat.hex64(lo)
        out[#out + 1] = {
          type = "mmap2", misc = compat.bor(MISC_USER, exec and 0 or MISC_MMAP_DATA), pid = pid, tid = pid,
          addr = addr, len = compat.sub(compat.hex64(hi), addr), pgoff = compat.hex64(off),
          maj = tonumber(maj, 16), min = tonumber(min, 16), ino = compat.tointeger(tonumber(ino)),
          ino_generation = 0, prot = prot,
          flags = perms:sub(4, 4) == "s" and MAP_SHARED or MAP_PRIVATE,
          filename = path, sample_id = zero_id(),
        }
      end
    end
  end
  f:close()
  return out
end

-- comm records, then mmap2 records, of process pid.
function M.process(pid, opts)
  local out = M.comms(pid)
  for _, r in ipairs(M.mmaps(pid, opts)) do out[#out + 1] = r end
  return out
end

-- The kernel's text as perf maps it: an mmap record of pid -1 from _text
-- (0xffffffff) from _text to _etext named "[kernel.kallsyms]_text" (the
-- reference symbol perf relocates kernel symbols by), or nil
-- when /proc/kallsyms shows no addresses (kptr_restrict, or not root).
function M.kernel()
  local f = io.open("/proc/kallsyms", "r")
  if not f then return nil end
  local text, etext
  for line in f:lines() do
    local addr, name = line:match("^(%x+) %a (%S+)$")
    if name == "_text" then text = compat.hex64(addr)
    elseif name == "_etext" then etext = compat.hex64(addr) end
    if text and etext then break end
  end
  f:close()
  if not text or text == 0 or not etext then return nil end
  return { type = "mmap", misc = MISC_KERNEL, pid = 0xffffffff, tid = 0, addr = text, len = compat.sub(etext, text),
           pgoff = text, filename = "[kernel.kallsyms]_text", sample_id = zero_id() }
end

return M
