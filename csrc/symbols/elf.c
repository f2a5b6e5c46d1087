/* core.elf_symtab: the ELF symbol-table entries perfev.elf keeps, parsed
 * in one pass (a Lua loop over 24-byte entries is most of perf report's
 * symbol loading), and core.elf_finish: those entries sorted and chosen
 * as perf keeps them (in Lua, the tables of a sort by start were most of
 * what was left). perfev.elf stays the ELF reader: it finds the sections,
 * calls these with their bytes and its lists. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "perfev.h"

enum { SYM_SIZE = 24, STT_NOTYPE = 0, STT_FUNC = 2, STT_GNU_IFUNC = 10, SHN_UNDEF = 0,
       SHN_LORESERVE = 0xff00, STV_INTERNAL = 1, STV_HIDDEN = 2 };

static uint64_t get(const unsigned char *p, int n, int be)
{
  uint64_t v = 0;
  for (int i = 0; i < n; i++)
    v = (v << 8) | p[be ? i : n - 1 - i];
  return v;
}

/* core.elf_symtab(data, strings, big_endian, labels, sections) ->
 * { { value, size, bind, name, type }, ... }: the defined functions (and
 * with labels, perf's labels: NOTYPE, visible, in an executable section)
 * with a name and a section. sections: one byte per section header
 * (index shndx + 1): 0 none, 1 a section, 2 an executable one. */
static int l_elf_symtab(lua_State *L)
{
  size_t n, ns, nsec;
  const unsigned char *d = (const unsigned char *)luaL_checklstring(L, 1, &n);
  const char *str = luaL_checklstring(L, 2, &ns);
  int be = lua_toboolean(L, 3), labels = lua_toboolean(L, 4);
  const unsigned char *sec = (const unsigned char *)luaL_checklstring(L, 5, &nsec);
  lua_newtable(L);
  lua_Integer k = 0;
  for (size_t p = 0; p + SYM_SIZE <= n; p += SYM_SIZE) {
    const unsigned char *s = d + p;
    unsigned info = s[4], type = info & 15, other = s[5];
    if (type != STT_FUNC && type != STT_GNU_IFUNC && (type != STT_NOTYPE || !labels))
      continue;
    uint64_t name = get(s, 4, be), shndx = get(s + 6, 2, be);
    if (name == 0 || shndx == SHN_UNDEF)
      continue;
    unsigned in_sec = shndx < SHN_LORESERVE && shndx < nsec ? sec[shndx] : 0;
    if (type == STT_NOTYPE) {
      unsigned vis = other & 3;
      if (in_sec != 2 || vis == STV_INTERNAL || vis == STV_HIDDEN)
        continue;
    } else if (labels && in_sec == 0) {
      continue;
    }
    lua_createtable(L, 5, 0);
    perfev_pushu64(L, get(s + 8, 8, be));
    lua_rawseti(L, -2, 1);
    perfev_pushu64(L, get(s + 16, 8, be));
    lua_rawseti(L, -2, 2);
    lua_pushinteger(L, info >> 4);
    lua_rawseti(L, -2, 3);
    if (name < ns) {
      const char *z = memchr(str + name, 0, ns - name);
      lua_pushlstring(L, str + name, z ? (size_t)(z - (str + name)) : ns - name);
    } else {
      lua_pushliteral(L, "");
    }
    lua_rawseti(L, -2, 4);
    lua_pushinteger(L, type);
    lua_rawseti(L, -2, 5);
    lua_rawseti(L, -2, ++k);
  }
  return 1;
}

/* ---- core.elf_finish: a symbol table as perf keeps it ---- */

enum { STB_GLOBAL = 1, STB_WEAK = 2, PAGE = 4096 };

struct fsym {
  int64_t start;   /* compared as Lua 5.3+ compares its integers */
  uint64_t size;
  size_t idx;      /* its place in the list: equal starts keep that order */
  lua_Integer bind;
  const char *name;
  size_t len;
};

static int by_start(const void *a, const void *b)
{
  const struct fsym *x = (const struct fsym *)a, *y = (const struct fsym *)b;
  if (x->start != y->start)
    return x->start < y->start ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static size_t underscores(const struct fsym *s)
{
  size_t n = 0;
  while (n < s->len && s->name[n] == '_')
    n++;
  return n;
}

/* perf's choose_best_symbol for two symbols at one address: a wins. */
static int better(const struct fsym *a, const struct fsym *b)
{
  size_t ua, ub;
  if ((b->size == 0) != (a->size == 0))
    return a->size > 0;
  if ((a->bind == STB_WEAK) != (b->bind == STB_WEAK))
    return b->bind == STB_WEAK;
  if ((a->bind == STB_GLOBAL) != (b->bind == STB_GLOBAL))
    return a->bind == STB_GLOBAL;
  ua = underscores(a);
  ub = underscores(b);
  if (ua != ub)
    return ua < ub;
  if (a->len != b->len)
    return a->len > b->len;
  return 1;
}

/* Reads entry i of the list at index 1 ({ start, size, bind, name }). */
static void read_sym(lua_State *L, size_t i, struct fsym *s)
{
  uint64_t v = 0;
  s->size = 0;
  if (lua_rawgeti(L, 1, (lua_Integer)i + 1) != LUA_TTABLE)
    luaL_error(L, "perfev.elf: finish: list[%d] is not a table", (int)i + 1);
  lua_rawgeti(L, -1, 1);
  if (!perfev_tou64(L, -1, &v))
    luaL_error(L, "perfev.elf: finish: list[%d][1] (start) is not an integer", (int)i + 1);
  s->start = (int64_t)v;
  lua_rawgeti(L, -2, 2);
  if (!perfev_tou64(L, -1, &s->size))
    luaL_error(L, "perfev.elf: finish: list[%d][2] (size) is not an integer", (int)i + 1);
  lua_rawgeti(L, -3, 3);
  s->bind = lua_tointeger(L, -1);
  lua_rawgeti(L, -4, 4);
  s->name = lua_tolstring(L, -1, &s->len);   /* the list keeps the string */
  if (!s->name)
    luaL_error(L, "perfev.elf: finish: list[%d][4] (name) is not a string", (int)i + 1);
  s->idx = i;
  lua_pop(L, 5);
}

/* core.elf_finish(list) -> { starts, ends, names, n }: the symbols of list
 * ({ { start, size, bind, name } }) sorted by start (equal starts in the
 * list's order, as perf's rb-tree), the best of each start kept, and every
 * zero-size symbol ended at the start of the next (the last one at the
 * end of its page + 4096). The list is left as it was. */
static int l_elf_finish(lua_State *L)
{
  size_t n, k = 0;
  struct fsym *v;
  luaL_checktype(L, 1, LUA_TTABLE);
  n = (size_t)lua_rawlen(L, 1);
  v = (struct fsym *)perfev_newuserdata(L, (n ? n : 1) * sizeof *v);   /* the GC frees it */
  for (size_t i = 0; i < n; i++)
    read_sym(L, i, &v[i]);
  qsort(v, n, sizeof *v, by_start);
  for (size_t i = 0; i < n; i++) {
    if (k > 0 && v[k - 1].start == v[i].start) {
      if (!better(&v[k - 1], &v[i]))
        v[k - 1] = v[i];
    } else {
      v[k++] = v[i];
    }
  }
  lua_createtable(L, 0, 4);
  lua_createtable(L, (int)k, 0);   /* starts */
  lua_createtable(L, (int)k, 0);   /* ends */
  lua_createtable(L, (int)k, 0);   /* names */
  for (size_t i = 0; i < k; i++) {
    uint64_t start = (uint64_t)v[i].start, end = start + v[i].size;
    if (v[i].size == 0)
      end = i + 1 < k ? (uint64_t)v[i + 1].start : (start + PAGE - 1) / PAGE * PAGE + PAGE;
    perfev_pushu64(L, start);
    lua_rawseti(L, -4, (lua_Integer)i + 1);
    perfev_pushu64(L, end);
    lua_rawseti(L, -3, (lua_Integer)i + 1);
    lua_pushlstring(L, v[i].name, v[i].len);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -4, "names");
  lua_setfield(L, -3, "ends");
  lua_setfield(L, -2, "starts");
  lua_pushinteger(L, (lua_Integer)k);
  lua_setfield(L, -2, "n");
  return 1;
}

int perfev_elfsym_open_lib(lua_State *L)
{
  lua_pushcfunction(L, l_elf_symtab);
  lua_setfield(L, -2, "elf_symtab");
  lua_pushcfunction(L, l_elf_finish);
  lua_setfield(L, -2, "elf_finish");
  return 0;
}
