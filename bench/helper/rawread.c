/* rawread: the baseline for the benchmarks in bench/ (not part of perfev), built by
 * `make bench` into build/bench/rawread.so.
 *
 *   local raw = require "rawread"
 *   local ns, nbytes = raw.ns_per_read(fd, bufsize, iterations)
 *   local count, enabled, running = raw.read(fd, bufsize)  -- a plain call
 *   raw.read_group(fd, t)
 *   local fev = raw.event(fd, bufsize)   fev:read()   -- the floors of ev:read()
 *   local fg = raw.group(fd, names_mt)   fg:read(t)   -- and of g:read(t)
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

/* The count of a value, as ev:read() and g:read(t) give it: false when
 * the event never ran, scaled by enabled/running when multiplexed. */
static void push_count(lua_State *L, uint64_t value, uint64_t enabled, uint64_t running)
{
  if (running == 0)
    lua_pushboolean(L, 0);
  else if (enabled != 0 && enabled != running)
    lua_pushinteger(L, (lua_Integer)(uint64_t)((long double)value * enabled / running));
  else
    lua_pushinteger(L, (lua_Integer)value);
}

/* One read(2) of fd, size (24..512) bytes, by read_format
 * total_time_enabled|total_time_running: the count (scaled, or false, as
 * ev:read() gives it), enabled, running pushed (nil, message on failure). */
static int read_one(lua_State *L, int fd, lua_Integer size)
{
  uint64_t w[64];
  ssize_t got;
  if (size < 24 || size > (lua_Integer)sizeof w)
    return luaL_error(L, "bufsize must be 24..512");
  got = read(fd, w, (size_t)size);
  if (got < 24) {
    lua_pushnil(L);
    lua_pushstring(L, got < 0 ? strerror(errno) : "a short read");
    return 2;
  }
  push_count(L, w[0], w[1], w[2]);
  lua_pushinteger(L, (lua_Integer)w[1]);
  lua_pushinteger(L, (lua_Integer)w[2]);
  return 3;
}

/* raw.read(fd, bufsize): read_one as a plain function of the fd. */
static int r_read(lua_State *L) {
  return read_one(L, (int)lua_tointeger(L, 1), lua_tointeger(L, 2));
}

/* The floor's event: what ev:read() is called on. */
struct fevent { int fd; lua_Integer size; };
#define FEVENT "rawread.event"

/* fev:read(): read_one reached as ev:read() is: a method found through
 * the metatable's __index table, its self checked the least the C API
 * allows for an exact answer (the self's metatable is upvalue 1, and it is
 * a full userdata; a closed one raises). */
static int r_event_read(lua_State *L) {
  struct fevent *e;
  int same = 0;
  if (lua_getmetatable(L, 1)) {
    same = lua_topointer(L, -1) == lua_topointer(L, lua_upvalueindex(1));
    lua_pop(L, 1);
  }
  if (!same || lua_type(L, 1) != LUA_TUSERDATA)
    return luaL_argerror(L, 1, "expected a " FEVENT);
  e = (struct fevent *)lua_touserdata(L, 1);
  if (e->fd < 0)
    return luaL_error(L, FEVENT ": closed");
  return read_one(L, e->fd, e->size);
}

/* raw.event(fd, bufsize) -> fev, whose fev:read() is read_one of fd. */
static int r_event(lua_State *L) {
  struct fevent *e = (struct fevent *)lua_newuserdata(L, sizeof *e);
  e->fd = (int)luaL_checkinteger(L, 1);
  e->size = luaL_checkinteger(L, 2);
  luaL_setmetatable(L, FEVENT);
  return 1;
}

/* One read(2) of the group leader fd (read_format
 * group|id|total_time_enabled|total_time_running, what perfev.group
 * opens; at most 32 members), t (index 2) filled with what g:read(t)
 * promises: t[i] the count of member i (the kernel's order; scaled, or
 * false, as above), t.raw the unscaled values (t itself when nothing was
 * scaled, else a table of t's), t.time_enabled, t.time_running. The keys
 * are the upvalues key..key+2 (a pushed upvalue and lua_rawset: the
 * cheapest keyed write of the C API, no string interning per write).
 * Returns t (nil, message on failure). */
static int fill_group(lua_State *L, int fd, int key) {
  uint64_t w[3 + 2 * 32];
  ssize_t got = read(fd, w, sizeof w);
  int scaled;
  if (got < 24 || (size_t)got < (3 + 2 * w[0]) * sizeof w[0]) {
    lua_pushnil(L);
    lua_pushstring(L, got < 0 ? strerror(errno) : "a short read");
    return 2;
  }
  lua_settop(L, 2);
  scaled = w[2] != 0 && w[1] != 0 && w[1] != w[2];
  lua_pushvalue(L, lua_upvalueindex(key));       /* 3: "raw" */
  if (!scaled) {
    lua_pushvalue(L, 2);                         /* 4: t.raw is t */
  } else {
    lua_pushvalue(L, lua_upvalueindex(key));
    if (lua_rawget(L, 2) != LUA_TTABLE || lua_rawequal(L, -1, 2)) {
      lua_pop(L, 1);
      lua_newtable(L);                           /* 4: t.raw, a table of t's */
    }
  }
  for (uint64_t i = 0; i < w[0]; i++) {
    uint64_t value = w[3 + 2 * i];
    push_count(L, value, w[1], w[2]);
    lua_rawseti(L, 2, (lua_Integer)i + 1);
    if (scaled) {
      lua_pushinteger(L, (lua_Integer)value);
      lua_rawseti(L, 4, (lua_Integer)i + 1);
    }
  }
  lua_rawset(L, 2);
  lua_pushvalue(L, lua_upvalueindex(key + 1));
  lua_pushinteger(L, (lua_Integer)w[1]);
  lua_rawset(L, 2);
  lua_pushvalue(L, lua_upvalueindex(key + 2));
  lua_pushinteger(L, (lua_Integer)w[2]);
  lua_rawset(L, 2);
  return 1;
}

/* raw.read_group(fd, t): fill_group as a plain function of the fd.
 * Upvalues 1-3: the keys. */
static int r_read_group(lua_State *L) {
  luaL_checktype(L, 2, LUA_TTABLE);
  return fill_group(L, (int)lua_tointeger(L, 1), 1);
}

/* fg:read(t): fill_group reached as g:read(t) is: a function held by the
 * object table itself, its self checked (upvalue 1 is the object), t a
 * table given the names' metatable when it has none (upvalue 5; g:read(t)
 * gives a caller's plain table the names), the fd upvalue 6. Upvalues
 * 2-4: the keys. */
static int r_group_read(lua_State *L) {
  if (!lua_rawequal(L, 1, lua_upvalueindex(1)))
    return luaL_argerror(L, 1, "expected the rawread group");
  luaL_checktype(L, 2, LUA_TTABLE);
  if (!lua_getmetatable(L, 2)) {
    lua_pushvalue(L, lua_upvalueindex(5));
    lua_setmetatable(L, 2);
  }
  return fill_group(L, (int)lua_tointeger(L, lua_upvalueindex(6)), 2);
}

/* raw.group(fd, names_mt) -> fg, a table whose fg:read(t) is fill_group
 * of fd. */
static int r_group(lua_State *L) {
  luaL_checkinteger(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_newtable(L);                 /* 3: fg */
  lua_pushvalue(L, 3);
  lua_pushliteral(L, "raw");
  lua_pushliteral(L, "time_enabled");
  lua_pushliteral(L, "time_running");
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 1);
  lua_pushcclosure(L, r_group_read, 6);
  lua_setfield(L, 3, "read");
  return 1;
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
  { "event", r_event },
  { "group", r_group },
  { NULL, NULL }
};

int luaopen_rawread(lua_State *L);
int luaopen_rawread(lua_State *L) {
  luaL_newmetatable(L, FEVENT);
  lua_newtable(L);
  lua_pushvalue(L, -2);
  lua_pushcclosure(L, r_event_read, 1);
  lua_setfield(L, -2, "read");
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  luaL_newlib(L, funcs);   /* compat.h: also for 5.1 */
  lua_pushliteral(L, "raw");
  lua_pushliteral(L, "time_enabled");
  lua_pushliteral(L, "time_running");
  lua_pushcclosure(L, r_read_group, 3);
  lua_setfield(L, -2, "read_group");
  return 1;
}
