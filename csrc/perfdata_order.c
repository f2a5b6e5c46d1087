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

/* ext: the record's bytes stay where they are (the mapped file); else
 * they are copied from rec into the arena. */
static int arena_add(struct pd_arena *a, const unsigned char *rec, const unsigned char *ext,
                     size_t len, uint64_t time, uint64_t seq, uint64_t foff)
{
  struct pd_qent *e;
  if ((!ext && reserve((void **)&a->bytes, &a->cap, a->len + len, 1)) ||
      reserve((void **)&a->ents, &a->cap_ents, a->n + 1, sizeof *a->ents))
    return ENOMEM;
  e = &a->ents[a->n++];
  e->time = time;
  e->seq = seq;
  e->foff = foff;
  e->ext = ext;
  e->at = a->len;
  e->len = (uint32_t)len;
  a->held += len;
  if (!ext) {
    memcpy(a->bytes + a->len, rec, len);
    a->len += len;
  }
  return 0;
}

int pd_queue_push(struct pd_queue *q, const unsigned char *rec, size_t len, uint64_t time,
                  uint64_t foff, int stable)
{
  int err;
  /* held, not len: a mapped record counts as a copied one, so that the
   * order does not depend on how the file is read */
  if (q->max_bytes && q->wait.held + len > q->max_bytes && q->opos >= q->out.n) {
    err = pd_queue_flush(q, PD_FLUSH_HALF);
    if (err)
      return err;
  }
  err = arena_add(&q->wait, rec, stable ? rec : NULL, len, time, q->seq++, foff);
  if (!err && time > q->max_time)
    q->max_time = time;
  return err;
}

/* Orders the entries by time, equal times in the order they are (their
 * seq order: the queue keeps what waits sorted and appends newer records).
 * A round is a few runs already in time order (one per ring buffer perf
 * read), so a natural merge sort is linear in the common case: runs are
 * found, then merged pairwise into tmp and back. */
static int sort_by_time(struct pd_queue *q, struct pd_qent *e, size_t n)
{
  struct pd_qent *a = e, *b;
  size_t i, runs = 1;
  for (i = 1; i < n; i++)
    runs += e[i].time < e[i - 1].time;
  if (runs == 1)
    return 0;
  if (reserve((void **)&q->tmp, &q->cap_tmp, n, sizeof *q->tmp))
    return ENOMEM;
  b = q->tmp;
  while (runs > 1) {
    size_t out = 0, lo = 0;
    runs = 0;
    while (lo < n) {   /* merge the run at lo with the next one */
      size_t mid = lo + 1, hi, x, y;
      while (mid < n && a[mid].time >= a[mid - 1].time)
        mid++;
      hi = mid < n ? mid + 1 : n;
      while (hi < n && a[hi].time >= a[hi - 1].time)
        hi++;
      for (x = lo, y = mid; x < mid || y < hi;)
        b[out++] = (y >= hi || (x < mid && a[x].time <= a[y].time)) ? a[x++] : a[y++];
      runs++;
      lo = hi;
    }
    { struct pd_qent *t = a; a = b; b = t; }
  }
  if (a != e)
    memcpy(e, a, n * sizeof *e);
  return 0;
}

/* Called when out has been delivered: out is rebuilt from scratch. The
 * queue is sorted; the records due (a prefix) are delivered from the
 * queue's own bytes, which out takes over, and only those that stay are
 * copied into a new queue (spare's buffers). */
int pd_queue_flush(struct pd_queue *q, int how)
{
  struct pd_arena *w = &q->wait, *o = &q->out, *s = &q->spare, t;
  uint64_t limit = q->next_flush;
  size_t i, due = 0;
  o->len = o->n = o->held = 0;
  q->opos = 0;
  if (w->n == 0) {
    if (how == PD_FLUSH_ROUND)
      q->next_flush = q->max_time;
    return 0;
  }
  if (sort_by_time(q, w->ents, w->n))
    return ENOMEM;
  if (how == PD_FLUSH_FINAL)
    limit = UINT64_MAX;
  else if (how == PD_FLUSH_HALF)
    limit = w->ents[0].time + (w->ents[w->n - 1].time - w->ents[0].time) / 2;
  /* perf's limit 0 (before any round ended) releases nothing */
  while (limit != 0 && due < w->n && w->ents[due].time <= limit)
    due++;
  s->len = s->n = s->held = 0;
  for (i = due; i < w->n; i++) {
    const struct pd_qent *e = &w->ents[i];
    /* a mapped record's bytes are not in the arena (which may have none) */
    const unsigned char *rec = e->ext ? e->ext : w->bytes + e->at;
    if (arena_add(s, rec, e->ext, e->len, e->time, e->seq, e->foff))
      return ENOMEM;
  }
  t = *o;   /* delivered: its buffers are free */
  *o = *w;
  o->n = due;
  *w = *s;   /* what stays is the queue */
  *s = t;
  s->len = s->n = s->held = 0;
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
  *rec = e->ext ? e->ext : q->out.bytes + e->at;
  return e;
}

void pd_queue_reset(struct pd_queue *q)
{
  q->wait.len = q->wait.n = q->out.len = q->out.n = q->spare.len = q->spare.n = 0;
  q->wait.held = q->out.held = q->spare.held = 0;
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
  free(q->tmp);
  q->tmp = NULL;
  q->cap_tmp = 0;
  arena_free(&q->wait);
  arena_free(&q->out);
  arena_free(&q->spare);
}
