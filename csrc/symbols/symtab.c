/* core.symtab(): a symbol table as perf report keeps one, in C. Entries
 * ({ start, size, bind, name }) are added in their file's order (t:add,
 * or an ELF file's whole table and PLT by symbols/elf.c), then t:finish()
 * sorts them by start (equal starts in their order, as perf's rb-tree),
 * keeps perf's best symbol of each start (choose_best_symbol) and ends
 * every zero-size symbol at the next start, the last a page past the end
 * of its own (symbols__fixup_end). t:find(v) is a binary search. The
 * names are kept in one buffer: no Lua string nor table per symbol (those
 * were most of perf report's symbol loading on a file of many binaries).
 *
 * Starts are compared as Lua 5.3+ compares its integers (signed 64-bit);
 * they are given back by perfev's rule for 64-bit values (perfev_pushu64). */
#include <stdlib.h>
#include <string.h>
#include "symtab.h"

#define SYMTAB_MT "perfev.symtab"

enum { STB_GLOBAL = 1, STB_WEAK = 2, PAGE = 4096 };

struct ent {
  int64_t start;
  uint64_t stop;     /* the size until finished, then where it ends */
  uint32_t name, len;   /* the name: len bytes at blob + name */
  uint32_t idx;      /* the order it was added in: equal starts keep it */
  int32_t bind;
};

struct perfev_symtab {
  struct ent *e;
  size_t n, cap;
  char *blob;
  size_t blen, bcap;
  int finished;
};

static struct perfev_symtab *self(lua_State *L)
{
  return (struct perfev_symtab *)perfev_self(L, SYMTAB_MT);
}

static int l_gc(lua_State *L)
{
  struct perfev_symtab *t = self(L);
  if (!t)   /* NULL: __gc given another self */
    return 0;
  free(t->e);
  free(t->blob);
  t->e = NULL;
  t->blob = NULL;
  t->n = t->cap = t->blen = t->bcap = 0;
  return 0;
}

/* p (*cap elements of size sz) grown to hold need; raises on failure
 * (p stays the table's, its __gc frees it). */
static void *grow(lua_State *L, void *p, size_t *cap, size_t need, size_t sz)
{
  size_t c = *cap ? *cap : 256;
  void *np;
  if (need <= *cap)
    return p;
  while (c < need)
    c *= 2;
  np = realloc(p, c * sz);
  if (!np)
    luaL_error(L, "perfev.symtab: out of memory (%d entries)", (int)need);
  *cap = c;
  return np;
}

void perfev_symtab_add(lua_State *L, struct perfev_symtab *t, int64_t start, uint64_t size, int bind,
                       const char *name, size_t len, const char *suffix)
{
  size_t slen = suffix ? strlen(suffix) : 0;
  struct ent *x;
  if (t->blen + len + slen + 1 > UINT32_MAX || t->n >= UINT32_MAX)
    luaL_error(L, "perfev.symtab: too many symbols");
  t->e = (struct ent *)grow(L, t->e, &t->cap, t->n + 1, sizeof *t->e);
  t->blob = (char *)grow(L, t->blob, &t->bcap, t->blen + len + slen + 1, 1);
  x = &t->e[t->n];
  x->start = start;
  x->stop = size;
  x->name = (uint32_t)t->blen;
  x->len = (uint32_t)(len + slen);
  x->idx = (uint32_t)t->n;
  x->bind = bind;
  memcpy(t->blob + t->blen, name, len);
  if (slen)
    memcpy(t->blob + t->blen + len, suffix, slen);
  t->blob[t->blen + len + slen] = '\0';
  t->blen += len + slen + 1;
  t->n++;
}

static struct perfev_symtab *building(lua_State *L, struct perfev_symtab *t)
{
  if (t->finished)
    luaL_error(L, "perfev.symtab: the table is finished: nothing can be added");
  return t;
}

struct perfev_symtab *perfev_symtab_building(lua_State *L, int idx)
{
  return building(L, (struct perfev_symtab *)luaL_checkudata(L, idx, SYMTAB_MT));
}

/* t:add(start, size, bind, name) -> t */
static int l_add(lua_State *L)
{
  struct perfev_symtab *t = building(L, self(L));
  uint64_t start = perfev_checku64(L, 2), size = perfev_checku64(L, 3);
  int bind = (int)luaL_checkinteger(L, 4);
  size_t len;
  const char *name = luaL_checklstring(L, 5, &len);
  perfev_symtab_add(L, t, (int64_t)start, size, bind, name, len, NULL);
  lua_settop(L, 1);
  return 1;
}

static int by_start(const void *a, const void *b)
{
  const struct ent *x = (const struct ent *)a, *y = (const struct ent *)b;
  if (x->start != y->start)
    return x->start < y->start ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static size_t underscores(const struct perfev_symtab *t, const struct ent *s)
{
  size_t n = 0;
  while (n < s->len && t->blob[s->name + n] == '_')
    n++;
  return n;
}

/* perf's choose_best_symbol for two symbols at one address: a wins. */
static int better(const struct perfev_symtab *t, const struct ent *a, const struct ent *b)
{
  size_t ua, ub;
  if ((b->stop == 0) != (a->stop == 0))   /* sizes: not finished yet */
    return a->stop > 0;
  if ((a->bind == STB_WEAK) != (b->bind == STB_WEAK))
    return b->bind == STB_WEAK;
  if ((a->bind == STB_GLOBAL) != (b->bind == STB_GLOBAL))
    return a->bind == STB_GLOBAL;
  ua = underscores(t, a);
  ub = underscores(t, b);
  if (ua != ub)
    return ua < ub;
  if (a->len != b->len)
    return a->len > b->len;
  return 1;
}

/* t:finish() -> t: sorted, one symbol per start, every symbol ended. */
static int l_finish(lua_State *L)
{
  struct perfev_symtab *t = building(L, self(L));
  size_t k = 0, n = t->n;
  struct ent *v = t->e;
  if (n > 1)
    qsort(v, n, sizeof *v, by_start);
  for (size_t i = 0; i < n; i++) {
    if (k > 0 && v[k - 1].start == v[i].start) {
      if (!better(t, &v[k - 1], &v[i]))
        v[k - 1] = v[i];
    } else {
      v[k++] = v[i];
    }
  }
  for (size_t i = 0; i < k; i++) {
    uint64_t start = (uint64_t)v[i].start;
    if (v[i].stop == 0)
      v[i].stop = i + 1 < k ? (uint64_t)v[i + 1].start : (start + PAGE - 1) / PAGE * PAGE + PAGE;
    else
      v[i].stop = start + v[i].stop;
  }
  t->n = k;
  t->finished = 1;
  lua_settop(L, 1);
  return 1;
}

static struct perfev_symtab *finished(lua_State *L)
{
  struct perfev_symtab *t = self(L);
  if (!t->finished)
    luaL_error(L, "perfev.symtab: the table is not finished (t:finish())");
  return t;
}

/* The entry of argument 2 (an index from 1). */
static const struct ent *at(lua_State *L, const struct perfev_symtab *t)
{
  lua_Integer i = luaL_checkinteger(L, 2);
  luaL_argcheck(L, i >= 1 && (size_t)i <= t->n, 2, "no such symbol");
  return &t->e[i - 1];
}

/* t:find(v) -> i | nil: the symbol holding v (the last start <= v, if v
 * is below its end) */
static int l_find(lua_State *L)
{
  const struct perfev_symtab *t = finished(L);
  int64_t v = (int64_t)perfev_checku64(L, 2);
  size_t lo = 0, hi = t->n;
  if (hi == 0 || v < t->e[0].start)
    return 0;
  hi--;
  while (lo < hi) {
    size_t mid = lo + (hi - lo + 1) / 2;
    if (t->e[mid].start <= v)
      lo = mid;
    else
      hi = mid - 1;
  }
  if (v >= (int64_t)t->e[lo].stop)
    return 0;
  lua_pushinteger(L, (lua_Integer)lo + 1);
  return 1;
}

/* t:name(i), t:start(i), t:stop(i) (where it ends) */
static int l_name(lua_State *L)
{
  const struct perfev_symtab *t = finished(L);
  const struct ent *x = at(L, t);
  lua_pushlstring(L, t->blob + x->name, x->len);
  return 1;
}

static int l_start(lua_State *L)
{
  const struct perfev_symtab *t = finished(L);
  perfev_pushu64(L, (uint64_t)at(L, t)->start);
  return 1;
}

static int l_stop(lua_State *L)
{
  const struct perfev_symtab *t = finished(L);
  perfev_pushu64(L, at(L, t)->stop);
  return 1;
}

/* t:index(name) -> the first i named so | nil */
static int l_index(lua_State *L)
{
  const struct perfev_symtab *t = finished(L);
  size_t len;
  const char *name = luaL_checklstring(L, 2, &len);
  for (size_t i = 0; i < t->n; i++) {
    if (t->e[i].len == len && memcmp(t->blob + t->e[i].name, name, len) == 0) {
      lua_pushinteger(L, (lua_Integer)i + 1);
      return 1;
    }
  }
  return 0;
}

/* t:count() and #t: the symbols (added so far, until finished) */
static int l_count(lua_State *L)
{
  lua_pushinteger(L, (lua_Integer)self(L)->n);
  return 1;
}

static int l_tostring(lua_State *L)
{
  const struct perfev_symtab *t = self(L);
  lua_pushfstring(L, "perfev.symtab(%d symbols%s, %p)", (int)t->n, t->finished ? "" : ", building",
                  lua_topointer(L, 1));
  return 1;
}

/* core.symtab() -> an empty table, to add to and finish */
static int l_new(lua_State *L)
{
  struct perfev_symtab *t = (struct perfev_symtab *)perfev_newuserdata(L, sizeof *t);
  memset(t, 0, sizeof *t);
  luaL_setmetatable(L, SYMTAB_MT);
  return 1;
}

int perfev_symtab_open_lib(lua_State *L)
{
  static const luaL_Reg meta[] = {
    { "__gc", l_gc }, { "__len", l_count }, { "__tostring", l_tostring }, { NULL, NULL }
  };
  static const luaL_Reg methods[] = {
    { "add", l_add }, { "finish", l_finish }, { "find", l_find }, { "name", l_name },
    { "start", l_start }, { "stop", l_stop }, { "index", l_index }, { "count", l_count },
    { NULL, NULL }
  };
  perfev_class_register(L, SYMTAB_MT, meta, methods);
  lua_pushcfunction(L, l_new);
  lua_setfield(L, -2, "symtab");
  return 0;
}
