/* The record decoder: one loop over the rows of layout.c, a short
 * function per kind of field, every read bounds-checked against the
 * record. Records are in the host's byte order, as the kernel writes them,
 * or (decoder swap) in the other one, as a perf.data file from a machine
 * of the other endianness: then every integer is byte-swapped as it is
 * read, and strings and byte blobs are left as they are. Every access goes
 * through memcpy, so a buffer needs no alignment. The table of a record is
 * filled through fill.c, which can refill one table for every
 * record without allocating. */
#include <stdio.h>
#include <string.h>
#include "decode.h"
#include "callchain.h"

/* Where decoding is: the record (its region being walked, in),
 * its layout, the table being filled. */
struct cur {
  struct perfev_cursor in;           /* first: cur_fail casts it back */
  lua_State *L;
  size_t off;                        /* the record's offset in the stream */
  uint32_t type;
  uint16_t misc, size;
  const struct perfev_attr_params *l;
  struct perfev_fill *f;             /* the record's table */
  const struct perfev_select *sel;   /* the `fields` option, or NULL: every key */
};

/* ---- errors: everything a malformed record says names its offset ---- */

static void cur_fail(const struct perfev_cursor *in, const char *msg)
{
  const struct cur *c = (const struct cur *)(const void *)in;
  perfev_decode_error(c->L, c->off, c->type, c->size, msg);
}

#define fail(c, ...) perfev_cursor_fail(&(c)->in, __VA_ARGS__)

void perfev_decode_error(lua_State *L, size_t off, uint32_t type, size_t size, const char *msg)
{
  char buf[320];
  snprintf(buf, sizeof buf, "perfev.decode: malformed record at offset %zu (type %u, size %zu): %s",
           off, (unsigned)type, size, msg);
  lua_pushstring(L, buf);
  lua_error(L);
}

static size_t left(const struct cur *c)
{
  return perfev_cursor_left(&c->in);
}

static const unsigned char *take(struct cur *c, size_t n, const char *what)
{
  return perfev_cursor_take(&c->in, n, what);
}

#define get64(c, what) perfev_cursor_u64(&(c)->in, what)
#define get32(c, what) perfev_cursor_u32(&(c)->in, what)
#define get16(c, what) perfev_cursor_u16(&(c)->in, what)
#define get_count(c, each, what) perfev_cursor_count(&(c)->in, each, what)

/* Constant names are upper case, record keys and values lower. */
static void add_lower(luaL_Buffer *b, const char *s)
{
  for (; *s; s++)
    luaL_addchar(b, (char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s));
}

/* ---- scalar fields ---- */

static void op_u8(struct cur *c, const struct perfev_rfield *f)
{
  perfev_fill_put_int(c->f, f->name, *take(c, 1, f->name));
}

static void op_u16(struct cur *c, const struct perfev_rfield *f)
{
  perfev_fill_put_int(c->f, f->name, get16(c, f->name));
}

static void op_u32(struct cur *c, const struct perfev_rfield *f)
{
  perfev_fill_put_int(c->f, f->name, get32(c, f->name));
}

/* pid_t in a u32: -1 stays -1 */
static void op_s32(struct cur *c, const struct perfev_rfield *f)
{
  perfev_fill_put_int(c->f, f->name, (uint64_t)(int64_t)(int32_t)get32(c, f->name));
}

static void op_u64(struct cur *c, const struct perfev_rfield *f)
{
  perfev_fill_put_int(c->f, f->name, get64(c, f->name));
}

static void op_pad32(struct cur *c, const struct perfev_rfield *f)
{
  (void)f;
  take(c, 4, NULL);
}

/* A NUL-terminated string padded to 8 bytes: the rest of the body. A
 * string without its NUL ends at the body's end. */
static void op_str(struct cur *c, const struct perfev_rfield *f)
{
  const unsigned char *nul = memchr(c->in.p, 0, left(c));
  perfev_fill_put_bytes(c->f, f->name, c->in.p, nul ? (size_t)(nul - c->in.p) : left(c));
  c->in.p = c->in.end;
}

static void op_bytes8(struct cur *c, const struct perfev_rfield *f)
{
  perfev_fill_put_bytes(c->f, f->name, take(c, 8, f->name), 8);
}

/* ---- composite fields ---- */

/* struct read_format: one value, or a group's nr values. The keys depend
 * on read_format alone: a reused table of the same layout keeps them. */
static void read_entry(struct cur *c, uint64_t fmt)
{
  perfev_fill_set_int(c->f, "value", get64(c, "read value"));
  if (fmt & PERF_FORMAT_ID)
    perfev_fill_set_int(c->f, "id", get64(c, "read id"));
  if (fmt & PERF_FORMAT_LOST)
    perfev_fill_set_int(c->f, "lost", get64(c, "read lost"));
}

static void read_times(struct cur *c, uint64_t fmt)
{
  if (fmt & PERF_FORMAT_TOTAL_TIME_ENABLED)
    perfev_fill_set_int(c->f, "time_enabled", get64(c, "time_enabled"));
  if (fmt & PERF_FORMAT_TOTAL_TIME_RUNNING)
    perfev_fill_set_int(c->f, "time_running", get64(c, "time_running"));
}

static void op_read(struct cur *c, const struct perfev_rfield *f)
{
  uint64_t fmt = c->l->read_format;
  int here = perfev_fill_shaped(c->f, f->name, 0, 5, fmt);
  if (fmt & PERF_FORMAT_GROUP) {
    size_t each = 8 * (1 + ((fmt & PERF_FORMAT_ID) != 0) + ((fmt & PERF_FORMAT_LOST) != 0));
    uint64_t nr = get64(c, "read nr");
    read_times(c, fmt);
    perfev_cursor_fits(&c->in, nr, each, "read nr");
    perfev_fill_set_int(c->f, "nr", nr);
    for (uint64_t i = 0; i < nr; i++) {
      int in_place = perfev_fill_item(c->f, -1, f->name, (lua_Integer)i + 1, 3);
      read_entry(c, fmt);
      perfev_fill_put_item(c->f, -2, (lua_Integer)i + 1, in_place);
    }
    perfev_fill_trim(c->f, -1, f->name, (lua_Integer)nr);
  } else {
    perfev_fill_set_int(c->f, "value", get64(c, "read value"));
    read_times(c, fmt);
    if (fmt & PERF_FORMAT_ID)
      perfev_fill_set_int(c->f, "id", get64(c, "read id"));
    if (fmt & PERF_FORMAT_LOST)
      perfev_fill_set_int(c->f, "lost", get64(c, "read lost"));
  }
  perfev_fill_put_nested(c->f, f->name, here);
}

/* rec.callchain_contexts' segment k: { context = "kernel", first = i,
 * last = j }, an item table refilled in place when it can be. */
struct segs { struct cur *c; int t; };

static void fill_segment(void *ud, uint64_t marker, lua_Integer first, lua_Integer last,
                         lua_Integer k)
{
  struct segs *s = (struct segs *)ud;
  struct cur *c = s->c;
  const char *name = perfev_context_name(marker);
  int in_place = perfev_fill_item(c->f, s->t, "callchain_contexts", k, 3);
  if (name)
    perfev_fill_name(c->f, name);
  else
    lua_pushinteger(c->L, (lua_Integer)marker);
  perfev_fill_set(c->f, "context");
  perfev_fill_set_int(c->f, "first", (uint64_t)first);
  perfev_fill_set_int(c->f, "last", (uint64_t)last);   /* first - 1: empty */
  perfev_fill_put_item(c->f, s->t, k, in_place);
}

/* rec.callchain: the addresses, without the PERF_CONTEXT_* markers, which
 * become rec.callchain_contexts, the segments they open (when present). */
static void op_callchain(struct cur *c, const struct perfev_rfield *f)
{
  lua_State *L = c->L;
  uint64_t nr = get_count(c, 8, "callchain nr");
  const unsigned char *w = take(c, (size_t)nr * 8, "callchain");
  int here = perfev_fill_nested(c->f, f->name, nr < 256 ? (int)nr : 256, 0);
  lua_Integer n = perfev_chain_fill(L, lua_gettop(L), w, nr, c->in.swap);
  perfev_fill_trim(c->f, lua_gettop(L), NULL, n);
  perfev_fill_put_nested(c->f, f->name, here);
  for (uint64_t i = 0; i < nr; i++)
    if (perfev_ld64(w + 8 * i, c->in.swap) >= (uint64_t)PERF_CONTEXT_MAX) {   /* markers */
      struct segs s = { c, 0 };
      int segs_here = perfev_fill_nested(c->f, "callchain_contexts", 2, 0);
      lua_Integer nseg;
      s.t = lua_gettop(L);
      nseg = perfev_chain_segments(w, nr, c->in.swap, fill_segment, &s);
      perfev_fill_trim(c->f, s.t, "callchain_contexts", nseg);
      perfev_fill_put_nested(c->f, "callchain_contexts", segs_here);   /* absent: no markers */
      break;
    }
}

static void op_raw(struct cur *c, const struct perfev_rfield *f)
{
  uint32_t n = get32(c, "raw size");
  perfev_fill_put_bytes(c->f, f->name, take(c, n, "raw data"), n);
}

static void op_auxdata(struct cur *c, const struct perfev_rfield *f)
{
  uint64_t n = get_count(c, 1, "aux size");
  perfev_fill_put_bytes(c->f, f->name, take(c, (size_t)n, "aux data"), (size_t)n);
}

/* Whether the writer of the records was big-endian. */
static int big_endian_writer(const struct cur *c)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  return !c->in.swap;
#else
  return c->in.swap;
#endif
}

/* from, to and the named bitfields of the flags word; the whole word as
 * entry.flags too when a bit no field names is set (reserved today, a
 * newer kernel's field tomorrow), so that nothing is lost. */
static void branch_entry(struct cur *c)
{
  lua_State *L = c->L;
  int be = big_endian_writer(c);
  uint64_t flags, named = 0;
  perfev_fill_set_int(c->f, "from", get64(c, "branch from"));
  perfev_fill_set_int(c->f, "to", get64(c, "branch to"));
  flags = get64(c, "branch flags");
  for (size_t i = 0; i < perfev_branch_nbits; i++) {
    const struct perfev_branch_bit *b = &perfev_branch_bits[i];
    uint64_t ones = (((uint64_t)1 << b->width) - 1), v;
    unsigned at = perfev_branch_shift(b, be);
    v = (flags >> at) & ones;
    named |= ones << at;
    if (b->is_bool)
      lua_pushboolean(L, v != 0);
    else
      lua_pushinteger(L, (lua_Integer)v);
    perfev_fill_set(c->f, b->name);
  }
  if (flags & ~named)
    lua_pushinteger(L, (lua_Integer)flags);
  else if (c->f->reuse)
    lua_pushnil(L);   /* a reused entry may hold the last record's */
  else
    return;
  perfev_fill_set(c->f, "flags");
}

/* bnr, hw_idx (branch_sample_type HW_INDEX), the entries, then one counter
 * word per entry (branch_sample_type COUNTERS, Linux 6.8). */
static void op_branch(struct cur *c, const struct perfev_rfield *f)
{
  lua_State *L = c->L;
  uint64_t bst = c->l->branch_sample_type;
  uint64_t nr = get64(c, "branch_stack nr");
  int here = perfev_fill_shaped(c->f, f->name, nr < 64 ? (int)nr : 64, 1, bst);
  if (bst & PERF_SAMPLE_BRANCH_HW_INDEX)
    perfev_fill_set_int(c->f, "hw_idx", get64(c, "branch_stack hw_idx"));
  perfev_cursor_fits(&c->in, nr, 24, "branch_stack nr");
  for (uint64_t i = 0; i < nr; i++) {
    int in_place = perfev_fill_item(c->f, -1, f->name, (lua_Integer)i + 1, 11);
    branch_entry(c);
    perfev_fill_put_item(c->f, -2, (lua_Integer)i + 1, in_place);
  }
  perfev_fill_trim(c->f, -1, f->name, (lua_Integer)nr);
  if (bst & PERF_SAMPLE_BRANCH_COUNTERS) {
    perfev_cursor_fits(&c->in, nr, 8, "branch_stack counters");
    for (uint64_t i = 0; i < nr; i++) {
      lua_rawgeti(L, -1, (lua_Integer)i + 1);
      perfev_fill_set_int(c->f, "counters", get64(c, "branch counters"));
      lua_pop(L, 1);
    }
  }
  perfev_fill_put_nested(c->f, f->name, here);
}

/* abi, then one word per bit of the mask (none when abi is NONE): a
 * reused table of the same layout keeps its keys unless abi changed
 * between NONE and not. */
static void regs(struct cur *c, const char *key, uint64_t mask)
{
  lua_State *L = c->L;
  uint64_t abi = get64(c, "regs abi");
  char name[PERFEV_REG_NAME];
  int here = perfev_fill_shaped(c->f, key, 0, 8, mask);
  if (lua_getfield(L, -1, "abi") == LUA_TNUMBER &&
      (lua_tointeger(L, -1) == PERF_SAMPLE_REGS_ABI_NONE) != (abi == PERF_SAMPLE_REGS_ABI_NONE)) {
    lua_pop(L, 1);
    perfev_fill_wipe(L, -1);
  } else {
    lua_pop(L, 1);
  }
  perfev_fill_set_int(c->f, "abi", abi);
  for (int i = 0; abi != PERF_SAMPLE_REGS_ABI_NONE && i < 64; i++) {
    if (!(mask & ((uint64_t)1 << i)))
      continue;
    perfev_reg_name(i, name);
    perfev_set_u64(L, name, get64(c, "register"));
  }
  perfev_fill_put_nested(c->f, key, here);
}

static void op_regs_user(struct cur *c, const struct perfev_rfield *f)
{
  regs(c, f->name, c->l->regs_user);
}

static void op_regs_intr(struct cur *c, const struct perfev_rfield *f)
{
  regs(c, f->name, c->l->regs_intr);
}

/* size, data[size], and dyn_size (the bytes of data that are real) when
 * size is not 0. */
static void op_stack(struct cur *c, const struct perfev_rfield *f)
{
  uint64_t n = get_count(c, 1, "stack_user size");
  perfev_fill_put_bytes(c->f, f->name, take(c, (size_t)n, "stack_user data"), (size_t)n);
  if (n)
    perfev_fill_put_int(c->f, "dyn_size", get64(c, "stack_user dyn_size"));
}

/* PERF_SAMPLE_WEIGHT: one u64. WEIGHT_STRUCT: union perf_sample_weight,
 * weight = var1_dw, and var2_w, var3_w (perf's ins_lat, retire_lat). The
 * union declares its fields in reverse on big-endian machines, so that
 * they sit at the same bits of the u64 in either byte order. */
static void op_weight(struct cur *c, const struct perfev_rfield *f)
{
  uint64_t v = get64(c, f->name);
  if (!(c->l->sample_type & PERF_SAMPLE_WEIGHT_STRUCT)) {
    perfev_fill_put_int(c->f, f->name, v);
    return;
  }
  perfev_fill_put_int(c->f, f->name, v & 0xffffffffu);
  perfev_fill_put_int(c->f, "var2_w", (v >> 32) & 0xffffu);
  perfev_fill_put_int(c->f, "var3_w", v >> 48);
}

/* One field of data_src: a value name, or "a|b" for a bit set. */
static void mem_field(lua_State *L, const struct perfev_mem_field *m, uint64_t v)
{
  const struct perfev_const_table *t = perfev_consts_get(m->consts);
  luaL_Buffer b;
  const char *name;
  int named = 0;
  luaL_buffinit(L, &b);
  if (m->is_enum) {
    name = t ? perfev_const_name(t, v) : NULL;
    if (name)
      add_lower(&b, name), named = 1;
  } else {
    for (size_t i = 0; t && i < t->n; i++) {
      if (!(v & t->items[i].value))
        continue;
      if (named++)
        luaL_addchar(&b, '|');
      add_lower(&b, t->items[i].name);
    }
  }
  luaL_pushresult(&b);
  if (!named) {   /* a value no table names: the number */
    lua_pop(L, 1);
    lua_pushinteger(L, (lua_Integer)v);
  }
  lua_setfield(L, -2, m->name);
}

/* rec.data_src, and rec.mem: its fields by name ("load", "hit|l1", ...).
 * union perf_mem_data_src keeps its bits in place in either byte order.
 * Which fields are set depends on the value: a reused mem is wiped. */
static void op_data_src(struct cur *c, const struct perfev_rfield *f)
{
  lua_State *L = c->L;
  uint64_t v = get64(c, f->name);
  perfev_fill_put_int(c->f, f->name, v);
  int here = perfev_fill_nested(c->f, "mem", 0, 6);
  if (c->f->reuse)
    perfev_fill_wipe(L, -1);
  for (size_t i = 0; i < perfev_mem_nfields; i++) {
    const struct perfev_mem_field *m = &perfev_mem_fields[i];
    uint64_t x = (v >> m->shift) & (((uint64_t)1 << m->width) - 1);
    if (x)
      mem_field(L, m, x);
  }
  perfev_fill_put_nested(c->f, "mem", here);
}

/* nr_namespaces, then { dev, inode } for each, in NS index order. */
static void op_namespaces(struct cur *c, const struct perfev_rfield *f)
{
  lua_State *L = c->L;
  const struct perfev_const_table *t = perfev_consts_get("NS");
  uint64_t nr = get_count(c, 16, "nr_namespaces");
  int here = perfev_fill_nested(c->f, f->name, (int)nr, 0);
  for (uint64_t i = 0; i < nr; i++) {
    const char *name = t && i < NR_NAMESPACES ? perfev_const_name(t, i) : NULL;
    /* the same index, the same keys */
    int in_place = perfev_fill_item(c->f, -1, f->name, (lua_Integer)i + 1, 3);
    perfev_fill_set_int(c->f, "dev", get64(c, "namespace dev"));
    perfev_fill_set_int(c->f, "inode", get64(c, "namespace inode"));
    if (name) {
      perfev_push_lower(L, name);
      lua_setfield(L, -2, "name");
    }
    perfev_fill_put_item(c->f, -2, (lua_Integer)i + 1, in_place);
  }
  perfev_fill_trim(c->f, -1, f->name, (lua_Integer)nr);
  perfev_fill_put_nested(c->f, f->name, here);
}

/* The 24-byte union of mmap2: the device and inode, or (misc
 * MMAP_BUILD_ID) a build id of up to 20 bytes. */
static void op_mmap2_id(struct cur *c, const struct perfev_rfield *f)
{
  const unsigned char *p = take(c, 24, "mmap2 maj/min/ino");
  (void)f;
  if (c->misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
    if (p[0] > 20)
      fail(c, "mmap2 build_id_size %d is over 20", p[0]);
    perfev_fill_put_bytes(c->f, "build_id", p + 4, p[0]);
    return;
  }
  perfev_fill_put_int(c->f, "maj", perfev_ld32(p, c->in.swap));
  perfev_fill_put_int(c->f, "min", perfev_ld32(p + 4, c->in.swap));
  perfev_fill_put_int(c->f, "ino", perfev_ld64(p + 8, c->in.swap));
  perfev_fill_put_int(c->f, "ino_generation", perfev_ld64(p + 16, c->in.swap));
}

/* old_len, new_len, then the old bytes and the new. */
static void op_text_poke(struct cur *c, const struct perfev_rfield *f)
{
  uint16_t old_len = get16(c, "old_len"), new_len = get16(c, "new_len");
  (void)f;
  perfev_fill_put_bytes(c->f, "old_bytes", take(c, old_len, "old_bytes"), old_len);
  perfev_fill_put_bytes(c->f, "new_bytes", take(c, new_len, "new_bytes"), new_len);
}

/* flags, and a boolean for each PERF_AUX_FLAG_* bit set. */
static void op_aux_flags(struct cur *c, const struct perfev_rfield *f)
{
  const struct perfev_const_table *t = perfev_consts_get("AUX_FLAG");
  uint64_t v = get64(c, f->name);
  perfev_fill_put_int(c->f, f->name, v);
  for (size_t i = 0; t && i < t->n; i++) {
    if ((v & t->items[i].value) && perfev_aux_flag_named(&t->items[i]))
      perfev_fill_put_flag(c->f, t->items[i].name);
  }
}

typedef void (*op_fn)(struct cur *, const struct perfev_rfield *);

static const op_fn ops[OP_COUNT] = { PERFEV_OPS(PERFEV_OP_FN) };

/* The one loop: every row present in this sample_type, in order. */
static void walk(struct cur *c, const struct perfev_rfield *f, size_t n)
{
  uint64_t st = c->l->sample_type;
  for (size_t i = 0; i < n; i++)
    if (f[i].mask == 0 || (st & f[i].mask))
      ops[f[i].op](c, &f[i]);
}

/* ---- a selection's walk: the rows not asked for are stepped over ---- */

static void skip_bytes(struct cur *c, uint64_t n, const char *what)
{
  take(c, (size_t)perfev_cursor_fits(&c->in, n, 1, what), what);
}

/* Steps over a sample row (its bytes checked as the op would read them). */
static void skip_row(struct cur *c, const struct perfev_rfield *f)
{
  const struct perfev_attr_params *l = c->l;
  uint64_t n;
  switch (f->op) {
  case OP_U32: case OP_S32: case OP_PAD32:
    take(c, 4, f->name);
    break;
  case OP_READ:
    if (l->read_format & PERF_FORMAT_GROUP) {
      n = get64(c, "read nr");
      take(c, 8u * (size_t)__builtin_popcountll(l->read_format & (PERF_FORMAT_TOTAL_TIME_ENABLED |
                                                 PERF_FORMAT_TOTAL_TIME_RUNNING)), "read");
      n = perfev_cursor_fits(&c->in, n, 8u * (1u + (unsigned)__builtin_popcountll(
                               l->read_format & (PERF_FORMAT_ID | PERF_FORMAT_LOST))), "read nr");
      skip_bytes(c, n * 8u * (1u + (unsigned)__builtin_popcountll(
                           l->read_format & (PERF_FORMAT_ID | PERF_FORMAT_LOST))), "read");
    } else {
      take(c, 8u * (1u + (size_t)__builtin_popcountll(l->read_format & (
                 PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING |
                 PERF_FORMAT_ID | PERF_FORMAT_LOST))), "read");
    }
    break;
  case OP_CALLCHAIN:
    n = get_count(c, 8, "callchain nr");
    take(c, (size_t)n * 8, "callchain");
    break;
  case OP_RAW:
    skip_bytes(c, get32(c, "raw size"), "raw data");
    break;
  case OP_BRANCH: {
    uint64_t bst = l->branch_sample_type, each = 24 + ((bst & PERF_SAMPLE_BRANCH_COUNTERS) ? 8 : 0);
    n = get64(c, "branch_stack nr");
    if (bst & PERF_SAMPLE_BRANCH_HW_INDEX)
      take(c, 8, "branch_stack hw_idx");
    n = perfev_cursor_fits(&c->in, n, (size_t)each, "branch_stack nr");
    take(c, (size_t)(n * each), "branch_stack");
    break;
  }
  case OP_REGS_USER: case OP_REGS_INTR:
    if (get64(c, "regs abi") != PERF_SAMPLE_REGS_ABI_NONE)
      take(c, 8u * (size_t)__builtin_popcountll(f->op == OP_REGS_USER ? l->regs_user : l->regs_intr),
           "register");
    break;
  case OP_STACK:
    n = get_count(c, 1, "stack_user size");
    take(c, (size_t)n, "stack_user data");
    if (n)
      take(c, 8, "stack_user dyn_size");
    break;
  case OP_AUXDATA:
    n = get_count(c, 1, "aux size");
    take(c, (size_t)n, "aux data");
    break;
  default:   /* U64, WEIGHT, DATA_SRC */
    take(c, 8, f->name);
    break;
  }
}

/* A sample's rows, the ops of those in `rows` (bits by row index) run,
 * the others stepped over (checked as the ops would read them: a
 * selection refuses what a full decode refuses). */
static void walk_selected(struct cur *c, uint32_t rows)
{
  const struct perfev_rfield *f = perfev_sample_fields;
  uint64_t st = c->l->sample_type;
  size_t n = perfev_sample_nfields;
  for (size_t i = 0; i < n; i++) {
    if (f[i].mask != 0 && !(st & f[i].mask))
      continue;
    if (rows & (1u << i))
      ops[f[i].op](c, &f[i]);
    else
      skip_row(c, &f[i]);
  }
}

void perfev_decode_check_sample(lua_State *L, const struct perfev_attr_params *l, const unsigned char *rec,
                                size_t size, size_t off, int swap)
{
  struct cur c;
  memset(&c, 0, sizeof c);
  c.L = L;
  c.in.rec = rec;
  c.in.fail = cur_fail;
  c.in.swap = swap;
  c.in.p = rec + sizeof(struct perf_event_header);
  c.in.end = rec + size;
  c.off = off;
  c.type = PERF_RECORD_SAMPLE;
  c.size = (uint16_t)size;
  c.l = l;
  walk_selected(&c, 0);
}

/* ---- one record ---- */

/* size, misc, cpumode and the misc flags: those hdr (PERFEV_HDR_* bits) asks for. */
static void set_header(struct cur *c, uint32_t hdr)
{
  const char *mode = perfev_cpumode_names[c->misc & PERF_RECORD_MISC_CPUMODE_MASK];
  if (hdr & PERFEV_HDR_SIZE)
    perfev_fill_put_int(c->f, "size", c->size);
  if (hdr & PERFEV_HDR_MISC)
    perfev_fill_put_int(c->f, "misc", c->misc);
  if (hdr & PERFEV_HDR_CPUMODE) {
    perfev_fill_name(c->f, mode ? mode : "unknown");
    perfev_fill_put(c->f, "cpumode");
  }
  for (size_t i = 0; (hdr & PERFEV_HDR_FLAGS) && i < perfev_misc_nflags; i++) {
    const struct perfev_misc_flag *m = &perfev_misc_flags[i];
    if ((m->type == 0 || m->type == c->type) && (c->misc & m->bit)) {
      lua_pushboolean(c->L, 1);
      perfev_fill_put(c->f, m->name);
    }
  }
}

/* Whether a trailer field this sample_type selects has the name of a
 * body field of rt (a fork's pid, a lost record's id, ...). */
static int trailer_collides(const struct perfev_rtype *rt, uint64_t sample_type)
{
  for (size_t i = 0; i < perfev_trailer_nfields; i++) {
    const struct perfev_rfield *t = &perfev_trailer_fields[i];
    if (!t->name || !(sample_type & t->mask))
      continue;
    for (size_t j = 0; j < rt->nfields; j++)
      if (rt->fields[j].name && strcmp(rt->fields[j].name, t->name) == 0)
        return 1;
  }
  return 0;
}

/* rec.sample_id: every trailer field, in a table of its own. Its keys
 * depend on the sample_type alone. */
static void trailer_table(struct cur *c, const unsigned char *at)
{
  struct perfev_fill *f = c->f;
  int t = f->t, reuse = f->reuse;
  int here = perfev_fill_shaped(f, "sample_id", 0, 6, c->l->sample_type & PERFEV_TRAILER_BITS);
  f->t = lua_gettop(c->L);
  f->reuse = 0;   /* the same keys every time: nothing to list or clear */
  c->in.p = at;
  walk(c, perfev_trailer_fields, perfev_trailer_nfields);
  f->t = t;
  f->reuse = reuse;
  perfev_fill_put_nested(f, "sample_id", here);
}

/* A non-sample record: the trailer first (its fields are at the end),
 * then the body, whose fields win where both have one (pid, tid, time,
 * id). Then rec.sample_id keeps the whole trailer, which encode takes. */
static void decode_other(struct cur *c, const struct perfev_rtype *rt)
{
  const unsigned char *body_end = c->in.end;
  if (rt->trailer && c->l->sample_id_all) {
    if (left(c) < c->l->trailer_size)
      fail(c, "the sample_id trailer needs %u bytes, the body has %lu",
           (unsigned)c->l->trailer_size, (unsigned long)left(c));
    body_end = c->in.end - c->l->trailer_size;
    c->in.p = body_end;
    walk(c, perfev_trailer_fields, perfev_trailer_nfields);
    if (trailer_collides(rt, c->l->sample_type))
      trailer_table(c, body_end);
    c->in.p = c->in.rec + sizeof(struct perf_event_header);
    c->in.end = body_end;
  }
  walk(c, rt->fields, rt->nfields);
}

/* A sample: its fields; without PERIOD in sample_type, the attr's
 * period, as perf's parser gives it (perf record -c N). */
static void decode_sample(struct cur *c)
{
  if (c->sel)
    walk_selected(c, c->sel->rows_now);
  else
    walk(c, perfev_sample_fields, perfev_sample_nfields);
  if (!(c->l->sample_type & PERF_SAMPLE_PERIOD) && c->l->period && (!c->sel || c->sel->period))
    perfev_fill_put_int(c->f, "period", c->l->period);
}

/* The layout of this record: by its id when the stream has several. */
static size_t pick_layout(struct cur *c, const struct perfev_decoder *d)
{
  size_t li = 0;
  uint64_t id = 0;
  switch (perfev_decoder_pick(d, c->in.rec, c->size, c->type, &li, &id)) {
  case PERFEV_PICK_SHORT:
    fail(c, "too short for its %s", c->type == PERF_RECORD_SAMPLE ? "sample id" : "sample_id trailer");
    break;
  case PERFEV_PICK_NO_ATTR:
    fail(c, "no attr for id %llu", (unsigned long long)id);
    break;
  default:
    break;
  }
  return li;
}

/* The keys the source adds (rec.event, rec.offset): with a selection,
 * on a sample, only those asked for. */
static void set_extras(struct cur *c, const struct perfev_extra *x, size_t li, size_t off)
{
  int sel = c->sel && c->type == PERF_RECORD_SAMPLE;
  for (int k = 0; x && k < PERFEV_NEXTRA; k++) {
    int asked = sel && (c->sel->extra & (1u << k));
    if ((!sel || asked) && x->push(c->L, x->ud, k, asked, c->type, li, off))
      perfev_fill_put(c->f, perfev_extra_names[k]);
  }
}

size_t perfev_decode_into(lua_State *L, struct perfev_decoder *d, const struct perfev_sink *to,
                          const unsigned char *rec, size_t len, size_t off,
                          const struct perfev_extra *x)
{
  struct perf_event_header h;
  struct perfev_fill fill;
  struct cur c;
  const struct perfev_rtype *rt;
  size_t li;
  if (!d)   /* a caller's bug (a stream without attrs yet), said rather than crashed on */
    luaL_error(L, "perfev.decode: no decoder for the record at offset %d", (int)off);
  if (len < sizeof h)
    perfev_decode_error(L, off, 0, len, "shorter than its 8-byte header");
  perfev_record_header(rec, d->swap, &h);
  memset(&c, 0, sizeof c);
  c.L = L;
  c.in.rec = rec;
  c.in.fail = cur_fail;
  c.off = off;
  c.type = h.type;
  c.misc = h.misc;
  c.size = h.size;
  c.in.swap = d->swap;
  c.f = &fill;
  if (h.size < sizeof h || h.size > len)
    fail(&c, "size is outside 8..%zu", len);
  li = pick_layout(&c, d);
  c.l = &d->attrs[li];
  c.in.p = rec + sizeof h;
  c.in.end = rec + h.size;
  rt = perfev_rtype_find(h.type);
  perfev_fill_begin(&fill, L, to ? to->fill : NULL, to ? to->state : 0, to ? to->into : 0);
  if (to && to->sel && to->sel->n && h.type == PERF_RECORD_SAMPLE)
    c.sel = to->sel;   /* a selection applies to samples; other records come whole */
  if (!rt) {   /* a type newer than this decoder: its number and bytes */
    perfev_fill_put_int(&fill, "type", h.type);
    perfev_fill_put_bytes(&fill, "data", c.in.p, left(&c));
  } else {
    perfev_fill_name(&fill, rt->name);
    perfev_fill_put(&fill, "type");
    if (h.type == PERF_RECORD_SAMPLE)
      decode_sample(&c);
    else
      decode_other(&c, rt);
  }
  set_header(&c, !c.sel ? ~0u : c.sel->values ? 0 : c.sel->hdr);
  set_extras(&c, x, li, off);
  if (c.sel && !c.sel->values && fill.reuse)
    perfev_fill_keep(&fill, c.sel);
  perfev_fill_end(&fill);
  perfev_decoder_count_lost(d, h.type, rec, h.size);
  return li;
}

size_t perfev_decode_one(lua_State *L, struct perfev_decoder *d, const unsigned char *rec,
                         size_t len, size_t off)
{
  return perfev_decode_into(L, d, NULL, rec, len, off, NULL);
}

