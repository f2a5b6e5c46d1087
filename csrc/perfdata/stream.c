/* The byte stream of a perf.data reader: the data section of a file (or
 * everything after a pipe-mode header) read in chunks of a fixed-size
 * buffer through the Lua file handle's stdio stream, cut into records;
 * compressed records are inflated and their records handed out in turn;
 * the payload some records carry after themselves is skipped. */
#include <errno.h>
#include <inttypes.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "perfdata.h"

/* The most one compressed record may inflate to (perf writes a record per
 * mmap buffer flush, far smaller). */
#define PD_ZMAX ((size_t)256 << 20)

static FILE *fp_of(lua_State *L, struct pd_reader *r)
{
  FILE *f = r->closed || !r->stream ? NULL : perfev_stream_file(r->stream);
  if (!f)
    pd_error(L, r, "the file was closed");
  return f;
}

/* Reading goes no further than the data's end. */
static size_t room_before_end(const struct pd_reader *r, size_t want)
{
  uint64_t at = r->off + (r->tail - r->head);
  if (r->end == UINT64_MAX)
    return want;
  if (at >= r->end)
    return 0;
  return r->end - at < want ? (size_t)(r->end - at) : want;
}

/* Makes n bytes (n <= cap) available at buf + head when the data has them;
 * returns how many there are. A stream that cannot seek (a pipe) is read
 * only as far as asked, so that a live `perf record -o -` is not waited
 * on for a whole buffer. */
static size_t fill(lua_State *L, struct pd_reader *r, size_t n)
{
  FILE *fp;
  if (r->tail - r->head >= n || r->map)   /* a mapping holds the whole data */
    return r->tail - r->head;
  fp = fp_of(L, r);
  if (r->head > 0) {
    memmove(r->buf, r->buf + r->head, r->tail - r->head);
    r->tail -= r->head;
    r->head = 0;
  }
  while (r->tail < n && !r->eof) {
    size_t want = room_before_end(r, r->seekable ? r->cap - r->tail : n - r->tail);
    size_t got;
    if (want == 0) {
      r->eof = 1;
      break;
    }
    got = fread(r->buf + r->tail, 1, want, fp);
    r->tail += got;
    if (got < want) {
      if (ferror(fp)) {
        int err = errno;
        clearerr(fp);
        pd_error(L, r, "read error at offset %" PRIu64 ": %s", r->off + r->tail, strerror(err));
      }
      r->eof = 1;
    }
  }
  return r->tail;
}

static void seek_to(lua_State *L, struct pd_reader *r, uint64_t to)
{
  FILE *fp;
  if (r->map) {
    r->head = (size_t)(to - r->mapoff);
    r->off = to;
    return;
  }
  fp = fp_of(L, r);
  if (fseeko(fp, (off_t)to, SEEK_SET) != 0)
    pd_error(L, r, "cannot seek to offset %" PRIu64 ": %s", to, strerror(errno));
  r->head = r->tail = 0;
  r->off = to;
  r->eof = 0;
}

/* Skips n bytes of payload after a record. */
static void skip_bytes(lua_State *L, struct pd_reader *r, uint64_t n, uint64_t recoff)
{
  uint64_t in_buf = r->tail - r->head;
  if (r->end != UINT64_MAX && n > r->end - r->off)
    pd_error(L, r, "the payload of %" PRIu64 " bytes after the record at offset %" PRIu64
             " runs past the end of the data at %" PRIu64, n, recoff, r->end);
  if (n <= in_buf) {
    r->head += (size_t)n;
    r->off += n;
    return;
  }
  if (r->seekable) {
    seek_to(L, r, r->off + n);
    return;
  }
  while (n > 0) {
    size_t have = fill(L, r, 1), take = have < n ? have : (size_t)n;
    if (have == 0)
      pd_error(L, r, "the data ends inside the payload after the record at offset %" PRIu64,
               recoff);
    r->head += take;
    r->off += take;
    n -= take;
  }
}

void pd_rewind(lua_State *L, struct pd_reader *r)
{
  seek_to(L, r, r->start);
  r->skip = 0;
  r->held = 0;
  r->zhead = r->zlen = 0;
  if (r->z && pd_zstd_reset(r->z))
    pd_error(L, r, "libzstd cannot reset its stream");
  pd_queue_reset(&r->q);
}

static void inflate(lua_State *L, struct pd_reader *r, const unsigned char *rec, size_t size,
                    uint64_t recoff)
{
  const unsigned char *in = rec + 8;
  size_t n = size - 8;
  const char *msg;
  if (!r->z) {
    char why[160];
    r->z = pd_zstd_new(why, sizeof why);
    if (!r->z)
      pd_error(L, r, "the record at offset %" PRIu64 " is compressed (perf record -z) and %s",
               recoff, why);
  }
  if (perfev_ld32(rec, r->swap) == PD_COMPRESSED2) {
    uint64_t data_size;
    if (size < 16)
      pd_error(L, r, "the compressed2 record at offset %" PRIu64 " is shorter than its header",
               recoff);
    data_size = perfev_ld64(rec + 8, r->swap);
    if (data_size > size - 16)
      pd_error(L, r, "the compressed2 record at offset %" PRIu64 " says %" PRIu64
               " bytes of data but holds %zu", recoff, data_size, size - 16);
    in = rec + 16;
    n = (size_t)data_size;
  }
  if (r->zhead > 0) {
    memmove(r->zbuf, r->zbuf + r->zhead, r->zlen - r->zhead);
    r->zlen -= r->zhead;
    r->zhead = 0;
  }
  msg = pd_zstd_inflate(r->z, in, n, &r->zbuf, &r->zlen, &r->zcap, PD_ZMAX);
  if (msg)
    pd_error(L, r, "the compressed record at offset %" PRIu64 " does not inflate: %s", recoff, msg);
  r->zoff = recoff;
}

static const unsigned char *hold(struct pd_reader *r, const unsigned char *rec, size_t len,
                                 uint64_t foff, int z, size_t *olen, uint64_t *ofoff, int *oz)
{
  r->hrec = rec;
  r->hlen = *olen = len;
  r->hoff = *ofoff = foff;
  r->hz = *oz = z;
  return rec;
}

/* The next record among the inflated bytes, or NULL. */
static const unsigned char *next_inflated(lua_State *L, struct pd_reader *r, size_t *len,
                                          uint64_t *foff, int *inflated)
{
  const unsigned char *rec;
  size_t left = r->zlen - r->zhead, size;
  if (left < 8)
    return NULL;
  rec = r->zbuf + r->zhead;
  size = perfev_ld16(rec + 6, r->swap);
  if (size < 8)
    pd_error(L, r, "a record of size %zu (type %" PRIu32 ") inside the compressed record at "
             "offset %" PRIu64 " is shorter than its 8-byte header", size, perfev_ld32(rec, r->swap),
             r->zoff);
  if (size > left)
    return NULL;   /* it goes on in the next compressed record */
  r->zhead += size;
  return hold(r, rec, size, r->zoff, 1, len, foff, inflated);
}

/* A pipe stream that ends inside a record (stderr mixed into `perf record
 * -o -`, a cut stream) ends there, as perf ends it ("unexpected end of
 * event stream"): with a warning the caller reads, not an error. */
static const unsigned char *trailing(struct pd_reader *r, uint64_t recoff, size_t have)
{
  if (!r->warning[0])
    snprintf(r->warning, sizeof r->warning, "the stream ends with %zu bytes that are not a "
             "whole record at offset %" PRIu64 " (unexpected end of event stream): ignored, as "
             "perf does", have, recoff);
  r->head += have;
  r->off += have;
  return NULL;
}

const unsigned char *pd_next_raw(lua_State *L, struct pd_reader *r, size_t *len, uint64_t *foff,
                                 int *inflated)
{
  if (r->closed)   /* the mapping (win) is gone with it */
    pd_error(L, r, "the file was closed");
  if (r->held) {
    r->held = 0;
    *len = r->hlen;
    *foff = r->hoff;
    *inflated = r->hz;
    return r->hrec;
  }
  if (r->skip) {
    uint64_t n = r->skip;
    r->skip = 0;
    skip_bytes(L, r, n, r->hoff);
  }
  for (;;) {
    const unsigned char *rec = next_inflated(L, r, len, foff, inflated);
    size_t have, size;
    uint32_t type;
    uint64_t recoff = r->off;
    if (rec)
      return rec;
    have = fill(L, r, 8);
    if (have == 0) {
      if (r->zlen > r->zhead)
        pd_error(L, r, "the data ends with %zu bytes of an unfinished record inflated from the "
                 "compressed record at offset %" PRIu64, r->zlen - r->zhead, r->zoff);
      return NULL;
    }
    if (have < 8) {
      if (r->pipe)
        return trailing(r, recoff, have);
      pd_error(L, r, "the data ends inside the header of a record at offset %" PRIu64
               " (%zu of 8 bytes): the file is truncated", recoff, have);
    }
    type = perfev_ld32(r->win + r->head, r->swap);
    size = perfev_ld16(r->win + r->head + 6, r->swap);
    if (size < 8)
      pd_error(L, r, "the record at offset %" PRIu64 " (type %" PRIu32 ") has size %zu, "
               "less than its 8-byte header", recoff, type, size);
    if (r->end != UINT64_MAX && size > r->end - recoff)
      pd_error(L, r, "the record at offset %" PRIu64 " (type %" PRIu32 ", size %zu) runs past "
               "the end of the data section at %" PRIu64, recoff, type, size, r->end);
    if ((have = fill(L, r, size)) < size && r->pipe)
      return trailing(r, recoff, have);
    if (have < size)
      pd_error(L, r, "the data ends inside the record at offset %" PRIu64 " (type %" PRIu32
               ", size %zu): the file is truncated", recoff, type, size);
    rec = r->win + r->head;
    r->head += size;
    r->off += size;
    if (type == PD_COMPRESSED || type == PD_COMPRESSED2) {
      inflate(L, r, rec, size, recoff);
      continue;
    }
    if (type == PD_AUXTRACE && size >= 16)
      r->skip = perfev_ld64(rec + 8, r->swap);
    else if (type == PD_TRACING_DATA && size >= 12)
      r->skip = perfev_ld32(rec + 8, r->swap);
    return hold(r, rec, size, recoff, 0, len, foff, inflated);
  }
}

/* A regular file whose data section is all there is mapped: records are
 * read where they lie and time order queues their positions, not copies.
 * Anything else (a pipe, a pipe-mode file read to its end, a truncated
 * file, a failed mmap) is read through stdio, whose errors say where the
 * data stops. The mapping starts at the page holding the data's start. */
void pd_map(struct pd_reader *r)
{
  FILE *fp = perfev_stream_file(r->stream);
  long page = sysconf(_SC_PAGESIZE);
  struct stat st;
  uint64_t from;
  void *m;
  if (!fp || !r->seekable || r->pipe || r->end == UINT64_MAX || r->end <= r->start || page <= 0)
    return;
  if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < r->end)
    return;
  from = r->start - r->start % (uint64_t)page;
  if (r->end - from > SIZE_MAX)
    return;
  m = mmap(NULL, (size_t)(r->end - from), PROT_READ, MAP_PRIVATE, fileno(fp), (off_t)from);
  if (m == MAP_FAILED)
    return;   /* stdio reads it instead */
  r->map = m;
  r->maplen = (size_t)(r->end - from);
  r->mapoff = from;
  r->win = m;
  r->tail = r->maplen;
  r->eof = 1;
  seek_to(NULL, r, r->off);
}

void pd_unmap(struct pd_reader *r)
{
  if (r->map)
    munmap(r->map, r->maplen);   /* cannot fail on a mapping we made */
  r->map = NULL;
  r->win = r->buf;
}

void pd_unread(struct pd_reader *r)
{
  r->held = 1;
}

int pd_error(lua_State *L, const struct pd_reader *r, const char *fmt, ...)
{
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return luaL_error(L, "perfev.perfdata: %s: %s", r->name, msg);
}
