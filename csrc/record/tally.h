/* Tallies (tally.c): with `tally = true` (and `fields`), an iteration
 * counts its samples by the values of the fields instead of returning
 * them, and returns each distinct set of values once, as `samples,
 * weight, values...` (weight: the sum of their periods, nil when the
 * samples have none), before the next other record it returns (as a
 * table) and at the end: a report's histogram at C speed, the records
 * that change its state in time. The tally protocol of an iterator is
 * record/iter.c's perfev_iter_next. */
#ifndef PERFEV_TALLY_H
#define PERFEV_TALLY_H

#include "decoder.h"
#include "select.h"

struct perfev_tally;

/* Counts the sample at rec (len bytes, off its offset) in *t (made, or
 * replaced by a larger one, in the user value of the iteration state at
 * index state) and returns 1; returns 0 for a record not counted: not a
 * sample, or one too short for the plan (its full decode says what is
 * wrong). Raises when a field cannot be a tally's key. */
int perfev_tally_count(lua_State *L, struct perfev_tally **t, struct perfev_select *sel, int state,
                       struct perfev_decoder *d, const unsigned char *rec, size_t len, size_t off);
/* With the record's table on top: pushes the first tally instead, holding
 * the table back, when there are tallies; returns the values pushed. */
int perfev_tally_hold(lua_State *L, struct perfev_tally *t, struct perfev_select *sel, int state,
                      struct perfev_decoder *d, const struct perfev_extra *x);
/* What an iteration with a tally returns before reading on: the next
 * tally, or the record held back (returns the values pushed; 0: none).
 * end: the records are over, the tallies left are handed out. */
int perfev_tally_next(lua_State *L, struct perfev_tally *t, struct perfev_select *sel, int state,
                      struct perfev_decoder *d, const struct perfev_extra *x, int end);

#endif
