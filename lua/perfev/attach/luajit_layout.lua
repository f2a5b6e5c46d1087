-- The struct layouts of LuaJIT 2.1 on x86_64, as data, for the attach
-- reader (perfev.attach.luajit). Byte offsets, derived from the headers of
-- the versions Debian 12 ships (lj_obj.h, lj_frame.h, lj_jit.h,
-- lj_dispatch.h of OpenResty's luajit2 v2.1-20230119 and of LuaJIT v2.1 at
-- 2022-03-20, the source of Debian's 2.1.0~beta3+git20220320) with offsetof
-- in a throwaway program, and checked against live processes
-- (spec/attach_luajit_spec.lua). Both flavours share every offset below
-- except the size of lua_State: OpenResty's adds exdata and exdata2, which
-- moves global_State, jit_State and the dispatch table in GG_State. The
-- reader tells the flavours apart by that size (lua_State.glref of the main
-- thread points right after it).
local M = {}

-- Fields common to both flavours, by mode.
M.gc64 = {
  gc64 = true,
  ptr = 8,                 -- GCRef / MRef size
  slot = 8,                -- TValue size
  fr2 = true,              -- two-slot frames: func at base-2, ftsz/PC at base-1
  -- GCHeader
  gct = 9,                 -- marked at 8, gct at 9 (every GC object)
  -- lua_State
  L_dummy_ffid = 10, L_status = 11, L_glref = 16, L_base = 32, L_top = 40,
  L_maxstack = 48, L_stack = 56, L_cframe = 80, L_stacksize = 88,
  -- global_State
  g_strempty = 120, g_hookmask = 145, g_vmstate = 184, g_mainthref = 192,
  g_registrytv = 272, g_cur_L = 368, g_jit_base = 376,
  -- jit_State
  J_trace = 384, J_sizetrace = 396,
  -- GCproto (its bytecode follows it)
  pt_size = 104, pt_sizebc = 12, pt_chunkname = 64, pt_firstline = 72,
  pt_numline = 76, pt_lineinfo = 80,
  -- GCfunc
  fn_ffid = 10, fn_nupvalues = 11, fn_pc = 32, fn_f = 40, fn_upvalue = 48,
  -- GCstr (its bytes follow it)
  str_size = 24, str_len = 20,
  -- GCtrace
  tr_startpt = 64, tr_startpc = 72, tr_startins = 80, tr_root = 108,
  -- GCtab, Node
  tab_array = 16, tab_node = 40, tab_asize = 48, tab_hmask = 52,
  node_size = 24, node_key = 8,
  -- C frame of the VM (lj_frame.h, x64 POSIX): saved PC and previous cframe
  cf_L = 16, cf_pc = 24, cf_prev = 32, cf_nres = 8,
  -- which lua_State sizes (and so GG_State offsets) are known
  flavours = {
    { name = "OpenResty", L_size = 112, GG_g = 112, GG_J = 848, GG_dispatch = 4120 },
    { name = "upstream", L_size = 96, GG_g = 96, GG_J = 824, GG_dispatch = 4064 },
  },
}

M.gc32 = {
  gc64 = false,
  ptr = 4,                 -- GCRef / MRef size (C pointers: L->base, L->top,
                           -- L->cframe, J->trace stay 8 bytes)
  slot = 8,
  fr2 = false,             -- one slot: func in the low half of base-1, ftsz/PC in the high half
  gct = 5,
  L_dummy_ffid = 6, L_status = 7, L_glref = 8, L_base = 16, L_top = 24,
  L_maxstack = 32, L_stack = 36, L_cframe = 48, L_stacksize = 56,
  g_strempty = 76, g_hookmask = 97, g_vmstate = 136, g_mainthref = 140,
  g_registrytv = 216, g_cur_L = 288, g_jit_base = 292,
  J_trace = 360, J_sizetrace = 372,
  pt_size = 64, pt_sizebc = 8, pt_chunkname = 40, pt_firstline = 44,
  pt_numline = 48, pt_lineinfo = 52,
  fn_ffid = 6, fn_nupvalues = 7, fn_pc = 16, fn_f = 24, fn_upvalue = 32,
  str_size = 20, str_len = 16,
  tr_startpt = 48, tr_startpc = 52, tr_startins = 56, tr_root = 84,
  tab_array = 8, tab_node = 20, tab_asize = 24, tab_hmask = 28,
  node_size = 24, node_key = 8,
  cf_L = 24, cf_pc = 28, cf_prev = 32, cf_nres = 16,
  flavours = {
    { name = "OpenResty", L_size = 80, GG_g = 80, GG_J = 576, GG_dispatch = 3296 },
    { name = "upstream", L_size = 64, GG_g = 64, GG_J = 552, GG_dispatch = 3240 },
  },
}

-- Shared by both modes.
M.GG_LEN_DISP = 243        -- dispatch table entries (BC__MAX 97 + 57 ASM fast functions + 89 static)
M.LUA_IDSIZE = 60          -- luaconf.h: short_src size

-- Internal type tags (~n, lj_obj.h) and the GC types' gct bytes (~tag & 0xff).
M.GCT = { str = 4, upval = 5, thread = 6, proto = 7, func = 8, trace = 9, cdata = 10, tab = 11, udata = 12 }
M.ITYPE = { str = 0xfffffffb, thread = 0xfffffff9, func = 0xfffffff7, tab = 0xfffffff4 }

-- Frame types in the low 3 bits of a frame link (lj_frame.h).
M.FRAME = { LUA = 0, C = 1, CONT = 2, VARG = 3, LUAP = 4, CP = 5, PCALL = 6, PCALLH = 7 }

-- g->vmstate: ~state, or >= 0 for the number of the trace running.
M.VMSTATE = { [-1] = "interp", [-2] = "C", [-3] = "GC", [-4] = "exit",
  [-5] = "record", [-6] = "opt", [-7] = "asm" }

return M
