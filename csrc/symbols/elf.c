/* core.elf_symtab, core.elf_add_symbols and core.elf_add_plt: an ELF
 * file's symbol-table entries as perfev.elf keeps them (and perf's
 * "name@plt" PLT stubs), parsed in C in one pass, as a list (e:symbols():
 * a function found by name, for uprobes and attach) or straight into a
 * core.symtab being built (perf report's tables, symbols/symtab.c). A Lua
 * loop over 24-byte entries, then a Lua table per symbol, were most of
 * perf report's symbol loading. elf_add_* map the sections they read
 * (MAP_POPULATE: the page cache's pages in one call) and the table keeps
 * the mappings: the names stay in the file's string table (reading them
 * into Lua strings cost more than the parse: page faults of fresh
 * buffers, ~15 us each on a VM). perfev.elf stays the ELF reader: it
 * finds the sections and calls these with their places or bytes. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "symtab.h"

enum { SYM_SIZE = 24, RELA_SIZE = 24, STT_NOTYPE = 0, STT_FUNC = 2, STT_GNU_IFUNC = 10, SHN_UNDEF = 0,
       SHN_LORESERVE = 0xff00, STV_INTERNAL = 1, STV_HIDDEN = 2, STB_GLOBAL = 1 };

static uint64_t get(const unsigned char *p, int n, int be)
{
  uint64_t v = 0;
  for (int i = 0; i < n; i++)
    v = (v << 8) | p[be ? i : n - 1 - i];
  return v;
}

/* The name at offset off of a string table: "" past its end. */
static const char *cstring(const char *str, size_t ns, uint64_t off, size_t *len)
{
  const char *z;
  if (off >= ns) {
    *len = 0;
    return "";
  }
  z = memchr(str + off, 0, ns - off);
  *len = z ? (size_t)(z - (str + off)) : ns - off;
  return str + off;
}

/* The file whose sections are mapped: fd, path, size. */
struct file {
  int fd;
  const char *path;
  uint64_t size;
};

/* Opens path (arg) for map(); raises with the message read_at gives. */
static void open_file(lua_State *L, int arg, struct file *f)
{
  struct stat st;
  f->path = luaL_checkstring(L, arg);
  f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
  if (f->fd < 0)
    luaL_error(L, "cannot open %s: %s", f->path, strerror(errno));
  if (fstat(f->fd, &st) != 0) {
    int err = errno;
    close(f->fd);
    luaL_error(L, "cannot read %s: %s", f->path, strerror(err));
  }
  f->size = (uint64_t)st.st_size;
}

/* Bytes [off, off + len) of f, mapped read-only and given to t (which
 * unmaps them at its __gc); *out their start ("" for none). Closes f and
 * raises when the file is shorter (a truncated ELF file) or mmap fails. */
static void map(lua_State *L, struct perfev_symtab *t, struct file *f, uint64_t off, uint64_t len,
                const unsigned char **out)
{
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), base = off / page * page;
  void *m;
  if (len == 0) {
    *out = (const unsigned char *)"";
    return;
  }
  if (off > f->size || len > f->size - off) {
    char what[80];
    snprintf(what, sizeof what, "wanted %llu bytes at offset %llu", (unsigned long long)len,
             (unsigned long long)off);
    close(f->fd);
    luaL_error(L, "%s: truncated ELF file (%s)", f->path, what);
  }
  m = mmap(NULL, (size_t)(off + len - base), PROT_READ, MAP_PRIVATE | MAP_POPULATE, f->fd, (off_t)base);
  if (m == MAP_FAILED) {
    int err = errno;
    close(f->fd);
    luaL_error(L, "cannot map %s: %s", f->path, strerror(err));
  }
  *out = (const unsigned char *)m + (off - base);
  perfev_symtab_own(L, t, m, (size_t)(off + len - base));   /* (f stays open if this raises: never, 8 maps) */
}

/* One symbol table section and what decides which entries are kept. */
struct symsrc {
  const unsigned char *d;
  size_t n;
  const char *str;
  size_t ns;
  const unsigned char *sec;   /* one byte per section header: 0 none, 1 a section, 2 an executable one */
  size_t nsec;
  int be, labels;
};

struct sym {
  uint64_t value, size, name;   /* name: its offset in the string table */
  unsigned bind, type;
};

/* The entry at p when it is kept: a defined function (and with labels,
 * perf's labels: NOTYPE, visible, in an executable section) with a name
 * and a section. */
static int kept(const struct symsrc *src, size_t p, struct sym *out)
{
  const unsigned char *s = src->d + p;
  unsigned info = s[4], type = info & 15, other = s[5];
  uint64_t name, shndx;
  unsigned in_sec;
  if (type != STT_FUNC && type != STT_GNU_IFUNC && (type != STT_NOTYPE || !src->labels))
    return 0;
  name = get(s, 4, src->be);
  shndx = get(s + 6, 2, src->be);
  if (name == 0 || shndx == SHN_UNDEF)
    return 0;
  in_sec = shndx < SHN_LORESERVE && shndx < src->nsec ? src->sec[shndx] : 0;
  if (type == STT_NOTYPE) {
    unsigned vis = other & 3;
    if (in_sec != 2 || vis == STV_INTERNAL || vis == STV_HIDDEN)
      return 0;
  } else if (src->labels && in_sec == 0) {
    return 0;
  }
  out->value = get(s + 8, 8, src->be);
  out->size = get(s + 16, 8, src->be);
  out->bind = info >> 4;
  out->type = type;
  out->name = name;
  return 1;
}

/* Arguments first..first+4: data, strings, big_endian, labels, sections. */
static void check_src(lua_State *L, int first, struct symsrc *src)
{
  src->d = (const unsigned char *)luaL_checklstring(L, first, &src->n);
  src->str = luaL_checklstring(L, first + 1, &src->ns);
  src->be = lua_toboolean(L, first + 2);
  src->labels = lua_toboolean(L, first + 3);
  src->sec = (const unsigned char *)luaL_checklstring(L, first + 4, &src->nsec);
}

/* core.elf_symtab(data, strings, big_endian, labels, sections) ->
 * { { value, size, bind, name, type }, ... }: the kept entries, in order.
 * sections: one byte per section header (index shndx + 1): 0 none, 1 a
 * section, 2 an executable one. */
static int l_elf_symtab(lua_State *L)
{
  struct symsrc src;
  struct sym s;
  lua_Integer k = 0;
  check_src(L, 1, &src);
  lua_newtable(L);
  for (size_t p = 0; p + SYM_SIZE <= src.n; p += SYM_SIZE) {
    if (!kept(&src, p, &s))
      continue;
    lua_createtable(L, 5, 0);
    perfev_pushu64(L, s.value);
    lua_rawseti(L, -2, 1);
    perfev_pushu64(L, s.size);
    lua_rawseti(L, -2, 2);
    lua_pushinteger(L, s.bind);
    lua_rawseti(L, -2, 3);
    {
      size_t len;
      const char *name = cstring(src.str, src.ns, s.name, &len);
      lua_pushlstring(L, name, len);
    }
    lua_rawseti(L, -2, 4);
    lua_pushinteger(L, s.type);
    lua_rawseti(L, -2, 5);
    lua_rawseti(L, -2, ++k);
  }
  return 1;
}

/* A PT_LOAD segment (the runtime file's: perf's adjust_symbols) */
struct seg {
  int64_t vaddr, memsz, offset;
};

static int64_t field(lua_State *L, const char *name)
{
  uint64_t v = 0;
  lua_getfield(L, -1, name);
  if (!perfev_tou64(L, -1, &v))
    luaL_error(L, "perfev.elf: a segment's %s is not an integer", name);
  lua_pop(L, 1);
  return (int64_t)v;
}

/* core.elf_add_symbols(t, path, sym_offset, sym_size, str_offset,
 * str_size, big_endian, labels, sections [, segments]) -> the entries
 * kept: those of the symbol table at sym_offset of path (its string
 * table at str_offset) are added to t (core.symtab, being built), named
 * in the mapped string table. segments (an executable's or a relocatable
 * file's: a list of { vaddr, memsz, offset }): each value is moved to its
 * file offset through the first segment that holds it (value - (vaddr -
 * offset)), and a value no segment holds is left out (still counted). */
static int l_elf_add_symbols(lua_State *L)
{
  struct perfev_symtab *t = perfev_symtab_building(L, 1);
  struct symsrc src;
  struct sym s;
  struct seg *segs = NULL;
  struct file f;
  const unsigned char *d, *str;
  uint64_t symoff = perfev_checku64(L, 3), symsize = perfev_checku64(L, 4);
  uint64_t stroff = perfev_checku64(L, 5), strsize = perfev_checku64(L, 6);
  size_t nseg = 0;
  lua_Integer count = 0;
  src.be = lua_toboolean(L, 7);
  src.labels = lua_toboolean(L, 8);
  src.sec = (const unsigned char *)luaL_checklstring(L, 9, &src.nsec);
  if (!lua_isnoneornil(L, 10)) {
    luaL_checktype(L, 10, LUA_TTABLE);
    nseg = (size_t)lua_rawlen(L, 10);
    segs = (struct seg *)perfev_newuserdata(L, (nseg ? nseg : 1) * sizeof *segs);   /* the GC frees it */
    for (size_t i = 0; i < nseg; i++) {
      if (lua_rawgeti(L, 10, (lua_Integer)i + 1) != LUA_TTABLE)
        luaL_error(L, "perfev.elf: segments[%d] is not a table", (int)i + 1);
      segs[i].vaddr = field(L, "vaddr");
      segs[i].memsz = field(L, "memsz");
      segs[i].offset = field(L, "offset");
      lua_pop(L, 1);
    }
  }
  open_file(L, 2, &f);
  map(L, t, &f, symoff, symsize, &d);
  map(L, t, &f, stroff, strsize, &str);
  close(f.fd);   /* the mappings stay */
  src.d = d;
  src.n = (size_t)symsize;
  src.str = (const char *)str;
  src.ns = (size_t)strsize;
  perfev_symtab_strings(L, t, src.str, src.ns);
  for (size_t p = 0; p + SYM_SIZE <= src.n; p += SYM_SIZE) {
    int64_t start;
    if (!kept(&src, p, &s))
      continue;
    count++;
    start = (int64_t)s.value;
    if (segs) {
      size_t i = 0;
      /* as Lua 5.3+ integers: start >= vaddr and start < vaddr + memsz */
      while (i < nseg && !(start >= segs[i].vaddr &&
                           start < (int64_t)((uint64_t)segs[i].vaddr + (uint64_t)segs[i].memsz)))
        i++;
      if (i == nseg)
        continue;
      start = (int64_t)((uint64_t)start - ((uint64_t)segs[i].vaddr - (uint64_t)segs[i].offset));
    }
    perfev_symtab_add_named(L, t, start, s.size, (int)s.bind, (size_t)s.name);
  }
  lua_pushinteger(L, count);
  return 1;
}

/* core.elf_add_plt(t, path, rela_offset, rela_size, dynsym_offset,
 * dynsym_size, dynstr_offset, dynstr_size, big_endian, plt_offset,
 * entsize): perf 6.1's dso__synthesize_plt_symbols: "name@plt" for each
 * relocation of .rela.plt, in its order, one PLT entry (entsize bytes)
 * each after the PLT's header (plt_offset: the .plt section's file
 * offset), global; the name is the dynamic symbol's the relocation names
 * ("" when out of range). */
static int l_elf_add_plt(lua_State *L)
{
  struct perfev_symtab *t = perfev_symtab_building(L, 1);
  struct file f;
  const unsigned char *rela, *syms, *str;
  uint64_t roff = perfev_checku64(L, 3), nr = perfev_checku64(L, 4);
  uint64_t soff = perfev_checku64(L, 5), nsym = perfev_checku64(L, 6);
  uint64_t stroff = perfev_checku64(L, 7), ns = perfev_checku64(L, 8);
  int be = lua_toboolean(L, 9);
  uint64_t offset = perfev_checku64(L, 10), size = perfev_checku64(L, 11);
  size_t len;
  open_file(L, 2, &f);
  map(L, t, &f, roff, nr, &rela);
  map(L, t, &f, soff, nsym, &syms);
  map(L, t, &f, stroff, ns, &str);
  close(f.fd);
  for (uint64_t p = 0; p + RELA_SIZE <= nr; p += RELA_SIZE) {
    uint64_t symidx = get(rela + p + 8, 8, be) >> 32;
    const char *name = "";
    len = 0;
    if (symidx < nsym / SYM_SIZE)
      name = cstring((const char *)str, (size_t)ns, get(syms + symidx * SYM_SIZE, 4, be), &len);
    offset += size;
    perfev_symtab_add(L, t, (int64_t)offset, size, STB_GLOBAL, name, len, "@plt");
  }
  return 0;
}

int perfev_elfsym_open_lib(lua_State *L)
{
  static const luaL_Reg fns[] = {
    { "elf_symtab", l_elf_symtab }, { "elf_add_symbols", l_elf_add_symbols }, { "elf_add_plt", l_elf_add_plt },
    { NULL, NULL }
  };
  luaL_setfuncs(L, fns, 0);
  return 0;
}
