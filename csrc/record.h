/* The record decoder (record.c, record_layout.c) shared with the ring
 * buffer (ring.c): records in the layout the kernel writes them, decoded
 * into Lua tables by walking the data tables of record_layout.c. */
#ifndef PERFEV_RECORD_H
#define PERFEV_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include "perfev.h"

/* ---- the layout tables (record_layout.c) ---- */

/* How one field is read: the ops, each with a function op_<name> in the
 * decoder (record.c) and the encoder (encode_fields.c), whose tables this
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

/* ---- decoder state (record.c) ---- */

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
  int swap;      /* the records are in the other byte order: swap every integer */
  uint64_t lost; /* LOST and LOST_SAMPLES counts seen so far */
  size_t n;
  struct perfev_layout layouts[];
};

/* The state of one iteration over records (perfev.decode, ring:records):
 * the key strings, interned once; and when every record is decoded into
 * one table (the `into` option), the keys the last record set, so that
 * the next clears those it does not set itself, and for the nested tables
 * whose keys depend on the attr (read, branch_stack, regs) the attr value
 * they were last filled for, so that they are refilled in place only when
 * their keys are the same. Its user value holds the key strings (at the
 * index of their slot in names, plus one) and the nested tables set aside. */
#define PERFEV_REUSE_KEYS 64
#define PERFEV_REUSE_SHAPES 8
#define PERFEV_NAME_SLOTS 64
struct perfev_reuse_key {
  const char *name;
  int lower;     /* name is a constant's upper-case name: the key is its lower case */
};
struct perfev_reuse {
  int into;      /* the records go into one table */
  int dirty;     /* that table holds keys not listed (first record, or a decode raised) */
  size_t nkeys, nshapes;
  struct perfev_reuse_key keys[PERFEV_REUSE_KEYS];
  struct { const char *name; uint64_t shape; } shapes[PERFEV_REUSE_SHAPES];
  const char *names[PERFEV_NAME_SLOTS];   /* the static string each slot holds */
};

/* Reads what decoding needs from a. */
void perfev_layout_init(struct perfev_layout *l, const struct perfev_attr *a, uint64_t id);
/* Pushes a decoder userdata with room for n layouts (filled by the caller). */
struct perfev_decoder *perfev_decoder_new(lua_State *L, size_t n);
/* Computes the id positions once the layouts are filled; raises when the
 * layouts cannot share one stream. */
void perfev_decoder_finish(lua_State *L, struct perfev_decoder *d);
/* Pushes the finished decoder of what perfev.decode and perfev.encode take
 * at idx: an attr, an event, a table of attr fields, or { [id] = attr,
 * ... } / { event, ... } for a stream of several; who names the caller. */
struct perfev_decoder *perfev_decoder_from(lua_State *L, int idx, const char *who);

/* Reads the header at p (8 bytes), byte-swapped when swap. */
void perfev_record_header(const unsigned char *p, int swap, struct perf_event_header *h);

/* Decodes the record of len bytes at rec (its header included; off is
 * its offset in the stream, for messages) and pushes its table. Raises on
 * a malformed record. Returns the index of the layout used. */
size_t perfev_decode_one(lua_State *L, struct perfev_decoder *d, const unsigned char *rec,
                         size_t len, size_t off);
/* The same within an iteration: state is the stack index of its state
 * (0: none, as decode_one); with the `into` option the record is decoded
 * into the table at index into, which is pushed holding this record's
 * keys alone. */
size_t perfev_decode_into(lua_State *L, struct perfev_decoder *d, int state, int into,
                          const unsigned char *rec, size_t len, size_t off);
/* Reads the options table at idx ({ into = t, swap = b }; nil: none;
 * swap is refused unless swap is not NULL, where it is stored). Pushes
 * the into table (or nil) and a new iteration state, and returns the
 * state. who names the caller in errors ("perfev.decode"). */
struct perfev_reuse *perfev_decode_options(lua_State *L, int idx, const char *who, int *swap);

/* Raises "perfev.decode: malformed record at offset off ...: msg". */
void perfev_decode_error(lua_State *L, size_t off, uint32_t type, size_t size, const char *msg);

#endif
