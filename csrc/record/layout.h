/* The layout of every kernel record as data (layout.c): for each
 * PERF_RECORD_* type its fields in order, the sample's fields with the
 * sample_type bit that makes each present, the sample_id trailer, and the
 * tables of the bits inside fields. The decoder (decode.c) and the
 * encoder (encode_fields.c) walk the same rows. */
#ifndef PERFEV_LAYOUT_H
#define PERFEV_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include "perfev.h"

/* header.size is a u16: no record is larger. */
#define PERFEV_RECORD_MAX 0xffffu

/* How one field is read: the ops, each with a function op_<name> in the
 * decoder (decode.c) and the encoder (encode_fields.c), whose tables this
 * list builds. Scalars first; the rest are composite fields. */
#define PERFEV_OPS(X)                                                                         \
  X(U8, u8) X(U16, u16) X(U32, u32) X(S32, s32) X(U64, u64) X(PAD32, pad32) X(STR, str)       \
  X(BYTES8, bytes8) X(READ, read) X(CALLCHAIN, callchain) X(RAW, raw) X(BRANCH, branch)       \
  X(REGS_USER, regs_user) X(REGS_INTR, regs_intr) X(STACK, stack) X(WEIGHT, weight)           \
  X(DATA_SRC, data_src) X(AUXDATA, auxdata) X(NAMESPACES, namespaces) X(MMAP2_ID, mmap2_id)   \
  X(TEXT_POKE, text_poke) X(AUX_FLAGS, aux_flags)
#define PERFEV_OP_ENUM(op, fn) OP_##op,
enum perfev_op { PERFEV_OPS(PERFEV_OP_ENUM) OP_COUNT };
/* An initializer of a table of ops by enum perfev_op: { PERFEV_OPS(PERFEV_OP_FN) } */
#define PERFEV_OP_FN(op, fn) [OP_##op] = op_##fn,

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
/* The sample_type bits that put a field in the sample_id trailer. */
#define PERFEV_TRAILER_BITS                                                                    \
  (PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID |              \
   PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER)

/* The bitfields of struct perf_branch_entry's third word, low bit first
 * as a little-endian machine lays them out; a big-endian one allocates
 * them from the top bit down (the header has one declaration for both).
 * The bits above the last are reserved or newer than this table. */
struct perfev_branch_bit {
  const char *name;
  uint8_t bit, width, is_bool;
};
extern const struct perfev_branch_bit perfev_branch_bits[];
extern const size_t perfev_branch_nbits;
/* Where field b sits in the flags word of a big-endian (be) or
 * little-endian writer. */
unsigned perfev_branch_shift(const struct perfev_branch_bit *b, int be);

/* The name of perf register index i as a record key: "ax", "xmm0", an
 * XMM register's upper half (index + 1) "xmm0h", others "r<i>". */
#define PERFEV_REG_NAME 16
void perfev_reg_name(int i, char buf[PERFEV_REG_NAME]);

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

/* The PERF_CONTEXT_* markers of a callchain, by the name the decoder gives
 * their segments (rec.callchain_contexts[i].context). */
struct perfev_context {
  const char *name;
  uint64_t marker;
};
extern const struct perfev_context perfev_contexts[];
extern const size_t perfev_ncontexts;

/* Whether a PERF_AUX_FLAG_* constant is one the decoder gives a boolean
 * key of its own (a single bit, not a CoreSight format value). */
int perfev_aux_flag_named(const struct perfev_const *c);

#endif
