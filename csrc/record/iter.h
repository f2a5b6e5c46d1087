/* Record iteration, the one home of every iterator over records
 * (iter.c): the iteration state and its options ({ into =, fields =,
 * tally = }), the one step every record of every source takes, and the
 * one loop an iterator call runs over a source (a ring, a perf.data file,
 * a byte string), with the tally protocol. core.decode is its iterator
 * over a byte string. */
#ifndef PERFEV_ITER_H
#define PERFEV_ITER_H

#include "decode.h"
#include "tally.h"

/* The state of one iteration over records (a userdata; its user value:
 * record/slots.h). */
struct perfev_iter {
  struct perfev_fill_state fill;   /* the table of each record (fill.c) */
  struct perfev_select sel;        /* the `fields` option (select.c) */
  struct perfev_tally *tally;      /* the `tally` option's counts (in the user value) */
  /* perfev.decode's walk over its byte string and its decoder (both kept
   * alive by its closure: one lua_touserdata a record, not three) */
  const unsigned char *bytes;
  size_t len, off;
  struct perfev_decoder *dec;
};

/* Reads the options table at idx ({ into = t, swap = b, fields = { ... },
 * tally = b }; nil: none; swap is refused unless swap is not NULL, where
 * it is stored). Pushes the into table (or nil) and a new iteration
 * state, and returns the state. who names the caller in errors. */
struct perfev_iter *perfev_iter_options(lua_State *L, int idx, const char *who, int *swap);
/* The same for options already checked by the caller: reads into,
 * fields and tally of the table at idx (0 or nil: none). */
struct perfev_iter *perfev_iter_state(lua_State *L, int idx, const char *who);

/* A source of records. */
enum { PERFEV_SOURCE_END, PERFEV_SOURCE_RECORD, PERFEV_SOURCE_PUSHED };
struct perfev_source {
  /* The next record: PERFEV_SOURCE_RECORD with rec, len and off set (the
   * bytes stay valid until the next call); PERFEV_SOURCE_PUSHED with a
   * record's table on top, one the source decoded itself (perf's own
   * records); PERFEV_SOURCE_END when there are no more. May raise. */
  int (*next)(lua_State *L, struct perfev_source *src);
  void *ud;
  struct perfev_decoder *dec;      /* the records' decoder (next may replace it) */
  const struct perfev_extra *x;    /* what the source adds to records, or NULL */
  const unsigned char *rec;
  size_t len, off;
};

/* One call of an iterator over src: pushes what the iteration gives
 * next (a record's table, a sample's values, a tally) and returns how
 * many values; 0: the records are over. state and into: stack indices of
 * the iteration state and its `into` table. */
int perfev_iter_next(lua_State *L, struct perfev_iter *st, int state, int into,
                     struct perfev_source *src);
#endif
