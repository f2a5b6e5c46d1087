/* core.symtab(): a symbol table as perf report keeps one, in C, looked
 * up by address with a binary search, without a Lua value per symbol. Entries
 * ({ start, size, bind, name }) are added in their file's order (t:add,
 * or an ELF file's whole table and PLT by symbols/elf.c), then t:finish()
 * sorts them by start (equal starts in their order, as perf's rb-tree),
 * keeps perf's best symbol of each start (choose_best_symbol) and ends
 * every zero-size symbol at the next start, the last a page past the end
 * of its own (symbols__fixup_end). t:find(v) is a binary search. The
 * names stay where they are, in the ELF file's string table mapped
 * (perfev_symtab_strings), or are copied into one buffer (t:add, PLT
 * stubs): no Lua string nor table per symbol (those, and the sections
 * read into Lua strings, were most of perf report's symbol loading on a
 * file of many binaries).
 *
 * Starts are compared as Lua 5.3+ compares its integers (signed 64-bit);
 * they are given back by perfev's rule for 64-bit values (perfev_pushu64). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "symtab.h"

#define SYMTAB_MT "perfev.symtab"
#define SYMTAB_MAPS 8

enum { STB_GLOBAL = 1, STB_WEAK = 2, PAGE = 4096 };

struct ent {
  int64_t start;
  uint64_t stop;     /* the size until finished, then where it ends */
  uint32_t name, len;   /* the name: len bytes at name in blob, or in strings (ext; len
                         * NOLEN until it is needed: most names are never printed) */
  uint32_t idx;      /* the order it was added in: equal starts keep it */
  int16_t bind;
  uint16_t ext;      /* named in strings */
};

struct perfev_symtab {
  struct ent *e;
  size_t n, cap;
  char *blob;
  size_t blen, bcap;
  const char *strings;   /* an ELF string table, within one of maps */
  size_t nstrings;
  struct { void *p; size_t len; } maps[SYMTAB_MAPS];   /* munmap'd at __gc */
  int nmaps;
  int finished;
};

#define NOLEN UINT32_MAX

static const char *name_of(const struct perfev_symtab *t, const struct ent *x)
{
  return (x->ext ? t->strings : t->blob) + x->name;
}

/* The name's length (up to its NUL, or the string table's end). */
static size_t len_of(const struct perfev_symtab *t, struct ent *x)
{
  if (x->len == NOLEN) {
    const char *z = (const char *)memchr(t->strings + x->name, 0, t->nstrings - x->name);
    x->len = (uint32_t)(z ? (size_t)(z - (t->strings + x->name)) : t->nstrings - x->name);
  }
  return x->len;
}

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
  for (int i = 0; i < t->nmaps; i++)
    munmap(t->maps[i].p, t->maps[i].len);   /* cannot fail on a mapping we made */
  t->nmaps = 0;
  t->e = NULL;
  t->blob = NULL;
  t->strings = NULL;
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

static struct ent *new_ent(lua_State *L, struct perfev_symtab *t, int64_t start, uint64_t size, int bind)
{
  struct ent *x;
  if (t->n >= UINT32_MAX)
    luaL_error(L, "perfev.symtab: too many symbols");
  t->e = (struct ent *)grow(L, t->e, &t->cap, t->n + 1, sizeof *t->e);
  x = &t->e[t->n];
  x->start = start;
  x->stop = size;
  x->idx = (uint32_t)t->n;
  x->bind = (int16_t)bind;
  x->ext = 0;
  t->n++;
  return x;
}

void perfev_symtab_own(lua_State *L, struct perfev_symtab *t, void *map, size_t len)
{
  if (t->nmaps == SYMTAB_MAPS) {
    munmap(map, len);
    luaL_error(L, "perfev.symtab: too many mappings");
  }
  t->maps[t->nmaps].p = map;
  t->maps[t->nmaps].len = len;
  t->nmaps++;
}

void perfev_symtab_strings(lua_State *L, struct perfev_symtab *t, const char *strings, size_t len)
{
  if (t->strings || len > UINT32_MAX)
    luaL_error(L, "perfev.symtab: %s", t->strings ? "a table has one string table" : "string table too large");
  t->strings = strings;
  t->nstrings = len;
}

void perfev_symtab_add_named(lua_State *L, struct perfev_symtab *t, int64_t start, uint64_t size, int bind,
                             size_t off)
{
  struct ent *x;
  if (off >= t->nstrings) {   /* past the table: "" */
    perfev_symtab_add(L, t, start, size, bind, "", 0, NULL);
    return;
  }
  x = new_ent(L, t, start, size, bind);
  x->ext = 1;
  x->name = (uint32_t)off;   /* off < nstrings <= UINT32_MAX */
  x->len = NOLEN;
}

void perfev_symtab_add(lua_State *L, struct perfev_symtab *t, int64_t start, uint64_t size, int bind,
                       const char *name, size_t len, const char *suffix)
{
  size_t slen = suffix ? strlen(suffix) : 0;
  struct ent *x;
  if (t->blen + len + slen + 1 > UINT32_MAX)
    luaL_error(L, "perfev.symtab: too many symbols");
  t->blob = (char *)grow(L, t->blob, &t->bcap, t->blen + len + slen + 1, 1);
  x = new_ent(L, t, start, size, bind);
  x->name = (uint32_t)t->blen;
  x->len = (uint32_t)(len + slen);
  memcpy(t->blob + t->blen, name, len);
  if (slen)
    memcpy(t->blob + t->blen + len, suffix, slen);
  t->blob[t->blen + len + slen] = '\0';
  t->blen += len + slen + 1;
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

/* Sorts t's entries by start, equal starts in the order they were added:
 * a stable LSD radix sort on the start's bytes (as signed: the top bit
 * flipped), skipping the bytes every start shares (the high ones of a
 * file's addresses). qsort's merge sort, calling a comparison per step,
 * was a third of the loading of a 27k-symbol table. */
static void sort_by_start(lua_State *L, struct perfev_symtab *t)
{
  size_t n = t->n, count[256];
  struct ent *src = t->e, *dst;
  if (n < 2)
    return;
  dst = (struct ent *)malloc(n * sizeof *dst);
  if (!dst)
    luaL_error(L, "perfev.symtab: out of memory (%d entries)", (int)n);
  for (int shift = 0; shift < 64; shift += 8) {
    size_t sum = 0;
    int skip = 0;
    memset(count, 0, sizeof count);
    for (size_t i = 0; i < n; i++)
      count[(((uint64_t)src[i].start ^ UINT64_C(0x8000000000000000)) >> shift) & 0xff]++;
    for (int b = 0; b < 256; b++) {
      size_t c = count[b];
      if (c == n)
        skip = 1;
      count[b] = sum;
      sum += c;
    }
    if (skip)
      continue;
    for (size_t i = 0; i < n; i++)
      dst[count[(((uint64_t)src[i].start ^ UINT64_C(0x8000000000000000)) >> shift) & 0xff]++] = src[i];
    {
      struct ent *x = src;
      src = dst;
      dst = x;
    }
  }
  /* src: the sorted entries; dst: the other buffer */
  free(dst);
  t->e = src;
  t->cap = n;
}

static size_t underscores(const struct perfev_symtab *t, struct ent *s)
{
  const char *name = name_of(t, s);
  size_t n = 0, len = len_of(t, s);
  while (n < len && name[n] == '_')
    n++;
  return n;
}

/* perf's choose_best_symbol for two symbols at one address: a wins. */
static int better(const struct perfev_symtab *t, struct ent *a, struct ent *b)
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
  if (len_of(t, a) != len_of(t, b))
    return len_of(t, a) > len_of(t, b);
  return 1;
}

/* t:finish() -> t: sorted, one symbol per start, every symbol ended. */
static int l_finish(lua_State *L)
{
  struct perfev_symtab *t = building(L, self(L));
  size_t k = 0, n = t->n;
  struct ent *v = t->e;
  sort_by_start(L, t);
  v = t->e;
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
static struct ent *at(lua_State *L, const struct perfev_symtab *t)
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
  struct ent *x = at(L, t);
  lua_pushlstring(L, name_of(t, x), len_of(t, x));
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
    if (len_of(t, &t->e[i]) == len && memcmp(name_of(t, &t->e[i]), name, len) == 0) {
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
