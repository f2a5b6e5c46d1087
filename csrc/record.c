/* The record decoder: one loop over the rows of record_layout.c, a short
 * function per kind of field, every read bounds-checked against the
 * record. Records are in the host's byte order, as the kernel writes them,
 * or (decoder swap) in the other one, as a perf.data file from a machine
 * of the other endianness: then every integer is byte-swapped as it is
 * read, and strings and byte blobs are left as they are. Every access goes
 * through memcpy, so a buffer needs no alignment. The table of a record is
 * filled through record_table.c, which can refill one table for every
 * record without allocating. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "record_table.h"

/* Where decoding is: the record, the region being walked, its layout, the
 * table being filled. */
struct cur {
  lua_State *L;
  const unsigned char *rec;          /* the record's header */
  const unsigned char *p, *end;      /* the region being read */
  size_t off;                        /* the record's offset in the stream */
  uint32_t type;
  uint16_t misc, size;
  int swap;
  const struct perfev_layout *l;
  struct perfev_fill *f;             /* the record's table */
};

/* ---- errors: everything a malformed record says names its offset ---- */

static void fail(const struct cur *c, const char *fmt, ...)
{
  char msg[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  perfev_decode_error(c->L, c->off, c->type, c->size, msg);
}

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
  return (size_t)(c->end - c->p);
}

/* The next n bytes of the region; raises when the record has fewer. */
static const unsigned char *take(struct cur *c, size_t n, const char *what)
{
  const unsigned char *q = c->p;
  if (n > left(c))
    fail(c, "%s needs %lu bytes at record offset %lu, %lu left", what ? what : "padding",
         (unsigned long)n, (unsigned long)(c->p - c->rec), (unsigned long)left(c));
  c->p += n;
  return q;
}

/* Integers at p, in the host's byte order or (swap) the other one. */
static uint64_t ld64(const unsigned char *p, int swap)
{
  uint64_t v;
  memcpy(&v, p, 8);
  return swap ? __builtin_bswap64(v) : v;
}

static uint32_t ld32(const unsigned char *p, int swap)
{
  uint32_t v;
  memcpy(&v, p, 4);
  return swap ? __builtin_bswap32(v) : v;
}

static uint16_t ld16(const unsigned char *p, int swap)
{
  uint16_t v;
  memcpy(&v, p, 2);
  return swap ? __builtin_bswap16(v) : v;
}

void perfev_record_header(const unsigned char *p, int swap, struct perf_event_header *h)
{
  h->type = ld32(p, swap);
  h->misc = ld16(p + 4, swap);
  h->size = ld16(p + 6, swap);
}

static uint64_t get64(struct cur *c, const char *what)
{
  return ld64(take(c, 8, what), c->swap);
}

static uint32_t get32(struct cur *c, const char *what)
{
  return ld32(take(c, 4, what), c->swap);
}

static uint16_t get16(struct cur *c, const char *what)
{
  return ld16(take(c, 2, what), c->swap);
}

/* A count of items of `each` bytes that must fit in what is left. */
static uint64_t get_count(struct cur *c, size_t each, const char *what)
{
  uint64_t n = get64(c, what);
  if (n > left(c) / each)
    fail(c, "%s count %llu overflows the record (%lu bytes left)", what,
         (unsigned long long)n, (unsigned long)left(c));
  return n;
}

/* t[k] = v for the table on top, k a name built here (not static). */
static void set_int(lua_State *L, const char *k, uint64_t v)
{
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, k);
}

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
  const unsigned char *nul = memchr(c->p, 0, left(c));
  perfev_fill_put_bytes(c->f, f->name, c->p, nul ? (size_t)(nul - c->p) : left(c));
  c->p = c->end;
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
  lua_State *L = c->L;
  uint64_t fmt = c->l->read_format;
  int here = perfev_fill_shaped(c->f, f->name, 0, 5, fmt);
  if (fmt & PERF_FORMAT_GROUP) {
    size_t each = 8 * (1 + ((fmt & PERF_FORMAT_ID) != 0) + ((fmt & PERF_FORMAT_LOST) != 0));
    uint64_t nr = get64(c, "read nr");
    read_times(c, fmt);
    if (nr > left(c) / each)
      fail(c, "read nr %llu overflows the record", (unsigned long long)nr);
    perfev_fill_set_int(c->f, "nr", nr);
    for (uint64_t i = 0; i < nr; i++) {
      perfev_fill_item(c->f, -1, f->name, (lua_Integer)i + 1, 3);
      read_entry(c, fmt);
      lua_rawseti(L, -2, (lua_Integer)i + 1);
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

/* The name of a PERF_CONTEXT_* marker, or NULL. */
static const char *context_name(uint64_t marker)
{
  for (size_t i = 0; i < perfev_ncontexts; i++)
    if (perfev_contexts[i].marker == marker)
      return perfev_contexts[i].name;
  return NULL;
}

/* Fills the segment table on top: { context = "kernel", first = i, last = j }. */
static void fill_segment(struct cur *c, uint64_t marker, lua_Integer first, lua_Integer last)
{
  const char *name = context_name(marker);
  if (name)
    perfev_fill_name(c->f, name);
  else
    lua_pushinteger(c->L, (lua_Integer)marker);
  perfev_fill_set(c->f, "context");
  perfev_fill_set_int(c->f, "first", (uint64_t)first);
  perfev_fill_set_int(c->f, "last", (uint64_t)last);   /* first - 1: empty */
}

/* rec.callchain: the addresses, without the PERF_CONTEXT_* markers, which
 * become rec.callchain_contexts, the segments they open (when present).
 * A segment's table is written when it closes, once its last frame is known. */
static void op_callchain(struct cur *c, const struct perfev_rfield *f)
{
  lua_State *L = c->L;
  uint64_t nr = get_count(c, 8, "callchain nr"), marker = 0;
  lua_Integer n = 0, nseg = 0, first = 0;
  int chain, segs = 0, segs_here = 0;
  int here = perfev_fill_nested(c->f, f->name, nr < 256 ? (int)nr : 256, 0);
  chain = lua_gettop(L);
  for (uint64_t i = 0; i < nr; i++) {
    uint64_t ip = get64(c, "callchain");
    if (ip >= (uint64_t)PERF_CONTEXT_MAX) {
      if (!segs) {
        segs_here = perfev_fill_nested(c->f, "callchain_contexts", 2, 0);
        segs = lua_gettop(L);
      } else {
        perfev_fill_item(c->f, segs, "callchain_contexts", nseg, 3);
        fill_segment(c, marker, first, n);
        lua_rawseti(L, segs, nseg);
      }
      marker = ip;
      first = n + 1;
      nseg++;
      continue;
    }
    lua_pushinteger(L, (lua_Integer)ip);
    lua_rawseti(L, chain, ++n);
  }
  if (segs) {
    perfev_fill_item(c->f, segs, "callchain_contexts", nseg, 3);
    fill_segment(c, marker, first, n);
    lua_rawseti(L, segs, nseg);
    perfev_fill_trim(c->f, segs, "callchain_contexts", nseg);
    perfev_fill_put_nested(c->f, "callchain_contexts", segs_here);   /* absent: no markers */
  }
  perfev_fill_trim(c->f, chain, NULL, n);
  perfev_fill_put_nested(c->f, f->name, here);
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
  return !c->swap;
#else
  return c->swap;
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
  if (nr > left(c) / 24)
    fail(c, "branch_stack nr %llu overflows the record", (unsigned long long)nr);
  for (uint64_t i = 0; i < nr; i++) {
    perfev_fill_item(c->f, -1, f->name, (lua_Integer)i + 1, 11);
    branch_entry(c);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  perfev_fill_trim(c->f, -1, f->name, (lua_Integer)nr);
  if (bst & PERF_SAMPLE_BRANCH_COUNTERS) {
    if (nr > left(c) / 8)
      fail(c, "branch_stack counters overflow the record");
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
    set_int(L, name, get64(c, "register"));
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
    perfev_fill_item(c->f, -1, f->name, (lua_Integer)i + 1, 3);   /* the same index, the same keys */
    perfev_fill_set_int(c->f, "dev", get64(c, "namespace dev"));
    perfev_fill_set_int(c->f, "inode", get64(c, "namespace inode"));
    if (name) {
      perfev_push_lower(L, name);
      lua_setfield(L, -2, "name");
    }
    lua_rawseti(L, -2, (lua_Integer)i + 1);
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
  perfev_fill_put_int(c->f, "maj", ld32(p, c->swap));
  perfev_fill_put_int(c->f, "min", ld32(p + 4, c->swap));
  perfev_fill_put_int(c->f, "ino", ld64(p + 8, c->swap));
  perfev_fill_put_int(c->f, "ino_generation", ld64(p + 16, c->swap));
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

/* ---- one record ---- */

static void set_misc(struct cur *c)
{
  const char *mode = perfev_cpumode_names[c->misc & PERF_RECORD_MISC_CPUMODE_MASK];
  perfev_fill_put_int(c->f, "misc", c->misc);
  perfev_fill_name(c->f, mode ? mode : "unknown");
  perfev_fill_put(c->f, "cpumode");
  for (size_t i = 0; i < perfev_misc_nflags; i++) {
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
  c->p = at;
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
  const unsigned char *body_end = c->end;
  if (rt->trailer && c->l->sample_id_all) {
    if (left(c) < c->l->trailer_size)
      fail(c, "the sample_id trailer needs %u bytes, the body has %lu",
           (unsigned)c->l->trailer_size, (unsigned long)left(c));
    body_end = c->end - c->l->trailer_size;
    c->p = body_end;
    walk(c, perfev_trailer_fields, perfev_trailer_nfields);
    if (trailer_collides(rt, c->l->sample_type))
      trailer_table(c, body_end);
    c->p = c->rec + sizeof(struct perf_event_header);
    c->end = body_end;
  }
  walk(c, rt->fields, rt->nfields);
}

/* The layout of this record: by its id when the stream has several. */
static size_t pick_layout(struct cur *c, const struct perfev_decoder *d)
{
  size_t len = c->size;
  uint64_t id;
  if (d->n == 1)
    return 0;
  if (c->type == PERF_RECORD_SAMPLE) {
    if (len < 8 * (size_t)(d->id_pos + 2))
      fail(c, "too short for the sample id");
    id = ld64(c->rec + 8 * (size_t)(d->id_pos + 1), d->swap);
  } else if (d->is_pos >= 0 && perfev_rtype_find(c->type) && perfev_rtype_find(c->type)->trailer) {
    if (len < 8 * (size_t)(d->is_pos + 2))
      fail(c, "too short for the sample_id trailer");
    id = ld64(c->rec + len - 8 * (size_t)(d->is_pos + 1), d->swap);
  } else {
    return 0;   /* no id: body fields do not depend on the attr */
  }
  for (size_t i = 0; i < d->n; i++)
    if (d->layouts[i].id == id)
      return i;
  fail(c, "no attr for id %llu", (unsigned long long)id);
  return 0;
}

static void count_lost(struct perfev_decoder *d, uint32_t type, const unsigned char *rec, size_t len)
{
  if (type == PERF_RECORD_LOST && len >= 24)
    d->lost += ld64(rec + 16, d->swap);
  else if (type == PERF_RECORD_LOST_SAMPLES && len >= 16)
    d->lost += ld64(rec + 8, d->swap);
}

size_t perfev_decode_into(lua_State *L, struct perfev_decoder *d, int state, int into,
                          const unsigned char *rec, size_t len, size_t off)
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
  c.rec = rec;
  c.off = off;
  c.type = h.type;
  c.misc = h.misc;
  c.size = h.size;
  c.swap = d->swap;
  c.f = &fill;
  if (h.size < sizeof h || h.size > len)
    fail(&c, "size is outside 8..%zu", len);
  li = pick_layout(&c, d);
  c.l = &d->layouts[li];
  c.p = rec + sizeof h;
  c.end = rec + h.size;
  rt = perfev_rtype_find(h.type);
  perfev_fill_begin(&fill, L, state, into);
  if (!rt) {   /* a type newer than this decoder: its number and bytes */
    perfev_fill_put_int(&fill, "type", h.type);
    perfev_fill_put_bytes(&fill, "data", c.p, left(&c));
  } else {
    perfev_fill_name(&fill, rt->name);
    perfev_fill_put(&fill, "type");
    if (h.type == PERF_RECORD_SAMPLE)
      walk(&c, perfev_sample_fields, perfev_sample_nfields);
    else
      decode_other(&c, rt);
  }
  perfev_fill_put_int(&fill, "size", h.size);
  set_misc(&c);
  perfev_fill_end(&fill);
  count_lost(d, h.type, rec, h.size);
  return li;
}

size_t perfev_decode_one(lua_State *L, struct perfev_decoder *d, const unsigned char *rec,
                         size_t len, size_t off)
{
  return perfev_decode_into(L, d, 0, 0, rec, len, off);
}

/* ---- decoder state ---- */

static int popcount64(uint64_t v)
{
  int n = 0;
  for (; v; v &= v - 1)
    n++;
  return n;
}

void perfev_layout_init(struct perfev_layout *l, const struct perfev_attr *a, uint64_t id)
{
  /* Read from the byte image as the struct: by name (perfev_attr_u64) it
   * costs a search per field on every decode and encode call. */
  struct perf_event_attr pa;
  memset(&pa, 0, sizeof pa);
  memcpy(&pa, a->raw, sizeof pa < sizeof a->raw ? sizeof pa : sizeof a->raw);
  memset(l, 0, sizeof *l);
  l->id = id;
  l->sample_type = pa.sample_type;
  l->read_format = pa.read_format;
  l->branch_sample_type = pa.branch_sample_type;
  l->regs_user = pa.sample_regs_user;
  l->regs_intr = pa.sample_regs_intr;
  l->sample_id_all = pa.sample_id_all;
  l->trailer_size = 8u * (uint32_t)popcount64(l->sample_type & PERFEV_TRAILER_BITS);
}

struct perfev_decoder *perfev_decoder_new(lua_State *L, size_t n)
{
  struct perfev_decoder *d = (struct perfev_decoder *)perfev_newuserdata(
    L, sizeof *d + n * sizeof d->layouts[0]);
  memset(d, 0, sizeof *d + n * sizeof d->layouts[0]);
  d->n = n;
  d->id_pos = d->is_pos = -1;
  luaL_setmetatable(L, PERFEV_DECODER_MT);
  return d;
}

/* Where a sample's id is, in u64 words after the header; -1: nowhere. */
static int id_pos(const struct perfev_layout *l)
{
  const uint64_t before = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR;
  if (l->sample_type & PERF_SAMPLE_IDENTIFIER)
    return 0;
  if (l->sample_type & PERF_SAMPLE_ID)
    return popcount64(l->sample_type & before);
  return -1;
}

/* Where the trailer's id is, in u64 words from the record's end. */
static int is_pos(const struct perfev_layout *l)
{
  if (!l->sample_id_all)
    return -1;
  if (l->sample_type & PERF_SAMPLE_IDENTIFIER)
    return 0;
  if (l->sample_type & PERF_SAMPLE_ID)
    return popcount64(l->sample_type & (PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU));
  return -1;
}

static void finish(lua_State *L, struct perfev_decoder *d, const char *who)
{
  d->id_pos = id_pos(&d->layouts[0]);
  d->is_pos = is_pos(&d->layouts[0]);
  if (d->n < 2)
    return;
  if (d->id_pos < 0)
    luaL_error(L, "%s: a stream of several events needs PERF_SAMPLE_IDENTIFIER "
                  "(or PERF_SAMPLE_ID) in every sample_type to tell its records apart", who);
  for (size_t i = 1; i < d->n; i++)
    if (id_pos(&d->layouts[i]) != d->id_pos || is_pos(&d->layouts[i]) != d->is_pos)
      luaL_error(L, "%s: the events of one stream must put the id at the same "
                    "place: use PERF_SAMPLE_IDENTIFIER in every sample_type (and the same "
                    "sample_id_all)", who);
}

void perfev_decoder_finish(lua_State *L, struct perfev_decoder *d)
{
  finish(L, d, "perfev.decode");
}

/* ---- core.decode(bytes, attr | event | { [id] = attr or event, ... }, [options]) ---- */

#define DECODE_UPV_BYTES lua_upvalueindex(1)
#define DECODE_UPV_DEC lua_upvalueindex(2)
#define DECODE_UPV_OFF lua_upvalueindex(3)
#define DECODE_UPV_INTO lua_upvalueindex(4)
#define DECODE_UPV_STATE lua_upvalueindex(5)

static int decode_next(lua_State *L)
{
  size_t len, off = (size_t)lua_tointeger(L, DECODE_UPV_OFF);
  const unsigned char *s = (const unsigned char *)lua_tolstring(L, DECODE_UPV_BYTES, &len);
  struct perfev_decoder *d = (struct perfev_decoder *)lua_touserdata(L, DECODE_UPV_DEC);
  struct perf_event_header h;
  if (off >= len)
    return 0;
  if (len - off < sizeof h)
    perfev_decode_error(L, off, 0, len - off, "the buffer ends inside a record header");
  perfev_record_header(s + off, d->swap, &h);
  if (h.size < sizeof h)
    perfev_decode_error(L, off, h.type, h.size, "size is smaller than the 8-byte header");
  if (h.size > len - off)
    perfev_decode_error(L, off, h.type, h.size, "size runs past the end of the buffer");
  perfev_decode_into(L, d, DECODE_UPV_STATE, DECODE_UPV_INTO, s + off, h.size, off);
  lua_pushinteger(L, (lua_Integer)(off + h.size));
  lua_replace(L, DECODE_UPV_OFF);
  return 1;
}

/* The attr and id of the value at idx (attr or event); 0 if neither. */
static int attr_of(lua_State *L, int idx, const struct perfev_attr **a, uint64_t *id)
{
  struct perfev_event *ev;
  struct perfev_attr *at = (struct perfev_attr *)luaL_testudata(L, idx, PERFEV_ATTR_MT);
  if (at) {
    *a = at;
    return 1;
  }
  ev = (struct perfev_event *)luaL_testudata(L, idx, PERFEV_EVENT_MT);
  if (ev) {
    *a = &ev->attr;
    *id = ev->id;
    return 1;
  }
  return 0;
}

/* Fills a decoder from { [id] = attr, ... } or { event, ... } at idx. */
static struct perfev_decoder *decoder_from_map(lua_State *L, int idx, const char *who)
{
  size_t n = 0, i = 0;
  struct perfev_decoder *d;
  for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1))
    n++;
  d = perfev_decoder_new(L, n);
  for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) {
    const struct perfev_attr *a = NULL;
    uint64_t id = 0;
    int is_event = luaL_testudata(L, -1, PERFEV_EVENT_MT) != NULL;
    if (!attr_of(L, -1, &a, &id))
      luaL_error(L, "%s: the attrs table maps ids to attrs (or lists events)", who);
    if (!is_event) {
      if (!lua_isinteger(L, -2))
        luaL_error(L, "%s: the attrs table's keys must be event ids", who);
      id = (uint64_t)lua_tointeger(L, -2);
    }
    perfev_layout_init(&d->layouts[i++], a, id);
  }
  return d;
}

/* Whether the table at idx holds attrs or events (rather than attr fields). */
static int is_map(lua_State *L, int idx)
{
  int yes = 0;
  if (!lua_istable(L, idx))
    return 0;
  lua_pushnil(L);
  if (lua_next(L, idx)) {
    yes = luaL_testudata(L, -1, PERFEV_ATTR_MT) || luaL_testudata(L, -1, PERFEV_EVENT_MT);
    lua_pop(L, 2);
  }
  return yes;
}

struct perfev_decoder *perfev_decoder_from(lua_State *L, int idx, const char *who)
{
  const struct perfev_attr *a = NULL;
  uint64_t id = 0;
  struct perfev_decoder *d;
  idx = lua_absindex(L, idx);
  if (attr_of(L, idx, &a, &id)) {
    d = perfev_decoder_new(L, 1);
    perfev_layout_init(&d->layouts[0], a, id);
  } else if (is_map(L, idx)) {
    d = decoder_from_map(L, idx, who);
  } else {
    if (!lua_istable(L, idx))
      luaL_error(L, "%s: argument %d must be an attr, an event, a table of attr fields or a "
                    "table of attrs by id, got %s", who, idx, luaL_typename(L, idx));
    a = perfev_attr_from(L, idx);
    d = perfev_decoder_new(L, 1);
    perfev_layout_init(&d->layouts[0], a, 0);
    lua_remove(L, -2);   /* the attr: the layout has what it needs */
  }
  finish(L, d, who);
  return d;
}

static int l_decode(lua_State *L)
{
  struct perfev_decoder *d;
  int top;
  luaL_checkstring(L, 1);
  lua_settop(L, 3);
  d = perfev_decoder_from(L, 2, "perfev.decode");
  top = lua_gettop(L);
  perfev_decode_options(L, 3, "perfev.decode", &d->swap);   /* pushes into, state */
  lua_pushvalue(L, 1);
  lua_pushvalue(L, top);
  lua_pushinteger(L, 0);
  lua_pushvalue(L, top + 1);
  lua_pushvalue(L, top + 2);
  lua_pushcclosure(L, decode_next, 5);
  return 1;
}

int perfev_record_open_lib(lua_State *L)
{
  luaL_newmetatable(L, PERFEV_DECODER_MT);
  lua_pushliteral(L, "perfev.decoder");
  lua_setfield(L, -2, "__name");
  lua_pop(L, 1);
  lua_pushcfunction(L, l_decode);
  lua_setfield(L, -2, "decode");
  return 0;
}
