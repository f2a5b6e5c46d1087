/* The group reader: one read(2) of a PERF_FORMAT_GROUP leader refills a
 * caller's table by member position; names resolve through a metatable so
 * that a refill in a frame loop allocates nothing. */
#include <string.h>
#include "perfev.h"

#define PERFEV_GROUP_MT "perfev.group_reader"
/* members one read(2) into PERFEV_READ_WORDS holds: nr, two times, and
 * value, id, lost per member */
#define GROUP_MAX ((PERFEV_READ_WORDS - 3) / 3)

struct perfev_group {
  struct perfev_event *leader;   /* kept alive by the user value's [1] */
  size_t n;
  uint64_t ids[];                /* member ids, in member order */
};

/* User value: [i] = member event (the reader owns them: its leader pointer
 * points into [1], so no table a caller can reach may hold the only
 * reference), names = { name... }, results = the metatable given to
 * result tables (its __index knows the names). members() hands out a copy. */

static struct perfev_group *group_self(lua_State *L)
{
  return (struct perfev_group *)perfev_self(L, PERFEV_GROUP_MT);
}

/* The result tables' class: tables, each group's with a metatable of its
 * own, whose functions have it as upvalue 1 (perfev_self checks a self
 * against it) and the names as upvalue 2. */
#define RESULT_CLASS "perfev.group.result"

/* results.__index(t, k): a member's name reads its position's count.
 * Upvalue 2: name -> position. */
static int result_index(lua_State *L)
{
  perfev_self(L, RESULT_CLASS);
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(2));
  if (lua_isnil(L, -1))
    return 1;
  lua_rawget(L, 1);
  return 1;
}

/* results.__tostring(t): "perfev.group.result(task-clock = 1234, ...,
 * time_enabled = 5, time_running = 5)", members in order. Upvalue 2: the
 * names list. */
static int result_tostring(lua_State *L)
{
  luaL_Buffer b;
  lua_Integer n = (lua_Integer)lua_rawlen(L, lua_upvalueindex(2));
  perfev_self(L, RESULT_CLASS);
  lua_settop(L, 1);
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "perfev.group.result(");
  for (lua_Integer i = 1; i <= n; i++) {
    const char *name;
    lua_rawgeti(L, lua_upvalueindex(2), i);
    name = lua_isstring(L, -1) ? lua_tostring(L, -1) : "?";
    lua_pop(L, 1);
    luaL_addstring(&b, name);
    luaL_addstring(&b, " = ");
    lua_rawgeti(L, 1, i);
    luaL_tolstring(L, -1, NULL);
    lua_remove(L, -2);
    luaL_addvalue(&b);
    luaL_addstring(&b, ", ");
  }
  for (int k = 0; k < 2; k++) {
    const char *key = k ? "time_running" : "time_enabled";
    luaL_addstring(&b, key);
    luaL_addstring(&b, " = ");
    lua_getfield(L, 1, key);
    luaL_tolstring(L, -1, NULL);
    lua_remove(L, -2);
    luaL_addvalue(&b);
    luaL_addstring(&b, k ? ")" : ", ");
  }
  luaL_pushresult(&b);
  return 1;
}

/* Pushes the metatable of result tables for the names list at idx (nil
 * entries are members without a name). */
static void push_results_meta(lua_State *L, int names, size_t n)
{
  lua_newtable(L);   /* byname */
  for (size_t i = 1; i <= n; i++) {
    lua_rawgeti(L, names, (lua_Integer)i);
    if (lua_isnil(L, -1)) {
      lua_pop(L, 1);
      continue;
    }
    lua_pushvalue(L, -1);
    lua_rawget(L, -3);
    if (!lua_isnil(L, -1)) {   /* a repeated name reads the first member */
      lua_pop(L, 2);
      continue;
    }
    lua_pop(L, 1);
    lua_pushinteger(L, (lua_Integer)i);
    lua_rawset(L, -3);
  }
  lua_createtable(L, 0, 3);
  lua_pushliteral(L, RESULT_CLASS);
  lua_setfield(L, -2, "__name");
  lua_pushvalue(L, -1);
  lua_pushvalue(L, -3);
  lua_pushcclosure(L, result_index, 2);
  lua_setfield(L, -2, "__index");
  lua_pushvalue(L, -1);
  lua_pushvalue(L, names);
  lua_pushcclosure(L, result_tostring, 2);
  lua_setfield(L, -2, "__tostring");
  lua_remove(L, -2);   /* byname: the __index closure holds it */
}

/* A copy of the names list at idx, n entries (nil ones kept as holes). */
static void push_names(lua_State *L, int idx, size_t n)
{
  lua_createtable(L, (int)n, 0);
  for (size_t i = 1; i <= n; i++) {
    lua_rawgeti(L, idx, (lua_Integer)i);
    if (lua_type(L, -1) != LUA_TSTRING && !lua_isnil(L, -1))
      luaL_error(L, "perfev.group_reader: names[%d] is a %s, not a string", (int)i, luaL_typename(L, -1));
    lua_rawseti(L, -2, (lua_Integer)i);
  }
}

/* core.group_results(names) -> the metatable perfev.group gives the
 * result tables it fills itself (groups with tool events): names and
 * tostring as the reader's. */
static int l_group_results(lua_State *L)
{
  size_t n;
  luaL_checktype(L, 1, LUA_TTABLE);
  n = lua_rawlen(L, 1);
  push_names(L, 1, n);
  push_results_meta(L, lua_gettop(L), n);
  return 1;
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
  luaL_argcheck(L, n <= GROUP_MAX, 1, "too many members for one read(2)");
  g = (struct perfev_group *)perfev_newuserdata(L, sizeof *g + n * sizeof(uint64_t));
  memset(g, 0, sizeof *g);
  luaL_setmetatable(L, PERFEV_GROUP_MT);
  lua_newtable(L);
  uv = lua_gettop(L);
  for (size_t i = 1; i <= n; i++) {
    struct perfev_event *ev;
    lua_rawgeti(L, 1, (lua_Integer)i);
    ev = perfev_event_check(L, -1);
    g->ids[i - 1] = ev->id;
    if (i == 1)
      g->leader = ev;
    lua_rawseti(L, uv, (lua_Integer)i);
  }
  if (!(g->leader->read_format & PERF_FORMAT_GROUP) || !(g->leader->read_format & PERF_FORMAT_ID))
    return luaL_error(L, "perfev.group: the leader must have read_format group|id");
  push_names(L, 2, n);
  lua_pushvalue(L, -1);
  lua_setfield(L, uv, "names");
  push_results_meta(L, lua_gettop(L), n);
  lua_setfield(L, uv, "results");
  lua_pop(L, 1);
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
 * upvalue key spares the string interning of lua_setfield per read). The
 * bound read (reader:bind) has the same first five, then its own. */
enum { UP_MT = 1, UP_RAW, UP_LOST, UP_ENABLED, UP_RUNNING, UP_KEYS = UP_RUNNING,
       UP_READER, UP_OWNER, UP_FALLBACK, UP_BOUND = UP_FALLBACK };

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

/* The members' counts at t[pos], raw values at raw[pos] (0: none, the
 * counts are the raw values), lost at lost[pos] (0: none); p at the first
 * member's value. */
static void fill_members(lua_State *L, const struct perfev_group *g, const struct perfev_reading *r,
                         const uint64_t *p, int t, int raw, int lost)
{
  for (uint64_t k = 0; k < r->nr; k++) {
    uint64_t value = *p++, id = r->has_id ? *p++ : 0;
    lua_Integer pos = (lua_Integer)position(g, (size_t)k, id) + 1;
    if (r->has_running && r->running == 0)
      lua_pushboolean(L, 0);
    else if (raw)
      lua_pushinteger(L, (lua_Integer)perfev_scale(value, r->enabled, r->running));
    else
      lua_pushinteger(L, (lua_Integer)value);
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
}

/* Counts at t[pos], raw values at t.raw[pos], lost at t.lost[pos]. When
 * nothing was scaled the counts are the raw values, and t.raw is t itself:
 * the refill stays one table write per member (a push and a rawseti at
 * the member's position, which the kernel's order almost always gives). */
static void fill(lua_State *L, const struct perfev_group *g, const struct perfev_reading *r, int t)
{
  const uint64_t *p = r->words + 1 + (size_t)r->has_enabled + (size_t)r->has_running;
  int raw = 0, lost = 0;
  if (perfev_scales(r->enabled, r->running)) {
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
  if (raw || lost || !r->has_id || (r->has_running && r->running == 0)) {
    fill_members(L, g, r, p, t, raw, lost);
  } else {
    /* the common case, kept lean (a read's cost is mostly this loop):
     * value and id per member, each value as read */
    const uint64_t *end = p + 2 * r->nr;
    for (size_t k = 0; p < end; k++, p += 2) {
      lua_pushinteger(L, (lua_Integer)p[0]);
      lua_rawseti(L, t, (lua_Integer)position(g, k, p[1]) + 1);
    }
  }
  set_key(L, t, UP_ENABLED, r->enabled);
  set_key(L, t, UP_RUNNING, r->running);
}

/* One read(2) of g's leader into the table at index 2 (a new one when the
 * slot is none or nil; its type is t); the reader userdata is at index rd
 * (an upvalue index for the bound read). Returns the table, or nil,
 * message, errno. */
static int read_into(lua_State *L, struct perfev_group *g, int rd, int t)
{
  uint64_t buf[PERFEV_READ_WORDS];
  struct perfev_reading r;
  int err;
  if (g->leader->fd < 0)
    return luaL_error(L, "perfev.group: attempt to read a closed group");
  err = perfev_read_fd(g->leader->fd, g->leader->read_format, buf, PERFEV_READ_WORDS, &r);
  if (err)
    return perfev_push_read_error(L, err);
  if (t != LUA_TTABLE) {
    if (t != LUA_TNONE && t != LUA_TNIL)
      luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 1);
    lua_createtable(L, (int)g->n, 4);
  }
  /* a caller's plain table gets the names; the metatable stays on the
   * stack otherwise (fill works above it, the result is index 2) */
  if (!lua_getmetatable(L, 2)) {
    perfev_getiuservalue(L, rd);
    lua_getfield(L, -1, "results");
    lua_setmetatable(L, 2);
  }
  fill(L, g, &r, 2);
  lua_settop(L, 2);
  return 1;
}

/* reader:read([into]) -> into, refilled */
static int l_group_read(lua_State *L)
{
  return read_into(L, (struct perfev_group *)perfev_self(L, PERFEV_GROUP_MT), 1, lua_type(L, 2));
}

/* The bound read: owner:read([t]) with owner the Lua object bind was given,
 * one C call from the caller's frame. Anything else (another self, t not a
 * table, a closed leader) goes to the fallback, the Lua method, which
 * checks and raises at the caller's line as every method does. */
static int l_group_bound_read(lua_State *L)
{
  struct perfev_group *g = (struct perfev_group *)lua_touserdata(L, lua_upvalueindex(UP_READER));
  int t = lua_type(L, 2);
  if (lua_rawequal(L, 1, lua_upvalueindex(UP_OWNER)) && g->leader->fd >= 0 &&
      (t == LUA_TTABLE || t == LUA_TNIL || t == LUA_TNONE)) {
    return read_into(L, g, lua_upvalueindex(UP_READER), t);
  }
  lua_pushvalue(L, lua_upvalueindex(UP_FALLBACK));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

/* reader:bind(owner, fallback) -> function(owner, [t]): reader:read(t)
 * as a method of owner (the Lua group stores it as its own `read`, so a
 * refill makes no Lua call of its own); fallback(self, t, ...) answers
 * every other call. */
static int l_group_bind(lua_State *L)
{
  group_self(L);
  luaL_checkany(L, 2);
  luaL_checktype(L, 3, LUA_TFUNCTION);
  for (int i = 1; i <= UP_KEYS; i++)
    lua_pushvalue(L, lua_upvalueindex(i));
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 3);
  lua_pushcclosure(L, l_group_bound_read, UP_BOUND);
  return 1;
}

/* reader:members() -> a new list of the member events: the reader's own
 * list stays out of reach (it keeps the leader alive). */
static int l_group_members(lua_State *L)
{
  struct perfev_group *g = group_self(L);
  perfev_getiuservalue(L, 1);
  lua_createtable(L, (int)g->n, 0);
  for (size_t i = 1; i <= g->n; i++) {
    lua_rawgeti(L, -2, (lua_Integer)i);
    lua_rawseti(L, -2, (lua_Integer)i);
  }
  return 1;
}

/* reader:close(): closes every member, the leader last. */
static int l_group_close(lua_State *L)
{
  struct perfev_group *g = group_self(L);
  perfev_getiuservalue(L, 1);
  for (size_t i = g->n; i >= 1; i--) {
    struct perfev_event *ev;
    lua_rawgeti(L, -1, (lua_Integer)i);
    ev = (struct perfev_event *)luaL_testudata(L, -1, PERFEV_EVENT_MT);
    if (ev)
      perfev_event_close(ev);
    lua_pop(L, 1);
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int l_group_tostring(lua_State *L)
{
  struct perfev_group *g = group_self(L);
  lua_pushfstring(L, "perfev.group_reader(%d members%s)", (int)g->n, g->leader->fd < 0 ? ", closed" : "");
  return 1;
}

int perfev_group_open_lib(lua_State *L)
{
  static const luaL_Reg meta[] = {
    { "__close", l_group_close }, { "__tostring", l_group_tostring }, { NULL, NULL }
  };
  static const luaL_Reg methods[] = {
    { "members", l_group_members }, { "close", l_group_close }, { NULL, NULL }
  };
  static const char *const keys[] = { "raw", "lost", "time_enabled", "time_running" };
  perfev_class_register(L, PERFEV_GROUP_MT, meta, methods);
  /* read refills a caller's table: the result keys are its upvalues
   * (UP_RAW ...), after the metatable every method has as upvalue 1 */
  perfev_class_methods(L, PERFEV_GROUP_MT);
  for (int m = 0; m < 2; m++) {
    luaL_getmetatable(L, PERFEV_GROUP_MT);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
      lua_pushstring(L, keys[i]);
    lua_pushcclosure(L, m ? l_group_bind : l_group_read, UP_KEYS);
    lua_setfield(L, -2, m ? "bind" : "read");
  }
  lua_pop(L, 1);
  lua_pushcfunction(L, l_group_reader);
  lua_setfield(L, -2, "group_reader");
  lua_pushcfunction(L, l_group_results);
  lua_setfield(L, -2, "group_results");
  return 0;
}
