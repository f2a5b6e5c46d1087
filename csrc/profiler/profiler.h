/* The Lua-function profiler's C half, shared by profiler.c (signal, hook,
 * lifecycle) and profiler/agg.c (the aggregation of stacks). */
#ifndef PERFEV_PROFILER_H
#define PERFEV_PROFILER_H

#include <stddef.h>
#include <stdint.h>
#include "perfev.h"

struct perfev_ring;

/* One frame as lua_getinfo("Sln") describes it, with its copies of the
 * strings (a function's source string can be collected before read-out). */
struct prof_frame {
  char *name;           /* ar.name, or NULL */
  char *src;            /* ar.short_src */
  int linedefined;      /* -1 for C functions */
  int line;             /* ar.currentline: the line running, or calling the frame above */
  char what;            /* 'L' Lua, 'C' C, 'm' main chunk, 't' truncated-stack marker,
                         * 'u' / 'k' a native frame of the user / kernel callchain */
  uint64_t ip;          /* native frames: the address (0 for the others) */
  uint32_t hash;
};

/* One distinct stack (frame ids, root first) and what it weighs. */
struct prof_stack {
  size_t off;           /* into agg.ids */
  uint32_t len, hash;
  uint64_t weight, samples;
};

/* Interned frames and stacks: open-addressing hash tables of ids into
 * growing arrays. Filled by the hook; allocation happens only when a frame
 * or a stack is seen for the first time (or a table doubles). */
struct prof_agg {
  struct prof_frame *frames;
  size_t nframes, capframes;
  uint32_t *ftab;       /* frame id + 1, 0 empty; capftab slots (power of two) */
  size_t capftab;
  struct prof_stack *stacks;
  size_t nstacks, capstacks;
  uint32_t *stab;       /* stack id + 1 */
  size_t capstab;
  uint32_t *ids;        /* every stack's frame ids, one after the other */
  size_t nids, capids;
};

/* A frame as the hook reads it, before it is interned. */
struct prof_key {
  const char *name, *src;
  int linedefined, line;
  char what;
  uint64_t ip;
};

/* Interns a frame; returns its id, or -1 when out of memory. */
long prof_agg_frame(struct prof_agg *a, const struct prof_key *k);
/* Adds weight and samples to the stack ids[0..n) (root first); returns
 * the stack's id (an index into a->stacks), or -1 when out of memory. */
long prof_agg_stack(struct prof_agg *a, const uint32_t *ids, uint32_t n, uint64_t weight,
                    uint64_t samples);
/* Interns the stack ids[0..n) (root first), weight 0 when new; returns
 * its id (an index into a->stacks), or -1 when out of memory. */
long prof_agg_stack_id(struct prof_agg *a, const uint32_t *ids, uint32_t n);
/* Pushes { frames = {...}, stacks = {...} } (see profiler.c's p:read()). */
void prof_agg_push(lua_State *L, const struct prof_agg *a);
/* Sets frames and stacks in the table on top of L. */
void prof_agg_push_fields(lua_State *L, const struct prof_agg *a);

/* How a sample's Lua stack is read (luastack.c): into agg, across the
 * chain of resumes (cotrack.h), at most max frames; name, when not NULL,
 * names frame lv of T (described by d, "Sln") instead of d->name, and
 * sets *pushed to the values it left on T's stack (popped after). */
struct perfev_cochain;
struct prof_walk {
  struct prof_agg *agg;
  const struct perfev_cochain *chain;
  int max;
  const char *(*name)(void *ud, lua_State *T, int lv, lua_Debug *d, int *pushed);
  void *ud;
};

/* The Lua stack of L from level `from`, then its resumers', into ids, root
 * first. Returns the count, or -1 when out of memory; *cut: whether it was
 * cut at w->max (a "[truncated]" frame at its root). */
int prof_lua_stack(const struct prof_walk *w, lua_State *L, int from, uint32_t *ids, int *cut);

/* The samples in time order (p:timeline(n), profiler_timeline.c): the
 * latest n, each with the time the hook recorded it (CLOCK_MONOTONIC, ns),
 * its weight and its stack, interned in an aggregation of the timeline's
 * own, which p:take() and p:reset() leave alone (map: the profile's frame
 * ids, which they start again, to the timeline's). */
struct prof_timeline {
  struct prof_agg agg;
  uint32_t *map;        /* the profile's frame id -> the timeline's + 1, 0 unknown */
  size_t capmap;
  uint64_t *time, *weight, *samples;
  uint32_t *stack;
  size_t cap;           /* samples kept at most (0: no timeline) */
  uint64_t count;       /* samples recorded: the latest cap of them are kept */
  int oom;
  int busy;             /* being read out: a hook meanwhile (a finalizer's) records none */
};

/* The most frames of a sample's stack (the hook's MAX_FRAMES + MAX_NATIVE) */
#define PROF_TIMELINE_FRAMES 1024

/* Allocates a timeline of cap samples (0: none); 0 or -1 (out of memory). */
int prof_timeline_init(struct prof_timeline *t, size_t cap);
/* The profile's frame ids start again (its aggregation was swapped out). */
void prof_timeline_forget(struct prof_timeline *t);
/* Records a sample of the stack from->ids[0..n) at time ns. */
void prof_timeline_add(struct prof_timeline *t, const struct prof_agg *from, const uint32_t *ids,
                       uint32_t n, uint64_t time, uint64_t weight, uint64_t samples);
/* Pushes { frames, stacks, time = {...}, stack = {...}, weight = {...},
 * samples = {...}, n, count, dropped } (the samples oldest first). */
void prof_timeline_push(lua_State *L, struct prof_timeline *t);
void prof_timeline_free(struct prof_timeline *t);
/* Frees everything, leaves an empty aggregation. */
void prof_agg_free(struct prof_agg *a);

/* The bound on the profiler's own cost (profiler/budget.c). */
struct prof_budget {
  int fd;                   /* the event's: PERF_EVENT_IOC_PERIOD */
  int asked_freq;           /* the event was asked a frequency (else a period) */
  int clock;                /* cpu-clock, task-clock: the samples' period field stays the one at open */
  int sigtrap;              /* attr.sigtrap: no moment enabled without our handler */
  int freq;                 /* the ioctl takes a frequency (not the clocks: a period in ns) */
  uint64_t asked, value;    /* the rate or period asked; what the ioctl set last */
  double bound;             /* the share of the thread's CPU time allowed (0: none) */
  uint64_t signal_ns;       /* one signal's cost, measured at start */
  uint64_t irq_ns;          /* one sample's interrupt (the event's overflow), measured at start */
  uint64_t cpu0, win_start, win_cost, cost;
  uint64_t charged_signals; /* the signals charged so far (the hook engine's count) */
  uint64_t throttled;       /* how many times the rate was lowered */
  int err;                  /* the ioctl's errno, once it failed (no more tries) */
};

/* The thread's CPU time, ns. */
uint64_t prof_budget_now(void);
/* For the event on fd with attr a; bound: the share allowed, 0 none. */
void prof_budget_init(struct prof_budget *b, int fd, const struct perfev_attr *a, double bound);
/* Measures a signal's cost and the event's interrupt's (the event enabled
 * a moment, its samples in ring r consumed), starts the clock. */
void prof_budget_start(struct prof_budget *b, struct perfev_ring *r);
/* Sums the periods of the samples ring r holds (sample_type PERIOD first)
 * and consumes them; the count in *n, the records lost added to *lost. */
uint64_t prof_ring_periods(struct perfev_ring *r, uint64_t *n, uint64_t *lost);
/* Adds cost ns at now (prof_budget_now()); lowers the rate when a window is over the bound. */
void prof_budget_charge(struct prof_budget *b, uint64_t cost, uint64_t now);
/* The period of a sample whose record says `reported`: a clock's record
 * keeps the period it was opened with (the kernel's hrtimer events do not
 * update last_period on PERF_EVENT_IOC_PERIOD), so once lowered, the one set. */
uint64_t prof_budget_period(const struct prof_budget *b, uint64_t reported);
/* Sets the budget's fields in the table on top of L (see p:read()). */
void prof_budget_push(lua_State *L, const struct prof_budget *b);
int perfev_profiler_budget_open_lib(lua_State *L);
/* The budget userdata at idx, or NULL when none is there. */
const struct prof_budget *prof_budget_opt(lua_State *L, int idx);

#endif
