/* Time order the way perf gives it (tools/perf/util/ordered-events.c's
 * rules, re-implemented): records with a time wait in a queue; a
 * finished_round record releases those not newer than the newest time seen
 * when the previous round ended, since perf record writes every buffer
 * once per round and nothing older can come after; the end releases the
 * rest. Records wait as bytes (an arena and an index), not as Lua tables. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "perfdata.h"

static int reserve(void **p, size_t *cap, size_t need, size_t each)
{
  size_t ncap;
  void *np;
  if (need <= *cap)
    return 0;
  ncap = *cap ? *cap : 64;
  while (ncap < need)
    ncap *= 2;
  np = realloc(*p, ncap * each);
  if (!np)
    return ENOMEM;
  *p = np;
  *cap = ncap;
  return 0;
}

static int arena_add(struct pd_arena *a, const unsigned char *rec, size_t len, uint64_t time,
                     uint64_t seq, uint64_t foff)
{
  struct pd_qent *e;
  if (reserve((void **)&a->bytes, &a->cap, a->len + len, 1) ||
      reserve((void **)&a->ents, &a->cap_ents, a->n + 1, sizeof *a->ents))
    return ENOMEM;
  e = &a->ents[a->n++];
  e->time = time;
  e->seq = seq;
  e->foff = foff;
  e->at = a->len;
  e->len = (uint32_t)len;
  memcpy(a->bytes + a->len, rec, len);
  a->len += len;
  return 0;
}

int pd_queue_push(struct pd_queue *q, const unsigned char *rec, size_t len, uint64_t time,
                  uint64_t foff)
{
  int err;
  if (q->max_bytes && q->wait.len + len > q->max_bytes && q->opos >= q->out.n) {
    err = pd_queue_flush(q, PD_FLUSH_HALF);
    if (err)
      return err;
  }
  err = arena_add(&q->wait, rec, len, time, q->seq++, foff);
  if (!err && time > q->max_time)
    q->max_time = time;
  return err;
}

static int by_time(const void *a, const void *b)
{
  const struct pd_qent *x = a, *y = b;
  if (x->time != y->time)
    return x->time < y->time ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Called when out has been delivered: out is rebuilt from scratch. */
int pd_queue_flush(struct pd_queue *q, int how)
{
  struct pd_arena *w = &q->wait, *o = &q->out, *s = &q->spare, t;
  uint64_t limit = q->next_flush;
  size_t i;
  o->len = o->n = 0;
  q->opos = 0;
  if (w->n == 0) {
    if (how == PD_FLUSH_ROUND)
      q->next_flush = q->max_time;
    return 0;
  }
  qsort(w->ents, w->n, sizeof *w->ents, by_time);
  if (how == PD_FLUSH_FINAL)
    limit = UINT64_MAX;
  else if (how == PD_FLUSH_HALF)
    limit = w->ents[0].time + (w->ents[w->n - 1].time - w->ents[0].time) / 2;
  s->len = s->n = 0;
  for (i = 0; i < w->n; i++) {
    const struct pd_qent *e = &w->ents[i];
    /* perf's limit 0 (before any round ended) releases nothing */
    int due = limit != 0 && e->time <= limit;
    if (arena_add(due ? o : s, w->bytes + e->at, e->len, e->time, e->seq, e->foff))
      return ENOMEM;
  }
  t = *w;   /* what stays becomes the queue */
  *w = *s;
  *s = t;
  if (how == PD_FLUSH_ROUND)
    q->next_flush = q->max_time;
  return 0;
}

const struct pd_qent *pd_queue_next(struct pd_queue *q, const unsigned char **rec)
{
  const struct pd_qent *e;
  if (q->opos >= q->out.n)
    return NULL;
  e = &q->out.ents[q->opos++];
  *rec = q->out.bytes + e->at;
  return e;
}

void pd_queue_reset(struct pd_queue *q)
{
  q->wait.len = q->wait.n = q->out.len = q->out.n = q->spare.len = q->spare.n = 0;
  q->opos = 0;
  q->seq = q->max_time = q->next_flush = 0;
}

static void arena_free(struct pd_arena *a)
{
  free(a->bytes);
  free(a->ents);
  memset(a, 0, sizeof *a);
}

void pd_queue_free(struct pd_queue *q)
{
  arena_free(&q->wait);
  arena_free(&q->out);
  arena_free(&q->spare);
}
