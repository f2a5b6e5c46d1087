/* The ring userdata shared by the files that read it, and the walk over
 * its records: ring.c (mapping, records, poll, info), ring/snapshot.c (overwrite and backward rings),
 * ring/selfread.c (counts through the metadata page), ring/aux.c (AUX area). */
#ifndef PERFEV_RING_H
#define PERFEV_RING_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "perfev.h"
#include "record/decoder.h"

#define PERFEV_RING_MT "perfev.ring"

struct perfev_ring {
  struct perf_event_mmap_page *page;   /* NULL once unmapped */
  size_t map_size;
  const unsigned char *data;           /* the data area, data_size bytes */
  uint64_t data_size;
  struct perfev_event *ev;             /* kept alive by the uservalue */
  struct perfev_decoder *dec;          /* idem */
  int overwrite;                       /* mapped read-only: the kernel overwrites old records */
  int backward;                        /* attr.write_backward: data_head moves down */
  unsigned char *aux;                  /* the AUX area, NULL when not mapped */
  size_t aux_len;
  unsigned char *rec;                  /* the record being decoded, copied out: PERFEV_RECORD_MAX
                                        * bytes, malloc'd at the first records() step, freed at
                                        * close (a profiler's ring, never iterated, has none: a
                                        * 64 KiB block in every ring userdata fragmented the heap,
                                        * +92 MB RSS over 80,000 profiles) */
};

/* The names of the capabilities bits of the metadata page, low first. */
extern const char *const perfev_ring_cap_names[];
extern const size_t perfev_ring_ncaps;

/* The ring at index 1 of a ring method; raises when it is closed. */
struct perfev_ring *perfev_ring_self(lua_State *L);
/* The ring's event; raises when it was closed (the page alone is left). */
struct perfev_event *perfev_ring_event(lua_State *L, const struct perfev_ring *r);
/* data_head, read with acquire: the records before it are visible. */
uint64_t perfev_ring_head(const struct perfev_ring *r);
/* Hands the data before tail back to the kernel (release: after our copies). */
void perfev_ring_consume(struct perfev_ring *r, uint64_t tail);

/* ---- the walk over a ring's records: the one loop of every reader ----
 * (records() in ring.c, snapshot() over a copy of the area in
 * snapshot.c, the profiler's hook in profiler/profiler.c) */
struct perfev_ring_walk {
  const unsigned char *data;   /* the area (or a copy of it, its newest record first) */
  uint64_t mask;               /* its size minus one (a power of two) */
  uint64_t pos, end;           /* the next record; where the records end (data_head) */
};

/* A walk of r's data area from data_tail to head. */
static inline void perfev_ring_walk_init(struct perfev_ring_walk *w, const struct perfev_ring *r,
                                         uint64_t head)
{
  w->data = r->data;
  w->mask = r->data_size - 1;
  w->pos = r->page->data_tail;   /* only this process writes it */
  w->end = r->data_size ? head : w->pos;
}

/* Copies n bytes at position pos, across the end of the area. */
static inline void perfev_ring_walk_copy(const struct perfev_ring_walk *w, uint64_t pos, void *dst,
                                         size_t n)
{
  size_t at = (size_t)(pos & w->mask), room = (size_t)(w->mask - at + 1);
  size_t first = room < n ? room : n;
  memcpy(dst, w->data + at, first);
  memcpy((unsigned char *)dst + first, w->data, n - first);
}

/* The header of the record at w->pos in *h: PERFEV_WALK_RECORD when the
 * record is whole, PERFEV_WALK_END when no header is left before end,
 * PERFEV_WALK_BROKEN when its size is under a header's or runs past end
 * (a kernel bug, or a copy partly overwritten). The caller reads what it
 * needs of the record and steps past it (w->pos += h->size). */
enum { PERFEV_WALK_END, PERFEV_WALK_RECORD, PERFEV_WALK_BROKEN };
static inline int perfev_ring_walk_next(const struct perfev_ring_walk *w,
                                        struct perf_event_header *h)
{
  if (w->pos >= w->end || w->end - w->pos < sizeof *h)
    return PERFEV_WALK_END;
  perfev_ring_walk_copy(w, w->pos, h, sizeof *h);
  if (h->size < sizeof *h || h->size > w->end - w->pos)
    return PERFEV_WALK_BROKEN;
  return PERFEV_WALK_RECORD;
}
/* Unmaps the AUX area, if mapped (before the ring: it lives behind it). */
void perfev_ring_aux_unmap(struct perfev_ring *r);


int perfev_ring_snapshot(lua_State *L);   /* ring:snapshot([opts]) */
/* Sets core._snapshot_walk on the table at the top (a test hook). */
void perfev_ring_snapshot_open_lib(lua_State *L);
int perfev_ring_read(lua_State *L);       /* ring:read() */
int perfev_ring_aux(lua_State *L);        /* ring:aux(pages) */

#endif
