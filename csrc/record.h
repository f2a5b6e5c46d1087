/* The record decoder (record.c, record_layout.c) shared with the ring
 * buffer (ring.c): records in the layout the kernel writes them, decoded
 * into Lua tables by walking the data tables of record_layout.c. */
#ifndef PERFEV_RECORD_H
#define PERFEV_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include "perfev.h"

/* ---- the layout tables (record_layout.c) ---- */

/* How one field is read. Scalars first; the rest are composite fields
 * with a function each in record.c. */
enum perfev_op {
  OP_U8, OP_U16, OP_U32, OP_U64, OP_PAD32, OP_STR, OP_BYTES8,
  OP_READ, OP_CALLCHAIN, OP_RAW, OP_BRANCH, OP_REGS_USER, OP_REGS_INTR,
  OP_STACK, OP_WEIGHT, OP_DATA_SRC, OP_AUXDATA, OP_NAMESPACES,
  OP_MMAP2_ID, OP_TEXT_POKE, OP_AUX_FLAGS,
  OP_COUNT
};

struct perfev_rfield {
  uint32_t mask;      /* sample_type bits that make it present; 0: always */
  uint8_t op;         /* enum perfev_op */
  const char *name;   /* Lua key; NULL for padding */
};

struct perfev_rtype {
  uint32_t type;                       /* PERF_RECORD_* */
  const char *name;                    /* rec.type */
  const struct perfev_rfield *fields;
  uint8_t nfields;
  uint8_t trailer;                     /* carries sample_id when sample_id_all */
};

/* Records of one type, or NULL for a type this ABI does not know. */
const struct perfev_rtype *perfev_rtype_find(uint32_t type);
extern const struct perfev_rfield perfev_sample_fields[];
extern const size_t perfev_sample_nfields;
extern const struct perfev_rfield perfev_trailer_fields[];
extern const size_t perfev_trailer_nfields;

/* header.misc flags whose meaning depends on the record type. */
struct perfev_misc_flag {
  uint32_t type;       /* PERF_RECORD_*; 0: every type */
  uint16_t bit;
  const char *name;
};
extern const struct perfev_misc_flag perfev_misc_flags[];
extern const size_t perfev_misc_nflags;
extern const char *const perfev_cpumode_names[8];

/* The fields of union perf_mem_data_src, by name, for rec.mem. */
struct perfev_mem_field {
  const char *name;    /* key in rec.mem */
  uint8_t shift, width;
  uint8_t is_enum;     /* one value (lvl_num, hops) rather than a bit set */
  const char *consts;  /* constant table of perfev_consts_get */
};
extern const struct perfev_mem_field perfev_mem_fields[];
extern const size_t perfev_mem_nfields;

/* ---- decoder state (record.c) ---- */

#define PERFEV_REG_NAME 8

/* What decoding needs of one attr, read from it once. */
struct perfev_layout {
  uint64_t id;
  uint64_t sample_type, read_format, branch_sample_type;
  uint64_t regs_user, regs_intr;
  uint32_t trailer_size;       /* bytes of sample_id on non-sample records */
  int sample_id_all;
};

/* One or several layouts (a stream of several events) and where the id
 * sits in each kind of record, to pick the layout of a record. */
#define PERFEV_DECODER_MT "perfev.decoder"
struct perfev_decoder {
  int id_pos;    /* u64 index of the id after a sample's header; -1: none */
  int is_pos;    /* u64 index of the id from the end of the trailer; -1: none */
  uint64_t lost; /* LOST and LOST_SAMPLES counts seen so far */
  size_t n;
  struct perfev_layout layouts[];
};

/* Reads what decoding needs from a. */
void perfev_layout_init(struct perfev_layout *l, const struct perfev_attr *a, uint64_t id);
/* Pushes a decoder userdata with room for n layouts (filled by the caller). */
struct perfev_decoder *perfev_decoder_new(lua_State *L, size_t n);
/* Computes the id positions once the layouts are filled; raises when the
 * layouts cannot share one stream. */
void perfev_decoder_finish(lua_State *L, struct perfev_decoder *d);

/* Decodes the record of len bytes at rec (its header included; off is
 * its offset in the stream, for messages) and pushes its table. Raises on
 * a malformed record. Returns the index of the layout used. */
size_t perfev_decode_one(lua_State *L, struct perfev_decoder *d, const unsigned char *rec,
                         size_t len, size_t off);

/* Raises "perfev.decode: malformed record at offset off ...: msg". */
void perfev_decode_error(lua_State *L, size_t off, uint32_t type, size_t size, const char *msg);

#endif
