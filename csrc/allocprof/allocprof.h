/* The allocation profiler's C half (perfev.alloc, lua/perfev/alloc.lua):
 * shared by allocprof.c (the allocator, the hook, the Lua methods) and
 * allocprof/live.c (the sampled blocks still live, the sampling's maths). */
#ifndef PERFEV_ALLOCPROF_H
#define PERFEV_ALLOCPROF_H

#include <stddef.h>
#include <stdint.h>

#define AP_PENDING UINT32_MAX     /* a block sampled whose stack is not known yet */

/* A sampled block not freed yet: where it is, its size, its stack. */
struct ap_block {
  uintptr_t ptr;                  /* 0: an empty slot */
  size_t size;                    /* now (a block shrunk in place keeps its sample) */
  size_t sampled;                 /* when it was sampled: its weight's size */
  uint32_t stack;                 /* AP_PENDING until the stack is recorded */
};

/* Open addressing (linear probing, deletion by backward shift), keyed by
 * the block's address. Grown with malloc, never with the Lua allocator. */
struct ap_live {
  struct ap_block *slots;
  size_t n, cap;                  /* cap: 0 or a power of two */
};

/* Adds a block; 0, or -1 when out of memory. An address already there
 * (freed by a path not seen) is replaced. */
int ap_live_put(struct ap_live *t, uintptr_t ptr, size_t size);
/* The block at ptr, or NULL. */
struct ap_block *ap_live_get(const struct ap_live *t, uintptr_t ptr);
/* The block at ptr, shrunk to size and moved to nptr (a realloc that
 * shrinks), keeping its sample; 0, or -1 when out of memory (then gone). */
int ap_live_shrink(struct ap_live *t, uintptr_t ptr, uintptr_t nptr, size_t size);
/* Removes the block at ptr when there is one. */
void ap_live_del(struct ap_live *t, uintptr_t ptr);
void ap_live_free(struct ap_live *t);

/* The weight of one sampled block of `size` bytes, sampled on average every
 * `period` bytes (an allocation of s bytes is sampled with probability
 * 1 - exp(-s/period), so it stands for 1/(1 - exp(-s/period)) of its
 * kind, as Go's pprof scales heap samples); 1 when period <= 1. */
double ap_scale(size_t size, uint64_t period);
/* The next sampling distance: exponential with mean `period` bytes, drawn
 * from the xorshift state *rng; 0 when period <= 1 (every allocation). */
int64_t ap_next_sample(uint64_t *rng, uint64_t period);

struct lua_State;
/* core.allocprof (allocprof.c) */
int perfev_allocprof_open_lib(struct lua_State *L);

#endif
