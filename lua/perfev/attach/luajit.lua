-- The attach reader of LuaJIT 2.1 on x86_64 (OpenResty's luajit2 and
-- upstream LuaJIT, GC64 or not): finds the Lua states of another process by
-- a validated scan of its anonymous memory, and reads the Lua stack of a
-- thread stopped at a sample. It only reads memory through the target
-- (perfev.attach's target object, ATTACH interface); doc/attach.md
-- ("LuaJIT 2.1") says how, and what is shown for compiled traces.
--
-- Layouts are data (perfev.attach.luajit_layout). Every read is checked;
-- a check that fails gives nil and a reason, never a guessed frame.
local layout = require "perfev.attach.luajit_layout"

local M = { name = "LuaJIT 2.1" }

local GCT, FRAME = layout.GCT, layout.FRAME
local floor = math.floor
local TWO32 = 4294967296

local SCAN_CHUNK = 1048576          -- bytes read at a time by the scan
local SCAN_LIMIT = 2 ^ 31           -- bytes scanned at most, in all
local MAX_FRAMES = 512
local MAX_CHAIN = 64                -- resumers followed at most

-- ---- little-endian decoding of a string read from the target ----

local function u8s(s, off) return s:byte(off + 1) end
local function u16s(s, off)
  local a, b = s:byte(off + 1, off + 2)
  return a + b * 256
end
local function u32s(s, off)
  local a, b, c, d = s:byte(off + 1, off + 4)
  return a + b * 256 + c * 65536 + d * 16777216
end
local function i32s(s, off)
  local v = u32s(s, off)
  if v >= 2147483648 then v = v - TWO32 end
  return v
end
-- a 64-bit value below 2^53 (pointers, frame links); nil above
local function u64s(s, off)
  local hi = u32s(s, off + 4)
  if hi >= 2097152 then return nil end
  return u32s(s, off) + hi * TWO32
end

-- ---- the reader of one universe (a global_State) ----

local State = {}
State.__index = State

local function rd(self, addr, len)
  if not addr or addr <= 0 then return nil end
  return self.target:read(addr, len)
end

-- a GCRef/MRef field at addr
local function ref(self, addr)
  if self.lay.gc64 then return self.target:ptr(addr) end
  return self.target:u32(addr)
end

-- a TValue at addr -> n (the tag: ~itype, 0 nil .. 13), gc pointer; or nil
-- for a number
local function tvalue(self, addr)
  local lo, hi = self.target:u64parts(addr)
  if not lo then return nil end
  if self.lay.gc64 then
    if hi < 0xfff80000 then return nil end
    local n = 0x1ffff - floor(hi / 32768)
    return n, lo + (hi % 32768) * TWO32
  end
  if hi < 0xfffffff2 then return nil end
  return 0xffffffff - hi, lo
end

local function gct_of(self, obj)
  return obj and self.target:u8(obj + self.lay.gct)
end

-- short_src of a chunk name, as lj_debug_shortname writes it
local function shortname(name, firstline)
  local idsize = layout.LUA_IDSIZE
  local c = name:sub(1, 1)
  if c == "=" then return name:sub(2, idsize) end
  if c == "@" then
    local src = name:sub(2)
    if #src >= idsize then return "..." .. src:sub(#src - (idsize - 4) + 1) end
    return src
  end
  local len = 0
  while len < idsize - 12 do
    local b = name:byte(len + 1)
    if not b or b < 32 then break end
    len = len + 1
  end
  local builtin = firstline == -1
  local out = builtin and "[builtin:" or '[string "'
  if len < #name then
    if len > idsize - 15 then len = idsize - 15 end
    out = out .. name:sub(1, len) .. "..."
  else
    out = out .. name
  end
  return out .. (builtin and "]" or '"]')
end

-- a GCstr's bytes
local function gcstr(self, s, max)
  if gct_of(self, s) ~= GCT.str then return nil end
  local len = self.target:u32(s + self.lay.str_len)
  if not len or len > (max or 65536) then return nil end
  if len == 0 then return "" end
  return rd(self, s + self.lay.str_size, len)
end

-- a GCproto's header fields (cached by address; protos are never written
-- after creation, but one can be freed and its memory reused: the header
-- is read again each time and compared, and so is its chunk name's text,
-- a string that may have been freed and another put at its address)
local function proto(self, pt)
  local lay = self.lay
  local h = rd(self, pt, lay.pt_size)
  if not h or u8s(h, lay.gct) ~= GCT.proto then return nil, "not a prototype" end
  local old = self.protos[pt]
  local chunk
  if lay.gc64 then chunk = u64s(h, lay.pt_chunkname) else chunk = u32s(h, lay.pt_chunkname) end
  local name = chunk and gcstr(self, chunk)
  if not name then return nil, "prototype without a chunk name" end
  if old and old.header == h and old.name == name then return old end
  local firstline = i32s(h, lay.pt_firstline)
  local p = {
    name = name,
    header = h,
    sizebc = u32s(h, lay.pt_sizebc),
    firstline = firstline,
    numline = i32s(h, lay.pt_numline),
    lineinfo = lay.gc64 and u64s(h, lay.pt_lineinfo) or u32s(h, lay.pt_lineinfo),
    source = shortname(name, firstline),
    bc = pt + lay.pt_size,
  }
  -- (another function at a kept one's address: counted for the specs; the
  -- collector's marks alone change the header of the same one)
  if old and (old.name ~= name or old.firstline ~= p.firstline or old.sizebc ~= p.sizebc) then
    self.reused = (self.reused or 0) + 1
  end
  if not old then
    self.nprotos = (self.nprotos or 0) + 1
    if self.nprotos > 4096 then self.protos, self.nprotos = {}, 1 end   -- kept for 4,096 at most
  end
  self.protos[pt] = p
  return p
end

-- the line of bytecode position pos (lj_debug_line's rules)
local function line_of(self, p, pos)
  if pos > p.sizebc or not p.lineinfo or p.lineinfo == 0 then return nil end
  if pos == p.sizebc then return p.firstline + p.numline end
  if pos == 0 then return p.firstline end
  pos = pos - 1
  local d
  if p.numline < 256 then d = self.target:u8(p.lineinfo + pos)
  elseif p.numline < 65536 then d = self.target:u16(p.lineinfo + 2 * pos)
  else d = self.target:i32(p.lineinfo + 4 * pos) end
  return d and p.firstline + d
end

-- position of the instruction before ins in prototype pt (debug_framepc),
-- with compiled loops' patched returns undone through their trace
local function pos_of(self, pt, p, ins)
  if not ins or (ins - p.bc) % 4 ~= 0 then return nil end
  local pos = (ins - p.bc) / 4 - 1
  if pos < 0 then return nil end
  if pos > p.sizebc then
    local lay = self.lay
    local T = ins - 4 - lay.tr_startins
    if gct_of(self, T) ~= GCT.trace or ref(self, T + lay.tr_startpt) ~= pt then return nil end
    local spc = ref(self, T + lay.tr_startpc)
    if not spc or (spc - p.bc) % 4 ~= 0 then return nil end
    pos = (spc - p.bc) / 4
    if pos < 0 or pos > p.sizebc then return nil end
  end
  return floor(pos)
end

-- the names of C functions Lua knows: the fields of the tables in
-- package.loaded (registry._LOADED) holding functions, by GCfunc address
local function table_nodes(self, t, each)
  local lay = self.lay
  if gct_of(self, t) ~= GCT.tab then return end
  local node = ref(self, t + lay.tab_node)
  local hmask = self.target:u32(t + lay.tab_hmask)
  if not node or not hmask or hmask > 65535 then return end
  local n = hmask + 1
  local blob = rd(self, node, n * lay.node_size)
  if not blob then return end
  for i = 0, n - 1 do
    local at = node + i * lay.node_size
    local kn, k = tvalue(self, at + lay.node_key)
    if kn == 4 then
      local vn, v = tvalue(self, at)
      if vn then each(k, vn, v) end
    end
  end
end

local function build_names(self)
  local names = {}
  local _, reg = tvalue(self, self.g + self.lay.g_registrytv)
  local loaded
  table_nodes(self, reg, function(k, vn, v)
    if vn == 11 and gcstr(self, k, 64) == "_LOADED" then loaded = v end
  end)
  table_nodes(self, loaded, function(mk, vn, mod)
    if vn ~= 11 then return end
    local global = gcstr(self, mk, 64) == "_G"
    table_nodes(self, mod, function(k, fvn, fn)
      if fvn == 8 and (not names[fn] or not global) then
        local key = gcstr(self, k, 128)
        if key then names[fn] = key end
      end
    end)
  end)
  self.names, self.unnamed, self.names_at = names, {}, os.time()
end

-- a C function's name: the tables are read again (a module loaded since)
-- when a function neither named nor found unnamed by the last reading is
-- met, at most every 2 s (the root C function is in every stack: reading
-- them again every 64 samples for it held the target for milliseconds)
local function cname(self, fn)
  if not self.names then build_names(self) end
  local n = self.names[fn]
  if n ~= nil or self.unnamed[fn] then return n end
  if os.time() - self.names_at >= 2 then
    build_names(self)
    n = self.names[fn]
    if n == nil then self.unnamed[fn] = true end
  end
  return n
end

-- ---- frames ----

-- the function and link of the frame whose link slot is at f
local function frame_at(self, f)
  local lay = self.lay
  local fn, ftsz
  if lay.fr2 then
    local n, v = tvalue(self, f - 8)
    if n ~= 8 then return nil end
    fn = v
    local s = rd(self, f, 8)
    ftsz = s and u64s(s, 0)
  else
    local s = rd(self, f, 8)
    if not s then return nil end
    fn, ftsz = u32s(s, 0), i32s(s, 4)
    if ftsz % 4 == 0 then ftsz = u32s(s, 4) end       -- a PC
  end
  if not ftsz or gct_of(self, fn) ~= GCT.func then return nil end
  return fn, ftsz
end

-- one frame of function fn, running at ins (a Lua function) -> a frame table
local function describe(self, fn, ins)
  local lay = self.lay
  local ffid = self.target:u8(fn + lay.fn_ffid)
  if not ffid then return nil, "unreadable function" end
  if ffid ~= 0 then
    return { what = "C", name = cname(self, fn), source = "[C]", line = -1, linedefined = -1 }
  end
  local pc = ref(self, fn + lay.fn_pc)
  local pt = pc and pc - lay.pt_size
  local p, why = proto(self, pt)
  if not p then return nil, why end
  if not ins then return nil, "no PC for a Lua function (below a C boundary)" end
  local pos = pos_of(self, pt, p, ins)
  if not pos then return nil, "PC outside its function" end
  local line = line_of(self, p, pos)
  if not line then return nil, "no line information" end
  local main = not (p.firstline ~= 0 or p.numline == 0)
  return { what = main and "main" or "Lua", source = p.source, line = line,
           linedefined = p.firstline }
end

-- the frames of thread L from the frame at base (its function at the top,
-- running at ins), top first, appended to out; returns out or nil, why
local function walk(self, L, base, ins, out)
  local lay = self.lay
  local stack = ref(self, L + lay.L_stack)
  local maxstack = ref(self, L + lay.L_maxstack)
  if not stack or not maxstack then return nil, "unreadable thread" end
  if base < stack or base > maxstack or (base - stack) % 8 ~= 0 then
    return nil, ("frame base 0x%x outside its thread 0x%x stack"):format(base, L)
  end
  local bottom = stack + (lay.fr2 and 8 or 0)
  local f = base - 8
  local skip = false
  local n = 0
  while f > bottom do
    n = n + 1
    if n > MAX_FRAMES then return nil, "too many frames" end
    local fn, ftsz = frame_at(self, f)
    if not fn then return nil, "not a frame" end
    if not skip then
      local fr, why = describe(self, fn, ins)
      if not fr then return nil, why end
      out[#out + 1] = fr
    end
    skip = false
    local ty = ftsz % 8
    local prev
    if ty % 4 == FRAME.LUA then
      local a = self.target:u8(ftsz - 3)            -- bc_a of the CALL before the return PC
      if not a then return nil, "unreadable return PC" end
      prev, ins = f - (1 + (lay.fr2 and 1 or 0) + a) * 8, ftsz
    else
      prev = f - (ftsz - ty)
      if ty == FRAME.CONT then
        local cf = lay.fr2 and f - 16 or f - 8
        local s = rd(self, cf, 8)
        ins = s and (lay.fr2 and u64s(s, 0) or u32s(s, 4))
      elseif ty == FRAME.VARG then
        skip = true                                -- the same function's real frame
      else
        ins = nil                                  -- below a C or pcall boundary
      end
    end
    if prev >= f then return nil, "frame link does not go down" end
    f = prev
  end
  -- the outermost frame links to the slot above the thread's dummy frame
  if f ~= bottom then return nil, "frame chain does not end at its stack's bottom" end
  return out
end

local function state_frame(name)
  return { what = "C", name = name, source = "", line = -1, linedefined = -1 }
end

-- is the C stack of the state (its running thread's cframe) on the stack
-- of the thread stopped with this rsp?
local function on_thread(self, L, rsp)
  local cf = self.target:ptr(L + self.lay.L_cframe)   -- void *: 8 bytes in both modes
  if not cf or cf == 0 then return nil end
  cf = cf - cf % 8
  if cf < rsp then return nil end
  local m = self.target:region(rsp)
  return m and cf < m.hi and cf or nil
end

-- the thread that resumed `co`, from the main thread down: the thread whose
-- top function (synced, as coroutine.resume and wrap sync it) has co as its
-- first argument or first upvalue; the chain, root first, or nil
local function resumers(self, cur)
  local lay = self.lay
  local chain = {}
  local th = ref(self, self.g + lay.g_mainthref)
  for _ = 1, MAX_CHAIN do
    if th == cur then return chain end
    local base = self.target:ptr(th + lay.L_base)   -- TValue *: 8 bytes
    if not base then return nil end
    local fn = frame_at(self, base - 8)
    if not fn or self.target:u8(fn + lay.fn_ffid) == 0 then return nil end
    local n, v = tvalue(self, base)
    if n ~= 6 then
      n, v = tvalue(self, fn + lay.fn_upvalue)
      if n ~= 6 or (self.target:u8(fn + lay.fn_nupvalues) or 0) < 1 then return nil end
    end
    if ref(self, v + lay.L_glref) ~= self.g then return nil end
    chain[#chain + 1] = { L = th, base = base }
    th = v
  end
  return nil
end

-- the trace running (vmstate = its number): its start function's frame at
-- g->jit_base, at the line where the trace starts; a side trace that starts
-- in another function than the one at jit_base is shown at its root trace's
-- start (the root trace entered that frame)
local function trace_top(self, traceno)
  local lay = self.lay
  local base = ref(self, self.g + lay.g_jit_base)
  if not base or base == 0 then return nil, "trace " .. traceno .. " without jit_base" end
  local J = self.GG + self.flavour.GG_J
  local size = self.target:u32(J + lay.J_sizetrace)
  local traces = self.target:ptr(J + lay.J_trace)             -- GCRef *: 8 bytes
  local fn = frame_at(self, base - 8)
  if not fn or self.target:u8(fn + lay.fn_ffid) ~= 0 then
    return nil, "no Lua function at the trace's base"
  end
  local pt = ref(self, fn + lay.fn_pc)
  local n = traceno
  for _ = 1, 2 do
    if not size or not traces or n <= 0 or n >= size then return nil, "trace number out of range" end
    local T = ref(self, traces + n * lay.ptr)
    if gct_of(self, T) ~= GCT.trace then return nil, "trace " .. n .. " not found" end
    local startpt = ref(self, T + lay.tr_startpt)
    if startpt and pt == startpt + lay.pt_size then
      -- startpc is the instruction the trace starts at: the frame's line is its own
      local startpc = ref(self, T + lay.tr_startpc)
      return base, startpc and startpc + 4
    end
    n = self.target:u16(T + lay.tr_root)
    if n == 0 then break end   -- a root trace (its root is 0): it left the function it started in
  end
  -- one reason for all traces, so that the count of such drops reads as one figure
  return nil, "compiled code (a trace) that left the function it started in: no frame of it to show"
end

-- the top of thread L at the sample: base and PC (ins, one after the
-- current instruction) from the VM's registers when it is in its
-- interpreter, else synced in L and its C frame
local function top_of(self, L, regs, vmstate)
  local lay = self.lay
  if vmstate == -1 and regs.rip and regs.rip >= self.vm_lo and regs.rip <= self.vm_hi then
    -- in the VM's own code: BASE is rdx, PC rbx, DISPATCH r14 (vm_x64.dasc)
    if regs.r14 ~= self.dispatch then return nil, "VM code running with another DISPATCH" end
    local base, pc = regs.rdx, regs.rbx
    local fn = base and frame_at(self, base - 8)
    if fn then
      local ffid = self.target:u8(fn + lay.fn_ffid)
      if ffid == 0 then
        local p = proto(self, ref(self, fn + lay.fn_pc) - lay.pt_size)
        if p and pc > p.bc and pc <= p.bc + 4 * p.sizebc then return base, pc end
      elseif ffid then
        return base, nil
      end
    end
    return nil, "interpreter between instructions (BASE/PC registers not consistent)"
  end
  if vmstate == -1 and not self.vm_exact then
    -- maybe in the VM's subroutines after its last handler, where L->base
    -- and the saved PC are as stale as in the handlers
    return nil, "interpreter outside its handlers (the VM's code range is not known exactly)"
  end
  local base = self.target:ptr(L + lay.L_base)
  if not base then return nil, "unreadable L->base" end
  local cf = self.target:ptr(L + lay.L_cframe)
  local ins
  if cf and cf ~= 0 then
    cf = cf - cf % 8
    ins = ref(self, cf + lay.cf_pc)
    if ins == ref(self, cf + lay.cf_L) then ins = nil end   -- no PC saved (lj_debug's test)
  end
  return base, ins
end

-- the Lua stack of thread tid, stopped with registers regs
function State:stack(tid, regs)
  local _ = tid
  local lay = self.lay
  local rsp = regs and regs.rsp
  if not rsp then return nil, "no stack pointer" end
  local cur = ref(self, self.g + lay.g_cur_L)
  if gct_of(self, cur) ~= GCT.thread or ref(self, cur + lay.L_glref) ~= self.g then
    return nil, "g->cur_L is not a thread of this state"
  end
  if not on_thread(self, cur, rsp) then
    return nil, "thread not running Lua (no VM C frame on its stack)", "outside"
  end
  local vmstate = self.target:i32(self.g + lay.g_vmstate)
  if not vmstate then return nil, "unreadable vmstate" end
  local leaf, base, ins, why
  if vmstate >= 0 then
    leaf = state_frame("[trace " .. vmstate .. "]")
    base, ins = trace_top(self, vmstate)
    if not base then return nil, ins end
  else
    local st = layout.VMSTATE[vmstate]
    if not st then return nil, "unknown vmstate " .. vmstate end
    if st == "exit" then return nil, "trace exit in progress" end
    if st == "GC" then leaf = state_frame("[GC]")
    elseif st == "record" or st == "opt" or st == "asm" then leaf = state_frame("[JIT compiler]") end
    base, ins = top_of(self, cur, regs, vmstate)
    if not base then
      if leaf then return { leaf } end
      return nil, ins
    end
  end
  local out = {}
  if leaf then out[1] = leaf end
  out, why = walk(self, cur, base, ins, out)
  if not out then
    if leaf and leaf.name ~= "" and vmstate < 0 then return { leaf } end
    return nil, why
  end
  -- the threads that resumed cur, each below its resume
  local chain = resumers(self, cur)
  if chain then
    for i = #chain, 1, -1 do
      out, why = walk(self, chain[i].L, chain[i].base, nil, out)
      if not out then return nil, why end
    end
  end
  local n = #out
  for i = 1, floor(n / 2) do out[i], out[n + 1 - i] = out[n + 1 - i], out[i] end
  return out
end

function State:close() self.protos, self.nprotos, self.names = {}, 0, nil end

-- ---- probe ----

local function is_luajit_object(path)
  local base = path:match("[^/]*$")
  return base:match("^libluajit") or base:match("^luajit")
end

-- the version string in a mapped object's file ("LuaJIT 2.1.0-beta3")
local function version_in(target, path)
  local f = io.open((target.root and target.root ~= "/" and target.root or "") .. path, "rb")
  if not f then return nil end
  local v
  repeat
    local s = f:read(1048576)
    v = s and s:match("LuaJIT 2%.%d[%w%.%-]*")
  until v or not s
  f:close()
  return v
end

local function scannable(m)
  if m.perms:sub(1, 2) ~= "rw" then return false end
  local p = m.path or ""
  return p == "" or p == "[heap]" or p:match("^%[anon")
end

local function try_candidate(self, A, lay)
  local t = self.target
  local glref = lay.gc64 and t:ptr(A + lay.L_glref) or t:u32(A + lay.L_glref)
  if not glref then return nil end
  for _, fl in ipairs(lay.flavours) do
    if glref == A + fl.L_size then
      local g = glref
      local mt = lay.gc64 and t:ptr(g + lay.g_mainthref) or t:u32(g + lay.g_mainthref)
      if mt == A and t:u8(g + lay.g_strempty + lay.gct) == GCT.str
         and t:u32(g + lay.g_strempty + lay.str_len) == 0 then
        return fl, g
      end
    end
  end
  return nil
end

local function scan(target, lay, found)
  local pat = "\6\1"   -- gct = ~LJ_TTHREAD, dummy_ffid = FF_C
  local scanned = 0
  for _, m in ipairs(target.maps) do
    if scannable(m) and (lay.gc64 or m.hi <= TWO32) then
      local at = m.lo
      while at < m.hi do
        if scanned > SCAN_LIMIT then return "scan limit reached" end
        local len = math.min(SCAN_CHUNK, m.hi - at)
        local s = target:read(at, len)
        scanned = scanned + len
        if s then
          local i = 1
          while true do
            i = s:find(pat, i, true)
            if not i then break end
            local A = at + i - 1 - lay.gct
            if A % 8 == 0 and not found[A] then
              local fl, g = try_candidate({ target = target }, A, lay)
              if fl then found[A] = { L = A, g = g, lay = lay, flavour = fl } end
            end
            i = i + 1
          end
        end
        at = at + len
      end
    end
  end
end

-- the VM's code range, from the dispatch table's handlers
local function vm_range(target, dispatch)
  local lo, hi
  for i = 0, layout.GG_LEN_DISP - 1 do
    local p = target:ptr(dispatch + i * 8)          -- ASMFunction: 8 bytes in both modes
    if not p then return nil end
    if not lo or p < lo then lo = p end
    if not hi or p > hi then hi = p end
  end
  for _, m in ipairs(target.maps) do
    if lo >= m.lo and hi < m.hi and m.perms:sub(3, 3) == "x" then return lo, hi, m end
  end
  return nil
end

-- The VM's whole code: the dispatch table's handlers lie in it, but its
-- subroutines (arithmetic helpers, trace exit, hooks) go on after the last
-- one. The VM has one unwind entry (FDE) for all its code: found through
-- the object's .eh_frame_hdr search table, read from the target's memory
-- (PT_GNU_EH_FRAME). nil when it cannot be read as expected.
local function vm_fde(target, m, lo, hi)
  local base
  for _, o in ipairs(target.maps) do
    if o.path == m.path and o.offset == 0 then base = o.lo break end
  end
  local eh = base and target:read(base, 64)
  if not eh or eh:sub(1, 4) ~= "\127ELF" or u8s(eh, 4) ~= 2 then return nil end
  local phoff, phentsize, phnum = u64s(eh, 0x20), u16s(eh, 0x36), u16s(eh, 0x38)
  local ph = phoff and target:read(base + phoff, phentsize * phnum)
  if not ph then return nil end
  local bias, hdr
  for i = 0, phnum - 1 do
    local o = i * phentsize
    local ty, off, vaddr = u32s(ph, o), u64s(ph, o + 8), u64s(ph, o + 16)
    if ty == 1 and off == 0 and not bias then bias = base - vaddr end
    if ty == 0x6474e550 then hdr = vaddr end
  end
  if not bias or not hdr then return nil end
  hdr = hdr + bias
  local h = target:read(hdr, 12)
  -- version 1; eh_frame_ptr pcrel|sdata4, count udata4, table datarel|sdata4
  if not h or h:byte(1) ~= 1 or h:byte(2) ~= 0x1b or h:byte(3) ~= 0x03 or h:byte(4) ~= 0x3b then
    return nil
  end
  local count = u32s(h, 8)
  local tab = count < 1000000 and target:read(hdr + 12, count * 8)
  if not tab then return nil end
  local a, b = 0, count - 1
  while a < b do                     -- the last entry starting at or below lo
    local mid = floor((a + b + 1) / 2)
    if hdr + i32s(tab, mid * 8) <= lo then a = mid else b = mid - 1 end
  end
  local start = hdr + i32s(tab, a * 8)
  local fde = hdr + i32s(tab, a * 8 + 4)
  local f = target:read(fde, 16)
  if not f or fde + 8 + i32s(f, 8) ~= start then return nil end
  local stop = start + u32s(f, 12)
  if start > lo or stop <= hi then return nil end
  return start, stop - 1
end

function M.probe(target)
  local objs, seen = {}, {}
  for _, m in ipairs(target.maps or {}) do
    if m.path and m.path:sub(1, 1) == "/" and not seen[m.path] and is_luajit_object(m.path) then
      seen[m.path] = true
      objs[#objs + 1] = m.path
    end
  end
  local version, from
  for _, p in ipairs(objs) do
    version = version_in(target, p)
    if version then from = p break end
  end
  if not version and target.exe then
    version = version_in(target, target.exe)
    from = version and target.exe
  end
  if not version then
    return nil, "no LuaJIT in the process: no luajit binary or libluajit mapped, and no "
      .. "\"LuaJIT 2.x\" version string in " .. tostring(target.exe)
  end
  if not version:match("^LuaJIT 2%.1") then
    return nil, from .. " is " .. version .. ": only LuaJIT 2.1 is read"
  end
  local found = {}
  local why = scan(target, layout.gc64, found)
  if not next(found) then why = scan(target, layout.gc32, found) or why end
  if not next(found) then
    -- the target runs while it is scanned: memory it mapped and unmapped
    -- meanwhile (a program churning large strings) once hid its state from
    -- the scan; once more, on its mappings read again
    target:refresh()
    target:flush()
    why = scan(target, layout.gc64, found) or why
    if not next(found) then why = scan(target, layout.gc32, found) or why end
  end
  local list = {}
  for _, s in pairs(found) do list[#list + 1] = s end
  table.sort(list, function(a, b) return a.L < b.L end)
  if #list == 0 then
    return nil, ("%s (%s) is mapped, but no LuaJIT state was found in its anonymous "
      .. "memory (a lua_State whose global_State points back to it)%s"):format(
      version, from, why and " (" .. why .. ")" or "")
  end
  local states = {}
  for i, s in ipairs(list) do
    s.GG = s.L
    s.dispatch = s.GG + s.flavour.GG_dispatch
    local lo, hi, m = vm_range(target, s.dispatch)
    if not lo then
      return nil, ("a LuaJIT state at 0x%x has a dispatch table that does not point into "
        .. "executable code: not a layout this reader knows"):format(s.L)
    end
    local flo, fhi = vm_fde(target, m, lo, hi)
    s.vm_lo, s.vm_hi = flo or lo, fhi or hi
    s.vm_exact = flo ~= nil
    s.target, s.protos = target, {}
    states[i] = setmetatable(s, State)
  end
  local first = states[1]
  local st = setmetatable({
    runtime = ("%s (%s%s)"):format(version, first.lay.gc64 and "GC64" or "32-bit GC refs",
      first.flavour.name == "OpenResty" and ", OpenResty" or ""),
    states = {},
    target = target,
  }, { __index = M.Universe })
  for i, s in ipairs(states) do
    st.states[i] = { L = s.L, label = #states == 1 and "main state" or ("state " .. i) }
  end
  st.readers = states
  return st
end

-- The object probe returns: each thread's stack from the state running on
-- it: of the states whose running thread has its VM C frame on this
-- thread's stack, the innermost (the lowest frame: a state called from
-- another one's C function runs above it).
M.Universe = {}
function M.Universe:stack(tid, regs)
  local rsp = regs and regs.rsp
  if not rsp then return nil, "no stack pointer" end
  local best, best_cf
  for _, s in ipairs(self.readers) do
    local cur = ref(s, s.g + s.lay.g_cur_L)
    local cf = cur and gct_of(s, cur) == GCT.thread and on_thread(s, cur, rsp)
    if cf and (not best_cf or cf < best_cf) then best, best_cf = s, cf end
  end
  if not best then return nil, "thread not running Lua (no VM C frame on its stack)", "outside" end
  return best:stack(tid, regs)
end
function M.Universe:close()
  for _, s in ipairs(self.readers) do s:close() end
end

M.shortname = shortname   -- for specs

return M
