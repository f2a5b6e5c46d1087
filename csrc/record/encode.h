/* The record encoder (encode.c: records and their headers; encode_fields.c:
 * one encode op per decode op of decode.c), shared between its two files. */
#ifndef PERFEV_ENCODE_H
#define PERFEV_ENCODE_H

#include "decode.h"

/* Why a field is needed, for the message when it is missing: set on the
 * hot path as a few pointers, formatted only for an error. One of text;
 * cond and bit (" (sample_type has IP)"); mask and reg
 * (" (sample_regs_user has bit 3)"); or none. */
struct perfev_enc_why {
  const char *text;
  const char *cond;
  uint64_t bit;
  const char *mask;
  int reg;
};

/* Where encoding is: the output, the record being written, its layout. */
struct perfev_enc {
  lua_State *L;
  int rec;            /* stack index of the record table */
  int src;            /* where scalar fields are read first: rec, or rec.sample_id in the
                         trailer (then rec after it) */
  int buf_slot;       /* stack index of the output buffer (a userdata, replaced as it grows) */
  unsigned char *buf;
  size_t len, cap;
  size_t start;       /* offset of the current record's header in buf */
  const struct perfev_attr_params *l;
  const char *what;   /* the record's type, for messages */
  uint32_t type;
  uint16_t misc;
  int exact;          /* rec.size given: laid out to exactly that size */
  int swap;           /* write integers in the other byte order (option swap) */
  struct perfev_enc_why why;   /* why the field being written is there */
  char what_buf[32];
};

void perfev_enc_put(struct perfev_enc *e, const void *p, size_t n);
void perfev_enc_zeros(struct perfev_enc *e, size_t n);
/* An integer of n bytes (1, 2, 4, 8) in the host's byte order, or the
 * other one with e->swap, as the decoder's swap option reads it. */
void perfev_enc_int(struct perfev_enc *e, uint64_t v, size_t n);
void perfev_enc_u64(struct perfev_enc *e, uint64_t v);
/* Whether the records are written as a big-endian machine writes them. */
int perfev_enc_big_endian(const struct perfev_enc *e);

/* Raises "perfev.encode: " followed by the message. */
void perfev_enc_error(struct perfev_enc *e, const char *fmt, ...);

/* Writes e->why as " (... has ...)", or "" when there is no reason. */
void perfev_enc_why_text(const struct perfev_enc *e, char *buf, size_t size);

/* Where a field is, for messages: key in the table path[at] (at 0: path
 * itself; path NULL: the record). Formatted into buf. */
const char *perfev_enc_name(char *buf, size_t size, const char *path, size_t at, const char *key);

/* The value on top of the stack, popped: an unsigned integer of at most
 * bits bits (a u64 may be any integer), else an error naming it as
 * perfev_enc_name does. */
uint64_t perfev_enc_check_u(struct perfev_enc *e, const char *path, size_t at, const char *key,
                            int bits);
/* t[key], an unsigned integer of at most bits bits; path and at name the
 * table t in messages (NULL, 0: the record). need_u raises when it is
 * missing, opt_u returns 0 then. */
uint64_t perfev_enc_need_u(struct perfev_enc *e, int t, const char *path, size_t at,
                           const char *key, int bits);
int perfev_enc_opt_u(struct perfev_enc *e, int t, const char *path, size_t at, const char *key,
                     int bits, uint64_t *out);

/* Writes the rows of a layout table that sample_type selects. cond says
 * why a row with a mask is there: "sample_type" for a sample,
 * "sample_id_all and sample_type" for the trailer. */
void perfev_enc_walk(struct perfev_enc *e, const struct perfev_rfield *rows, size_t n,
                     const char *cond);

#endif
