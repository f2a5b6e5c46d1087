/* One encode op for each decode op of record.c, walked over the same rows
 * of record_layout.c. Each op writes exactly the bytes its decode op reads,
 * so that decode(encode(t)) == t. Where the decoder drops bits (reserved
 * fields, padding), the op writes zeros, as the kernel does. */
#include <string.h>
#include "encode.h"

/* ---- reading the record table ---- */

static void field_name(char *buf, size_t size, const char *path, const char *key)
{
  snprintf(buf, size, "%s%s%s", path ? path : "", path ? "." : "", key);
}

static void missing(struct perfev_enc *e, const char *path, const char *key)
{
  char name[96];
  field_name(name, sizeof name, path, key);
  perfev_enc_error(e, "%s needs field '%s'%s", e->what, name, e->why);
}

static void wrong(struct perfev_enc *e, const char *path, const char *key, const char *want)
{
  char name[96];
  field_name(name, sizeof name, path, key);
  perfev_enc_error(e, "field '%s' must be %s, got %s", name, want, luaL_typename(e->L, -1));
}

/* Pushes t[key] when it is a string; its bytes stay alive in t. */
static const char *need_str(struct perfev_enc *e, int t, const char *path, const char *key, size_t *n)
{
  lua_getfield(e->L, t, key);
  if (lua_isnil(e->L, -1))
    missing(e, path, key);
  if (lua_type(e->L, -1) != LUA_TSTRING)
    wrong(e, path, key, "a string");
  return lua_tolstring(e->L, -1, n);
}

/* Pushes t[key] when it is a table and returns its absolute index. */
static int need_table(struct perfev_enc *e, int t, const char *path, const char *key)
{
  lua_getfield(e->L, t, key);
  if (lua_isnil(e->L, -1))
    missing(e, path, key);
  if (!lua_istable(e->L, -1))
    wrong(e, path, key, "a table");
  return lua_gettop(e->L);
}

/* Pushes t[i] when it is a table; path[i] names it in messages. */
static int need_entry(struct perfev_enc *e, int t, const char *path, size_t i, char *name, size_t size)
{
  snprintf(name, size, "%s[%zu]", path, i);
  lua_rawgeti(e->L, t, (lua_Integer)i);
  if (!lua_istable(e->L, -1)) {
    perfev_enc_error(e, "field '%s' must be a table, got %s", name, luaL_typename(e->L, -1));
  }
  return lua_gettop(e->L);
}

/* Sets e->why for the duration of a sub-field, and restores it. */
static void with_why(struct perfev_enc *e, char *saved, size_t size, const char *why)
{
  snprintf(saved, size, "%s", e->why);
  snprintf(e->why, sizeof e->why, "%s", why);
}

static void restore_why(struct perfev_enc *e, const char *saved)
{
  snprintf(e->why, sizeof e->why, "%s", saved);
}

/* ---- scalar fields ---- */

static void op_u8(struct perfev_enc *e, const struct perfev_rfield *f)
{
  perfev_enc_int(e, perfev_enc_need_u(e, e->src, NULL, f->name, 8), 1);
}

static void op_u16(struct perfev_enc *e, const struct perfev_rfield *f)
{
  perfev_enc_int(e, perfev_enc_need_u(e, e->src, NULL, f->name, 16), 2);
}

static void op_u32(struct perfev_enc *e, const struct perfev_rfield *f)
{
  perfev_enc_int(e, perfev_enc_need_u(e, e->src, NULL, f->name, 32), 4);
}

static void op_u64(struct perfev_enc *e, const struct perfev_rfield *f)
{
  perfev_enc_u64(e, perfev_enc_need_u(e, e->src, NULL, f->name, 64));
}

static void op_pad32(struct perfev_enc *e, const struct perfev_rfield *f)
{
  (void)f;
  perfev_enc_zeros(e, 4);
}

/* The string, and its NUL unless size says the record has no room for it;
 * the body's padding (encode.c) pads it to 8 bytes as the kernel does. */
static void op_str(struct perfev_enc *e, const struct perfev_rfield *f)
{
  size_t n;
  const char *s = need_str(e, e->src, NULL, f->name, &n);
  const char *nul = memchr(s, 0, n);
  if (nul)
    perfev_enc_error(e, "field '%s' holds a NUL byte at offset %zu (the record's strings end "
                        "at their first NUL)", f->name, (size_t)(nul - s));
  perfev_enc_put(e, s, n);
  if (!e->exact)
    perfev_enc_zeros(e, 1);
}

static void op_bytes8(struct perfev_enc *e, const struct perfev_rfield *f)
{
  size_t n;
  const char *s = need_str(e, e->src, NULL, f->name, &n);
  if (n != 8)
    perfev_enc_error(e, "field '%s' must be 8 bytes, got %zu", f->name, n);
  perfev_enc_put(e, s, 8);
}

/* ---- composite fields ---- */

/* value, id, lost of one read_format entry, then nothing else. */
static void read_entry(struct perfev_enc *e, int t, const char *path, uint64_t fmt)
{
  char saved[96];
  perfev_enc_u64(e, perfev_enc_need_u(e, t, path, "value", 64));
  with_why(e, saved, sizeof saved, " (read_format has ID)");
  if (fmt & PERF_FORMAT_ID)
    perfev_enc_u64(e, perfev_enc_need_u(e, t, path, "id", 64));
  snprintf(e->why, sizeof e->why, " (read_format has LOST)");
  if (fmt & PERF_FORMAT_LOST)
    perfev_enc_u64(e, perfev_enc_need_u(e, t, path, "lost", 64));
  restore_why(e, saved);
}

static void read_times(struct perfev_enc *e, int t, const char *path, uint64_t fmt)
{
  char saved[96];
  with_why(e, saved, sizeof saved, " (read_format has TOTAL_TIME_ENABLED)");
  if (fmt & PERF_FORMAT_TOTAL_TIME_ENABLED)
    perfev_enc_u64(e, perfev_enc_need_u(e, t, path, "time_enabled", 64));
  snprintf(e->why, sizeof e->why, " (read_format has TOTAL_TIME_RUNNING)");
  if (fmt & PERF_FORMAT_TOTAL_TIME_RUNNING)
    perfev_enc_u64(e, perfev_enc_need_u(e, t, path, "time_running", 64));
  restore_why(e, saved);
}

static void op_read(struct perfev_enc *e, const struct perfev_rfield *f)
{
  uint64_t fmt = e->l->read_format, given;
  int t = need_table(e, e->src, NULL, f->name);
  char name[48];
  if (!(fmt & PERF_FORMAT_GROUP)) {
    char saved[96];
    perfev_enc_u64(e, perfev_enc_need_u(e, t, f->name, "value", 64));
    read_times(e, t, f->name, fmt);
    with_why(e, saved, sizeof saved, " (read_format has ID)");
    if (fmt & PERF_FORMAT_ID)
      perfev_enc_u64(e, perfev_enc_need_u(e, t, f->name, "id", 64));
    snprintf(e->why, sizeof e->why, " (read_format has LOST)");
    if (fmt & PERF_FORMAT_LOST)
      perfev_enc_u64(e, perfev_enc_need_u(e, t, f->name, "lost", 64));
    restore_why(e, saved);
    return;
  }
  size_t nr = lua_rawlen(e->L, t);
  if (perfev_enc_opt_u(e, t, f->name, "nr", 64, &given) && given != nr)
    perfev_enc_error(e, "field '%s.nr' is %llu but '%s' lists %zu values (read_format has GROUP)",
                     f->name, (unsigned long long)given, f->name, nr);
  perfev_enc_u64(e, nr);
  read_times(e, t, f->name, fmt);
  for (size_t i = 1; i <= nr; i++) {
    int entry = need_entry(e, t, f->name, i, name, sizeof name);
    read_entry(e, entry, name, fmt);
    lua_pop(e->L, 1);
  }
}

/* The PERF_CONTEXT_* marker of callchain_contexts[i]: a name of
 * core.CONTEXT, or the number the decoder gives for one it cannot name. */
static uint64_t segment_marker(struct perfev_enc *e, int seg, const char *name)
{
  const struct perfev_const_table *ctx = perfev_consts_get("CONTEXT");
  uint64_t v = 0;
  lua_getfield(e->L, seg, "context");
  if (lua_type(e->L, -1) == LUA_TSTRING) {
    if (!ctx || !perfev_const_lookup(ctx, lua_tostring(e->L, -1), &v))
      perfev_enc_error(e, "field '%s.context': '%s' is not a PERF_CONTEXT_* name", name,
                       lua_tostring(e->L, -1));
  } else {
    lua_pop(e->L, 1);
    v = perfev_enc_need_u(e, seg, name, "context", 64);
    if (v < (uint64_t)PERF_CONTEXT_MAX)
      perfev_enc_error(e, "field '%s.context' is %lld, not a PERF_CONTEXT_* marker (those are "
                          "the u64 values from 2^64-4095 up)", name, (long long)v);
    return v;
  }
  lua_pop(e->L, 1);
  return v;
}

/* nr, then the addresses of rec.callchain with the markers of
 * rec.callchain_contexts put back before the frame each segment opens at
 * (its `first`; #callchain + 1 for a segment with no frame after it). */
static void op_callchain(struct perfev_enc *e, const struct perfev_rfield *f)
{
  lua_State *L = e->L;
  int chain = need_table(e, e->rec, NULL, f->name), segs = 0;
  size_t n = lua_rawlen(L, chain), nseg = 0, s = 1;
  char name[48];
  lua_getfield(L, e->rec, "callchain_contexts");
  if (!lua_isnil(L, -1)) {
    if (!lua_istable(L, -1))
      wrong(e, NULL, "callchain_contexts", "a table");
    segs = lua_gettop(L);
    nseg = lua_rawlen(L, segs);
  }
  perfev_enc_u64(e, (uint64_t)n + nseg);
  for (size_t i = 1; i <= n + 1; i++) {
    while (s <= nseg) {
      int seg = need_entry(e, segs, "callchain_contexts", s, name, sizeof name);
      uint64_t first = perfev_enc_need_u(e, seg, name, "first", 64);
      if (first != i) {
        lua_pop(L, 1);
        break;
      }
      perfev_enc_u64(e, segment_marker(e, seg, name));
      lua_pop(L, 1);
      s++;
    }
    if (i <= n) {
      uint64_t ip;
      snprintf(name, sizeof name, "%s[%zu]", f->name, i);
      lua_rawgeti(L, chain, (lua_Integer)i);
      ip = perfev_enc_check_u(e, name, 64);
      if (ip >= (uint64_t)PERF_CONTEXT_MAX)
        perfev_enc_error(e, "field '%s' is a PERF_CONTEXT_* marker value: put markers in "
                            "callchain_contexts", name);
      perfev_enc_u64(e, ip);
    }
  }
  if (s <= nseg)
    perfev_enc_error(e, "field 'callchain_contexts[%zu].first' is out of order or past "
                        "#callchain + 1 (%zu)", s, n + 1);
}

/* Variable-length bytes: the kernel pads them with zeros and counts the
 * padding in their size, so that what follows stays 8-byte aligned; in
 * exact mode (rec.size given) they are written as they are. */
static size_t pad_for(const struct perfev_enc *e, size_t n)
{
  return e->exact ? 0 : (8 - n % 8) % 8;
}

static void op_raw(struct perfev_enc *e, const struct perfev_rfield *f)
{
  size_t n, pad;
  const char *s = need_str(e, e->src, NULL, f->name, &n);
  pad = pad_for(e, n + 4);
  if (n + pad > UINT32_MAX)
    perfev_enc_error(e, "field '%s' is %zu bytes, over the u32 size", f->name, n);
  perfev_enc_int(e, n + pad, 4);
  perfev_enc_put(e, s, n);
  perfev_enc_zeros(e, pad);
}

static void op_auxdata(struct perfev_enc *e, const struct perfev_rfield *f)
{
  size_t n, pad;
  const char *s = need_str(e, e->src, NULL, f->name, &n);
  pad = pad_for(e, n);
  perfev_enc_u64(e, n + pad);
  perfev_enc_put(e, s, n);
  perfev_enc_zeros(e, pad);
}

/* size, data, and dyn_size when size is not 0. */
static void op_stack(struct perfev_enc *e, const struct perfev_rfield *f)
{
  size_t n, pad;
  const char *s = need_str(e, e->src, NULL, f->name, &n);
  pad = pad_for(e, n);
  perfev_enc_u64(e, n + pad);
  perfev_enc_put(e, s, n);
  perfev_enc_zeros(e, pad);
  if (n + pad) {
    char saved[96];
    with_why(e, saved, sizeof saved, " (stack_user is not empty)");
    perfev_enc_u64(e, perfev_enc_need_u(e, e->src, NULL, "dyn_size", 64));
    restore_why(e, saved);
  }
}

/* The bitfields of struct perf_branch_entry's third word, as record.c
 * decodes them (the same table; bits 33..63 are reserved): low bit first
 * as a little-endian machine lays them out, from the top bit down on a
 * big-endian one. */
static const struct { const char *name; uint8_t bit, width, is_bool; } branch_bits[] = {
  { "mispred", 0, 1, 1 }, { "predicted", 1, 1, 1 }, { "in_tx", 2, 1, 1 }, { "abort", 3, 1, 1 },
  { "cycles", 4, 16, 0 }, { "type", 20, 4, 0 }, { "spec", 24, 2, 0 }, { "new_type", 26, 4, 0 },
  { "priv", 30, 3, 0 },
};

/* The flags word: entry.flags when given (every bit, reserved ones too),
 * else the bitfields by name, a missing one 0. */
static uint64_t branch_flags(struct perfev_enc *e, int t, const char *path)
{
  uint64_t flags = 0, v;
  if (perfev_enc_opt_u(e, t, path, "flags", 64, &flags))
    return flags;
  for (size_t i = 0; i < sizeof branch_bits / sizeof branch_bits[0]; i++) {
    lua_getfield(e->L, t, branch_bits[i].name);
    if (branch_bits[i].is_bool && lua_isboolean(e->L, -1)) {
      v = (uint64_t)lua_toboolean(e->L, -1);
      lua_pop(e->L, 1);
    } else {
      lua_pop(e->L, 1);
      if (!perfev_enc_opt_u(e, t, path, branch_bits[i].name, branch_bits[i].width, &v))
        v = 0;
    }
    flags |= v << (perfev_enc_big_endian(e) ? 64 - branch_bits[i].bit - branch_bits[i].width
                                            : branch_bits[i].bit);
  }
  return flags;
}

/* nr, hw_idx (branch_sample_type HW_INDEX), the entries, then a counter
 * word per entry (branch_sample_type COUNTERS). */
static void op_branch(struct perfev_enc *e, const struct perfev_rfield *f)
{
  uint64_t bst = e->l->branch_sample_type;
  int t = need_table(e, e->src, NULL, f->name);
  size_t nr = lua_rawlen(e->L, t);
  char name[48], saved[96];
  perfev_enc_u64(e, nr);
  with_why(e, saved, sizeof saved, " (branch_sample_type has HW_INDEX)");
  if (bst & PERF_SAMPLE_BRANCH_HW_INDEX)
    perfev_enc_u64(e, perfev_enc_need_u(e, t, f->name, "hw_idx", 64));
  restore_why(e, saved);
  for (size_t i = 1; i <= nr; i++) {
    int entry = need_entry(e, t, f->name, i, name, sizeof name);
    perfev_enc_u64(e, perfev_enc_need_u(e, entry, name, "from", 64));
    perfev_enc_u64(e, perfev_enc_need_u(e, entry, name, "to", 64));
    perfev_enc_u64(e, branch_flags(e, entry, name));
    lua_pop(e->L, 1);
  }
  if (!(bst & PERF_SAMPLE_BRANCH_COUNTERS))
    return;
  with_why(e, saved, sizeof saved, " (branch_sample_type has COUNTERS)");
  for (size_t i = 1; i <= nr; i++) {
    int entry = need_entry(e, t, f->name, i, name, sizeof name);
    perfev_enc_u64(e, perfev_enc_need_u(e, entry, name, "counters", 64));
    lua_pop(e->L, 1);
  }
  restore_why(e, saved);
}

/* The name record.c gives perf register index i: "ax", "xmm0", "xmm0h"
 * for an XMM register's upper half, "r<i>" for an index without a name. */
static void reg_name(int i, char *buf, size_t size)
{
  const struct perfev_const_table *t = perfev_consts_get("REG");
  const char *name = t ? perfev_const_name(t, (uint64_t)i) : NULL;
  const char *lo = (!name && i > 0 && t) ? perfev_const_name(t, (uint64_t)(i - 1)) : NULL;
  if (lo && strncmp(lo, "XMM", 3) == 0)
    snprintf(buf, size, "%sh", lo);
  else if (name)
    snprintf(buf, size, "%s", name);
  else
    snprintf(buf, size, "r%d", i);
  for (size_t n = 0; buf[n]; n++)
    if (buf[n] >= 'A' && buf[n] <= 'Z')
      buf[n] = (char)(buf[n] - 'A' + 'a');
}

/* abi, then a word per bit of the attr's mask, unless abi is NONE. */
static void regs(struct perfev_enc *e, const char *key, uint64_t mask, const char *mask_name)
{
  int t = need_table(e, e->src, NULL, key);
  uint64_t abi = perfev_enc_need_u(e, t, key, "abi", 64);
  char name[16], saved[96];
  perfev_enc_u64(e, abi);
  snprintf(saved, sizeof saved, "%s", e->why);
  for (int i = 0; abi != PERF_SAMPLE_REGS_ABI_NONE && i < 64; i++) {
    if (!(mask & ((uint64_t)1 << i)))
      continue;
    reg_name(i, name, sizeof name);
    snprintf(e->why, sizeof e->why, " (%s has bit %d)", mask_name, i);
    perfev_enc_u64(e, perfev_enc_need_u(e, t, key, name, 64));
  }
  restore_why(e, saved);
}

static void op_regs_user(struct perfev_enc *e, const struct perfev_rfield *f)
{
  regs(e, f->name, e->l->regs_user, "sample_regs_user");
}

static void op_regs_intr(struct perfev_enc *e, const struct perfev_rfield *f)
{
  regs(e, f->name, e->l->regs_intr, "sample_regs_intr");
}

/* WEIGHT: one u64. WEIGHT_STRUCT: union perf_sample_weight as one u64,
 * weight (var1_dw) in its low 32 bits, var2_w and var3_w above: the same
 * word in either byte order, as the union's two declarations make it. */
static void op_weight(struct perfev_enc *e, const struct perfev_rfield *f)
{
  char saved[96];
  uint64_t w;
  if (!(e->l->sample_type & PERF_SAMPLE_WEIGHT_STRUCT)) {
    perfev_enc_u64(e, perfev_enc_need_u(e, e->src, NULL, f->name, 64));
    return;
  }
  with_why(e, saved, sizeof saved, " (sample_type has WEIGHT_STRUCT)");
  w = perfev_enc_need_u(e, e->src, NULL, f->name, 32);
  w |= perfev_enc_need_u(e, e->src, NULL, "var2_w", 16) << 32;
  w |= perfev_enc_need_u(e, e->src, NULL, "var3_w", 16) << 48;
  perfev_enc_u64(e, w);
  restore_why(e, saved);
}

/* One field of rec.mem back to its bits: a number, a constant's name, or
 * for a bit set "a|b". */
static uint64_t mem_field(struct perfev_enc *e, int mem, const struct perfev_mem_field *m)
{
  const struct perfev_const_table *t = perfev_consts_get(m->consts);
  uint64_t v = 0, bit;
  const char *s, *bar;
  char part[32];
  lua_getfield(e->L, mem, m->name);
  if (lua_type(e->L, -1) != LUA_TSTRING) {
    lua_pop(e->L, 1);
    if (!perfev_enc_opt_u(e, mem, "mem", m->name, m->width, &v))
      v = 0;
    return v;
  }
  for (s = lua_tostring(e->L, -1); ; s = bar + 1) {
    size_t n;
    bar = strchr(s, '|');
    n = bar ? (size_t)(bar - s) : strlen(s);
    snprintf(part, sizeof part, "%.*s", (int)(n < sizeof part ? n : sizeof part - 1), s);
    if (!t || n >= sizeof part || !perfev_const_lookup(t, part, &bit) || (m->is_enum && bar))
      perfev_enc_error(e, "field 'mem.%s': '%s' is not %s of %s", m->name, lua_tostring(e->L, -1),
                       m->is_enum ? "a value" : "a set of names", m->consts);
    v |= bit;
    if (!bar)
      break;
  }
  lua_pop(e->L, 1);
  if (m->width < 64 && v >> m->width)
    perfev_enc_error(e, "field 'mem.%s' does not fit its %d bits", m->name, m->width);
  return v;
}

/* rec.data_src, else rec.mem by name (what the decoder gives both of). */
static void op_data_src(struct perfev_enc *e, const struct perfev_rfield *f)
{
  uint64_t v = 0;
  int mem;
  if (perfev_enc_opt_u(e, e->src, NULL, f->name, 64, &v)) {
    perfev_enc_u64(e, v);
    return;
  }
  lua_getfield(e->L, e->src, "mem");
  if (lua_isnil(e->L, -1))
    missing(e, NULL, f->name);
  if (!lua_istable(e->L, -1))
    wrong(e, NULL, "mem", "a table");
  mem = lua_gettop(e->L);
  for (size_t i = 0; i < perfev_mem_nfields; i++)
    v |= mem_field(e, mem, &perfev_mem_fields[i]) << perfev_mem_fields[i].shift;
  perfev_enc_u64(e, v);
}

static void op_namespaces(struct perfev_enc *e, const struct perfev_rfield *f)
{
  int t = need_table(e, e->src, NULL, f->name);
  size_t nr = lua_rawlen(e->L, t);
  char name[48];
  perfev_enc_u64(e, nr);
  for (size_t i = 1; i <= nr; i++) {
    int entry = need_entry(e, t, f->name, i, name, sizeof name);
    perfev_enc_u64(e, perfev_enc_need_u(e, entry, name, "dev", 64));
    perfev_enc_u64(e, perfev_enc_need_u(e, entry, name, "inode", 64));
    lua_pop(e->L, 1);
  }
}

/* maj, min, ino, ino_generation; or (misc MMAP_BUILD_ID) the build id's
 * size byte, 3 reserved bytes and 20 bytes of id, zero-filled. */
static void op_mmap2_id(struct perfev_enc *e, const struct perfev_rfield *f)
{
  (void)f;
  if (e->misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
    size_t n;
    const char *id;
    snprintf(e->why, sizeof e->why, " (misc has MMAP_BUILD_ID)");
    id = need_str(e, e->src, NULL, "build_id", &n);
    if (n > 20)
      perfev_enc_error(e, "field 'build_id' is %zu bytes, over 20", n);
    perfev_enc_int(e, n, 1);
    perfev_enc_zeros(e, 3);
    perfev_enc_put(e, id, n);
    perfev_enc_zeros(e, 20 - n);
    e->why[0] = '\0';
    return;
  }
  perfev_enc_int(e, perfev_enc_need_u(e, e->src, NULL, "maj", 32), 4);
  perfev_enc_int(e, perfev_enc_need_u(e, e->src, NULL, "min", 32), 4);
  perfev_enc_u64(e, perfev_enc_need_u(e, e->src, NULL, "ino", 64));
  perfev_enc_u64(e, perfev_enc_need_u(e, e->src, NULL, "ino_generation", 64));
}

static void op_text_poke(struct perfev_enc *e, const struct perfev_rfield *f)
{
  size_t old_len, new_len;
  const char *old_bytes = need_str(e, e->src, NULL, "old_bytes", &old_len);
  const char *new_bytes = need_str(e, e->src, NULL, "new_bytes", &new_len);
  (void)f;
  if (old_len > 0xffff || new_len > 0xffff)
    perfev_enc_error(e, "fields 'old_bytes' and 'new_bytes' must be at most 65535 bytes each");
  perfev_enc_int(e, old_len, 2);
  perfev_enc_int(e, new_len, 2);
  perfev_enc_put(e, old_bytes, old_len);
  perfev_enc_put(e, new_bytes, new_len);
}

/* rec.flags, else the PERF_AUX_FLAG_* bits the decoder names as booleans. */
static void op_aux_flags(struct perfev_enc *e, const struct perfev_rfield *f)
{
  const struct perfev_const_table *t = perfev_consts_get("AUX_FLAG");
  uint64_t v = 0;
  char key[48];
  if (!perfev_enc_opt_u(e, e->src, NULL, f->name, 64, &v)) {
    for (size_t i = 0; t && i < t->n; i++) {
      uint64_t bit = t->items[i].value;
      size_t k;
      if ((bit & (bit - 1)) != 0 || strncmp(t->items[i].name, "CORESIGHT", 9) == 0)
        continue;
      for (k = 0; t->items[i].name[k] && k + 1 < sizeof key; k++) {
        char c = t->items[i].name[k];
        key[k] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      }
      key[k] = '\0';
      lua_getfield(e->L, e->src, key);
      if (lua_toboolean(e->L, -1))
        v |= bit;
      lua_pop(e->L, 1);
    }
  }
  perfev_enc_u64(e, v);
}

typedef void (*op_fn)(struct perfev_enc *, const struct perfev_rfield *);

static const op_fn ops[OP_COUNT] = {
  [OP_U8] = op_u8, [OP_U16] = op_u16, [OP_U32] = op_u32, [OP_U64] = op_u64,
  [OP_PAD32] = op_pad32, [OP_STR] = op_str, [OP_BYTES8] = op_bytes8, [OP_READ] = op_read,
  [OP_CALLCHAIN] = op_callchain, [OP_RAW] = op_raw, [OP_BRANCH] = op_branch,
  [OP_REGS_USER] = op_regs_user, [OP_REGS_INTR] = op_regs_intr, [OP_STACK] = op_stack,
  [OP_WEIGHT] = op_weight, [OP_DATA_SRC] = op_data_src, [OP_AUXDATA] = op_auxdata,
  [OP_NAMESPACES] = op_namespaces, [OP_MMAP2_ID] = op_mmap2_id,
  [OP_TEXT_POKE] = op_text_poke, [OP_AUX_FLAGS] = op_aux_flags,
};

/* The name of the lowest sample_type bit of mask, for messages. */
static const char *sample_bit_name(uint64_t mask)
{
  const struct perfev_const_table *t = perfev_consts_get("SAMPLE");
  const char *name = t ? perfev_const_name(t, mask & (~mask + 1)) : NULL;
  return name ? name : "?";
}

/* The one loop, the twin of record.c's: every row present, in order. */
void perfev_enc_walk(struct perfev_enc *e, const struct perfev_rfield *rows, size_t n,
                     const char *cond)
{
  uint64_t st = e->l->sample_type;
  for (size_t i = 0; i < n; i++) {
    int top = lua_gettop(e->L);
    if (rows[i].mask != 0 && !(st & rows[i].mask))
      continue;
    if (rows[i].mask != 0)
      snprintf(e->why, sizeof e->why, " (%s has %s)", cond, sample_bit_name(st & rows[i].mask));
    else
      e->why[0] = '\0';
    ops[rows[i].op](e, &rows[i]);
    lua_settop(e->L, top);
  }
  e->why[0] = '\0';
}
