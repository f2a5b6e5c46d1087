-- uprobes and kprobes through the kernel's `uprobe` and `kprobe` PMUs
-- (perf_event_open with attr.type from sysfs; no tracefs, no perf probe).
--
--   local probe = require "perfev.probe"
--   local t = probe.uprobe { path = "/usr/bin/foo", func = "main" }     -- a spec table
--   local r = probe.uprobe { path = "/usr/bin/foo", func = "main", ret = true }
--   local k = probe.kprobe { func = "do_sys_openat2" }
--   perfev.open(t)                                    -- counts calls by this thread
--
-- uprobe: path (the binary), and one of func (a function, from .symtab or
-- .dynsym; offset is then added to it, as perf probe's func+off), offset
-- alone (a file offset) or addr (a virtual address, mapped to the file
-- through the PT_LOAD headers); ret = true for a return probe;
-- ref_ctr_offset (an SDT semaphore's file offset) where the PMU has it.
-- kprobe: func (a kernel function, checked against /proc/kallsyms) with an
-- optional offset, or addr (a kernel address); ret = true for kretprobe.
-- Other keys of the table are attr fields and are kept (sample_period ...).
--
-- The attr gets uprobe_path / kprobe_func (a string the attr keeps alive
-- for the kernel to read, config1) and probe_offset / kprobe_addr
-- (config2); ret and ref_ctr_offset go into config through the PMU's
-- format/ files. The result also carries pmu, name and probe (what was
-- asked: path, func, offset, ret), which are not attr fields.
local pmu = require "perfev.pmu"
local fs = require "perfev.fs"
local options = require "perfev.options"

local M = {}

M.KALLSYMS = "/proc/kallsyms"

-- The keys each probe takes, and their kind; the keys given as PMU
-- format terms (perfev.probe_keys: data the event-string parser shares).
local probe_keys = require "perfev.probe_keys"
M.KEYS, M.FORMAT_KEYS = probe_keys.KEYS, probe_keys.FORMAT_KEYS
local FORMAT_KEYS = M.FORMAT_KEYS

local WHY_MISSING = {
  uprobe = "the kernel was built without CONFIG_UPROBE_EVENTS",
  kprobe = "the kernel was built without kprobes (CONFIG_KPROBES, CONFIG_KPROBE_EVENTS)",
}

-- the_pmu(kind, root) -> pmu | nil, message
local function the_pmu(kind, root)
  local p = pmu.get(kind, root)
  if p then return p end
  return nil, ("no %s PMU on this machine (no %s/%s/type): %s"):format(kind, root or pmu.ROOT, kind, WHY_MISSING[kind])
end

local function basename(path) return path:match("([^/]+)$") or path end

local function label(kind, args)
  local what = args.func and (args.func .. ((args.offset or 0) ~= 0 and ("+0x%x"):format(args.offset) or ""))
               or args.addr and ("0x%x"):format(args.addr) or ("0x%x"):format(args.offset or 0)
  local ret = args.ret and (kind == "uprobe" and "uretprobe" or "kretprobe") or kind
  if kind == "uprobe" then return ("%s:%s:%s"):format(ret, basename(args.path), what) end
  return ("%s:%s"):format(ret, what)
end

-- config bits of ret / ref_ctr_offset through the PMU's format terms
local function format_bits(p, args, fields)
  for key, term in pairs(FORMAT_KEYS) do
    local v = args[key]
    if v == true then v = 1 elseif v == false then v = nil end
    if v then
      if not p.formats[term] then
        return nil, ("the %s PMU has no '%s' format term (no %s/format/%s): '%s' is not supported by this kernel")
          :format(p.name, term, p.dir, term, key)
      end
      local ok, err = pmu.set_term(p, term, v, fields)
      if not ok then return nil, ("%s: %s"):format(key, err) end
    end
  end
  return true
end

-- The uprobe's file offset from path and func/offset/addr.
local function uprobe_offset(args)
  local elf = require "perfev.elf"   -- only probes need it: not at start-up
  if args.func then
    local off, sym = elf.func_offset(args.path, args.func)
    if not off then return nil, sym end
    local add = args.offset or 0
    if add < 0 or (sym.size > 0 and add >= sym.size) then
      return nil, ("offset %d is outside %s (%d bytes)"):format(add, args.func, sym.size)
    end
    return off + add
  end
  if args.addr then
    local e, err = elf.open(args.path)
    if not e then return nil, err end
    return e:offset(args.addr)
  end
  -- a bare file offset: the file must still be there and be ELF
  local e, err = elf.open(args.path)
  if not e then return nil, err end
  return args.offset
end

-- kallsyms_has(name, path) -> true | nil, message (with the nearest names)
function M.kallsyms_has(name, path)
  options.arg(name, "string", "perfev.probe.kallsyms_has", "the name")
  if path ~= nil then options.arg(path, "string", "perfev.probe.kallsyms_has", "the path") end
  path = path or M.KALLSYMS
  local s, err = fs.read(path)
  if not s then return nil, ("cannot read %s: %s"):format(path, err) end
  s = "\n" .. s .. "\n"
  local quoted = name:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")
  if s:find("\n%x+ [TtWw] " .. quoted .. "[\t\n]") then return true end
  local names = {}
  for n in s:gmatch("\n%x+ [TtWw] ([^%s]+)") do names[#names + 1] = n end
  if #names == 0 then
    return nil, ("%s lists no kernel functions"):format(path)
  end
  local near = require("perfev.elf").nearest(name, names)
  return nil, ("no kernel function '%s' in %s%s"):format(
    name, path, #near > 0 and ("; nearest: " .. table.concat(near, ", ")) or "")
end

-- check(kind, args) -> true | nil, message: which keys go together
local function check(kind, args)
  local n = (args.func and 1 or 0) + (args.addr and 1 or 0)
  if kind == "uprobe" then
    if not args.path then return nil, "needs path (the binary to probe)" end
    n = n + ((not args.func and args.offset) and 1 or 0)
    if n ~= 1 then return nil, "needs exactly one of func (+ offset), offset (a file offset) or addr" end
  else
    if n ~= 1 then return nil, "needs exactly one of func (+ offset) or addr" end
    if args.addr and args.offset then return nil, "takes offset with func, not with addr" end
  end
  if args.addr and args.offset and kind == "uprobe" then
    return nil, "takes offset with func, or alone as a file offset; not with addr"
  end
  return true
end

-- build(kind, args, opts) -> fields | nil, message. args as described in
-- the header (already type-checked); opts: sysfs (PMU root), kallsyms
-- (path, or false to skip the check). fields: type, config, the probe's
-- attr fields, name, pmu, probe.
function M.build(kind, args, opts)
  options.arg(args, "table", "perfev.probe.build", "its arguments")
  if opts ~= nil then options.arg(opts, "table", "perfev.probe.build", "its options") end
  opts = opts or {}
  local ok, err = check(kind, args)
  if not ok then return nil, err end
  local p, perr = the_pmu(kind, opts.sysfs)
  if not p then return nil, perr end
  local fields = {}
  ok, err = format_bits(p, args, fields)
  if not ok then return nil, err end
  local ev = { type = p.type, config = fields.config or 0, pmu = p.name, name = label(kind, args),
               probe = { path = args.path, func = args.func, offset = args.offset, addr = args.addr,
                         ret = args.ret or false } }
  if kind == "uprobe" then
    local off, oerr = uprobe_offset(args)
    if not off then return nil, oerr end
    ev.uprobe_path, ev.probe_offset = args.path, off
  elseif args.func then
    if opts.kallsyms ~= false then
      local found, kerr = M.kallsyms_has(args.func, opts.kallsyms)
      if not found then return nil, kerr end
    end
    ev.kprobe_func, ev.probe_offset = args.func, args.offset or 0
  else
    ev.config1, ev.kprobe_addr = 0, args.addr
  end
  return ev
end

local OPTIONS = { sysfs = "string", kallsyms = "string|boolean" }

-- API: probe.uprobe(t, opts) / probe.kprobe(t, opts) -> spec table; raise
-- on a mistake (a key of the wrong type, a missing symbol or file, no PMU).
local function api(kind)
  local fname = "perfev." .. kind
  return function(t, opts)
    if type(t) ~= "table" then options.raisef("%s: expected a table, got %s", fname, options.describe(t)) end
    opts = options.check(opts, OPTIONS, fname)
    local keys, args, extra = M.KEYS[kind], {}, {}
    for k, v in pairs(t) do
      local want = keys[k]
      if want then
        local got = (want == "integer" and options.is_integer(v)) and "integer" or type(v)
        if got ~= want then
          options.raisef("%s: field '%s' expects %s %s, got %s", fname, k, want == "integer" and "an" or "a",
                         want, got)
        end
        args[k] = v
      else
        extra[k] = v
      end
    end
    local ev, err = M.build(kind, args, opts)
    if not ev then options.raisef("%s: %s", fname, err) end
    for k, v in pairs(extra) do
      if k == "name" then ev.name = v elseif ev[k] == nil then ev[k] = v end
    end
    return ev
  end
end
M.uprobe = api("uprobe")
M.kprobe = api("kprobe")

return M
