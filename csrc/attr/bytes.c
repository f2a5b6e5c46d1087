/* An attr from the bytes of a struct perf_event_attr as a file holds it
 * (perf.data attrs, header_attr records), possibly written on a machine of
 * the other byte order. core.attr_from_bytes(s[, swap]). */
#include <string.h>
#include "perfev.h"
#include "fields.h"

static void bswap_unit(unsigned char *p, size_t size)
{
  for (size_t i = 0; i < size / 2; i++) {
    unsigned char t = p[i];
    p[i] = p[size - 1 - i];
    p[size - 1 - i] = t;
  }
}

/* Bitfields are laid out from the most significant bit on big-endian
 * machines and from the least on little-endian ones, unit by unit, so the
 * same field sits at the mirror bit of the same byte: a bitfield unit keeps
 * its bytes and reverses the bits of each. */
static void bitrev_unit(unsigned char *p, size_t size)
{
  for (size_t i = 0; i < size; i++) {
    unsigned b = p[i], r = 0;
    for (int k = 0; k < 8; k++)
      r |= ((b >> k) & 1u) << (7 - k);
    p[i] = (unsigned char)r;
  }
}

/* Storage the field table does not name (reserved, must be zero). */
static const struct { uint16_t off; uint8_t size; } reserved_units[] = { { 110, 2 } };

/* Converts the first n bytes of an attr image from the other byte order:
 * every storage unit the field table knows, once, when it lies whole
 * within n. */
static void attr_swap_bytes(unsigned char *raw, size_t n)
{
  unsigned char done[PERFEV_ATTR_SIZE] = { 0 };
  if (n > PERFEV_ATTR_SIZE)
    n = PERFEV_ATTR_SIZE;
  for (size_t i = 0; i < perfev_attr_nfields; i++) {
    const struct perfev_field *f = &perfev_attr_fields[i];
    int bitfield = 0;
    if (done[f->off] || (size_t)f->off + f->size > n)
      continue;
    done[f->off] = 1;
    for (size_t j = 0; j < perfev_attr_nfields; j++)
      if (perfev_attr_fields[j].off == f->off && perfev_attr_fields[j].width < f->size * 8)
        bitfield = 1;
    if (bitfield)
      bitrev_unit(raw + f->off, f->size);
    else
      bswap_unit(raw + f->off, f->size);
  }
  for (size_t i = 0; i < sizeof reserved_units / sizeof reserved_units[0]; i++)
    if ((size_t)reserved_units[i].off + reserved_units[i].size <= n)
      bswap_unit(raw + reserved_units[i].off, reserved_units[i].size);
}

struct perfev_attr *perfev_attr_push_bytes(lua_State *L, const unsigned char *p, size_t n, int swap)
{
  unsigned char raw[PERFEV_ATTR_SIZE] = { 0 };
  struct perfev_attr *a;
  /* bytes past the newest attr this build knows are dropped: a newer
   * writer's fields cannot be named anyway */
  memcpy(raw, p, n < sizeof raw ? n : sizeof raw);
  if (swap)
    attr_swap_bytes(raw, n);
  lua_pushnil(L);
  a = perfev_attr_from(L, -1);   /* an empty attr */
  lua_remove(L, -2);
  memcpy(a->raw, raw, sizeof raw);
  return a;
}

/* core.attr_from_bytes(s[, swap]): the size field is kept as the bytes
 * say, so that a writer can give the attr back as it was. */
static int l_attr_from_bytes(lua_State *L)
{
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  int swap = lua_toboolean(L, 2);
  if (n < 8)
    luaL_error(L, "perfev.attr_from_bytes: %d bytes is shorter than an attr's type and size",
               (int)n);
  perfev_attr_push_bytes(L, (const unsigned char *)s, n, swap);
  return 1;
}

int perfev_attr_bytes_open_lib(lua_State *L)
{
  lua_pushcfunction(L, l_attr_from_bytes);
  lua_setfield(L, -2, "attr_from_bytes");
  return 0;
}
