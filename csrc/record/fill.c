/* Filling the Lua table of a record, for the decoder (decode.c).
 *
 * Key strings: lua_setfield hashes and compares its key's text on every
 * call; here the string of a static name is looked up by the name's
 * address in a small cache that lives in the iteration's state, and set
 * with lua_rawset.
 *
 * One table for every record (the `into` option): every key a record sets
 * is listed, and after the record, the keys the previous record set that
 * this one did not are removed (a stream of records of one shape sets the
 * same keys in the same order: nothing to compare then). Nested tables
 * are refilled in place when their keys cannot differ; one a record drops
 * is set aside in the state's user value (.aside[k]) for the next record
 * that has one, and so are the item tables trimmed off a nested array
 * (.spares[k][i]), so a stream of samples and side-band records
 * allocates nothing once its tables have grown to size. */
#include <string.h>
#include "fill.h"

/* ---- the iteration's state ---- */

/* Whether the nested table k, last filled for shape, can be refilled for
 * shape now; remembers shape for k. */
static int keeps_shape(struct perfev_fill_state *st, const char *k, uint64_t shape)
{
  size_t i;
  int same;
  for (i = 0; i < st->nshapes; i++)
    if (st->shapes[i].name == k || strcmp(st->shapes[i].name, k) == 0)
      break;
  if (i == st->nshapes) {
    if (i == PERFEV_REUSE_SHAPES)
      return 0;
    st->nshapes++;
    st->shapes[i].name = k;
    st->shapes[i].shape = ~shape;
  }
  same = st->shapes[i].shape == shape;
  st->shapes[i].shape = shape;
  return same;
}

/* Pushes the state's user value's table `which` ("aside", "spares"). */
static void push_store(struct perfev_fill *f, const char *which)
{
  lua_State *L = f->L;
  if (lua_getfield(L, f->u, which) == LUA_TTABLE)
    return;
  lua_pop(L, 1);
  lua_createtable(L, 0, 4);
  lua_pushvalue(L, -1);
  lua_setfield(L, f->u, which);
}

/* Pushes the spare item tables of the nested table k, by index. */
static void push_spares(struct perfev_fill *f, const char *k)
{
  lua_State *L = f->L;
  push_store(f, "spares");
  if (lua_getfield(L, -1, k) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_createtable(L, 4, 0);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, k);
  }
  lua_remove(L, -2);
}

void perfev_fill_wipe(lua_State *L, int idx)
{
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_pushnil(L);
    lua_rawset(L, idx);   /* clearing a present key is allowed during lua_next */
  }
}

void perfev_push_lower(lua_State *L, const char *s)
{
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (; *s; s++)
    luaL_addchar(&b, (char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s));
  luaL_pushresult(&b);
}

/* ---- keys: their strings by the address of their static text ---- */

/* The slot of static string k in st->names (and of its string in the user
 * value, at the slot's index plus one), or -1 when the probe finds the
 * slots near its hash taken: open addressing, a few probes, no eviction. */
static int name_slot(struct perfev_fill_state *st, const char *k)
{
  /* Fibonacci hashing of the address: the top bits of the product */
  unsigned h = (unsigned)(((uint64_t)(uintptr_t)k * UINT64_C(0x9e3779b97f4a7c15)) >> 58);
  for (unsigned i = 0; i < 4; i++) {
    unsigned slot = (h + i) % PERFEV_NAME_SLOTS;
    if (st->names[slot] == k || !st->names[slot])
      return (int)slot;
  }
  return -1;
}

void perfev_fill_name(struct perfev_fill *f, const char *k)
{
  lua_State *L = f->L;
  int slot = f->st ? name_slot(f->st, k) : -1;
  if (slot < 0) {
    lua_pushstring(L, k);
  } else if (f->st->names[slot] == k) {
    lua_rawgeti(L, f->u, slot + 1);
  } else {   /* the first time */
    lua_pushstring(L, k);
    lua_pushvalue(L, -1);
    lua_rawseti(L, f->u, slot + 1);
    f->st->names[slot] = k;
  }
}

static void track(struct perfev_fill *f, const char *k, int lower)
{
  if (f->nkeys < PERFEV_REUSE_KEYS) {
    f->keys[f->nkeys].name = k;
    f->keys[f->nkeys].lower = lower;
  }
  f->nkeys++;
}

void perfev_fill_put(struct perfev_fill *f, const char *k)
{
  perfev_fill_name(f, k);
  lua_insert(f->L, -2);
  lua_rawset(f->L, f->t);
  if (f->reuse)
    track(f, k, 0);
}

void perfev_fill_put_int(struct perfev_fill *f, const char *k, uint64_t v)
{
  perfev_fill_name(f, k);
  lua_pushinteger(f->L, (lua_Integer)v);
  lua_rawset(f->L, f->t);
  if (f->reuse)
    track(f, k, 0);
}

void perfev_fill_put_bytes(struct perfev_fill *f, const char *k, const unsigned char *p, size_t n)
{
  perfev_fill_name(f, k);
  lua_pushlstring(f->L, (const char *)p, n);
  lua_rawset(f->L, f->t);
  if (f->reuse)
    track(f, k, 0);
}

void perfev_fill_put_flag(struct perfev_fill *f, const char *name)
{
  perfev_push_lower(f->L, name);
  lua_pushboolean(f->L, 1);
  lua_rawset(f->L, f->t);
  if (f->reuse)
    track(f, name, 1);
}

void perfev_fill_set_int(struct perfev_fill *f, const char *k, uint64_t v)
{
  perfev_fill_name(f, k);
  lua_pushinteger(f->L, (lua_Integer)v);
  lua_rawset(f->L, -3);
}

void perfev_fill_set(struct perfev_fill *f, const char *k)
{
  perfev_fill_name(f, k);
  lua_insert(f->L, -2);
  lua_rawset(f->L, -3);
}

/* ---- nested tables ---- */

int perfev_fill_nested(struct perfev_fill *f, const char *k, int narr, int nrec)
{
  lua_State *L = f->L;
  if (f->reuse) {
    perfev_fill_name(f, k);
    if (lua_rawget(L, f->t) == LUA_TTABLE)
      return 1;
    lua_pop(L, 1);
    push_store(f, "aside");
    if (lua_getfield(L, -1, k) == LUA_TTABLE) {
      lua_remove(L, -2);
      return 0;
    }
    lua_pop(L, 2);
  }
  lua_createtable(L, narr, nrec);
  return 0;
}

int perfev_fill_shaped(struct perfev_fill *f, const char *k, int narr, int nrec, uint64_t shape)
{
  if (f->reuse && !keeps_shape(f->st, k, shape)) {
    push_spares(f, k);   /* items of the other shape */
    perfev_fill_wipe(f->L, -1);
    lua_pop(f->L, 1);
    lua_createtable(f->L, narr, nrec);
    return 0;
  }
  return perfev_fill_nested(f, k, narr, nrec);
}

void perfev_fill_put_nested(struct perfev_fill *f, const char *k, int in_place)
{
  if (!in_place) {
    perfev_fill_put(f, k);
    return;
  }
  lua_pop(f->L, 1);   /* record[k] is that table already */
  track(f, k, 0);
}

int perfev_fill_item(struct perfev_fill *f, int parent, const char *k, lua_Integer i, int nrec)
{
  lua_State *L = f->L;
  if (f->reuse) {
    parent = lua_absindex(L, parent);
    if (lua_rawgeti(L, parent, i) == LUA_TTABLE)
      return 1;
    lua_pop(L, 1);
    push_spares(f, k);
    if (lua_rawgeti(L, -1, i) == LUA_TTABLE) {
      lua_remove(L, -2);
      return 0;
    }
    lua_pop(L, 2);
  }
  lua_createtable(L, 0, nrec);
  return 0;
}

void perfev_fill_put_item(struct perfev_fill *f, int parent, lua_Integer i, int in_place)
{
  if (in_place)
    lua_pop(f->L, 1);
  else
    lua_rawseti(f->L, parent, i);
}

void perfev_fill_trim(struct perfev_fill *f, int idx, const char *k, lua_Integer n)
{
  lua_State *L = f->L;
  int spares = 0;
  if (!f->reuse)
    return;
  idx = lua_absindex(L, idx);
  while (lua_rawgeti(L, idx, ++n) != LUA_TNIL) {
    if (k && lua_istable(L, -1)) {
      if (!spares) {
        push_spares(f, k);
        lua_insert(L, -2);
        spares = lua_gettop(L) - 1;
      }
      lua_rawseti(L, spares, n);
    } else {
      lua_pop(L, 1);
    }
    lua_pushnil(L);
    lua_rawseti(L, idx, n);
  }
  lua_pop(L, 1 + (spares != 0));
}

/* ---- one record ---- */

void perfev_fill_begin(struct perfev_fill *f, lua_State *L, struct perfev_fill_state *st, int state,
                       int into)
{
  f->L = L;
  f->st = st;
  f->reuse = 0;
  f->nkeys = 0;
  if (!f->st) {
    f->u = 0;
    lua_createtable(L, 0, 12);
    f->t = lua_gettop(L);
    return;
  }
  perfev_getiuservalue(L, state);
  f->u = lua_gettop(L);
  if (!f->st->into) {
    lua_createtable(L, 0, 12);
    f->t = lua_gettop(L);
    return;
  }
  lua_pushvalue(L, into);
  f->t = lua_gettop(L);
  f->reuse = 1;
  if (f->st->dirty) {   /* keys nobody listed: start from empty tables */
    perfev_fill_wipe(L, f->t);
    lua_pushnil(L);
    lua_setfield(L, f->u, "aside");
    lua_pushnil(L);
    lua_setfield(L, f->u, "spares");
    f->st->nkeys = f->st->nshapes = 0;
  }
  f->st->dirty = 1;     /* until this record is whole */
}

static int same_key(const struct perfev_fill_key *a, const struct perfev_fill_key *b)
{
  return a->lower == b->lower && (a->name == b->name || strcmp(a->name, b->name) == 0);
}

static void push_key(lua_State *L, const struct perfev_fill_key *k)
{
  if (k->lower)
    perfev_push_lower(L, k->name);
  else
    lua_pushstring(L, k->name);
}

/* Removes key k from the record; a nested table is set aside. */
static void drop_key(struct perfev_fill *f, const struct perfev_fill_key *k)
{
  lua_State *L = f->L;
  push_key(L, k);
  if (lua_rawget(L, f->t) == LUA_TTABLE) {
    push_store(f, "aside");
    push_key(L, k);
    lua_pushvalue(L, -3);
    lua_rawset(L, -3);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  push_key(L, k);
  lua_pushnil(L);
  lua_rawset(L, f->t);
}

/* Removes the keys the previous record set that this one did not, and
 * remembers this one's. */
static void forget_stale(struct perfev_fill *f)
{
  struct perfev_fill_state *st = f->st;
  size_t i, j, n = f->nkeys;
  int same = st->nkeys == n;
  for (i = 0; same && i < n; i++)
    same = st->keys[i].name == f->keys[i].name && st->keys[i].lower == f->keys[i].lower;
  for (i = 0; !same && i < st->nkeys; i++) {
    for (j = 0; j < n && !same_key(&st->keys[i], &f->keys[j]); j++)
      ;
    if (j == n)
      drop_key(f, &st->keys[i]);
  }
  memcpy(st->keys, f->keys, n * sizeof f->keys[0]);
  st->nkeys = n;
  st->dirty = 0;
}

void perfev_fill_keep(struct perfev_fill *f, const struct perfev_select *sel)
{
  size_t i, j, k, n = f->nkeys < PERFEV_REUSE_KEYS ? f->nkeys : PERFEV_REUSE_KEYS;
  for (i = k = 0; i < n; i++) {
    const char *name = f->keys[i].name;
    int keep = !f->keys[i].lower && strcmp(name, "type") == 0;
    for (j = 0; !keep && j < sel->n; j++)
      keep = !f->keys[i].lower && (sel->f[j].name == name || strcmp(sel->f[j].name, name) == 0);
    if (keep)
      f->keys[k++] = f->keys[i];
    else
      drop_key(f, &f->keys[i]);
  }
  f->nkeys = k + (f->nkeys - n);
}

void perfev_fill_end(struct perfev_fill *f)
{
  /* too many keys to list: st stays dirty, and the next record wipes the table */
  if (f->reuse && f->nkeys <= PERFEV_REUSE_KEYS)
    forget_stale(f);
  if (f->u)
    lua_remove(f->L, f->u);   /* the table alone is left */
}
