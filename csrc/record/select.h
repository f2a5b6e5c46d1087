/* Field selection (select.c), the `fields` option of every record
 * iteration: a list of record keys, compiled once into what each is in a
 * sample (a row of the sample's layout, a header key, a key the source
 * adds), and per attr into a plan: where each field sits when its offset
 * is fixed, which layout rows must be walked for the others. What the
 * source of the records adds to them (rec.event, rec.offset) is here too. */
#ifndef PERFEV_SELECT_H
#define PERFEV_SELECT_H

#include <stddef.h>
#include <stdint.h>
#include "decoder.h"

#define PERFEV_SELECT_MAX 32
#define PERFEV_SELECT_PLANS 8

/* What the source of the records adds to them (rec.event, rec.offset). */
enum { PERFEV_EXTRA_EVENT, PERFEV_EXTRA_OFFSET, PERFEV_NEXTRA };
struct perfev_extra {
  /* Pushes the value of key `which` for the record (its type, the index
   * of its attr, its offset in the stream) and returns 1, or pushes
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
/* How a plan gets field j (its f[j].how): absent from this attr's
 * samples; read in place (an integer, the attr's period, a header key, a
 * misc flag, what the source adds: perfev_select_key); taken from the
 * record's table, decoded (TABLE); the callchain read in place (CHAIN) or,
 * for a tally, its contexts (CHAIN_CTX). */
enum { PERFEV_H_ABSENT, PERFEV_H_U64, PERFEV_H_S32, PERFEV_H_U32, PERFEV_H_PERIOD, PERFEV_H_TABLE,
       PERFEV_H_TYPE, PERFEV_H_SIZE, PERFEV_H_MISC, PERFEV_H_CPUMODE, PERFEV_H_FLAG, PERFEV_H_EXTRA,
       PERFEV_H_CHAIN, PERFEV_H_CHAIN_CTX };
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

/* Compiles the field names of the list at idx into sel (raises at the
 * caller naming an unknown field, with "did you mean"); the table at uv
 * (the iteration state's user value) gets their key strings. */
void perfev_select_compile(lua_State *L, int idx, int uv, struct perfev_select *sel,
                           const char *who);
/* The plan of the selection for attr li (cached). */
const struct perfev_sel_plan *perfev_select_plan(struct perfev_select *sel,
                                                 const struct perfev_attr_params *l, size_t li);
/* The value of field j of a sample read in place as a u64, and that value
 * pushed as the iteration pushes the field. */
uint64_t perfev_select_key(const struct perfev_sel_plan *p, size_t j, const struct perfev_attr_params *l,
                           const unsigned char *rec, int swap);
void perfev_select_push_key(lua_State *L, const struct perfev_sel_plan *p, size_t j, uint64_t v,
                            const struct perfev_extra *x, size_t li, size_t off);

/* Whether the callchain at p->chain fits the record of size bytes. */
static inline int perfev_plan_chain_fits(const struct perfev_sel_plan *p, const unsigned char *rec,
                                         size_t size, int swap)
{
  uint64_t nr;
  if (!p->chain)
    return 1;
  nr = perfev_ld64(rec + p->chain, swap);
  return nr <= (size - p->chain - 8) / 8;
}

#endif
