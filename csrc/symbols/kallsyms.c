/* core.kallsyms_map(path): the kernel's lines of a kallsyms file searched
 * where they lie. perf record's copy in the build-id cache is a regular
 * file of ~5 MB: mapped (MAP_POPULATE: its page-cache pages in one call),
 * not copied into a Lua string, which cost ~70 ms of page faults on a VM
 * for every report. /proc/kallsyms cannot be mapped: it is read into a
 * buffer. The lookup rules (perf's symbol_type__filter and
 * symbols__fixup_end) are lua/perfev/symbols/kallsyms.lua's, which parses
 * the modules' lines (m:modules()) and calls m:find(v) for the kernel's.
 *
 * Addresses are given as v = address - 0xffff800000000000 (below 2^47:
 * a number on every runtime), as the Lua side uses them. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "perfev.h"

#define KALLSYMS_MT "perfev.kallsyms"
#define KSPAN UINT64_C(0x800000000000)
#define PAGE UINT64_C(4096)

struct kallsyms {
  const char *s;      /* the text (NULL once closed) */
  size_t len;
  size_t core_end;    /* where the modules' lines start (len: none) */
  int mapped;         /* s is a mapping (else malloc'd) */
  int modules;        /* the file has modules' lines */
};

/* The address at line pos as v, or -1 below the kernel's base (a line
 * not starting with "f", or too short). */
static int64_t addr_at(const struct kallsyms *k, size_t pos)
{
  uint64_t v = 0;
  if (pos + 16 > k->len || k->s[pos] != 'f')
    return -1;
  for (size_t i = pos + 4; i < pos + 16; i++) {
    char c = k->s[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
          : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0)
      return -1;
    v = v * 16 + (uint64_t)d;
  }
  return v >= KSPAN ? (int64_t)(v - KSPAN) : -1;
}

static char type_at(const struct kallsyms *k, size_t pos)
{
  return pos + 17 < k->len ? k->s[pos + 17] : 0;
}

/* perf's symbol_type__filter: T, W, D, B in either case */
static int kept(const struct kallsyms *k, size_t pos)
{
  char t = type_at(k, pos);
  return t && strchr("TtWwDdBb", t) != NULL;
}

static size_t next_line(const struct kallsyms *k, size_t pos)
{
  const char *nl = memchr(k->s + pos, '\n', k->len - pos);
  return nl ? (size_t)(nl - k->s) + 1 : k->len;
}

/* The start of the line before the one at pos; (size_t)-1 at the first. */
static size_t prev_line(const struct kallsyms *k, size_t pos)
{
  size_t p;
  if (pos == 0)
    return (size_t)-1;
  p = pos - 1;   /* the newline ending the line before */
  while (p > 0 && k->s[p - 1] != '\n')
    p--;
  return p;
}

/* The last line in [lo, hi) whose address is <= v (lo's is). */
static size_t last_le(const struct kallsyms *k, size_t lo, size_t hi, int64_t v)
{
  for (;;) {
    size_t after = next_line(k, lo), mid, m;
    if (after >= hi)
      return lo;
    mid = after + (hi - after) / 2;
    m = mid == after ? after : next_line(k, mid - 1);
    if (m >= hi) {
      hi = mid;
    } else {
      int64_t a = addr_at(k, m);
      if (a >= 0 && a <= v)
        lo = m;
      else
        hi = m;
    }
  }
}

/* Where a symbol starting at v ends when no kept symbol follows it:
 * perf's symbols__fixup_end for the last one. */
static uint64_t last_end(const struct kallsyms *k, uint64_t start)
{
  if (k->modules)
    return (start + PAGE + PAGE - 1) / PAGE * PAGE;
  return (start + PAGE - 1) / PAGE * PAGE + PAGE;
}

static struct kallsyms *check(lua_State *L)
{
  struct kallsyms *k = (struct kallsyms *)perfev_self(L, KALLSYMS_MT);
  if (!k->s)
    luaL_error(L, "perfev.kallsyms: the file is closed");
  return k;
}

/* m:find(v) -> key, name, start, object | nil: the kernel's kept symbol
 * holding v (key: its line's byte position, from 1). */
static int l_find(lua_State *L)
{
  struct kallsyms *k = check(L);
  int64_t v = (int64_t)luaL_checknumber(L, 2), first, start, stop = -1;
  size_t pos, nxt, name_end;
  const char *tab;
  if (k->core_end == 0 || (first = addr_at(k, 0)) < 0 || v < first)
    return 0;
  pos = last_le(k, 0, k->core_end, v);
  while (pos != (size_t)-1 && !kept(k, pos))
    pos = prev_line(k, pos);
  if (pos == (size_t)-1 || (start = addr_at(k, pos)) < 0)
    return 0;
  for (nxt = next_line(k, pos); nxt < k->core_end; nxt = next_line(k, nxt)) {
    int64_t a;
    if (kept(k, nxt) && (a = addr_at(k, nxt)) > start) {
      stop = a;
      break;
    }
  }
  if (stop < 0)
    stop = (int64_t)last_end(k, (uint64_t)start);
  if (v >= stop || pos + 19 > k->len)
    return 0;
  name_end = next_line(k, pos);
  if (name_end > pos + 19 && k->s[name_end - 1] == '\n')
    name_end--;
  tab = memchr(k->s + pos + 19, '\t', name_end - (pos + 19));
  if (tab)
    name_end = (size_t)(tab - k->s);
  lua_pushinteger(L, (lua_Integer)pos + 1);
  lua_pushlstring(L, k->s + pos + 19, name_end - (pos + 19));
  lua_pushinteger(L, (lua_Integer)start);
  lua_pushboolean(L, strchr("DdBb", type_at(k, pos)) != NULL);
  return 4;
}

/* m:core_limit() -> where the kernel's last kept symbol ends, or nil. */
static int l_core_limit(lua_State *L)
{
  struct kallsyms *k = check(L);
  size_t pos = k->core_end ? prev_line(k, k->core_end) : (size_t)-1;
  int64_t start;
  while (pos != (size_t)-1 && !kept(k, pos))
    pos = prev_line(k, pos);
  if (pos == (size_t)-1 || (start = addr_at(k, pos)) < 0)
    return 0;
  lua_pushinteger(L, (lua_Integer)last_end(k, (uint64_t)start));
  return 1;
}

/* m:first() -> v of the first line, or nil (hidden addresses: all zeros) */
static int l_first(lua_State *L)
{
  struct kallsyms *k = check(L);
  int64_t v = addr_at(k, 0);
  if (v < 0)
    return 0;
  lua_pushinteger(L, (lua_Integer)v);
  return 1;
}

/* m:modules() -> the modules' lines, as one string ("" when none) */
static int l_modules(lua_State *L)
{
  struct kallsyms *k = check(L);
  lua_pushlstring(L, k->s + k->core_end, k->len - k->core_end);
  return 1;
}

static int l_size(lua_State *L)
{
  lua_pushinteger(L, (lua_Integer)check(L)->len);
  return 1;
}

static void release(struct kallsyms *k)
{
  if (!k->s)
    return;
  if (k->mapped)
    munmap((void *)k->s, k->len);   /* cannot fail on a mapping we made */
  else
    free((void *)k->s);
  k->s = NULL;
}

static int l_close(lua_State *L)
{
  struct kallsyms *k = (struct kallsyms *)perfev_self(L, KALLSYMS_MT);
  if (k)   /* NULL: __gc given another self (perfev_self) */
    release(k);
  return 0;
}

static int l_closed(lua_State *L)
{
  lua_pushboolean(L, ((struct kallsyms *)perfev_self(L, KALLSYMS_MT))->s == NULL);
  return 1;
}

/* The whole of fd into a malloc'd buffer (for /proc/kallsyms, whose size
 * is 0 to stat): 0 or an errno. */
static int slurp(int fd, char **out, size_t *len)
{
  size_t cap = 1 << 20, n = 0;
  char *buf = malloc(cap);
  if (!buf)
    return ENOMEM;
  for (;;) {
    ssize_t r;
    if (n == cap) {
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        return ENOMEM;
      }
      buf = nb;
      cap *= 2;
    }
    r = read(fd, buf + n, cap - n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      int err = errno;
      free(buf);
      return err;
    }
    if (r == 0)
      break;
    n += (size_t)r;
  }
  *out = buf;
  *len = n;
  return 0;
}

/* The text of path: a regular file mapped, anything else read. */
static int load(const char *path, struct kallsyms *k)
{
  struct stat st;
  int err = 0, fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (m != MAP_FAILED) {
      k->s = m;
      k->len = (size_t)st.st_size;
      k->mapped = 1;
    }
  }
  if (!k->s) {
    char *buf = NULL;
    err = slurp(fd, &buf, &k->len);
    k->s = buf;
  }
  close(fd);   /* a read-only fd: nothing to flush */
  return err;
}

/* core.kallsyms_map(path) -> map | nil, message, errno */
static int l_map(lua_State *L)
{
  const char *path = luaL_checkstring(L, 1);
  struct kallsyms *k = (struct kallsyms *)perfev_newuserdata(L, sizeof *k);
  const char *mod;
  int err;
  memset(k, 0, sizeof *k);
  luaL_setmetatable(L, KALLSYMS_MT);
  if ((err = load(path, k)) != 0)
    return perfev_push_errno(L, err, path);
  /* the modules' lines ("\t[name]") come after the kernel's */
  mod = k->len ? memmem(k->s, k->len, "\t[", 2) : NULL;
  k->core_end = k->len;
  if (mod) {
    size_t p = (size_t)(mod - k->s);
    while (p > 0 && k->s[p - 1] != '\n')
      p--;
    k->core_end = p;
    /* the kernel's last symbol ends by the rule for a file with modules
     * when one of their symbols counts (perf's kallsyms has them) */
    for (; p < k->len && !k->modules; p = next_line(k, p))
      k->modules = kept(k, p) && addr_at(k, p) >= 0;
  }
  return 1;
}

static int l_tostring(lua_State *L)
{
  struct kallsyms *k = (struct kallsyms *)perfev_self(L, KALLSYMS_MT);
  if (!k->s)
    lua_pushliteral(L, "perfev.kallsyms (closed)");
  else
    lua_pushfstring(L, "perfev.kallsyms (%d bytes, %s%s)", (int)k->len,
                    k->mapped ? "mapped" : "read", k->modules ? ", with modules" : "");
  return 1;
}

int perfev_kallsyms_open_lib(lua_State *L)
{
  static const luaL_Reg meta[] = {
    { "__gc", l_close }, { "__close", l_close }, { "__tostring", l_tostring }, { NULL, NULL }
  };
  static const luaL_Reg methods[] = {
    { "find", l_find }, { "core_limit", l_core_limit }, { "first", l_first },
    { "modules", l_modules }, { "size", l_size }, { "close", l_close }, { "closed", l_closed },
    { NULL, NULL }
  };
  perfev_class_register(L, KALLSYMS_MT, meta, methods);
  lua_pushcfunction(L, l_map);
  lua_setfield(L, -2, "kallsyms_map");
  return 0;
}
