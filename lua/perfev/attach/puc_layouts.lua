-- perfev.attach.puc_layouts: where the fields the PUC Lua reader needs lie
-- in the structs of each Lua version Debian ships, on x86_64 (LP64), as
-- data. Derived by hand from the declarations in lstate.h / lobject.h of
-- Lua 5.1.5, 5.3.6 and 5.4.4 (8-byte pointers and size_t, 4-byte int,
-- natural alignment) and checked against running /usr/bin/lua5.x
-- processes (spec/attach_puc_spec.lua). Offsets are in bytes.
--
-- L      lua_State         g      global_State      ci    CallInfo
-- tv     TValue            str    TString           cl    closures
-- proto  Proto             tab    Table             node  hash Node
-- tags   type tags: "gc" is the tag in an object's header, "tv" the tag a
--        TValue holding it has (5.3/5.4 set the collectable bit, 0x40)
-- g_from_L  global_State's distance from the main lua_State: both are
--        allocated in one block (LG), so a main state's l_G is L + this
-- chunkid   which luaO_chunkid rules make short_src ("5.1" or "5.3",
--        5.4 keeps 5.3's)
-- lines     "abs" (5.4: signed byte deltas plus an absolute line every
--        128 instructions at most) or "int" (5.1, 5.3: one int per
--        instruction)
local M = {}

M["5.4"] = {
  version = "5.4",
  L = { size = 200, tt = 8, status = 10, top = 16, l_G = 24, ci = 32,
        stack_last = 40, stack = 48, base_ci = 96, nCcalls = 176, nCcalls_size = 4,
        nCcalls_mask = 0xffff },
  g = { size = 272, l_registry = 64, mainthread = 264 },
  g_from_L = 200,
  ci = { size = 64, func = 0, top = 8, previous = 16, next = 24, savedpc = 32,
         callstatus = 62 },
  tv = { size = 16, tt = 8, tt_size = 1 },
  stackvalue = 16,
  str = { tt = 8, shrlen = 11, lnglen = 16, contents = 24, short_tag = 0x04, long_tag = 0x14 },
  cl = { nupvalues = 10, f = 24, p = 24, upvalue = 32 },
  proto = { size = 128, tt = 8, sizecode = 24, sizelineinfo = 28, sizeabslineinfo = 40, linedefined = 44,
            lastlinedefined = 48, code = 64, lineinfo = 88, abslineinfo = 96, source = 112 },
  tab = { lsizenode = 11, asize = 12, array = 16, node = 24 },
  node = { size = 24, val = 0, val_tt = 8, key_tt = 9, key = 16 },
  tags = {
    thread_gc = 8, proto_gc = 10, lclosure_gc = 6, cclosure_gc = 0x26,
    tv_thread = 0x48, tv_lclosure = 0x46, tv_lcf = 0x16, tv_cclosure = 0x66,
    tv_table = 0x45, tv_shrstr = 0x44, tv_lngstr = 0x54,
  },
  ident = "$LuaVersion: Lua 5.4",
  chunkid = "5.3",
  lines = "abs",
}

M["5.3"] = {
  version = "5.3",
  L = { size = 208, tt = 8, status = 12, top = 16, l_G = 24, ci = 32,
        stack_last = 48, stack = 56, base_ci = 96, nCcalls = 198, nCcalls_size = 2 },
  g = { size = 224, l_registry = 64, mainthread = 200 },
  g_from_L = 208,
  ci = { size = 72, func = 0, top = 8, previous = 16, next = 24, savedpc = 40,
         callstatus = 66 },
  tv = { size = 16, tt = 8, tt_size = 4 },
  stackvalue = 16,
  str = { tt = 8, shrlen = 11, lnglen = 16, contents = 24, short_tag = 0x04, long_tag = 0x14 },
  cl = { nupvalues = 10, f = 24, p = 24, upvalue = 32 },
  proto = { size = 120, tt = 8, sizecode = 24, sizelineinfo = 28, linedefined = 40, lastlinedefined = 44,
            code = 56, lineinfo = 72, source = 104 },
  tab = { lsizenode = 11, asize = 12, array = 16, node = 24 },
  node = { size = 32, val = 0, val_tt = 8, key_tt = 24, key = 16 },
  tags = {
    thread_gc = 8, proto_gc = 9, lclosure_gc = 6, cclosure_gc = 0x26,
    tv_thread = 0x48, tv_lclosure = 0x46, tv_lcf = 0x16, tv_cclosure = 0x66,
    tv_table = 0x45, tv_shrstr = 0x44, tv_lngstr = 0x54,
  },
  ident = "$LuaVersion: Lua 5.3",
  chunkid = "5.3",
  lines = "int",
}

-- 5.1: CallInfo is an array (L->base_ci .. L->end_ci), the running
-- function's pc is L->savedpc (ci->savedpc only for the frames below it),
-- closures carry isC and env, TValue tags have no variant bits.
M["5.1"] = {
  version = "5.1",
  L = { size = 184, tt = 8, status = 10, top = 16, l_G = 32, ci = 40, savedpc = 48,
        stack_last = 56, stack = 64, end_ci = 72, base_ci_ptr = 80, nCcalls = 96, nCcalls_size = 2 },
  g = { size = 176 + 8, l_registry = 160, mainthread = 176 },
  g_from_L = 184,
  ci = { size = 40, base = 0, func = 8, top = 16, savedpc = 24 },
  tv = { size = 16, tt = 8, tt_size = 4 },
  stackvalue = 16,
  str = { tt = 8, len = 16, contents = 24, short_tag = 4 },
  cl = { isC = 10, nupvalues = 11, f = 32, p = 32, upvalue = 40 },
  proto = { size = 120, tt = 8, code = 24, lineinfo = 40, source = 64, sizecode = 80, sizelineinfo = 84,
            linedefined = 96, lastlinedefined = 100 },
  tab = { lsizenode = 11, array = 24, node = 32, asize = 56 },
  node = { size = 40, val = 0, val_tt = 8, key_tt = 24, key = 16 },
  tags = {
    thread_gc = 8, proto_gc = 9, closure_gc = 6,
    tv_thread = 8, tv_function = 6, tv_table = 5, tv_string = 4,
  },
  ident = "$Lua: Lua 5.1",
  chunkid = "5.1",
  lines = "int",
}

return M
