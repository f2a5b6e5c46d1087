/* 64-bit values as LuaJIT cdata (see compat.h). The C API cannot make a
 * cdata, so small functions written with LuaJIT's ffi do it, through one
 * uint64_t[1] buffer both sides write: C stores the bits there and calls
 * a function that returns buf[0] (a new uint64_t cdata), or calls one that
 * stores a cdata argument there. They are compiled once per lua_State, on
 * first use, and kept in the registry. Only values above 2^53 take this
 * path: about 100 ns a value (bench/u64.lua), against 4 ns for a number. */
#include "compat.h"

#if PERFEV_LUAJIT

#define U64_KEY "perfev.compat.u64"

enum { U64_PUSH = 1, I64_PUSH, U64_READ, U64_BUF };

static const char u64_chunk[] =
  "local ffi = require 'ffi'\n"
  "local istype = ffi.istype\n"
  "local u64, i64 = ffi.typeof('uint64_t'), ffi.typeof('int64_t')\n"
  "local buf = ffi.new('uint64_t[1]')\n"
  "local ibuf = ffi.cast('int64_t *', buf)\n"
  "return {\n"
  "  function() return buf[0] end,\n"
  "  function() return ibuf[0] end,\n"
  "  function(v)\n"
  "    if istype(u64, v) or istype(i64, v) then buf[0] = v return true end\n"
  "    return false\n"
  "  end,\n"
  "  buf,\n"
  "}\n";

/* Pushes function `which` of the table, compiling it on first use, and
 * returns the buffer it shares with C. */
static uint64_t *push_fn(lua_State *L, int which)
{
  uint64_t *buf;
  if (lua_getfield(L, LUA_REGISTRYINDEX, U64_KEY) != LUA_TTABLE) {
    lua_pop(L, 1);
    if (luaL_loadbuffer(L, u64_chunk, sizeof u64_chunk - 1, "=perfev.compat") != LUA_OK)
      lua_error(L);
    lua_call(L, 0, 1);   /* raises when this LuaJIT was built without its ffi */
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, U64_KEY);
  }
  lua_rawgeti(L, -1, U64_BUF);
  buf = (uint64_t *)(uintptr_t)lua_topointer(L, -1);   /* a cdata's payload */
  lua_pop(L, 1);
  lua_rawgeti(L, -1, which);
  lua_remove(L, -2);
  return buf;
}

void perfev_push_u64_cdata(lua_State *L, uint64_t v)
{
  *push_fn(L, U64_PUSH) = v;
  lua_call(L, 0, 1);
}

void perfev_push_i64_cdata(lua_State *L, int64_t v)
{
  *push_fn(L, I64_PUSH) = (uint64_t)v;
  lua_call(L, 0, 1);
}

int perfev_cdata_u64(lua_State *L, int idx, uint64_t *out)
{
  uint64_t *buf;
  int ok;
  idx = lua_absindex(L, idx);
  buf = push_fn(L, U64_READ);
  lua_pushvalue(L, idx);
  lua_call(L, 1, 1);
  ok = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (ok)
    *out = *buf;
  return ok;
}

#else
/* Lua 5.3 and 5.4 have 64-bit integers: nothing to do. */
typedef int perfev_compat_unused;
#endif
