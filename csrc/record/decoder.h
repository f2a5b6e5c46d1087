/* The decoder object (decoder.c): the decode parameters of each attr of a
 * stream, read from it once, and where a record carries the id that says
 * which attr it belongs to. Everything that decodes or encodes records
 * holds one. */
#ifndef PERFEV_DECODER_H
#define PERFEV_DECODER_H

#include <stddef.h>
#include <stdint.h>
#include "perfev.h"
#include "cursor.h"
#include "layout.h"

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

/* The attr of the record at rec (len bytes, of the given type) in *li,
 * the id it was picked by in *id: PERFEV_PICK_OK (also when the record
 * carries no id: attr 0), PERFEV_PICK_SHORT when the record is too
 * short to hold its id, PERFEV_PICK_NO_ATTR when no attr has that id. */
enum { PERFEV_PICK_OK, PERFEV_PICK_SHORT, PERFEV_PICK_NO_ATTR };
int perfev_decoder_pick(const struct perfev_decoder *d, const unsigned char *rec, size_t len,
                        uint32_t type, size_t *li, uint64_t *id);
/* Adds a LOST or LOST_SAMPLES record's count to d->lost. */
void perfev_decoder_count_lost(struct perfev_decoder *d, uint32_t type, const unsigned char *rec,
                               size_t len);

/* Registers the decoder's class and sets core.id_positions on the table
 * on top. */
void perfev_decoder_open_lib(lua_State *L);

/* Reads the header at p (8 bytes), byte-swapped when swap. */
static inline void perfev_record_header(const unsigned char *p, int swap,
                                        struct perf_event_header *h)
{
  h->type = perfev_ld32(p, swap);
  h->misc = perfev_ld16(p + 4, swap);
  h->size = perfev_ld16(p + 6, swap);
}

#endif
