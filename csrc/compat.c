/* 64-bit values as LuaJIT cdata (see compat.h). The C API cannot make a
 * cdata, so small functions written with LuaJIT's ffi do it, through one
 * uint64_t[1] buffer both sides write: C stores the bits there and calls
 * a function that returns buf[0] (a new uint64_t cdata), or calls one that
 * stores a cdata argument there. They are compiled once per lua_State, on
 * first use, and kept in the registry. Only values above 2^53 take this
 * path: about 100 ns a value (bench/u64.lua), against 4 ns for a number. */
#include <stdarg.h>
#include <string.h>
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

/* ---- lua_pushfstring / luaL_error with 5.3's formats ---- */

static void add_formatted(luaL_Buffer *b, const char *fmt, va_list ap)
{
  char num[64];
  const char *p;
  while ((p = strchr(fmt, '%')) != NULL) {
    luaL_addlstring(b, fmt, (size_t)(p - fmt));
    switch (p[1]) {
    case 's': {
      const char *s = va_arg(ap, const char *);
      luaL_addstring(b, s ? s : "(null)");
      break;
    }
    case 'd':
      snprintf(num, sizeof num, "%d", va_arg(ap, int));
      luaL_addstring(b, num);
      break;
    case 'I':
      snprintf(num, sizeof num, "%lld", (long long)va_arg(ap, lua_Integer));
      luaL_addstring(b, num);
      break;
    case 'f':
      snprintf(num, sizeof num, "%.14g", (double)va_arg(ap, lua_Number));
      luaL_addstring(b, num);
      break;
    case 'p':
      snprintf(num, sizeof num, "%p", va_arg(ap, void *));
      luaL_addstring(b, num);
      break;
    case 'c':
      luaL_addchar(b, (char)va_arg(ap, int));
      break;
    case 'U': {   /* a code point, as UTF-8 */
      unsigned long c = (unsigned long)va_arg(ap, long);
      if (c < 0x80) {
        luaL_addchar(b, (char)c);
      } else if (c < 0x800) {
        luaL_addchar(b, (char)(0xc0 | (c >> 6)));
        luaL_addchar(b, (char)(0x80 | (c & 0x3f)));
      } else if (c < 0x10000) {
        luaL_addchar(b, (char)(0xe0 | (c >> 12)));
        luaL_addchar(b, (char)(0x80 | ((c >> 6) & 0x3f)));
        luaL_addchar(b, (char)(0x80 | (c & 0x3f)));
      } else {
        luaL_addchar(b, (char)(0xf0 | ((c >> 18) & 0x07)));
        luaL_addchar(b, (char)(0x80 | ((c >> 12) & 0x3f)));
        luaL_addchar(b, (char)(0x80 | ((c >> 6) & 0x3f)));
        luaL_addchar(b, (char)(0x80 | (c & 0x3f)));
      }
      break;
    }
    case '%':
      luaL_addchar(b, '%');
      break;
    default:   /* as 5.3 would refuse it: keep it visible */
      luaL_addlstring(b, p, p[1] ? 2 : 1);
      break;
    }
    fmt = p[1] ? p + 2 : p + 1;
  }
  luaL_addstring(b, fmt);
}

const char *perfev_compat_pushfstring(lua_State *L, const char *fmt, ...)
{
  luaL_Buffer b;
  va_list ap;
  luaL_buffinit(L, &b);
  va_start(ap, fmt);
  add_formatted(&b, fmt, ap);
  va_end(ap);
  luaL_pushresult(&b);
  return lua_tostring(L, -1);
}

int perfev_compat_error(lua_State *L, const char *fmt, ...)
{
  luaL_Buffer b;
  va_list ap;
  luaL_where(L, 1);
  luaL_buffinit(L, &b);
  va_start(ap, fmt);
  add_formatted(&b, fmt, ap);
  va_end(ap);
  luaL_pushresult(&b);
  lua_concat(L, 2);
  return lua_error(L);
}

#else
/* Lua 5.3 and 5.4 have 64-bit integers: nothing to do. */
typedef int perfev_compat_unused;
#endif
