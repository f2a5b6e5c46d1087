/* rawread: the baseline for the benchmarks in bench/ (not part of perfev), built by
 * `make bench` into build/bench/rawread.so.
 *
 *   local raw = require "rawread"
 *   local ns, nbytes = raw.ns_per_read(fd, bufsize, iterations)
 *   local v1, v2, v3 = raw.read(fd, bufsize)
 *
 * read(2)s fd `iterations` times into one buffer of `bufsize` bytes in a C
 * loop timed with CLOCK_MONOTONIC; returns nanoseconds per read and the
 * byte count of the last read. On a failed read: nil, message, errno. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lua.h>
#include <lauxlib.h>
#include "compat.h"
#include "clock.h"

static int64_t now_ns(void) { return bench_clock_ns(CLOCK_MONOTONIC); }

static int r_ns_per_read(lua_State *L) {
  int fd = (int)luaL_checkinteger(L, 1);
  lua_Integer bufsize = luaL_checkinteger(L, 2);
  lua_Integer iterations = luaL_checkinteger(L, 3);
  luaL_argcheck(L, bufsize > 0 && bufsize <= (1 << 20), 2, "bufsize must be 1..1048576");
  luaL_argcheck(L, iterations > 0, 3, "iterations must be > 0");

  void *buf = malloc((size_t)bufsize);
  if (buf == NULL) return luaL_error(L, "ns_per_read: out of memory");
  ssize_t got = 0;
  int64_t t0 = now_ns();
  for (lua_Integer i = 0; i < iterations; i++) {
    got = read(fd, buf, (size_t)bufsize);
    if (got < 0) {
      int err = errno;
      free(buf);
      lua_pushnil(L);
      lua_pushfstring(L, "read(%d): %s", fd, strerror(err));
      lua_pushinteger(L, err);
      return 3;
    }
  }
  int64_t t1 = now_ns();
  free(buf);
  lua_pushnumber(L, (lua_Number)(t1 - t0) / (lua_Number)iterations);
  lua_pushinteger(L, (lua_Integer)got);
  return 2;
}

/* raw.read(fd, bufsize): one read(2) of up to bufsize (<= 512) bytes, its
 * first three words returned (nil, message on failure): the least a
 * binding's read does, called from a Lua loop as ev:read() is (the floor
 * of bench/read.lua). */
static int r_read(lua_State *L) {
  uint64_t w[64] = { 0 };
  lua_Integer size = luaL_optinteger(L, 2, 40);
  if (size < 24 || size > (lua_Integer)sizeof w)
    return luaL_argerror(L, 2, "bufsize must be 24..512");
  if (read((int)lua_tointeger(L, 1), w, (size_t)size) < 0) {
    lua_pushnil(L);
    lua_pushstring(L, strerror(errno));
    return 2;
  }
  lua_pushinteger(L, (lua_Integer)w[0]);
  lua_pushinteger(L, (lua_Integer)w[1]);
  lua_pushinteger(L, (lua_Integer)w[2]);
  return 3;
}

/* The clock the C loop uses, for timing the Lua side the same way. */
static int r_now_ns(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)now_ns());
  return 1;
}

static const luaL_Reg funcs[] = {
  { "ns_per_read", r_ns_per_read },
  { "now_ns", r_now_ns },
  { "read", r_read },
  { NULL, NULL }
};

int luaopen_rawread(lua_State *L);
int luaopen_rawread(lua_State *L) {
  luaL_newlib(L, funcs);   /* compat.h: also for 5.1 */
  return 1;
}
