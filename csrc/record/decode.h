/* The record decoder: the decoder object (decoder.c: the decode
 * parameters of a stream's attrs, how a record's layout is picked) and the decoding of one
 * record into a Lua table (decode.c, filling it through fill.c). Shared by
 * core.decode, the ring (ring/), perf.data files (perfdata/) and the
 * encoder (record/encode*.c). */
#ifndef PERFEV_DECODE_H
#define PERFEV_DECODE_H

#include <stddef.h>
#include <stdint.h>
#include "perfev.h"
#include "layout.h"
#include "cursor.h"

/* ---- the decoder object (decoder.c) ---- */

/* What decoding needs of one attr (its decode parameters), read from it
 * once; the layout of each record type is layout.c's. */
struct perfev_attr_params {
  uint64_t id;
  uint64_t sample_type, read_format, branch_sample_type;
  uint64_t regs_user, regs_intr;
  uint32_t trailer_size;       /* bytes of sample_id on non-sample records */
  int sample_id_all, inherit;
  uint64_t period;             /* the attr's sample_period (or sample_freq, its union) */
};

/* The parameters of one or several attrs (a stream of several events)
 * and where the id sits in each kind of record, to pick a record's attr. */
#define PERFEV_DECODER_MT "perfev.decoder"
struct perfev_decoder {
  int id_pos;    /* u64 index of the id after a sample's header; -1: none */
  int is_pos;    /* u64 index of the id from the end of the trailer; -1: none */
  int swap;      /* the records are in the other byte order: swap every integer */
  uint64_t lost; /* LOST and LOST_SAMPLES counts seen so far */
  size_t n;
  struct perfev_attr_params attrs[];
};

/* The state of one iteration over records (perfev.decode, ring:records):
 * the key strings, interned once; and when every record is decoded into
 * one table (the `into` option), the keys the last record set, so that
 * the next clears those it does not set itself, and for the nested tables
 * whose keys depend on the attr (read, branch_stack, regs) the attr value
 * they were last filled for, so that they are refilled in place only when
 * their keys are the same. Its user value holds the key strings (at the
 * index of their slot in names, plus one) and the nested tables set aside. */
/* ---- field selection (select.c) ----
 * The `fields` option of every record iteration: a list of record keys,
 * compiled once into what each is in a sample (a row of the sample's
 * layout, a header key, a key the source adds), and per attr into a plan:
 * where each field sits when its offset is fixed, which layout rows must
 * be walked for the others. */
#define PERFEV_SELECT_MAX 32
#define PERFEV_SELECT_PLANS 8
/* What the source of the records adds to them (rec.event, rec.offset). */
enum { PERFEV_EXTRA_EVENT, PERFEV_EXTRA_OFFSET, PERFEV_NEXTRA };
struct perfev_extra {
  /* Pushes the value of key `which` for the record (its type, the index
   * of its layout, its offset in the stream) and returns 1, or pushes
   * nothing and returns 0 when the record has none. asked: the caller
   * selected the key by name. */
  int (*push)(lua_State *L, void *ud, int which, int asked, uint32_t type, size_t li, size_t off);
  void *ud;
};
extern const char *const perfev_extra_names[PERFEV_NEXTRA];

/* Header keys a selection may ask for (rec.type is always there). */
enum { PERFEV_HDR_SIZE = 1, PERFEV_HDR_MISC = 2, PERFEV_HDR_CPUMODE = 4, PERFEV_HDR_FLAGS = 8 };
struct perfev_sel_field {
  const char *name;   /* the record key */
  uint8_t kind;       /* enum in select.c: a sample row, a header key, an extra */
  uint8_t row;        /* the row of a scalar (the last one: id) */
  uint32_t rows;      /* the sample rows whose ops set the key */
};
struct perfev_sel_plan {
  uint64_t sample_type, read_format, period;   /* what the plan was made for */
  int valid;
  uint32_t rows;      /* the rows to walk for the fields without a fixed offset */
  uint16_t min_size;  /* the record must hold the fixed fields */
  uint8_t fast;       /* every field has a fixed offset (or none) */
  uint8_t first_set;  /* the first field always has a value: no nil check */
  uint16_t chain;     /* the callchain's offset, when it is fixed and asked for; 0: none */
  uint16_t period_at; /* the sample's period's offset; 0: the sample has none */
  uint8_t tally;      /* every field can be a tally's key (fixed, one value a sample) */
  uint8_t untallied;  /* when not: the first field that cannot */
  uint8_t scalars;    /* every field an integer at a fixed offset (or the attr's period):
                         the values are pushed by one tight loop (min_size is the
                         whole sample's where every row has a fixed size) */
  uint8_t variable;   /* the layout has rows of a size the record says (raw, stack_user,
                         ...): a sample read in place is checked whole first
                         (perfev_decode_check_sample), as a full decode reads it */
  struct { uint16_t off; uint8_t how, scalar; } f[PERFEV_SELECT_MAX];
};
/* What a field of a plan of scalars is (its .scalar). */
enum { PERFEV_SCALAR_U64, PERFEV_SCALAR_U32, PERFEV_SCALAR_S32, PERFEV_SCALAR_PERIOD };
struct perfev_select {
  size_t n;           /* fields; 0: no selection (whole records) */
  int values;         /* the iterator returns the values (no `into` table) */
  const char *who;    /* the iteration's name in errors (a static string) */
  uint32_t rows_all;  /* the rows of every field */
  uint32_t rows_now;  /* the rows the decoder walks for this record */
  uint32_t hdr;       /* header keys asked for: PERFEV_HDR_* bits */
  uint32_t extra;     /* extras asked for, by bit */
  int period;         /* period asked for (the attr's when the sample has none) */
  int tally;          /* samples are counted by their values (tally.c), not returned */
  lua_Integer chain_len;   /* frames in the reused callchain table (values mode) */
  /* values mode over a one-event stream whose plan is scalars: that plan,
   * and the decoder it was made for (samples then skip the general path) */
  const struct perfev_sel_plan *scalars;
  const struct perfev_decoder *scalars_of;
  struct perfev_sel_field f[PERFEV_SELECT_MAX];
  struct perfev_sel_plan plans[PERFEV_SELECT_PLANS];
};

#define PERFEV_REUSE_KEYS 64
#define PERFEV_REUSE_SHAPES 8
#define PERFEV_NAME_SLOTS 64
struct perfev_reuse_key {
  const char *name;
  int lower;     /* name is a constant's upper-case name: the key is its lower case */
};
struct perfev_reuse {
  int into;      /* the records go into one table */
  int dirty;     /* that table holds keys not listed (first record, or a decode raised) */
  size_t nkeys, nshapes;
  struct perfev_reuse_key keys[PERFEV_REUSE_KEYS];
  struct { const char *name; uint64_t shape; } shapes[PERFEV_REUSE_SHAPES];
  const char *names[PERFEV_NAME_SLOTS];   /* the static string each slot holds */
  struct perfev_select sel;               /* the `fields` option */
  /* perfev.decode's walk over its byte string and its decoder (both kept
   * alive by its closure: one lua_touserdata a record, not three) */
  const unsigned char *bytes;
  size_t len, off;
  struct perfev_decoder *dec;
  struct perfev_tally *tally;             /* the `tally` option's counts (in the user value) */
};
/* ... the tally's userdata and the record it holds back while the tallies
 * before it are handed out. */
#define PERFEV_SEL_TALLY 998
#define PERFEV_SEL_HELD 997
#define PERFEV_SEL_CHAINS 996
/* Where the selected fields' key strings sit in the state's user value. */
#define PERFEV_SEL_KEYS 1000
/* ... and the callchain table values mode reuses. */
#define PERFEV_SEL_CHAIN 999

/* Reads what decoding needs from a. */
void perfev_attr_params_init(struct perfev_attr_params *l, const struct perfev_attr *a, uint64_t id);
/* Pushes a decoder userdata with room for n attrs (filled by the caller). */
struct perfev_decoder *perfev_decoder_new(lua_State *L, size_t n);
/* Computes the id positions once the attrs are filled; raises when the
 * attrs cannot share one stream. */
void perfev_decoder_finish(lua_State *L, struct perfev_decoder *d);
/* Pushes the finished decoder of what perfev.decode and perfev.encode take
 * at idx: an attr, an event, a table of attr fields, or { [id] = attr,
 * ... } / { event, ... } for a stream of several; who names the caller. */
struct perfev_decoder *perfev_decoder_from(lua_State *L, int idx, const char *who);

/* The layout of the record at rec (len bytes, of the given type) in *li,
 * the id it was picked by in *id: PERFEV_PICK_OK (also when the record
 * carries no id: layout 0), PERFEV_PICK_SHORT when the record is too
 * short to hold its id, PERFEV_PICK_NO_ATTR when no layout has that id. */
enum { PERFEV_PICK_OK, PERFEV_PICK_SHORT, PERFEV_PICK_NO_ATTR };
int perfev_decoder_pick(const struct perfev_decoder *d, const unsigned char *rec, size_t len,
                        uint32_t type, size_t *li, uint64_t *id);

/* ---- decoding one record (decode.c) ---- */

/* Reads the header at p (8 bytes), byte-swapped when swap. */
static inline void perfev_record_header(const unsigned char *p, int swap,
                                        struct perf_event_header *h)
{
  h->type = perfev_ld32(p, swap);
  h->misc = perfev_ld16(p + 4, swap);
  h->size = perfev_ld16(p + 6, swap);
}

/* Decodes the record of len bytes at rec (its header included; off is
 * its offset in the stream, for messages) and pushes its table. Raises on
 * a malformed record. Returns the index of the layout used. */
size_t perfev_decode_one(lua_State *L, struct perfev_decoder *d, const unsigned char *rec,
                         size_t len, size_t off);
/* The same within an iteration: state is the stack index of its state
 * (0: none, as decode_one); with the `into` option the record is decoded
 * into the table at index into, which is pushed holding this record's
 * keys alone. */
size_t perfev_decode_into(lua_State *L, struct perfev_decoder *d, int state, int into,
                          const unsigned char *rec, size_t len, size_t off,
                          const struct perfev_extra *x);
/* Raises the decoder's malformed-record error when a row of the sample
 * at rec (size bytes, its header included; layout l; off its offset in
 * the stream) does not fit the record: what a full decode would say. The
 * selections that read a sample in place (values, tallies) check it so,
 * and agree with a full decode on every record. */
void perfev_decode_check_sample(lua_State *L, const struct perfev_attr_params *l, const unsigned char *rec,
                                size_t size, size_t off, int swap);
/* Adds a LOST or LOST_SAMPLES record's count to d->lost. */
void perfev_decode_count_lost(struct perfev_decoder *d, uint32_t type, const unsigned char *rec,
                              size_t len);
/* Reads the options table at idx ({ into = t, swap = b, fields = { ... } };
 * nil: none; swap is refused unless swap is not NULL, where it is stored).
 * Pushes the into table (or nil) and a new iteration state, and returns
 * the state. who names the caller in errors ("perfev.decode"). */
struct perfev_reuse *perfev_decode_options(lua_State *L, int idx, const char *who, int *swap);
/* The same for options already checked by the caller: reads into and
 * fields of the table at idx (0 or nil: none). */
struct perfev_reuse *perfev_decode_state(lua_State *L, int idx, const char *who);

/* ---- one record of an iteration (select.c) ---- */

/* What every record iteration (perfev.decode, ring:records, perf.data
 * records) does with a record: pushes its table (returns 1), or with a
 * `fields` selection and no `into` table its selected values (returns
 * how many), or skips it (returns 0: not a sample, when values are asked
 * for). st: the iteration state's userdata, the one at index state (the
 * caller keeps it, sparing a hot loop a lua_touserdata per record).
 * x (may be NULL): what the source adds. */
/* Values mode's shortcut: the size of the record at rec (avail bytes
 * left in its buffer) when it is a whole sample that st's plan of scalars
 * reads, else 0. With layout, the plan is also checked against the
 * decoder's one layout, for a decoder that can be replaced (ring:add): it
 * can be freed and another made at its place. */
static inline size_t perfev_select_scalar_size(const struct perfev_reuse *st,
                                               const struct perfev_decoder *d,
                                               const unsigned char *rec, size_t avail,
                                               int layout)
{
  const struct perfev_sel_plan *p = st->sel.scalars;
  struct perf_event_header h;
  if (!d || st->sel.scalars_of != d || avail < sizeof h)
    return 0;
  perfev_record_header(rec, d->swap, &h);
  if (h.type != PERF_RECORD_SAMPLE || h.size > avail || h.size < p->min_size)
    return 0;
  if (layout && (d->n != 1 || p->sample_type != d->attrs[0].sample_type ||
                 p->read_format != d->attrs[0].read_format || p->period != d->attrs[0].period))
    return 0;
  return h.size;
}

/* ... and pushes them (inline: it is the whole of a selected iteration's
 * work on a plain sample); a sample with rows of variable size is checked
 * whole first (off: its offset, for the message). */
static inline int perfev_select_push_scalars(lua_State *L, const struct perfev_reuse *st,
                                             const struct perfev_decoder *d,
                                             const unsigned char *rec, size_t off)
{
  const struct perfev_sel_plan *p = st->sel.scalars;
  size_t n = st->sel.n;
  int swap = d->swap;
  if (p->variable)
    perfev_decode_check_sample(L, &d->attrs[0], rec, perfev_ld16(rec + 6, swap), off, swap);
  if (n + 6 > LUA_MINSTACK)   /* a C function has LUA_MINSTACK slots */
    luaL_checkstack(L, (int)n + 6, "too many fields");
  for (size_t j = 0; j < n; j++) {
    const unsigned char *at = rec + p->f[j].off;
    switch (p->f[j].scalar) {
    case PERFEV_SCALAR_U64: lua_pushinteger(L, (lua_Integer)perfev_ld64(at, swap)); break;
    case PERFEV_SCALAR_U32: lua_pushinteger(L, (lua_Integer)perfev_ld32(at, swap)); break;
    case PERFEV_SCALAR_S32: lua_pushinteger(L, (lua_Integer)(int32_t)perfev_ld32(at, swap)); break;
    default: lua_pushinteger(L, (lua_Integer)p->period); break;
    }
  }
  return (int)n;
}

int perfev_iter_record(lua_State *L, struct perfev_reuse *st, struct perfev_decoder *d,
                       int state, int into, const unsigned char *rec, size_t len, size_t off,
                       const struct perfev_extra *x);
/* Whether the iteration state at index state returns values (samples only). */
int perfev_iter_values(lua_State *L, int state);

/* ---- tallies (tally.c) ----
 * With `tally = true` (and `fields`), an iteration counts its samples by
 * the values of the fields instead of returning them, and returns each
 * distinct set of values once, as `samples, weight, values...` (weight:
 * the sum of their periods, nil when the samples have none), before the
 * next other record it returns (as a table) and at the end: a report's
 * histogram at C speed, the records that change its state in time. */

/* select.c: the plan of the selection for layout li (cached); the value
 * of field j of a sample read in place as a u64, and that value pushed as
 * the iteration pushes the field. */
const struct perfev_sel_plan *perfev_select_plan(struct perfev_select *sel,
                                                 const struct perfev_attr_params *l, size_t li);
uint64_t perfev_select_key(const struct perfev_sel_plan *p, size_t j, const struct perfev_attr_params *l,
                           const unsigned char *rec, int swap);
void perfev_select_push_key(lua_State *L, const struct perfev_sel_plan *p, size_t j, uint64_t v,
                            const struct perfev_extra *x, size_t li, size_t off);
/* Whether field j is the callchain (1) or its contexts (2), which a tally
 * keeps and pushes itself, or neither (0). */
int perfev_select_chain_field(const struct perfev_sel_plan *p, size_t j);
/* Counts the sample rec (layout li, plan p) in st's tally. */
void perfev_tally_add(lua_State *L, struct perfev_reuse *st, int state,
                      const struct perfev_sel_plan *p, const struct perfev_attr_params *l,
                      const unsigned char *rec, int swap, size_t li);
/* With the record's table on top: pushes the first tally instead, holding
 * the table back, when there are tallies; returns the values pushed. */
int perfev_tally_hold(lua_State *L, struct perfev_reuse *st, int state, struct perfev_decoder *d,
                      const struct perfev_extra *x);
/* What an iteration with a tally returns before reading on: the next
 * tally, or the record held back (returns the values pushed; 0: none).
 * end: the records are over, the tallies left are handed out. */
int perfev_tally_next(lua_State *L, struct perfev_reuse *st, int state, struct perfev_decoder *d,
                      const struct perfev_extra *x, int end);

/* The name of a PERF_CONTEXT_* marker ("kernel", "user" ...), or NULL. */
const char *perfev_context_name(uint64_t marker);

/* Raises "perfev.decode: malformed record at offset off ...: msg". */
void perfev_decode_error(lua_State *L, size_t off, uint32_t type, size_t size, const char *msg);

#endif
