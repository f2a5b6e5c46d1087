/* The group reader: one read(2) of a PERF_FORMAT_GROUP leader refills a
 * caller's table by member position; names resolve through a metatable so
 * that a refill in a frame loop allocates nothing. */
#include <string.h>
#include "perfev.h"

#define PERFEV_GROUP_MT "perfev.group"

struct perfev_group {
  struct perfev_event *leader;   /* kept alive by the user value's [1] */
  size_t n;
  uint64_t ids[];                /* member ids, in member order */
};

/* User value layout: [i] = member event, names = {...}, byname = {name = i},
 * results = metatable given to result tables. */

static struct perfev_group *group_check(lua_State *L, int idx)
{
  return (struct perfev_group *)luaL_checkudata(L, idx, PERFEV_GROUP_MT);
}

/* results.__index(t, k): a member's name reads its position's count. */
static int result_index(lua_State *L)
{
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(1));
  if (lua_isnil(L, -1))
    return 1;
  lua_rawget(L, 1);
  return 1;
}

static void make_result_meta(lua_State *L, int uv)
{
  lua_createtable(L, 0, 1);
  lua_getfield(L, uv, "byname");
  lua_pushcclosure(L, result_index, 1);
  lua_setfield(L, -2, "__index");
  lua_setfield(L, uv, "results");
}

/* core.group_reader(events, names) -> reader; events[1] is the leader. */
static int l_group_reader(lua_State *L)
{
  size_t n = lua_rawlen(L, 1);
  struct perfev_group *g;
  int uv;
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 2, LUA_TTABLE);
  luaL_argcheck(L, n > 0, 1, "a group needs at least its leader");
  g = (struct perfev_group *)perfev_newuserdata(L, sizeof *g + n * sizeof(uint64_t));
  memset(g, 0, sizeof *g);
  luaL_setmetatable(L, PERFEV_GROUP_MT);
  lua_newtable(L);
  uv = lua_gettop(L);
  lua_newtable(L);
  for (size_t i = 1; i <= n; i++) {
    struct perfev_event *ev;
    lua_rawgeti(L, 1, (lua_Integer)i);
    ev = perfev_event_check(L, -1);
    g->ids[i - 1] = ev->id;
    if (i == 1)
      g->leader = ev;
    lua_rawseti(L, uv, (lua_Integer)i);
    lua_rawgeti(L, 2, (lua_Integer)i);
    if (!lua_isnil(L, -1)) {
      lua_pushinteger(L, (lua_Integer)i);
      lua_rawset(L, -3);
    } else {
      lua_pop(L, 1);
    }
  }
  if (!(g->leader->read_format & PERF_FORMAT_GROUP) || !(g->leader->read_format & PERF_FORMAT_ID))
    return luaL_error(L, "perfev.group: the leader must have read_format group|id");
  lua_setfield(L, uv, "byname");
  make_result_meta(L, uv);
  g->n = n;
  perfev_setiuservalue(L, -2);
  return 1;
}

/* Where member id sits: the kernel's order is the member order, so the
 * guess is almost always right. */
static size_t position(const struct perfev_group *g, size_t guess, uint64_t id)
{
  if (guess < g->n && g->ids[guess] == id)
    return guess;
  for (size_t i = 0; i < g->n; i++)
    if (g->ids[i] == id)
      return i;
  return guess;
}

/* Upvalues of the read method: the metatable, then the result keys (an
 * upvalue key spares the string interning of lua_setfield per read). */
enum { UP_MT = 1, UP_RAW, UP_LOST, UP_ENABLED, UP_RUNNING };

/* t[key] = {} unless it already is a table other than t; leaves it on the stack. */
static void subtable(lua_State *L, int t, int key)
{
  lua_pushvalue(L, lua_upvalueindex(key));
  lua_rawget(L, t);
  if (lua_istable(L, -1) && !lua_rawequal(L, -1, t))
    return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushvalue(L, lua_upvalueindex(key));
  lua_pushvalue(L, -2);
  lua_rawset(L, t);
}

static void set_key(lua_State *L, int t, int key, uint64_t v)
{
  lua_pushvalue(L, lua_upvalueindex(key));
  lua_pushinteger(L, (lua_Integer)v);
  lua_rawset(L, t);
}

/* Counts at t[pos], raw values at t.raw[pos], lost at t.lost[pos]. When
 * nothing was scaled the counts are the raw values, and t.raw is t itself:
 * the refill stays one table write per member. */
static void fill(lua_State *L, const struct perfev_group *g, const struct perfev_reading *r, int t)
{
  const uint64_t *p = r->words + 1 + (size_t)r->has_enabled + (size_t)r->has_running;
  int counted = !r->has_running || r->running != 0;
  int scaled = perfev_scales(r->enabled, r->running);
  int raw = 0, lost = 0;
  if (scaled) {
    subtable(L, t, UP_RAW);
    raw = lua_gettop(L);
  } else {
    lua_pushvalue(L, lua_upvalueindex(UP_RAW));
    lua_pushvalue(L, t);
    lua_rawset(L, t);
  }
  if (r->has_lost) {
    subtable(L, t, UP_LOST);
    lost = lua_gettop(L);
  }
  for (uint64_t k = 0; k < r->nr; k++) {
    uint64_t value = *p++, id = r->has_id ? *p++ : 0;
    lua_Integer pos = (lua_Integer)position(g, (size_t)k, id) + 1;
    if (counted)
      lua_pushinteger(L, (lua_Integer)perfev_scale(value, r->enabled, r->running));
    else
      lua_pushboolean(L, 0);
    lua_rawseti(L, t, pos);
    if (raw) {
      lua_pushinteger(L, (lua_Integer)value);
      lua_rawseti(L, raw, pos);
    }
    if (lost) {
      lua_pushinteger(L, (lua_Integer)*p++);
      lua_rawseti(L, lost, pos);
    }
  }
  set_key(L, t, UP_ENABLED, r->enabled);
  set_key(L, t, UP_RUNNING, r->running);
}

/* reader:read([into]) -> into, refilled */
static int l_group_read(lua_State *L)
{
  struct perfev_group *g = (struct perfev_group *)perfev_self(L, PERFEV_GROUP_MT);
  uint64_t buf[PERFEV_READ_WORDS];
  struct perfev_reading r;
  int err;
  if (g->leader->fd < 0)
    return luaL_error(L, "perfev.group: attempt to read a closed group");
  err = perfev_read_fd(g->leader->fd, g->leader->read_format, buf, PERFEV_READ_WORDS, &r);
  if (err)
    return perfev_push_read_error(L, err);
  if (lua_isnoneornil(L, 2)) {
    lua_settop(L, 1);
    lua_createtable(L, (int)g->n, 4);
  }
  luaL_checktype(L, 2, LUA_TTABLE);
  if (!lua_getmetatable(L, 2)) {
    perfev_getiuservalue(L, 1);
    lua_getfield(L, -1, "results");
    lua_setmetatable(L, 2);
  }
  lua_settop(L, 2);
  fill(L, g, &r, 2);
  lua_settop(L, 2);
  return 1;
}

static int l_group_events(lua_State *L)
{
  group_check(L, 1);
  perfev_getiuservalue(L, 1);
  return 1;
}

/* reader:close(): closes every member, the leader last. */
static int l_group_close(lua_State *L)
{
  struct perfev_group *g = group_check(L, 1);
  perfev_getiuservalue(L, 1);
  for (size_t i = g->n; i >= 1; i--) {
    lua_rawgeti(L, -1, (lua_Integer)i);
    perfev_event_close((struct perfev_event *)luaL_checkudata(L, -1, PERFEV_EVENT_MT));
    lua_pop(L, 1);
  }
  return 0;
}

int perfev_group_open_lib(lua_State *L)
{
  static const luaL_Reg methods[] = {
    { "members", l_group_events }, { "close", l_group_close }, { NULL, NULL }
  };
  static const char *const keys[] = { "raw", "lost", "time_enabled", "time_running" };
  luaL_newmetatable(L, PERFEV_GROUP_MT);
  lua_pushcfunction(L, l_group_close);
  lua_setfield(L, -2, "__close");
  luaL_newlib(L, methods);
  lua_pushvalue(L, -2);
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    lua_pushstring(L, keys[i]);
  lua_pushcclosure(L, l_group_read, 5);
  lua_setfield(L, -2, "read");
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, "__index");
  lua_setfield(L, -3, "group_reader_methods");
  lua_pop(L, 1);
  lua_pushcfunction(L, l_group_reader);
  lua_setfield(L, -2, "group_reader");
  return 0;
}
