/* The perf.data record reader: the data section (or a pipe-mode stream)
 * read in fixed-size chunks, compressed records inflated, perf's own record
 * types decoded, kernel records through the record decoder, optionally
 * reordered by time the way perf does. Shared by the files of perfdata/. */
#ifndef PERFEV_PERFDATA_H
#define PERFEV_PERFDATA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "perfev.h"
#include "record/iter.h"
#include "cursor.h"

#define PD_READER_MT "perfev.perfdata.reader"

/* perf's own record types, above every kernel type. */
enum {
  PD_HEADER_ATTR = 64, PD_EVENT_TYPE = 65, PD_TRACING_DATA = 66, PD_BUILD_ID = 67,
  PD_FINISHED_ROUND = 68, PD_ID_INDEX = 69, PD_AUXTRACE_INFO = 70, PD_AUXTRACE = 71,
  PD_AUXTRACE_ERROR = 72, PD_THREAD_MAP = 73, PD_CPU_MAP = 74, PD_STAT_CONFIG = 75,
  PD_STAT = 76, PD_STAT_ROUND = 77, PD_EVENT_UPDATE = 78, PD_TIME_CONV = 79,
  PD_HEADER_FEATURE = 80, PD_COMPRESSED = 81, PD_FINISHED_INIT = 82, PD_COMPRESSED2 = 83,
  PD_BPF_METADATA = 84, PD_SCHEDSTAT_CPU = 85, PD_SCHEDSTAT_DOMAIN = 86,
  PD_USER_END
};
#define PD_USER_START 64

/* ---- perfdata/zstd.c: libzstd, loaded when a file needs it ---- */
struct pd_zstd;
/* NULL and a reason in why[] when libzstd cannot be loaded. */
struct pd_zstd *pd_zstd_new(char *why, size_t whylen);
void pd_zstd_free(struct pd_zstd *z);
int pd_zstd_reset(struct pd_zstd *z);
/* Inflates in[0..n) onto the end of *out (grown up to max bytes). Returns
 * NULL, or an error message. */
const char *pd_zstd_inflate(struct pd_zstd *z, const unsigned char *in, size_t n,
                            unsigned char **out, size_t *len, size_t *cap, size_t max);

/* ---- perfdata/order.c: perf's finished_round reordering ---- */
/* 32 bytes: ordering is memory-bound (every record's entry is written,
 * merged and read back), so the entry holds only what delivery needs.
 * Equal times keep their arrival order because the merge is stable. */
struct pd_qent {
  uint64_t time, foff;        /* foff: the record's file offset */
  union {
    size_t at;                  /* its bytes in the arena (copied) */
    const unsigned char *ext;   /* or in the mapped file (never copied) */
  } where;
  uint32_t len;
  uint32_t mapped;            /* where.ext, not where.at */
};
/* Bytes of copied records (those not in a mapped file). */
struct pd_bytes {
  unsigned char *p;
  size_t len, cap;
};
/* One array of entries, reused for the whole file (its pages are faulted
 * in once: on this VM a page fault cost ~15 us, more than ordering a page of
 * entries): ents[0..due) are flushed, in time order, delivered from opos;
 * ents[due..n) wait. A flush first drops what was delivered. */
struct pd_queue {
  struct pd_qent *ents;
  size_t n, cap, due, opos;
  struct pd_bytes bytes, spare;       /* copied records; spare: compaction's target */
  size_t held;                        /* bytes of the waiting records, copied or mapped */
  uint64_t max_time, next_flush;
  size_t max_bytes;                   /* a half flush past this */
  struct pd_qent *tmp;                /* the merge sort's scratch */
  size_t cap_tmp;
};
/* 0, or ENOMEM. stable: rec stays valid until the queue is reset (a
 * record of the mapped file): its position is queued, not its bytes. */
int pd_queue_push(struct pd_queue *q, const unsigned char *rec, size_t len, uint64_t time,
                  uint64_t foff, int stable);
/* Moves what is due to out: ROUND (perf's finished_round: up to the
 * previous round's newest time), FINAL (everything) or HALF (the older
 * half, when the queue outgrows max_bytes). 0, or ENOMEM. */
enum { PD_FLUSH_ROUND, PD_FLUSH_FINAL, PD_FLUSH_HALF };
int pd_queue_flush(struct pd_queue *q, int how);
/* Whether records wait (a final flush has something to do). */
int pd_queue_pending(const struct pd_queue *q);
/* The next flushed record, or NULL. */
const struct pd_qent *pd_queue_next(struct pd_queue *q, const unsigned char **rec);
void pd_queue_reset(struct pd_queue *q);
void pd_queue_free(struct pd_queue *q);

/* ---- the reader (perfdata/reader.c, perfdata/stream.c) ---- */

/* What ordering needs of each attr of the decoder. */
struct pd_lx {
  int attr;          /* index in the attrs list, from 1 */
  int time_sample;   /* byte offset of a sample's time after its header; -1: none */
  int time_trailer;  /* bytes from a record's end to the trailer's time; -1: none */
};

struct pd_reader {
  perfev_stream *stream;          /* the Lua file handle (kept alive in the uservalue) */
  char name[200];               /* the file, for messages */
  int swap, pipe, closed;
  /* the data: file offsets [start, end); end UINT64_MAX: until EOF */
  uint64_t start, end;
  int seekable, started;
  /* the read buffer: win[head..tail) is file offset off..; win is buf
   * (read through stdio) or, for a regular file's data section, the
   * mapping map[0..maplen) of file offsets mapoff.. (nothing copied) */
  unsigned char *buf;
  const unsigned char *win;
  size_t cap, head, tail;
  void *map;
  size_t maplen;
  uint64_t mapoff;
  uint64_t off;
  int eof;
  uint64_t skip;                /* payload bytes after the last record (auxtrace) */
  /* the record handed out last, kept for peeking */
  int held;
  const unsigned char *hrec;
  size_t hlen;
  uint64_t hoff;
  int hz;
  /* compressed records: inflated bytes zbuf[zhead..zlen) */
  struct pd_zstd *z;
  unsigned char *zbuf;
  size_t zhead, zlen, zcap;
  uint64_t zoff;                /* file offset of the compressed record being read */
  /* decoding */
  struct perfev_decoder *d;     /* NULL until attrs are known (uservalue slot DEC) */
  struct pd_lx *lx;
  size_t nlx;
  int dirty;
  /* ordering and filtering */
  struct pd_queue q;
  unsigned generation;
  /* a pipe stream's unexpected end, for the caller's warnings list (uservalue
   * slot WARN), added once */
  char warning[240];
  int warned;
  /* replayed records (pipe mode's header, read at open): uservalue slot REPLAY */
  size_t nreplay;
};

/* uservalue slots */
enum { PD_UV_FILE = 1, PD_UV_DEC, PD_UV_ATTRS, PD_UV_NAMES, PD_UV_REPLAY, PD_UV_WARN };

/* Raises "perfev.perfdata: NAME: msg". */
int pd_error(lua_State *L, const struct pd_reader *r, const char *fmt, ...);

/* The next record of the stream (compressed records inflated), its length
 * and file offset (for an inflated record, the compressed record's); NULL
 * at the end. Valid until the next call. *inflated: it came from a
 * compressed record. */
const unsigned char *pd_next_raw(lua_State *L, struct pd_reader *r, size_t *len, uint64_t *foff,
                                 int *inflated);
/* Maps the data section when it can (see perfdata/stream.c); pd_unmap undoes it. */
void pd_map(struct pd_reader *r);
void pd_unmap(struct pd_reader *r);
/* Makes the record pd_next_raw returned last come again. */
void pd_unread(struct pd_reader *r);
/* Back to the start of the data (seekable streams). */
void pd_rewind(lua_State *L, struct pd_reader *r);

/* ---- perfdata/perf_records.c: perf's own records ---- */
/* Pushes the table of a user record (rec: header included). */
void pd_user_decode(lua_State *L, const struct pd_reader *r, const unsigned char *rec, size_t len,
                    uint64_t foff);
/* core.PERFDATA: feature names by bit, record types by name. */
void pd_push_consts(lua_State *L);
extern const char *const pd_feature_names[];
extern const size_t pd_nfeatures;

#endif
