/* core.encode(record or records, attr | event | { [id] = attr, ... }
 * [, { swap = b }]) -> bytes: the inverse of the record decoder (decode.c). The header, misc,
 * the record's size and padding, the sample_id trailer and the choice of
 * attr are here; the fields are written by encode_fields.c walking the same
 * layout tables the decoder walks.
 *
 * Two ways to lay a record out: without rec.size, as the kernel does
 * (strings NUL-terminated, variable-length bytes and the body padded to 8
 * bytes with zeros); with rec.size (every decoded record has it), to
 * exactly that size, fields as given and zeros to fill, so that the bytes
 * a table was decoded from come back. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "encode.h"

/* ---- output ---- */

void perfev_enc_error(struct perfev_enc *e, const char *fmt, ...)
{
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  lua_pushfstring(e->L, "perfev.encode: %s", msg);
  lua_error(e->L);
}

/* The buffer is a userdata in a stack slot (freed by the GC whatever
 * happens), replaced by one twice its size when it fills. */
static unsigned char *enc_room(struct perfev_enc *e, size_t n)
{
  unsigned char *p;
  if (n > PERFEV_RECORD_MAX - (e->len - e->start))
    perfev_enc_error(e, "the %s record needs more than %u bytes (header.size is 16 bits)", e->what,
                     PERFEV_RECORD_MAX);
  if (n > e->cap - e->len) {
    size_t cap = e->cap;
    while (cap - e->len < n)
      cap *= 2;
    p = (unsigned char *)perfev_newuserdata(e->L, cap);
    memcpy(p, e->buf, e->len);
    lua_replace(e->L, e->buf_slot);
    e->buf = p;
    e->cap = cap;
  }
  p = e->buf + e->len;
  e->len += n;
  return p;
}

void perfev_enc_put(struct perfev_enc *e, const void *p, size_t n)
{
  if (n)
    memcpy(enc_room(e, n), p, n);
}

void perfev_enc_zeros(struct perfev_enc *e, size_t n)
{
  if (n)
    memset(enc_room(e, n), 0, n);
}

void perfev_enc_int(struct perfev_enc *e, uint64_t v, size_t n)
{
  unsigned char *p = enc_room(e, n);
  if (n == 8) {
    uint64_t x = e->swap ? __builtin_bswap64(v) : v;
    memcpy(p, &x, 8);
  } else if (n == 4) {
    uint32_t x = e->swap ? __builtin_bswap32((uint32_t)v) : (uint32_t)v;
    memcpy(p, &x, 4);
  } else if (n == 2) {
    uint16_t x = e->swap ? __builtin_bswap16((uint16_t)v) : (uint16_t)v;
    memcpy(p, &x, 2);
  } else {
    *p = (unsigned char)v;
  }
}

void perfev_enc_u64(struct perfev_enc *e, uint64_t v)
{
  perfev_enc_int(e, v, 8);
}

int perfev_enc_big_endian(const struct perfev_enc *e)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  return !e->swap;
#else
  return e->swap;
#endif
}

/* ---- reading the record table ---- */

const char *perfev_enc_name(char *buf, size_t size, const char *path, size_t at, const char *key)
{
  if (!path)
    snprintf(buf, size, "%s", key);
  else if (at)
    snprintf(buf, size, "%s[%zu]%s%s", path, at, key ? "." : "", key ? key : "");
  else
    snprintf(buf, size, "%s.%s", path, key);
  return buf;
}

void perfev_enc_why_text(const struct perfev_enc *e, char *buf, size_t size)
{
  const struct perfev_enc_why *w = &e->why;
  if (w->text) {
    snprintf(buf, size, "%s", w->text);
  } else if (w->cond) {
    const struct perfev_const_table *t = perfev_consts_get("SAMPLE");
    const char *name = t ? perfev_const_name(t, w->bit & (~w->bit + 1)) : NULL;
    snprintf(buf, size, " (%s has %s)", w->cond, name ? name : "?");
  } else if (w->mask) {
    snprintf(buf, size, " (%s has bit %d)", w->mask, w->reg);
  } else {
    buf[0] = '\0';
  }
}

uint64_t perfev_enc_check_u(struct perfev_enc *e, const char *path, size_t at, const char *key,
                            int bits)
{
  lua_State *L = e->L;
  int isint = 0;
  lua_Integer v = lua_tointegerx(L, -1, &isint);
  char name[96];
  if (!isint || !perfev_isnum(L, -1))
    perfev_enc_error(e, "field '%s' must be an integer, got %s",
                     perfev_enc_name(name, sizeof name, path, at, key),
                     lua_type(L, -1) == LUA_TNUMBER ? "a float" : luaL_typename(L, -1));
  if (bits < 64 && (v < 0 || (uint64_t)v >> bits))
    perfev_enc_error(e, "field '%s' is %lld, out of range for %d bits (0..%llu)",
                     perfev_enc_name(name, sizeof name, path, at, key), (long long)v, bits,
                     (unsigned long long)(((uint64_t)1 << bits) - 1));
  lua_pop(L, 1);
  return (uint64_t)v;
}

int perfev_enc_opt_u(struct perfev_enc *e, int t, const char *path, size_t at, const char *key,
                     int bits, uint64_t *out)
{
  if (lua_getfield(e->L, t, key) == LUA_TNIL) {
    lua_pop(e->L, 1);
    return 0;
  }
  *out = perfev_enc_check_u(e, path, at, key, bits);
  return 1;
}

uint64_t perfev_enc_need_u(struct perfev_enc *e, int t, const char *path, size_t at,
                           const char *key, int bits)
{
  uint64_t v = 0;
  if (!perfev_enc_opt_u(e, t, path, at, key, bits, &v)) {
    char name[96], why[96];
    perfev_enc_why_text(e, why, sizeof why);
    perfev_enc_error(e, "%s needs field '%s'%s", e->what,
                     perfev_enc_name(name, sizeof name, path, at, key), why);
  }
  return v;
}

/* ---- the header ---- */

/* rec.type: a record type's name, or a number (a type this ABI does not
 * know is written from rec.data). Sets e->type, e->what; returns the type's
 * layout or NULL. */
static const struct perfev_rtype *record_type(struct perfev_enc *e)
{
  lua_State *L = e->L;
  const struct perfev_rtype *rt = NULL;
  e->what = "record";
  lua_getfield(L, e->rec, "type");
  if (lua_type(L, -1) == LUA_TSTRING) {
    const char *name = lua_tostring(L, -1);
    for (uint32_t t = 0; t <= UINT8_MAX && !rt; t++) {
      const struct perfev_rtype *r = perfev_rtype_find(t);
      if (r && strcmp(r->name, name) == 0)
        rt = r;
    }
    if (rt)
      e->type = rt->type;
    else
      perfev_enc_error(e, "unknown record type '%s' (a number encodes a type this ABI does not "
                          "name, from rec.data)", name);
    lua_pop(L, 1);
  } else if (lua_isnil(L, -1)) {
    perfev_enc_error(e, "record needs field 'type'");
  } else {
    e->type = (uint32_t)perfev_enc_check_u(e, NULL, 0, "type", 32);
    rt = perfev_rtype_find(e->type);
  }
  if (rt) {
    e->what = rt->name;
  } else {
    snprintf(e->what_buf, sizeof e->what_buf, "record of type %u", (unsigned)e->type);
    e->what = e->what_buf;
  }
  return rt;
}

/* rec.misc when given; else rec.cpumode and the flags the decoder sets as
 * booleans (comm_exec, switch_out, ...), and for mmap2 MMAP_BUILD_ID when
 * rec.build_id is there. */
static uint16_t record_misc(struct perfev_enc *e)
{
  lua_State *L = e->L;
  uint64_t misc = 0;
  if (perfev_enc_opt_u(e, e->rec, NULL, 0, "misc", 16, &misc))
    return (uint16_t)misc;
  lua_getfield(L, e->rec, "cpumode");
  if (lua_type(L, -1) == LUA_TSTRING) {
    const char *name = lua_tostring(L, -1);
    size_t mode = 0;
    while (mode < 8 && !(perfev_cpumode_names[mode] && strcmp(perfev_cpumode_names[mode], name) == 0))
      mode++;
    if (mode == 8 && strcmp(name, "unknown") != 0)
      perfev_enc_error(e, "field 'cpumode': '%s' is not a cpumode (user, kernel, hypervisor, "
                          "guest_kernel, guest_user, unknown)", name);
    misc = mode == 8 ? 0 : mode;
    lua_pop(L, 1);
  } else if (!lua_isnil(L, -1)) {
    misc = perfev_enc_check_u(e, NULL, 0, "cpumode", 3);
  } else {
    lua_pop(L, 1);
  }
  for (size_t i = 0; i < perfev_misc_nflags; i++) {
    const struct perfev_misc_flag *m = &perfev_misc_flags[i];
    if (m->type != 0 && m->type != e->type)
      continue;
    lua_getfield(L, e->rec, m->name);
    if (!lua_isnil(L, -1) && !lua_isboolean(L, -1))
      perfev_enc_error(e, "field '%s' must be a boolean, got %s", m->name, luaL_typename(L, -1));
    if (lua_toboolean(L, -1))
      misc |= m->bit;
    lua_pop(L, 1);
  }
  if (e->type == PERF_RECORD_MMAP2) {
    lua_getfield(L, e->rec, "build_id");
    if (!lua_isnil(L, -1))
      misc |= PERF_RECORD_MISC_MMAP_BUILD_ID;
    lua_pop(L, 1);
  }
  return (uint16_t)misc;
}

/* ---- the attrs ---- */

/* The layout of this record: by its id when there are several, the way
 * the decoder picks it (the sample's id; the trailer's, which is
 * rec.sample_id.id when given, else rec.id). */
static const struct perfev_attr_params *pick_layout(struct perfev_enc *e, const struct perfev_rtype *rt,
                                               const struct perfev_attr_params *ls, size_t n)
{
  const uint64_t has_id = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_ID;
  uint64_t id = 0;
  int found = 0;
  if (n == 1 || !rt)
    return &ls[0];
  if (rt->type != PERF_RECORD_SAMPLE &&
      !(rt->trailer && ls[0].sample_id_all && (ls[0].sample_type & has_id)))
    return &ls[0];
  if (rt->type != PERF_RECORD_SAMPLE) {
    lua_getfield(e->L, e->rec, "sample_id");
    if (lua_istable(e->L, -1))
      found = perfev_enc_opt_u(e, lua_gettop(e->L), "sample_id", 0, "id", 64, &id);
    lua_pop(e->L, 1);
  }
  if (!found && !perfev_enc_opt_u(e, e->rec, NULL, 0, "id", 64, &id))
    perfev_enc_error(e, "%s needs field 'id' to pick its attr among several", e->what);
  for (size_t i = 0; i < n; i++)
    if (ls[i].id == id)
      return &ls[i];
  perfev_enc_error(e, "no attr for id %llu", (unsigned long long)id);
  return NULL;
}

/* ---- one record ---- */

static void encode_one(struct perfev_enc *e, const struct perfev_attr_params *ls, size_t nls)
{
  lua_State *L = e->L;
  const struct perfev_rtype *rt;
  struct perf_event_header h;
  uint64_t size = 0;
  size_t trailer = 0, body_end;
  e->start = e->len;
  memset(&e->why, 0, sizeof e->why);
  e->src = e->rec;
  rt = record_type(e);
  e->l = pick_layout(e, rt, ls, nls);
  e->misc = record_misc(e);
  e->exact = perfev_enc_opt_u(e, e->rec, NULL, 0, "size", 16, &size);
  if (rt && rt->trailer && e->l->sample_id_all)
    trailer = e->l->trailer_size;
  if (e->exact && size < sizeof h + trailer)
    perfev_enc_error(e, "size %u is smaller than the %zu bytes of the header%s", (unsigned)size,
                     sizeof h + trailer, trailer ? " and the sample_id trailer" : "");
  perfev_enc_zeros(e, sizeof h);
  if (!rt) {
    size_t n;
    const char *data;
    lua_getfield(L, e->rec, "data");
    if (lua_type(L, -1) != LUA_TSTRING)
      perfev_enc_error(e, lua_isnil(L, -1) ? "%s needs field 'data' (its bytes after the header)"
                                           : "field 'data' of the %s must be a string", e->what);
    data = lua_tolstring(L, -1, &n);
    perfev_enc_put(e, data, n);
    lua_pop(L, 1);
  } else if (rt->type == PERF_RECORD_SAMPLE) {
    perfev_enc_walk(e, perfev_sample_fields, perfev_sample_nfields, "sample_type");
  } else {
    perfev_enc_walk(e, rt->fields, rt->nfields, NULL);
  }
  /* the body's padding: to rec.size, or to 8 bytes as the kernel pads */
  body_end = e->exact ? e->start + (size_t)size - trailer : e->len + (rt ? (8 - e->len % 8) % 8 : 0);
  if (e->len > body_end)
    perfev_enc_error(e, "size %u is smaller than the %zu bytes the fields need (leave size out "
                        "to have it computed)", (unsigned)size, e->len - e->start + trailer);
  perfev_enc_zeros(e, body_end - e->len);
  if (trailer) {
    lua_getfield(L, e->rec, "sample_id");   /* the trailer as it was, when the decoder kept it */
    if (lua_istable(L, -1))
      e->src = lua_gettop(L);
    else if (!lua_isnil(L, -1))
      perfev_enc_error(e, "field 'sample_id' must be a table, got %s", luaL_typename(L, -1));
    perfev_enc_walk(e, perfev_trailer_fields, perfev_trailer_nfields, "sample_id_all and sample_type");
    lua_pop(L, 1);
    e->src = e->rec;
  }
  h.type = e->swap ? __builtin_bswap32(e->type) : e->type;
  h.misc = e->swap ? __builtin_bswap16(e->misc) : e->misc;
  h.size = (uint16_t)(e->len - e->start);
  h.size = e->swap ? __builtin_bswap16(h.size) : h.size;
  memcpy(e->buf + e->start, &h, sizeof h);
}

/* The options table at idx: { swap = b }, or nil. */
static int option_swap(lua_State *L, int idx)
{
  static const struct perfev_opt opts[] = { { "swap", LUA_TBOOLEAN }, { NULL, 0 } };
  perfev_check_options(L, idx, "perfev.encode", opts);
  return perfev_opt_bool(L, idx, "swap", 0);
}

/* core.encode(record or { record, ... }, attrs[, { swap = b }]) */
static int l_encode(lua_State *L)
{
  struct perfev_enc e;
  const struct perfev_decoder *d;
  size_t nrec = 1;
  int list, swap;
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 3);
  swap = option_swap(L, 3);
  d = perfev_decoder_from(L, 2, "perfev.encode");
  memset(&e, 0, sizeof e);
  e.L = L;
  e.swap = swap;
  e.cap = 1024;   /* a sample with a deep callchain, without growing */
  e.buf = (unsigned char *)perfev_newuserdata(L, e.cap);
  e.buf_slot = lua_gettop(L);
  lua_getfield(L, 1, "type");
  list = lua_isnil(L, -1) && lua_rawlen(L, 1) > 0;   /* records, not a record */
  lua_pop(L, 1);
  if (list)
    nrec = lua_rawlen(L, 1);
  for (size_t i = 1; i <= nrec; i++) {
    if (list) {
      lua_rawgeti(L, 1, (lua_Integer)i);
      if (!lua_istable(L, -1))
        luaL_error(L, "perfev.encode: records[%d] must be a table, got %s", (int)i, luaL_typename(L, -1));
    } else {
      lua_pushvalue(L, 1);
    }
    e.rec = lua_gettop(L);
    encode_one(&e, d->attrs, d->n);
    lua_settop(L, e.buf_slot);
  }
  lua_pushlstring(L, (const char *)e.buf, e.len);
  return 1;
}

int perfev_encode_open_lib(lua_State *L)
{
  lua_pushcfunction(L, l_encode);
  lua_setfield(L, -2, "encode");
  return 0;
}
