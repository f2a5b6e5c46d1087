/* The one C compatibility layer: perfev is written against the Lua 5.4 API;
 * this header lets the same sources build, with -Werror, for Lua 5.3 and
 * LuaJIT 2.1 (Debian's luajit and OpenResty's luajit2), and refuses the
 * runtimes it does not support (PUC Lua 5.1 and 5.2) at build time.
 *
 * Three kinds of shim:
 *  - 5.2/5.3 functions LuaJIT lacks, or has with another return type
 *    (lua_getfield & co. return void there): same name, 5.3 meaning;
 *  - user values (5.4 has several per userdata, 5.3 one, LuaJIT an
 *    environment table): perfev_newuserdata/perfev_getiuservalue/
 *    perfev_setiuservalue;
 *  - 64-bit values: perfev_pushu64/perfev_pushi64/perfev_tou64. On 5.3+
 *    they are lua_Integer. LuaJIT's numbers are doubles, so a value above
 *    2^53 comes back as a uint64_t (int64_t) cdata, and such a cdata is read
 *    back exact: never a silent rounding (doc/runtimes.md). */
#ifndef PERFEV_COMPAT_H
#define PERFEV_COMPAT_H

#include <stdint.h>
#include <stdio.h>
#include <lua.h>
#include <lauxlib.h>

/* LuaJIT says LUA_VERSION_NUM 501; its own header tells it from PUC 5.1. */
#if LUA_VERSION_NUM == 501 && defined(__has_include)
#  if __has_include(<luajit.h>)
#    include <luajit.h>
#  endif
#endif

#if defined(LUAJIT_VERSION_NUM) || defined(LUAJIT_VERSION)
#  define PERFEV_LUAJIT 1
#elif defined(LUA_VERSION_NUM) && LUA_VERSION_NUM < 503
#  error "perfev supports Lua 5.3, Lua 5.4 and LuaJIT 2.1 (Debian's luajit, OpenResty's luajit2); these are Lua 5.1/5.2 headers: build with LUA=lua5.4, lua5.3 or luajit"
#else
#  define PERFEV_LUAJIT 0
#endif

#if PERFEV_LUAJIT

#include <lualib.h>   /* LUA_FILEHANDLE */

#ifndef LUA_OK
#  define LUA_OK 0
#endif
/* lua_type() of a cdata (LuaJIT's LUA_TCDATA, not in its public headers). */
#define PERFEV_TCDATA 10

/* 5.3 returns the pushed value's type from these; LuaJIT returns nothing.
 * A function-like macro is not expanded inside itself: the inner call is
 * LuaJIT's function. */
#define lua_getfield(L, i, k) (lua_getfield((L), (i), (k)), lua_type((L), -1))
#define lua_rawget(L, i) (lua_rawget((L), (i)), lua_type((L), -1))
#define lua_rawgeti(L, i, n) (lua_rawgeti((L), (i), (int)(n)), lua_type((L), -1))
#define lua_rawseti(L, i, n) lua_rawseti((L), (i), (int)(n))
#define lua_gettable(L, i) (lua_gettable((L), (i)), lua_type((L), -1))

#define lua_rawlen(L, i) lua_objlen((L), (i))
#define lua_absindex(L, i) \
  ((i) > 0 || (i) <= LUA_REGISTRYINDEX ? (i) : lua_gettop(L) + (i) + 1)

static inline int perfev_compat_geti(lua_State *L, int idx, lua_Integer n)
{
  idx = lua_absindex(L, idx);
  lua_pushinteger(L, n);
  return lua_gettable(L, idx);
}
#define lua_geti(L, i, n) perfev_compat_geti((L), (i), (n))

static inline void perfev_compat_seti(lua_State *L, int idx, lua_Integer n)
{
  idx = lua_absindex(L, idx);
  lua_pushinteger(L, n);
  lua_insert(L, -2);
  lua_settable(L, idx);
}
#define lua_seti(L, i, n) perfev_compat_seti((L), (i), (n))

/* Rotates the elements from idx to the top n places towards the top
 * (n < 0: towards idx), as 5.3's lua_rotate. */
static inline void perfev_compat_rotate(lua_State *L, int idx, int n)
{
  int top = lua_gettop(L), len;
  idx = lua_absindex(L, idx);
  len = top - idx + 1;
  if (len <= 0)
    return;
  n %= len;
  if (n < 0)
    n += len;
  for (int i = 0; i < n; i++)
    lua_insert(L, idx);   /* the top element moves down to idx */
}
#define lua_rotate(L, i, n) perfev_compat_rotate((L), (i), (n))


static inline lua_Integer perfev_compat_len(lua_State *L, int idx)
{
  return (lua_Integer)lua_objlen(L, idx);
}
#define luaL_len(L, i) perfev_compat_len((L), (i))

/* luaL_tolstring: __tostring when there is one, else the usual forms. */
static inline const char *perfev_compat_tolstring(lua_State *L, int idx, size_t *len)
{
  idx = lua_absindex(L, idx);
  if (luaL_callmeta(L, idx, "__tostring")) {
    if (!lua_isstring(L, -1))
      luaL_error(L, "'__tostring' must return a string");
  } else {
    switch (lua_type(L, idx)) {
    case LUA_TNUMBER:
    case LUA_TSTRING:
      lua_pushvalue(L, idx);
      break;
    case LUA_TBOOLEAN:
      lua_pushstring(L, lua_toboolean(L, idx) ? "true" : "false");
      break;
    case LUA_TNIL:
      lua_pushliteral(L, "nil");
      break;
    default:
      lua_pushfstring(L, "%s: %p", luaL_typename(L, idx), lua_topointer(L, idx));
      break;
    }
  }
  return lua_tolstring(L, -1, len);
}
#define luaL_tolstring(L, i, len) perfev_compat_tolstring((L), (i), (len))

/* User values: LuaJIT keeps one environment table per userdata, and only
 * a table. The value is kept in slot 1 of a table of its own, so any value
 * (nil, another userdata) is kept as on 5.3/5.4. Every perfev userdata that
 * reads its user value has set it when it was made. */
#define perfev_newuserdata(L, sz) lua_newuserdata((L), (sz))
static inline int perfev_getiuservalue(lua_State *L, int idx)
{
  lua_getfenv(L, idx);
  lua_rawgeti(L, -1, 1);
  lua_remove(L, -2);
  return lua_type(L, -1);
}
static inline void perfev_setiuservalue(lua_State *L, int idx)
{
  idx = lua_absindex(L, idx);
  lua_createtable(L, 1, 0);
  lua_insert(L, -2);
  lua_rawseti(L, -2, 1);
  lua_setfenv(L, idx);
}
#define lua_getuservalue(L, i) perfev_getiuservalue((L), (i))
#define lua_setuservalue(L, i) perfev_setiuservalue((L), (i))

/* Lua file handles (io.open): LuaJIT's starts with the FILE *, NULL once
 * closed (its struct IOFileUD). */
typedef struct perfev_stream perfev_stream;
static inline FILE *perfev_stream_file(perfev_stream *s)
{
  return *(FILE **)(void *)s;
}

/* ---- 64-bit values on LuaJIT (compat.c) ---- */
#define PERFEV_EXACT_MAX 9007199254740992.0   /* 2^53: above it doubles skip integers */
void perfev_push_u64_cdata(lua_State *L, uint64_t v);
void perfev_push_i64_cdata(lua_State *L, int64_t v);
/* A uint64_t/int64_t cdata at idx: its 64 bits in *out, returns 1; else 0. */
int perfev_cdata_u64(lua_State *L, int idx, uint64_t *out);

/* The rule for every 64-bit integer the core gives LuaJIT: a number when
 * its value as a signed 64-bit integer is within +-2^53 (so 0xffffffff81000000
 * reads -2130706432, as on 5.3+), else a uint64_t cdata of the same bits. */
static inline void perfev_pushu64(lua_State *L, uint64_t v)
{
  int64_t s = (int64_t)v;
  if (s >= -((int64_t)1 << 53) && s <= ((int64_t)1 << 53))
    lua_pushnumber(L, (lua_Number)s);
  else
    perfev_push_u64_cdata(L, v);
}
/* For a signed field: the same, but a large value is an int64_t cdata. */
static inline void perfev_pushi64(lua_State *L, int64_t v)
{
  if (v >= -((int64_t)1 << 53) && v <= ((int64_t)1 << 53))
    lua_pushnumber(L, (lua_Number)v);
  else
    perfev_push_i64_cdata(L, v);
}
/* The exact integer at idx, in two's complement: a number with an integral
 * value no larger than 2^53 in magnitude (a larger double may already have
 * been rounded: pass a uint64_t cdata, 0x8000000000000001ULL), or a
 * uint64_t/int64_t cdata. Returns 0 for anything else. */
static inline int perfev_tou64(lua_State *L, int idx, uint64_t *out)
{
  if (lua_type(L, idx) == LUA_TNUMBER) {
    lua_Number d = lua_tonumber(L, idx);
    if (!(d >= -PERFEV_EXACT_MAX && d <= PERFEV_EXACT_MAX) || d != (lua_Number)(int64_t)d)
      return 0;
    *out = (uint64_t)(int64_t)d;
    return 1;
  }
  return lua_type(L, idx) == PERFEV_TCDATA && perfev_cdata_u64(L, idx, out);
}

/* The integer API with 5.3's meaning and no rounding, so that the core's
 * call sites are the same for every runtime:
 *  - lua_pushinteger(n): perfev_pushu64's rule: a number within +-2^53,
 *    else a uint64_t cdata of the same 64 bits (5.3 shows those bits as
 *    an integer, a u64 above 2^63 negative);
 *  - lua_tointegerx & co.: an integral number (at most 2^53 in magnitude)
 *    or a 64-bit cdata; anything else is not an integer (LuaJIT's own
 *    truncates 1.5 to 1, and cannot see a cdata). Numeric strings convert
 *    as on 5.3. */
static inline void perfev_compat_pushinteger(lua_State *L, lua_Integer n)
{
  perfev_pushu64(L, (uint64_t)n);
}
static inline lua_Integer perfev_compat_tointegerx(lua_State *L, int idx, int *isnum)
{
  uint64_t v = 0;
  int ok = perfev_tou64(L, idx, &v);
  if (!ok && lua_type(L, idx) == LUA_TSTRING) {
    lua_Number d = lua_tonumber(L, idx);   /* 0 when not numeric */
    if (lua_isnumber(L, idx) && d >= -PERFEV_EXACT_MAX && d <= PERFEV_EXACT_MAX &&
        d == (lua_Number)(int64_t)d) {
      v = (uint64_t)(int64_t)d;
      ok = 1;
    }
  }
  if (isnum)
    *isnum = ok;
  return ok ? (lua_Integer)v : 0;
}
static inline lua_Integer perfev_compat_checkinteger(lua_State *L, int arg)
{
  int ok = 0;
  lua_Integer v = perfev_compat_tointegerx(L, arg, &ok);
  if (!ok) {
    if (lua_type(L, arg) == LUA_TNUMBER)
      luaL_argerror(L, arg, "number has no exact integer representation (above 2^53: pass a uint64_t cdata)");
    else
      luaL_typerror(L, arg, "integer");
  }
  return v;
}
static inline lua_Integer perfev_compat_optinteger(lua_State *L, int arg, lua_Integer def)
{
  return lua_isnoneornil(L, arg) ? def : perfev_compat_checkinteger(L, arg);
}
/* An integer as the integer API takes it (LuaJIT has no integer subtype):
 * an integral number within 2^53, or a 64-bit integer cdata. */
static inline int perfev_compat_isinteger(lua_State *L, int idx)
{
  uint64_t v;
  return perfev_tou64(L, idx, &v);
}
#define lua_isinteger(L, i) perfev_compat_isinteger((L), (i))
#define lua_pushinteger(L, n) perfev_compat_pushinteger((L), (lua_Integer)(n))
#define lua_tointegerx(L, i, isnum) perfev_compat_tointegerx((L), (i), (isnum))
#define lua_tointeger(L, i) perfev_compat_tointegerx((L), (i), NULL)
#define luaL_checkinteger(L, arg) perfev_compat_checkinteger((L), (arg))
#define luaL_optinteger(L, arg, def) perfev_compat_optinteger((L), (arg), (def))

/* lua_pushfstring and luaL_error with 5.3's formats (%I for a lua_Integer,
 * %U, %f, %p, %c, %d, %s, %%), which LuaJIT's lack %I and %U of (compat.c). */
const char *perfev_compat_pushfstring(lua_State *L, const char *fmt, ...);
int perfev_compat_error(lua_State *L, const char *fmt, ...);
#define lua_pushfstring perfev_compat_pushfstring
#define luaL_error perfev_compat_error

#else /* Lua 5.3 and 5.4 */

#define PERFEV_TCDATA (-2)   /* no such type: never equals lua_type() */

#if LUA_VERSION_NUM < 504
#  define perfev_newuserdata(L, sz) lua_newuserdata((L), (sz))
#  define perfev_getiuservalue(L, i) lua_getuservalue((L), (i))
#  define perfev_setiuservalue(L, i) lua_setuservalue((L), (i))
#else
#  define perfev_newuserdata(L, sz) lua_newuserdatauv((L), (sz), 1)
#  define perfev_getiuservalue(L, i) lua_getiuservalue((L), (i), 1)
#  define perfev_setiuservalue(L, i) lua_setiuservalue((L), (i), 1)
#endif

/* Lua file handles (io.open): luaL_Stream, closef NULL once closed. */
typedef struct perfev_stream perfev_stream;
static inline FILE *perfev_stream_file(perfev_stream *s)
{
  luaL_Stream *ls = (luaL_Stream *)(void *)s;
  return ls->closef ? ls->f : NULL;
}

/* 64-bit integers are Lua integers: a u64 above 2^63 reads as negative. */
static inline void perfev_pushu64(lua_State *L, uint64_t v)
{
  lua_pushinteger(L, (lua_Integer)v);
}
static inline void perfev_pushi64(lua_State *L, int64_t v)
{
  lua_pushinteger(L, (lua_Integer)v);
}
static inline int perfev_tou64(lua_State *L, int idx, uint64_t *out)
{
  int ok = 0;
  lua_Integer i = lua_tointegerx(L, idx, &ok);
  if (ok)
    *out = (uint64_t)i;
  return ok;
}

#endif

/* A number, or on LuaJIT a cdata: what the integer API above takes (it
 * still refuses a cdata that is not a 64-bit integer). */
static inline int perfev_isnum(lua_State *L, int idx)
{
  int t = lua_type(L, idx);
  return t == LUA_TNUMBER || t == PERFEV_TCDATA;
}

/* A Lua file handle (io.open, io.tmpfile) at idx; raises when idx is not
 * one. perfev_stream_file() gives its FILE *, NULL once closed. */
static inline perfev_stream *perfev_checkstream(lua_State *L, int idx)
{
  return (perfev_stream *)luaL_checkudata(L, idx, LUA_FILEHANDLE);
}

/* Like luaL_checkinteger for a 64-bit field: exact or an error naming arg. */
static inline uint64_t perfev_checku64(lua_State *L, int arg)
{
  uint64_t v = 0;
  if (!perfev_tou64(L, arg, &v))
    luaL_argerror(L, arg, PERFEV_LUAJIT ? "integer expected (a number up to 2^53, or a uint64_t/int64_t cdata)"
                                         : "integer expected");
  return v;
}

#endif
