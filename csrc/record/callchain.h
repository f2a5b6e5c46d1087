/* A sample's callchain as the kernel writes it (callchain.c): nr, then nr
 * u64 entries, the addresses and the PERF_CONTEXT_* markers that open a
 * segment (kernel, user, guest ...). The one walk over its entries, and
 * the one way to make its Lua values (rec.callchain: the addresses;
 * rec.callchain_contexts: the segments), for the decoder, values mode,
 * tallies and the profiler. */
#ifndef PERFEV_CALLCHAIN_H
#define PERFEV_CALLCHAIN_H

#include <stddef.h>
#include <stdint.h>
#include "perfev.h"
#include "cursor.h"
#include "layout.h"

/* The nr entries at w (u64 each, byte-swapped when swap), walked. */
struct perfev_chain {
  const unsigned char *w;
  uint64_t nr, i;
  int swap;
};

static inline void perfev_chain_init(struct perfev_chain *c, const unsigned char *w, uint64_t nr,
                                     int swap)
{
  c->w = w;
  c->nr = nr;
  c->i = 0;
  c->swap = swap;
}

enum { PERFEV_CHAIN_END, PERFEV_CHAIN_IP, PERFEV_CHAIN_MARKER };
/* The next entry in *v: an address (PERFEV_CHAIN_IP), a PERF_CONTEXT_*
 * marker, or PERFEV_CHAIN_END. */
static inline int perfev_chain_next(struct perfev_chain *c, uint64_t *v)
{
  if (c->i >= c->nr)
    return PERFEV_CHAIN_END;
  *v = perfev_ld64(c->w + 8 * c->i++, c->swap);
  return *v >= (uint64_t)PERF_CONTEXT_MAX ? PERFEV_CHAIN_MARKER : PERFEV_CHAIN_IP;
}

/* Sets t[1..n] (t: a stack index) to the chain's addresses, the markers
 * left out, and returns n; the caller clears what t held after n. */
lua_Integer perfev_chain_fill(lua_State *L, int t, const unsigned char *w, uint64_t nr, int swap);

/* The segments the markers open: calls seg(ud, marker, first, last, k)
 * for the k-th (from 1), first..last the addresses' indices in
 * rec.callchain (last = first - 1: empty). Returns how many. */
typedef void (*perfev_chain_seg_fn)(void *ud, uint64_t marker, lua_Integer first, lua_Integer last,
                                    lua_Integer k);
lua_Integer perfev_chain_segments(const unsigned char *w, uint64_t nr, int swap,
                                  perfev_chain_seg_fn seg, void *ud);
/* Pushes rec.callchain_contexts as new tables ({ context =, first =,
 * last = } each), or nil when the chain has no marker. */
void perfev_chain_push_contexts(lua_State *L, const unsigned char *w, uint64_t nr, int swap);

/* The name of a PERF_CONTEXT_* marker ("kernel", "user" ...), or NULL. */
const char *perfev_context_name(uint64_t marker);

#endif
