/* core.elf_symtab: the ELF symbol-table entries perfev.elf keeps, parsed
 * in one pass (a Lua loop over 24-byte entries is most of perf report's
 * symbol loading). perfev.elf stays the ELF reader: it finds the sections,
 * calls this with their bytes and applies perf's rules to the result. */
#include <stdint.h>
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

int perfev_elfsym_open_lib(lua_State *L)
{
  lua_pushcfunction(L, l_elf_symtab);
  lua_setfield(L, -2, "elf_symtab");
  return 0;
}
