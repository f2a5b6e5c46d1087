/* One encode op for each decode op of decode.c, walked over the same rows
 * of layout.c. Each op writes exactly the bytes its decode op reads,
 * so that decode(encode(t)) == t. Where the decoder drops bits (reserved
 * fields, padding), the op writes zeros, as the kernel does. */
#include <string.h>
#include "encode.h"

/* ---- reading the record table ---- */

static void missing(struct perfev_enc *e, const char *path, size_t at, const char *key)
{
  char name[96], why[96];
  perfev_enc_why_text(e, why, sizeof why);
  perfev_enc_error(e, "%s needs field '%s'%s", e->what,
                   perfev_enc_name(name, sizeof name, path, at, key), why);
}

static void wrong(struct perfev_enc *e, const char *path, size_t at, const char *key,
                  const char *want)
{
  char name[96];
  perfev_enc_error(e, "field '%s' must be %s, got %s",
                   perfev_enc_name(name, sizeof name, path, at, key), want,
                   luaL_typename(e->L, -1));
}

/* Pushes t[key] when it is a string; its bytes stay alive in t. */
static const char *need_str(struct perfev_enc *e, int t, const char *key, size_t *n)
{
  int type = lua_getfield(e->L, t, key);
  if (type == LUA_TNIL)
    missing(e, NULL, 0, key);
  if (type != LUA_TSTRING)
    wrong(e, NULL, 0, key, "a string");
  return lua_tolstring(e->L, -1, n);
}

/* Pushes t[key] when it is a table and returns its absolute index. */
static int need_table(struct perfev_enc *e, int t, const char *key)
{
  int type = lua_getfield(e->L, t, key);
  if (type == LUA_TNIL)
    missing(e, NULL, 0, key);
  if (type != LUA_TTABLE)
    wrong(e, NULL, 0, key, "a table");
  return lua_gettop(e->L);
}

/* Pushes path[i] (the table at t) when it is a table. */
static int need_entry(struct perfev_enc *e, int t, const char *path, size_t i)
{
  if (lua_rawgeti(e->L, t, (lua_Integer)i) != LUA_TTABLE)
    wrong(e, path, i, NULL, "a table");
  return lua_gettop(e->L);
}

/* Pushes a scalar field of the record: in the trailer rec.sample_id's
 * when it has one, else the record's (the decoder gives sample_id only
 * when a body field hides a trailer one). Returns whether it is there. */
static int get_scalar(struct perfev_enc *e, const char *key)
{
  if (lua_getfield(e->L, e->src, key) != LUA_TNIL || e->src == e->rec)
    return !lua_isnil(e->L, -1);
  lua_pop(e->L, 1);
  return lua_getfield(e->L, e->rec, key) != LUA_TNIL;
}

static uint64_t need_scalar(struct perfev_enc *e, const char *key, int bits)
{
  if (!get_scalar(e, key))
    missing(e, NULL, 0, key);
  return perfev_enc_check_u(e, NULL, 0, key, bits);
}

/* ---- scalar fields ---- */

static void op_u8(struct perfev_enc *e, const struct perfev_rfield *f)
{
  perfev_enc_int(e, need_scalar(e, f->name, 8), 1);
}

static void op_u16(struct perfev_enc *e, const struct perfev_rfield *f)
{
  perfev_enc_int(e, need_scalar(e, f->name, 16), 2);
}

static void op_u32(struct perfev_enc *e, const struct perfev_rfield *f)
{
  perfev_enc_int(e, need_scalar(e, f->name, 32), 4);
}

/* A pid_t in a u32: -1 as the decoder gives it, or 4294967295. */
static void op_s32(struct perfev_enc *e, const struct perfev_rfield *f)
{
  lua_State *L = e->L;
  int isint = 0;
  lua_Integer v;
  if (!get_scalar(e, f->name))
    missing(e, NULL, 0, f->name);
  v = lua_tointegerx(L, -1, &isint);
  if (!isint || !perfev_isnum(L, -1))
    wrong(e, NULL, 0, f->name, "an integer");
  if (v < INT32_MIN || v > (lua_Integer)UINT32_MAX)
    perfev_enc_error(e, "field '%s' is %lld, out of range for a pid_t or a u32 "
                        "(-2147483648..4294967295)", f->name, (long long)v);
  lua_pop(L, 1);
  perfev_enc_int(e, (uint32_t)v, 4);
}

static void op_u64(struct perfev_enc *e, const struct perfev_rfield *f)
{
  perfev_enc_u64(e, need_scalar(e, f->name, 64));
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
  const char *s = need_str(e, e->src, f->name, &n);
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
  const char *s = need_str(e, e->src, f->name, &n);
  if (n != 8)
    perfev_enc_error(e, "field '%s' must be 8 bytes, got %zu", f->name, n);
  perfev_enc_put(e, s, 8);
}

/* ---- composite fields ---- */

/* The reasons of read_format's optional words. */
static const struct perfev_enc_why why_id = { " (read_format has ID)", NULL, 0, NULL, 0 };
static const struct perfev_enc_why why_lost = { " (read_format has LOST)", NULL, 0, NULL, 0 };
static const struct perfev_enc_why why_enabled = {
  " (read_format has TOTAL_TIME_ENABLED)", NULL, 0, NULL, 0 };
static const struct perfev_enc_why why_running = {
  " (read_format has TOTAL_TIME_RUNNING)", NULL, 0, NULL, 0 };

/* t.key (a table named path[at]) when flag is in fmt, needed for why. */
static void read_word(struct perfev_enc *e, int t, const char *path, size_t at, const char *key,
                      uint64_t fmt, uint64_t flag, const struct perfev_enc_why *why)
{
  struct perfev_enc_why saved = e->why;
  if (!(fmt & flag))
    return;
  e->why = *why;
  perfev_enc_u64(e, perfev_enc_need_u(e, t, path, at, key, 64));
  e->why = saved;
}

static void read_times(struct perfev_enc *e, int t, const char *path, uint64_t fmt)
{
  read_word(e, t, path, 0, "time_enabled", fmt, PERF_FORMAT_TOTAL_TIME_ENABLED, &why_enabled);
  read_word(e, t, path, 0, "time_running", fmt, PERF_FORMAT_TOTAL_TIME_RUNNING, &why_running);
}

/* value, then id and lost as read_format has them. */
static void read_value(struct perfev_enc *e, int t, const char *path, size_t at, uint64_t fmt,
                       int with_times)
{
  perfev_enc_u64(e, perfev_enc_need_u(e, t, path, at, "value", 64));
  if (with_times)
    read_times(e, t, path, fmt);
  read_word(e, t, path, at, "id", fmt, PERF_FORMAT_ID, &why_id);
  read_word(e, t, path, at, "lost", fmt, PERF_FORMAT_LOST, &why_lost);
}

static void op_read(struct perfev_enc *e, const struct perfev_rfield *f)
{
  uint64_t fmt = e->l->read_format, given;
  int t = need_table(e, e->src, f->name);
  size_t nr;
  if (!(fmt & PERF_FORMAT_GROUP)) {
    read_value(e, t, f->name, 0, fmt, 1);
    return;
  }
  nr = lua_rawlen(e->L, t);
  if (perfev_enc_opt_u(e, t, f->name, 0, "nr", 64, &given) && given != nr)
    perfev_enc_error(e, "field '%s.nr' is %llu but '%s' lists %zu values (read_format has GROUP)",
                     f->name, (unsigned long long)given, f->name, nr);
  perfev_enc_u64(e, nr);
  read_times(e, t, f->name, fmt);
  for (size_t i = 1; i <= nr; i++) {
    int entry = need_entry(e, t, f->name, i);
    read_value(e, entry, f->name, i, fmt, 0);
    lua_pop(e->L, 1);
  }
}

/* The PERF_CONTEXT_* marker of callchain_contexts[s]: the name the
 * decoder gives it (or another spelling of core.CONTEXT), or the number
 * it gives for one it cannot name. */
static uint64_t segment_marker(struct perfev_enc *e, int seg, size_t s)
{
  const char *path = "callchain_contexts";
  uint64_t v = 0;
  if (lua_getfield(e->L, seg, "context") == LUA_TSTRING) {
    const char *name = lua_tostring(e->L, -1);
    const struct perfev_const_table *ctx;
    for (size_t i = 0; i < perfev_ncontexts; i++)
      if (strcmp(perfev_contexts[i].name, name) == 0)
        return perfev_contexts[i].marker;
    ctx = perfev_consts_get("CONTEXT");
    if (!ctx || !perfev_const_lookup(ctx, name, &v))
      perfev_enc_error(e, "field '%s[%zu].context': '%s' is not a PERF_CONTEXT_* name", path, s,
                       name);
    return v;
  }
  lua_pop(e->L, 1);
  v = perfev_enc_need_u(e, seg, path, s, "context", 64);
  if (v < (uint64_t)PERF_CONTEXT_MAX)
    perfev_enc_error(e, "field '%s[%zu].context' is %lld, not a PERF_CONTEXT_* marker (those "
                        "are the u64 values from 2^64-4095 up)", path, s, (long long)v);
  return v;
}

/* callchain[i], an address (not a marker). */
static void put_frame(struct perfev_enc *e, int chain, const char *path, size_t i)
{
  uint64_t ip;
  lua_rawgeti(e->L, chain, (lua_Integer)i);
  ip = perfev_enc_check_u(e, path, i, NULL, 64);
  if (ip >= (uint64_t)PERF_CONTEXT_MAX)
    perfev_enc_error(e, "field '%s[%zu]' is a PERF_CONTEXT_* marker value: put markers in "
                        "callchain_contexts", path, i);
  perfev_enc_u64(e, ip);
}

/* nr, then the addresses of rec.callchain with the markers of
 * rec.callchain_contexts put back before the frame each segment opens at
 * (its `first`; #callchain + 1 for a segment with no frame after it). */
static void op_callchain(struct perfev_enc *e, const struct perfev_rfield *f)
{
  lua_State *L = e->L;
  int chain = need_table(e, e->src, f->name), segs = 0;
  size_t n = lua_rawlen(L, chain), nseg = 0, i = 1;
  int type = lua_getfield(L, e->src, "callchain_contexts");
  if (type != LUA_TNIL) {
    if (type != LUA_TTABLE)
      wrong(e, NULL, 0, "callchain_contexts", "a table");
    segs = lua_gettop(L);
    nseg = lua_rawlen(L, segs);
  }
  perfev_enc_u64(e, (uint64_t)n + nseg);
  for (size_t s = 1; s <= nseg; s++) {
    int seg = need_entry(e, segs, "callchain_contexts", s);
    uint64_t first = perfev_enc_need_u(e, seg, "callchain_contexts", s, "first", 64);
    if (first < i || first > n + 1)
      perfev_enc_error(e, "field 'callchain_contexts[%zu].first' is out of order or past "
                          "#callchain + 1 (%zu)", s, n + 1);
    for (; i < first; i++)
      put_frame(e, chain, f->name, i);
    perfev_enc_u64(e, segment_marker(e, seg, s));
    lua_pop(L, 1);
  }
  for (; i <= n; i++)
    put_frame(e, chain, f->name, i);
}

/* A string field after its size word (a u32 for raw, else a u64): the
 * kernel pads the bytes with zeros and counts the padding in the size, so
 * that what follows stays 8-byte aligned; in exact mode (rec.size given)
 * they are written as they are. Returns the size written. */
static uint64_t put_sized(struct perfev_enc *e, const char *key, size_t word)
{
  size_t n, pad;
  const char *s = need_str(e, e->src, key, &n);
  pad = e->exact ? 0 : (8 - (n + (word == 4 ? 4 : 0)) % 8) % 8;
  if (word == 4 && n + pad > UINT32_MAX)
    perfev_enc_error(e, "field '%s' is %zu bytes, over the u32 size", key, n);
  perfev_enc_int(e, n + pad, word);
  perfev_enc_put(e, s, n);
  perfev_enc_zeros(e, pad);
  return n + pad;
}

static void op_raw(struct perfev_enc *e, const struct perfev_rfield *f)
{
  put_sized(e, f->name, 4);
}

static void op_auxdata(struct perfev_enc *e, const struct perfev_rfield *f)
{
  put_sized(e, f->name, 8);
}

/* size, data, and dyn_size when size is not 0. */
static void op_stack(struct perfev_enc *e, const struct perfev_rfield *f)
{
  static const struct perfev_enc_why why = { " (stack_user is not empty)", NULL, 0, NULL, 0 };
  if (put_sized(e, f->name, 8)) {
    struct perfev_enc_why saved = e->why;
    e->why = why;
    perfev_enc_u64(e, need_scalar(e, "dyn_size", 64));
    e->why = saved;
  }
}

/* The flags word: entry.flags when given (every bit, reserved ones too:
 * the decoder gives it when one of those is set), else the bitfields by
 * name, a missing one 0. */
static uint64_t branch_flags(struct perfev_enc *e, int t, size_t at)
{
  uint64_t flags = 0, v;
  int be = perfev_enc_big_endian(e);
  if (perfev_enc_opt_u(e, t, "branch_stack", at, "flags", 64, &flags))
    return flags;
  for (size_t i = 0; i < perfev_branch_nbits; i++) {
    const struct perfev_branch_bit *b = &perfev_branch_bits[i];
    int type = lua_getfield(e->L, t, b->name);
    if (type == LUA_TNIL) {
      lua_pop(e->L, 1);
      continue;
    }
    if (b->is_bool && type == LUA_TBOOLEAN) {
      v = (uint64_t)lua_toboolean(e->L, -1);
      lua_pop(e->L, 1);
    } else {
      v = perfev_enc_check_u(e, "branch_stack", at, b->name, b->width);
    }
    flags |= v << perfev_branch_shift(b, be);
  }
  return flags;
}

/* nr, hw_idx (branch_sample_type HW_INDEX), the entries, then a counter
 * word per entry (branch_sample_type COUNTERS). */
static void op_branch(struct perfev_enc *e, const struct perfev_rfield *f)
{
  static const struct perfev_enc_why why_hw = {
    " (branch_sample_type has HW_INDEX)", NULL, 0, NULL, 0 };
  static const struct perfev_enc_why why_counters = {
    " (branch_sample_type has COUNTERS)", NULL, 0, NULL, 0 };
  uint64_t bst = e->l->branch_sample_type;
  int t = need_table(e, e->src, f->name);
  size_t nr = lua_rawlen(e->L, t);
  struct perfev_enc_why saved = e->why;
  perfev_enc_u64(e, nr);
  if (bst & PERF_SAMPLE_BRANCH_HW_INDEX) {
    e->why = why_hw;
    perfev_enc_u64(e, perfev_enc_need_u(e, t, f->name, 0, "hw_idx", 64));
    e->why = saved;
  }
  for (size_t i = 1; i <= nr; i++) {
    int entry = need_entry(e, t, f->name, i);
    perfev_enc_u64(e, perfev_enc_need_u(e, entry, f->name, i, "from", 64));
    perfev_enc_u64(e, perfev_enc_need_u(e, entry, f->name, i, "to", 64));
    perfev_enc_u64(e, branch_flags(e, entry, i));
    lua_pop(e->L, 1);
  }
  if (!(bst & PERF_SAMPLE_BRANCH_COUNTERS))
    return;
  e->why = why_counters;
  for (size_t i = 1; i <= nr; i++) {
    int entry = need_entry(e, t, f->name, i);
    perfev_enc_u64(e, perfev_enc_need_u(e, entry, f->name, i, "counters", 64));
    lua_pop(e->L, 1);
  }
  e->why = saved;
}

/* abi, then a word per bit of the attr's mask, unless abi is NONE. */
static void regs(struct perfev_enc *e, const char *key, uint64_t mask, const char *mask_name)
{
  int t = need_table(e, e->src, key);
  uint64_t abi = perfev_enc_need_u(e, t, key, 0, "abi", 64);
  char name[PERFEV_REG_NAME];
  struct perfev_enc_why saved = e->why;
  perfev_enc_u64(e, abi);
  for (int i = 0; abi != PERF_SAMPLE_REGS_ABI_NONE && i < 64; i++) {
    if (!(mask & ((uint64_t)1 << i)))
      continue;
    perfev_reg_name(i, name);
    e->why = (struct perfev_enc_why){ NULL, NULL, 0, mask_name, i };
    perfev_enc_u64(e, perfev_enc_need_u(e, t, key, 0, name, 64));
  }
  e->why = saved;
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
  static const struct perfev_enc_why why = { " (sample_type has WEIGHT_STRUCT)", NULL, 0, NULL, 0 };
  struct perfev_enc_why saved = e->why;
  uint64_t w;
  if (!(e->l->sample_type & PERF_SAMPLE_WEIGHT_STRUCT)) {
    perfev_enc_u64(e, need_scalar(e, f->name, 64));
    return;
  }
  e->why = why;
  w = need_scalar(e, f->name, 32);
  w |= need_scalar(e, "var2_w", 16) << 32;
  w |= need_scalar(e, "var3_w", 16) << 48;
  perfev_enc_u64(e, w);
  e->why = saved;
}

/* One field of rec.mem back to its bits: a number, a constant's name, or
 * for a bit set "a|b". */
static uint64_t mem_field(struct perfev_enc *e, int mem, const struct perfev_mem_field *m)
{
  const struct perfev_const_table *t = perfev_consts_get(m->consts);
  uint64_t v = 0, bit;
  const char *s, *bar;
  char part[32];
  if (lua_getfield(e->L, mem, m->name) != LUA_TSTRING) {
    lua_pop(e->L, 1);
    if (!perfev_enc_opt_u(e, mem, "mem", 0, m->name, m->width, &v))
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
  int mem, type;
  if (perfev_enc_opt_u(e, e->src, NULL, 0, f->name, 64, &v)) {
    perfev_enc_u64(e, v);
    return;
  }
  type = lua_getfield(e->L, e->src, "mem");
  if (type == LUA_TNIL)
    missing(e, NULL, 0, f->name);
  if (type != LUA_TTABLE)
    wrong(e, NULL, 0, "mem", "a table");
  mem = lua_gettop(e->L);
  for (size_t i = 0; i < perfev_mem_nfields; i++)
    v |= mem_field(e, mem, &perfev_mem_fields[i]) << perfev_mem_fields[i].shift;
  perfev_enc_u64(e, v);
}

static void op_namespaces(struct perfev_enc *e, const struct perfev_rfield *f)
{
  int t = need_table(e, e->src, f->name);
  size_t nr = lua_rawlen(e->L, t);
  perfev_enc_u64(e, nr);
  for (size_t i = 1; i <= nr; i++) {
    int entry = need_entry(e, t, f->name, i);
    perfev_enc_u64(e, perfev_enc_need_u(e, entry, f->name, i, "dev", 64));
    perfev_enc_u64(e, perfev_enc_need_u(e, entry, f->name, i, "inode", 64));
    lua_pop(e->L, 1);
  }
}

/* maj, min, ino, ino_generation; or (misc MMAP_BUILD_ID) the build id's
 * size byte, 3 reserved bytes and 20 bytes of id, zero-filled. */
static void op_mmap2_id(struct perfev_enc *e, const struct perfev_rfield *f)
{
  static const struct perfev_enc_why why = { " (misc has MMAP_BUILD_ID)", NULL, 0, NULL, 0 };
  (void)f;
  if (e->misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
    struct perfev_enc_why saved = e->why;
    size_t n;
    const char *id;
    e->why = why;
    id = need_str(e, e->src, "build_id", &n);
    if (n > 20)
      perfev_enc_error(e, "field 'build_id' is %zu bytes, over 20", n);
    perfev_enc_int(e, n, 1);
    perfev_enc_zeros(e, 3);
    perfev_enc_put(e, id, n);
    perfev_enc_zeros(e, 20 - n);
    e->why = saved;
    return;
  }
  perfev_enc_int(e, need_scalar(e, "maj", 32), 4);
  perfev_enc_int(e, need_scalar(e, "min", 32), 4);
  perfev_enc_u64(e, need_scalar(e, "ino", 64));
  perfev_enc_u64(e, need_scalar(e, "ino_generation", 64));
}

static void op_text_poke(struct perfev_enc *e, const struct perfev_rfield *f)
{
  size_t old_len, new_len;
  const char *old_bytes = need_str(e, e->src, "old_bytes", &old_len);
  const char *new_bytes = need_str(e, e->src, "new_bytes", &new_len);
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
  if (!perfev_enc_opt_u(e, e->src, NULL, 0, f->name, 64, &v)) {
    for (size_t i = 0; t && i < t->n; i++) {
      size_t k;
      if (!perfev_aux_flag_named(&t->items[i]))
        continue;
      for (k = 0; t->items[i].name[k] && k + 1 < sizeof key; k++) {
        char c = t->items[i].name[k];
        key[k] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      }
      key[k] = '\0';
      lua_getfield(e->L, e->src, key);
      if (lua_toboolean(e->L, -1))
        v |= t->items[i].value;
      lua_pop(e->L, 1);
    }
  }
  perfev_enc_u64(e, v);
}

typedef void (*op_fn)(struct perfev_enc *, const struct perfev_rfield *);

static const op_fn ops[OP_COUNT] = { PERFEV_OPS(PERFEV_OP_FN) };

/* The one loop, the twin of decode.c's: every row present, in order. */
void perfev_enc_walk(struct perfev_enc *e, const struct perfev_rfield *rows, size_t n,
                     const char *cond)
{
  uint64_t st = e->l->sample_type;
  for (size_t i = 0; i < n; i++) {
    int top = lua_gettop(e->L);
    if (rows[i].mask != 0 && !(st & rows[i].mask))
      continue;
    e->why = (struct perfev_enc_why){ NULL, rows[i].mask ? cond : NULL, st & rows[i].mask, NULL, 0 };
    ops[rows[i].op](e, &rows[i]);
    lua_settop(e->L, top);
  }
  memset(&e->why, 0, sizeof e->why);
}
