-- perfev.attach.puc: the reader of PUC Lua 5.1, 5.3 and 5.4 states in
-- another process (doc/attach.md, "PUC Lua 5.1, 5.3, 5.4"). It only reads
-- the target's memory through the engine's target object (ATTACH.md):
--   probe(target)   recognises the version (the lua_ident string in
--                   memory, else "$LuaVersion: ..." in a mapped file) and
--                   finds each state by a validated scan of the heap: a
--                   lua_State whose l_G points right after it (one LG
--                   block) to a global_State whose mainthread points back
--   state:stack()   walks the CallInfo chain of the running thread of the
--                   state (a coroutine found from its resumer's
--                   coroutine.resume / wrap frame), root first
-- Struct offsets are data: perfev.attach.puc_layouts.
local layouts = require "perfev.attach.puc_layouts"
local mem = require "perfev.attach.puc_mem"

local u8, u16, u32, i32, ptr = mem.u8, mem.u16, mem.u32, mem.i32, mem.ptr
local byte = string.byte

local M = { name = "PUC Lua 5.1/5.3/5.4" }

local MAX_FRAMES = 20000       -- deeper than this: dropped, not cut
local MAX_CHAIN = 200          -- nested coroutines (LUAI_MAXCCALLS)
local SCAN_CHUNK = 1024 * 1024
local SCAN_LIMIT = 2 ^ 31      -- bytes the probe scans at most (a sanitizer's shadow is terabytes)
local IDSIZE = 60              -- LUA_IDSIZE in Debian's luaconf.h (5.1, 5.3, 5.4)

local State = {}
State.__index = State

-- Version ------------------------------------------------------------------

local function basename(p) return p:match("[^/]*$") end

local function read_file(path, max)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read(max)
  f:close()
  return s
end

-- the mapped objects worth looking at: the executable and any library
-- whose name says Lua
local function lua_objects(target)
  local list, seen = {}, {}
  for _, m in ipairs(target.maps or {}) do
    local p = m.path
    if p and p:sub(1, 1) == "/" and not seen[p]
       and (p == target.exe or basename(p):lower():find("lua", 1, true)) then
      seen[p] = true
      list[#list + 1] = p
    end
  end
  return list
end

-- "Lua 5.4.4" and the layout, or nil, why
local function find_version(target)
  local objects = lua_objects(target)
  for _, p in ipairs(objects) do
    local b = basename(p):lower()
    if b:find("luajit", 1, true) then
      return nil, ("%s is LuaJIT, not PUC Lua (the LuaJIT reader reads it)"):format(p)
    end
  end
  for _, p in ipairs(objects) do
    local pattern = "^" .. p:gsub("%p", "%%%0") .. "$"
    local ok, addr = pcall(target.symbol, target, "lua_ident", pattern)
    local s = ok and addr and target:cstring(addr, 128)
    local v = s and (s:match("^%$LuaVersion: Lua (5%.%d+%.%d+)") or s:match("^%$Lua: Lua (5%.1%.%d+)"))
    if v then return v, "lua_ident in " .. p end
  end
  local tried = {}
  for _, p in ipairs(objects) do
    local s = read_file((target.root or "") .. p, 16 * 1024 * 1024) or read_file(p, 16 * 1024 * 1024)
    if s then
      if s:find("LuaJIT 2.", 1, true) and not s:find("$LuaVersion: Lua 5.", 1, true) then
        return nil, ("%s holds LuaJIT, not PUC Lua (the LuaJIT reader reads it)"):format(p)
      end
      local v = s:match("%$LuaVersion: Lua (5%.%d+%.%d+)") or s:match("%$Lua: Lua (5%.1%.%d+)")
      if v then return v, p end
    end
    tried[#tried + 1] = p
  end
  return nil, ("no PUC Lua version string (lua_ident, \"$LuaVersion: Lua 5.x.y\") in the target's "
               .. "executable or Lua libraries (looked in: %s)"):format(
               #tried > 0 and table.concat(tried, ", ") or "no mapped object named lua, "
               .. tostring(target.exe))
end

-- Memory helpers -----------------------------------------------------------

local R = ("r"):byte()

-- whether the len bytes at addr lie in one readable mapping of the target
local function in_maps(target, addr, len)
  if type(addr) ~= "number" or addr <= 0 then return false end
  local m = target:region(addr, len)
  return m ~= nil and m.perms:byte(1) == R
end

-- reads len bytes at addr; a read of memory the target does not map fails
-- (process_vm_readv), so the mappings are looked at only then, to say why
-- (an address outside the known mappings has them read again, once per
-- stack: the target maps memory as it runs)
local function rd(st, addr, len, what)
  if type(addr) ~= "number" or addr <= 0 then
    return nil, ("%s at 0x%x is outside the target's mappings"):format(what, tonumber(addr) or 0)
  end
  local s, err = st.target:read(addr, len)
  if s and #s >= len then return s end
  if not in_maps(st.target, addr, len) and st.may_refresh and st.target.refresh then
    st.may_refresh = false
    st.target:refresh()
  end
  if not in_maps(st.target, addr, len) then
    return nil, ("%s at 0x%x is outside the target's mappings"):format(what, addr)
  end
  return nil, ("cannot read %s at 0x%x: %s"):format(what, addr, tostring(err))
end

-- a TString's text
local function tstring(st, addr)
  local lay = st.lay
  local s = rd(st, addr, lay.str.contents + 120, "string")
  if not s then
    local err
    s, err = rd(st, addr, lay.str.contents + 1, "string")
    if not s then return nil, err end
  end
  local tt = u8(s, lay.str.tt)
  local len
  if lay.version == "5.1" then
    if tt ~= 4 then return nil, ("object at 0x%x is no string (tag %d)"):format(addr, tt) end
    len = ptr(s, lay.str.len)
  elseif tt == lay.str.short_tag then
    len = u8(s, lay.str.shrlen)
  elseif tt == lay.str.long_tag then
    len = ptr(s, lay.str.lnglen)
  else
    return nil, ("object at 0x%x is no string (tag %d)"):format(addr, tt)
  end
  if not len or len > 65536 then return nil, ("string at 0x%x has a bad length"):format(addr) end
  if lay.str.contents + len <= #s then
    return s:sub(lay.str.contents + 1, lay.str.contents + len)
  end
  return rd(st, addr + lay.str.contents, len, "string contents")
end

-- short_src as luaO_chunkid makes it from a chunk name
local function chunkid(rules, source)
  local n = #source
  local first = source:sub(1, 1)
  if rules == "5.1" then
    if first == "=" then return source:sub(2, IDSIZE) end
    if first == "@" then
      local name, room = source:sub(2), IDSIZE - 8
      if #name > room then return "..." .. name:sub(-room) end
      return name
    end
    local len = (source:find("[\n\r]") or (n + 1)) - 1
    local room = IDSIZE - 17
    if len > room then len = room end
    if len < n then return '[string "' .. source:sub(1, len) .. '..."]' end
    return '[string "' .. source .. '"]'
  end
  -- 5.3 / 5.4
  if first == "=" then
    if n <= IDSIZE then return source:sub(2) end
    return source:sub(2, IDSIZE)
  end
  if first == "@" then
    if n <= IDSIZE then return source:sub(2) end
    return "..." .. source:sub(n - (IDSIZE - 3) + 2)
  end
  local room = IDSIZE - 15
  local nl = source:find("\n", 1, true)
  if n < room and not nl then return '[string "' .. source .. '"]' end
  local len = nl and nl - 1 or n
  if len > room then len = room end
  return '[string "' .. source:sub(1, len) .. '..."]'
end
M.chunkid = chunkid

-- Threads ------------------------------------------------------------------

-- reads and checks a lua_State of this state's global_State
local function thread(st, L)
  local lay = st.lay
  local s, err = rd(st, L, lay.L.size, "lua_State")
  if not s then return nil, err end
  if u8(s, lay.L.tt) ~= lay.tags.thread_gc then
    return nil, ("0x%x is no thread (tag %d)"):format(L, u8(s, lay.L.tt))
  end
  if ptr(s, lay.L.l_G) ~= st.g then
    return nil, ("thread 0x%x belongs to another global_State"):format(L)
  end
  local t = { L = L, raw = s, status = u8(s, lay.L.status), ci = ptr(s, lay.L.ci),
              top = ptr(s, lay.L.top), stack = ptr(s, lay.L.stack),
              stack_last = ptr(s, lay.L.stack_last) }
  local nc = lay.L.nCcalls_size == 4 and u32(s, lay.L.nCcalls) or u16(s, lay.L.nCcalls)
  if lay.L.nCcalls_mask then nc = nc % (lay.L.nCcalls_mask + 1) end
  t.nCcalls = nc
  if lay.version == "5.1" then
    t.base_ci = ptr(s, lay.L.base_ci_ptr)
    t.end_ci = ptr(s, lay.L.end_ci)
    t.savedpc = ptr(s, lay.L.savedpc)
  else
    t.base_ci = L + lay.L.base_ci
  end
  if not (t.ci and t.top and t.stack and t.stack_last and t.base_ci) then
    return nil, ("thread 0x%x has a field that is no pointer"):format(L)
  end
  if t.top < t.stack or t.top > t.stack_last + 5 * lay.stackvalue + 64 * lay.stackvalue then
    return nil, ("thread 0x%x: top outside its stack"):format(L)
  end
  t.active = t.status == 0 and t.ci ~= t.base_ci
  return t
end

-- A TValue's tag and value word at addr (already read as s at o)
local function tv(lay, s, o)
  local tt = lay.tv.tt_size == 1 and u8(s, o + lay.tv.tt) or u32(s, o + lay.tv.tt)
  return tt, ptr(s, o)
end

-- what kind of function a TValue holds: "lua", "c" (address of the C
-- function), or nil
local function func_kind(st, tt, v)
  local lay, tags = st.lay, st.lay.tags
  if lay.version == "5.1" then
    if tt ~= tags.tv_function or not v then return nil end
    local s, err = rd(st, v, lay.cl.upvalue, "closure")
    if not s then return nil, err end
    if u8(s, 8) ~= tags.closure_gc then return nil, "function value is no closure" end
    if u8(s, lay.cl.isC) ~= 0 then return "c", ptr(s, lay.cl.f), s end
    return "lua", ptr(s, lay.cl.p), s
  end
  if tt == tags.tv_lcf then return "c", v end
  if not v then return nil end
  if tt == tags.tv_cclosure then
    local s, err = rd(st, v, lay.cl.upvalue, "C closure")
    if not s then return nil, err end
    if u8(s, 8) ~= tags.cclosure_gc then return nil, "C closure has a wrong tag" end
    return "c", ptr(s, lay.cl.f), s
  end
  if tt == tags.tv_lclosure then
    local s, err = rd(st, v, lay.cl.upvalue, "Lua closure")
    if not s then return nil, err end
    if u8(s, 8) ~= tags.lclosure_gc then return nil, "Lua closure has a wrong tag" end
    return "lua", ptr(s, lay.cl.p), s
  end
  return nil, ("call frame's function has tag 0x%x"):format(tt)
end

-- Tables (for C function names) --------------------------------------------

-- calls fn(key string, tag, value word) for each string key of a table's
-- hash part
local function each_string_key(st, taddr, fn)
  local lay = st.lay
  local s = rd(st, taddr, lay.tab.node + 8, "table")
  if not s then return end
  local lsize, node = u8(s, lay.tab.lsizenode), ptr(s, lay.tab.node)
  if not node or lsize > 16 then return end
  local n = math.floor(2 ^ lsize)
  local ns = rd(st, node, n * lay.node.size, "table nodes")
  if not ns then return end
  for i = 0, n - 1 do
    local o = i * lay.node.size
    local ktt = lay.version == "5.4" and u8(ns, o + lay.node.key_tt) or u32(ns, o + lay.node.key_tt)
    local isstr
    if lay.version == "5.1" then isstr = ktt == lay.tags.tv_string
    else isstr = ktt == lay.tags.tv_shrstr or ktt == lay.tags.tv_lngstr end
    if isstr then
      local vtt, v = tv(lay, ns, o + lay.node.val)
      local k = tstring(st, ptr(ns, o + lay.node.key))
      if k then fn(k, vtt, v) end
    end
  end
end

local function table_tag(lay)
  return lay.version == "5.1" and lay.tags.tv_table or lay.tags.tv_table
end

-- address of each C function in package.loaded's tables -> its name, as
-- Lua's own traceback names it ("_G." left out)
local function c_names(st)
  local lay = st.lay
  local gs = rd(st, st.g + lay.g.l_registry, 16, "registry")
  if not gs then return {} end
  local rtt, reg = tv(lay, gs, 0)
  if rtt ~= table_tag(lay) then return {} end
  local loaded
  each_string_key(st, reg, function(k, vtt, v)
    if k == "_LOADED" and vtt == table_tag(lay) then loaded = v end
  end)
  local names = {}
  if not loaded then return names end
  local mods = {}
  each_string_key(st, loaded, function(k, vtt, v)
    if vtt == table_tag(lay) then mods[#mods + 1] = { k, v } end
  end)
  table.sort(mods, function(a, b)
    if (a[1] == "_G") ~= (b[1] == "_G") then return a[1] == "_G" end
    return a[1] < b[1]
  end)
  for _, m in ipairs(mods) do
    each_string_key(st, m[2], function(k, vtt, v)
      local kind, addr = func_kind(st, vtt, v)
      if kind == "c" and addr and not names[addr] then
        names[addr] = m[1] == "_G" and k or (m[1] .. "." .. k)
      end
    end)
  end
  return names
end

-- A C function's name: the tables are read again (a library loaded since)
-- when a function neither named nor found unnamed by the last reading is
-- met, at most every 2 s; a function still unnamed then is not asked about
-- again until the next reading (the interpreter's own root C function is
-- in every stack: reading the tables for it at each sample, or every 2 s,
-- held the target for milliseconds).
function State:cname(addr)
  local name = self.cnames[addr]
  if name ~= nil or self.unnamed[addr] then return name end
  if not self.cnames_at or os.time() - self.cnames_at >= 2 then
    self.cnames, self.unnamed, self.cnames_at = c_names(self), {}, os.time()
    name = self.cnames[addr]
    if name == nil then self.unnamed[addr] = true end
  end
  return name
end

-- Frames -------------------------------------------------------------------

-- the fields of a Proto read as s
local function proto_fields(lay, s)
  local P = lay.proto
  local info = {
    linedefined = i32(s, P.linedefined), lastlinedefined = i32(s, P.lastlinedefined),
    code = ptr(s, P.code), sizecode = i32(s, P.sizecode), lineinfo = ptr(s, P.lineinfo),
    sizelineinfo = i32(s, P.sizelineinfo), source = ptr(s, P.source),
  }
  if P.abslineinfo then
    info.abslineinfo = ptr(s, P.abslineinfo)
    info.sizeabslineinfo = i32(s, P.sizeabslineinfo)
  end
  return info
end

local PROTO_KEYS = { "linedefined", "lastlinedefined", "code", "sizecode", "lineinfo", "sizelineinfo",
                     "source", "abslineinfo", "sizeabslineinfo" }
local GC_HEADER = 10   -- CommonHeader (next, tt, marked): the collector changes it

-- A Proto's fields, its source (chunk name) and short_src, kept by its
-- address from one sample to the next. The Proto is read again at each
-- sample and compared with the one kept (past its GC header, then field
-- by field: the collector writes its gclist), and so is its source's text:
-- a chunk loaded where a collected one was, whatever the addresses it
-- reuses, never gets the old one's name. The line information is read at
-- each sample (lines_of), not kept.
local function proto_info(st, p)
  local lay = st.lay
  local P = lay.proto
  local s, err = rd(st, p, P.size, "Proto")
  if not s then return nil, err end
  if u8(s, P.tt) ~= lay.tags.proto_gc then return nil, ("0x%x is no Proto"):format(p) end
  local body = s:sub(GC_HEADER + 1)
  local info = st.protos[p]
  if not (info and info.body == body) then
    local fresh = proto_fields(lay, s)
    if not fresh.code or fresh.sizecode <= 0 or fresh.sizecode > 1e8 then
      return nil, ("Proto 0x%x has no code"):format(p)
    end
    if info then
      for _, k in ipairs(PROTO_KEYS) do
        if fresh[k] ~= info[k] then info = nil break end
      end
      -- (a Proto collected, another at its address: counted for the specs)
      if not info then st.reused = st.reused + 1 end
    end
    if not info then
      info = fresh
      if not st.protos[p] then
        st.nprotos = st.nprotos + 1
        if st.nprotos > 4096 then st.protos, st.nprotos = {}, 1 end
      end
      st.protos[p] = info
    end
    info.body = body
  end
  local text = "=?"
  if info.source ~= 0 then
    text, err = tstring(st, info.source)
    if not text then return nil, err end
  end
  if text ~= info.source_text then
    if info.source_text then st.reused = st.reused + 1 end   -- the same fields, another chunk name
    info.source_text, info.short_src = text, chunkid(lay.chunkid, text)
  end
  return info
end

-- len bytes of a Proto's line information from byte off (read at each
-- sample: see proto_info)
local function line_bytes(st, base, off, len)
  return rd(st, base + off, len, "line information")
end

-- the line of instruction pc (0-based) of a Proto
local function line_of(st, info, pc)
  if not info.lineinfo or info.lineinfo == 0 then return -1 end
  if pc < 0 then return info.linedefined end
  if pc >= info.sizelineinfo then return nil, "pc beyond the line information" end
  if st.lay.lines == "int" then
    local s = line_bytes(st, info.lineinfo, 4 * pc, 4)
    if not s or #s < 4 then return nil, "cannot read the line information" end
    return i32(s, 0)
  end
  -- 5.4: the last absolute line at or before pc, plus the byte deltas after it
  local basepc, line = -1, info.linedefined
  local nabs = info.sizeabslineinfo or 0
  if nabs > 0 and info.abslineinfo and info.abslineinfo ~= 0 then
    local s = line_bytes(st, info.abslineinfo, 0, 8 * nabs)
    if not s or #s < 8 * nabs then return nil, "cannot read the absolute line information" end
    for i = 0, nabs - 1 do
      local apc = i32(s, 8 * i)
      if apc > pc then break end
      basepc, line = apc, i32(s, 8 * i + 4)
    end
  end
  if pc > basepc then
    local n = pc - basepc
    local s = line_bytes(st, info.lineinfo, basepc + 1, n)
    if not s or #s < n then return nil, "cannot read the line information" end
    for i = 1, n do
      local d = byte(s, i)
      line = line + (d >= 128 and d - 256 or d)
    end
  end
  return line
end

-- a Lua frame from a Proto and its saved pc
local function lua_frame(st, p, savedpc)
  local info, err = proto_info(st, p)
  if not info then return nil, err end
  local line = -1
  if savedpc and savedpc ~= 0 then
    local off = savedpc - info.code
    if off < 0 or off > 4 * info.sizecode or off % 4 ~= 0 then
      return nil, "saved pc outside its function's code"
    end
    local lerr
    line, lerr = line_of(st, info, math.floor(off / 4) - 1)
    if not line then return nil, lerr end
  end
  return {
    what = info.linedefined == 0 and "main" or "Lua",
    source = info.short_src,
    line = line, linedefined = info.linedefined,
  }
end

local function c_frame(st, addr)
  return { what = "C", name = addr and st:cname(addr) or nil, source = "[C]", line = -1,
           linedefined = -1, address = addr }
end

-- len bytes of thread t's stack at addr: from one read of the used part
-- of the stack (up to SLICE_MAX bytes), kept with t for this sample
local SLICE_MAX = 64 * 1024
local function stack_bytes(st, t, addr, len)
  if t.slice == nil then
    local n = t.top - t.stack
    t.slice = n > 0 and n <= SLICE_MAX and rd(st, t.stack, n, "Lua stack") or false
  end
  local o = addr - t.stack
  if t.slice and o >= 0 and o + len <= #t.slice then return t.slice:sub(o + 1, o + len) end
  return rd(st, addr, len, "Lua stack slot")
end

-- the frame of one CallInfo: func is the address of its function's slot
local function frame_of(st, t, func, savedpc)
  local lay = st.lay
  if func < t.stack or func > t.stack_last + 8 * lay.stackvalue then
    return nil, "call frame's function outside its thread's stack"
  end
  local s, err = stack_bytes(st, t, func, lay.tv.size)
  if not s then return nil, err end
  local tt, v = tv(lay, s, 0)
  local kind, x = func_kind(st, tt, v)
  if kind == "c" then return c_frame(st, x), nil, x end
  if kind == "lua" then return lua_frame(st, x, savedpc) end
  return nil, x or "call frame holds no function"
end

-- the CallInfos of thread t, base first: { func =, savedpc = } each
local function callinfos(st, t)
  local lay = st.lay
  local C = lay.ci
  local list = {}
  if lay.version == "5.1" then
    local d = t.ci - t.base_ci
    if d < 0 or d % C.size ~= 0 or t.ci >= t.end_ci then return nil, "current CallInfo outside its array" end
    local n = math.floor(d / C.size)
    if n > MAX_FRAMES then return nil, ("more than %d frames"):format(MAX_FRAMES) end
    if n == 0 then return list end
    local s, err = rd(st, t.base_ci + C.size, n * C.size, "CallInfo array")
    if not s then return nil, err end
    for i = 0, n - 1 do
      local o = i * C.size
      list[#list + 1] = { func = ptr(s, o + C.func), savedpc = i == n - 1 and t.savedpc or ptr(s, o + C.savedpc) }
    end
    return list
  end
  local ci, rev = t.ci, {}
  while ci ~= t.base_ci do
    if #rev >= MAX_FRAMES then return nil, ("more than %d frames"):format(MAX_FRAMES) end
    local s, err = rd(st, ci, C.size, "CallInfo")
    if not s then return nil, err end
    local func = ptr(s, C.func)
    if not func then return nil, "CallInfo with a bad function pointer" end
    rev[#rev + 1] = { func = func, savedpc = ptr(s, C.savedpc), callstatus = u16(s, C.callstatus) }
    ci = ptr(s, C.previous)
    if not ci or ci == 0 then return nil, "CallInfo chain does not reach the base" end
  end
  for i = #rev, 1, -1 do list[#list + 1] = rev[i] end
  return list
end

-- the thread that thread t's top C frame resumes (coroutine.resume's first
-- argument, coroutine.wrap's upvalue), if it is active and deeper
local function resumed_by(st, t, top, visited)
  local lay = st.lay
  if not top or not top.func then return nil end
  local s = stack_bytes(st, t, top.func, lay.tv.size)
  if not s then return nil end
  local tt, v = tv(lay, s, 0)
  local kind, _, raw = func_kind(st, tt, v)
  if kind ~= "c" then return nil end
  local cands = {}
  local nargs = math.floor((t.top - top.func) / lay.stackvalue) - 1
  if nargs > 8 then nargs = 8 end
  if nargs > 0 then
    local a = stack_bytes(st, t, top.func + lay.stackvalue, nargs * lay.stackvalue)
    if a then
      for i = 0, nargs - 1 do
        local att, av = tv(lay, a, i * lay.stackvalue)
        if att == lay.tags.tv_thread then cands[#cands + 1] = av end
      end
    end
  end
  if raw then   -- a C closure: its upvalues (coroutine.wrap's function holds the thread)
    local nup = u8(raw, lay.cl.nupvalues)
    if nup > 0 and nup <= 8 then
      local u = rd(st, v + lay.cl.upvalue, nup * lay.tv.size, "upvalues")
      if u then
        for i = 0, nup - 1 do
          local utt, uv = tv(lay, u, i * lay.tv.size)
          if utt == lay.tags.tv_thread then cands[#cands + 1] = uv end
        end
      end
    end
  end
  for _, L in ipairs(cands) do
    if not visited[L] then
      local c = thread(st, L)
      if c and c.active and c.nCcalls > t.nCcalls then return c end
    end
  end
  return nil
end

-- The words of thread tid's registers, then those of the top of its
-- native stack from rsp (within its mapping), read in growing steps up to
-- NATIVE_WINDOW bytes: where the running lua_State of a C host's
-- lua_resume, or the state a thread runs, shows. words(i) is the i-th word
-- (nil past the end); reads happen only as far as asked.
local STEPS = { 1024, 4096, 16384 }
M.NATIVE_WINDOW = STEPS[#STEPS]

local unpack = rawget(string, "unpack")
local WORDS64 = unpack and "<" .. ("i8"):rep(64)

local function decode_words(s, into)
  local n = #into
  if unpack then
    for o = 1, #s - 511, 512 do
      local t = { unpack(WORDS64, s, o) }
      for i = 1, 64 do n = n + 1; into[n] = t[i] end
    end
    for o = #s - #s % 512, #s - 8, 8 do n = n + 1; into[n] = unpack("<i8", s, o + 1) end
  else
    for o = 0, #s - 8, 8 do n = n + 1; into[n] = ptr(s, o) or -1 end
  end
end

local function native_words(self, regs)
  local words, started = {}, false
  local rsp, limit, done, step = regs and regs.rsp, 0, 0, 0
  return function(i)
    if not started then   -- on the first word asked for (one state and a Lua top: never)
      started = true
      for _, v in pairs(regs or {}) do
        if type(v) == "number" then words[#words + 1] = v end
      end
      if type(rsp) == "number" and rsp > 0 then
        local m = self.target:region(rsp)
        if m then limit = m.hi - rsp end
      end
    end
    while i > #words and step < #STEPS and done < limit do
      step = step + 1
      local upto = math.min(STEPS[step], limit)
      upto = upto - upto % 8
      local s = upto > done and self.target:read(rsp + done, upto - done)
      if not s then limit = 0; break end
      decode_words(s, words)
      done = upto
    end
    return words[i]
  end
end

local MAX_TRIES = 256

local W = ("w"):byte()

-- whether w is 8-aligned and in writable memory other than the native
-- stack (stack: its mapping; a lua_State is never there)
local function writable(target, w, stack)
  if w <= 0 or w % 8 ~= 0 then return false end
  local m = target:region(w)
  return m ~= nil and m ~= stack and m.perms:byte(2) == W
end

-- The words found not to point at a thread, kept for 2 s: the native
-- stack holds mostly the same words from one sample to the next, and a
-- word is checked by a read. (A thread made since at such an address is
-- found once they are dropped.)
local NOT_THREAD_KEEP = 2

-- the mapping of the native stack of the sampled thread
local function stack_map(self)
  local rsp = self.regs and self.regs.rsp
  return type(rsp) == "number" and self.target:region(rsp) or nil
end

local function not_threads(self)
  local now = os.time()
  if not self.not_thread or now - self.not_thread_at >= NOT_THREAD_KEEP then
    self.not_thread, self.not_thread_at = {}, now
  end
  return self.not_thread
end

-- the global_State of the thread object at w when it is one of gs's, else nil
local function thread_g(self, w, gs)
  local head = self.target:read(w, self.lay.L.l_G + 8)
  if head and u8(head, self.lay.L.tt) == self.lay.tags.thread_gc then
    local g = ptr(head, self.lay.L.l_G)
    if g and gs[g] then return g end
  end
end

-- which of the process's states thread tid runs: the one whose main
-- thread or global_State a register or the native stack's top points at,
-- else the one of a thread (a coroutine) they point at
local function pick_state(self, words)
  if #self.states == 1 then return self.states[1] end
  local want, gs = {}, {}
  for _, s in ipairs(self.states) do want[s.L] = s; want[s.g] = s; gs[s.g] = s end
  local i = 1
  while true do
    local v = words(i)
    if v == nil then break end
    if want[v] then return want[v] end
    i = i + 1
  end
  local tried, target, stack, neg = 0, self.target, stack_map(self), not_threads(self)
  for pass = 1, 2 do
    i = 1
    while tried < MAX_TRIES do
      local w = words(i)
      if w == nil then break end
      i = i + 1
      if (pass == 1 and self.known[w]) or (pass == 2 and not self.known[w] and writable(target, w, stack)) then
        tried = tried + 1
        if not neg[w] then
          local g = thread_g(self, w, gs)
          if g then self.known[w] = g; return gs[g] end
          neg[w] = true
        end
      end
    end
  end
  return nil
end

-- the active threads of this global_State that words point at, by nesting
-- (nCcalls) ascending: threads already seen (self.known) are checked
-- first; other words only when none of those is found, when 8-aligned in
-- writable memory, at most MAX_TRIES of them, each read and checked by
-- thread()
local function native_threads(self, words, visited)
  local target, found, seen, gs = self.target, {}, {}, { [self.g] = true }
  local stack, neg = stack_map(self), not_threads(self)
  local function try(w)
    seen[w] = true
    local c = thread(self, w)
    if c then self.known[w] = self.g end
    if c and c.active then found[#found + 1] = c end
  end
  local i = 1
  while true do
    local w = words(i)
    if w == nil then break end
    if self.known[w] == self.g and not visited[w] and not seen[w] then try(w) end
    i = i + 1
  end
  if #found == 0 then
    local tried = 0
    i = 1
    while tried < MAX_TRIES do
      local w = words(i)
      if w == nil then break end
      i = i + 1
      if not visited[w] and not seen[w] and not self.known[w] and writable(target, w, stack) then
        seen[w] = true
        tried = tried + 1
        if not neg[w] then
          if thread_g(self, w, gs) then try(w) else neg[w] = true end
        end
      end
    end
  end
  table.sort(found, function(a, b) return a.nCcalls < b.nCcalls end)
  return found
end

-- Whether the C function at addr is one of the Lua runtime's own library
-- functions that resume no coroutine: in the interpreter (lua5.x) or the
-- Lua library (liblua5.x) itself, named from package.loaded, and not one
-- of coroutine's (coroutine.resume and wrap's function, unnamed, are
-- followed by their argument or upvalue, and by the native stack). Those
-- call Lua only through lua_call (a CallInfo on the same thread): no
-- coroutine runs above them, and the native stack is not searched for one.
-- A host's own functions, C modules, and a host linking Lua statically are
-- searched as before.
local function runtime_leaf(self, addr)
  if not addr then return false end
  local name = self:cname(addr)
  if not name or name:sub(1, 10) == "coroutine." then return false end
  local m = self.target:region(addr)
  local base = m and m.path and m.path:match("[^/]*$")
  return base ~= nil and m.perms:sub(3, 3) == "x"
         and (base:match("^lua5%.%d$") or base:match("^liblua5%.%d%.so")) ~= nil
end

function State:stack(tid, regs)
  local _ = tid
  self.may_refresh, self.regs = true, regs
  local words = native_words(self, regs)
  local which = pick_state(self, words)
  if not which then return nil, "no known Lua state in the thread's registers or native stack", "outside" end
  self.g, self.L = which.g, which.L
  local t, err = thread(self, which.L)
  if not t then return nil, err end
  if not t.active then return nil, "the Lua state is not running Lua code", "outside" end
  local frames, visited, native = {}, {}, nil
  local depth = 0
  while t do
    depth = depth + 1
    if depth > MAX_CHAIN then return nil, "coroutine chain too long" end
    visited[t.L] = true
    local cis, cerr = callinfos(self, t)
    if not cis then return nil, cerr end
    local top_is_c, top_c = false, nil
    for _, ci in ipairs(cis) do
      local f, ferr, caddr = frame_of(self, t, ci.func, ci.savedpc)
      if not f then return nil, ferr end
      frames[#frames + 1] = f
      top_is_c, top_c = f.what == "C", caddr
      f.address = nil
      if #frames > MAX_FRAMES then return nil, ("more than %d frames"):format(MAX_FRAMES) end
    end
    local nxt = top_is_c and resumed_by(self, t, cis[#cis], visited) or nil
    if not nxt and top_is_c and not runtime_leaf(self, top_c) then
      -- a C function may resume a coroutine it holds elsewhere (a host's
      -- lua_resume): that coroutine's lua_State is on the native stack
      native = native or native_threads(self, words, visited)
      -- (every active thread is on the chain of resumes: one not seen yet is
      -- further down it; the least nested first)
      for _, c in ipairs(native) do
        if not visited[c.L] then nxt = c; break end
      end
    end
    t = nxt
  end
  if #frames == 0 then return nil, "the Lua state is not running Lua code", "outside" end
  return frames
end

function State:close() self.protos, self.nprotos = {}, 0 end

-- Probe --------------------------------------------------------------------

-- lua_States of the layout in the writable anonymous memory: a word at
-- L + l_G equal to L + g_from_L, with a thread's tag, whose global_State's
-- mainthread is L
local function scan(target, lay)
  local found, seen = {}, {}
  local lG, gL, ttoff = lay.L.l_G, lay.g_from_L, lay.L.tt
  local scanned = 0
  for _, m in ipairs(target.maps) do
    local anon = m.path == nil or m.path == "" or m.path == "[heap]"
    if anon and m.perms:sub(1, 2) == "rw" then
      local addr = m.lo
      while addr < m.hi and scanned < SCAN_LIMIT do
        local len = math.min(SCAN_CHUNK, m.hi - addr)
        local s = target:read(addr, len)
        if not s then break end
        scanned = scanned + len
        local last = #s - lG - 8
        for o = 0, last, 8 do
          local w
          if unpack then w = unpack("<i8", s, o + lG + 1)
          else w = ptr(s, o + lG) end
          if w == addr + o + gL and s:byte(o + ttoff + 1) == lay.tags.thread_gc then
            if not seen[addr + o] then seen[addr + o] = true; found[#found + 1] = addr + o end
          end
        end
        addr = addr + len - lG - 8
        if len < SCAN_CHUNK then break end
      end
    end
  end
  local states = {}
  for _, L in ipairs(found) do
    local main = target:ptr(L + gL + lay.g.mainthread)
    if main == L then states[#states + 1] = L end
  end
  return states, scanned
end

function M.probe(target)
  local version, where = find_version(target)
  if not version then return nil, where end
  local major = version:match("^(5%.%d+)")
  local lay = layouts[major]
  if not lay then
    return nil, ("the target runs Lua %s (from %s): perfev reads PUC Lua 5.1, 5.3 and 5.4 only")
      :format(version, where)
  end
  local found, scanned = scan(target, lay)
  local st = setmetatable({ target = target, lay = lay, runtime = "Lua " .. version,
                            version_from = where, states = {}, protos = {}, nprotos = 0, reused = 0,
                            cnames = {}, unnamed = {}, known = {} }, State)
  for _, L in ipairs(found) do
    st.g, st.L = L + lay.g_from_L, L
    local t = thread(st, L)
    if t then st.states[#st.states + 1] = { L = L, g = L + lay.g_from_L } end
  end
  if #st.states == 0 then
    return nil, ("Lua %s (version from %s), but no lua_State of its layout in %d bytes of the "
                 .. "target's heap and anonymous memory"):format(version, where, scanned)
  end
  for i, s in ipairs(st.states) do
    s.label = #st.states == 1 and "main state" or ("state %d (L=0x%x)"):format(i, s.L)
  end
  st.g, st.L = st.states[1].g, st.states[1].L
  st.cnames = c_names(st)
  st.cnames_at = os.time()
  return st
end

return M
