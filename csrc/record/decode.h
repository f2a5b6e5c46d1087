/* Decoding one record into a Lua table (decode.c): one loop over the rows
 * of layout.c, the table filled through fill.c. Every iteration (record/
 * iter.c), a snapshot of a ring, perf.data files and the encoder's checks
 * come here for a record's table. */
#ifndef PERFEV_DECODE_H
#define PERFEV_DECODE_H

#include <stddef.h>
#include <stdint.h>
#include "decoder.h"
#include "select.h"
#include "fill.h"

/* Where a record's table goes: a new table (fill NULL: nothing kept
 * between records), or within an iteration the `into` table refilled. */
struct perfev_sink {
  struct perfev_fill_state *fill;   /* the iteration's, or NULL */
  struct perfev_select *sel;        /* its `fields` (n 0: every key), or NULL */
  int state;                        /* stack index of the iteration state (0: none) */
  int into;                         /* stack index of the `into` table */
};

/* Decodes the record of len bytes at rec (its header included; off is
 * its offset in the stream, for messages) and pushes its table. Raises on
 * a malformed record. Returns the index of the attr used. */
size_t perfev_decode_one(lua_State *L, struct perfev_decoder *d, const unsigned char *rec,
                         size_t len, size_t off);
/* The same within an iteration (to: where the table goes; NULL as
 * decode_one); x (may be NULL): what the source adds. */
size_t perfev_decode_into(lua_State *L, struct perfev_decoder *d, const struct perfev_sink *to,
                          const unsigned char *rec, size_t len, size_t off,
                          const struct perfev_extra *x);
/* Raises the decoder's malformed-record error when a row of the sample
 * at rec (size bytes, its header included; attr l; off its offset in
 * the stream) does not fit the record: what a full decode would say. The
 * selections that read a sample in place (values, tallies) check it so,
 * and agree with a full decode on every record. */
void perfev_decode_check_sample(lua_State *L, const struct perfev_attr_params *l, const unsigned char *rec,
                                size_t size, size_t off, int swap);
/* Raises "perfev.decode: malformed record at offset off ...: msg". */
void perfev_decode_error(lua_State *L, size_t off, uint32_t type, size_t size, const char *msg);

#endif
