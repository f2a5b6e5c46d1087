/* How the decoder (decode.c) fills the Lua table of a record
 * (fill.c): key strings looked up once per iteration rather than
 * hashed and compared on every set, and decoding every record into one
 * table (the `into` option) without allocating. Internal to the decoder. */
#ifndef PERFEV_FILL_H
#define PERFEV_FILL_H

#include "decoder.h"
#include "select.h"
#include "slots.h"

/* What an iteration keeps between records to fill them (a part of the
 * iteration state, record/iter.h): the key strings, interned once (at the
 * index of their slot in names, plus one, in the state's user value); and
 * when every record is decoded into one table (the `into` option), the
 * keys the last record set, so that the next clears those it does not set
 * itself, and for the nested tables whose keys depend on the attr (read,
 * branch_stack, regs) the attr value they were last filled for, so that
 * they are refilled in place only when their keys are the same. */
#define PERFEV_REUSE_KEYS 64
#define PERFEV_REUSE_SHAPES 8
struct perfev_fill_key {
  const char *name;
  int lower;     /* name is a constant's upper-case name: the key is its lower case */
};
struct perfev_fill_state {
  int into;      /* the records go into one table */
  int dirty;     /* that table holds keys not listed (first record, or a decode raised) */
  size_t nkeys, nshapes;
  struct perfev_fill_key keys[PERFEV_REUSE_KEYS];
  struct { const char *name; uint64_t shape; } shapes[PERFEV_REUSE_SHAPES];
  const char *names[PERFEV_NAME_SLOTS];   /* the static string each slot holds */
};

/* The table being filled. Keys and string values passed as `k` must be
 * static strings (the layout tables' names, literals): their address
 * stands for their text in the key cache. */
struct perfev_fill {
  lua_State *L;
  int t;                          /* stack index of the record's table */
  struct perfev_fill_state *st;   /* the iteration's, or NULL (decode_one) */
  int u;                          /* stack index of the iteration state's user value */
  int reuse;                      /* t is the `into` table, being refilled */
  size_t nkeys;                   /* keys set so far; above PERFEV_REUSE_KEYS, unlisted */
  struct perfev_fill_key keys[PERFEV_REUSE_KEYS];
};

/* Pushes the table to fill: with st (NULL: none; state: the stack index
 * of the iteration state, whose user value holds the key strings) the
 * table at index into when st->into, else a new one. perfev_fill_end removes the
 * keys of the previous record this one did not set, and leaves the table
 * alone on top of what was there. */
void perfev_fill_begin(struct perfev_fill *f, lua_State *L, struct perfev_fill_state *st, int state,
                       int into);
void perfev_fill_end(struct perfev_fill *f);
/* Removes the keys of the record (being refilled) that sel does not ask
 * for (rec.type stays): an op sets a key beside its own (callchain's
 * callchain_contexts, data_src's mem). Nested tables are set aside. */
void perfev_fill_keep(struct perfev_fill *f, const struct perfev_select *sel);

/* Pushes the string k (a key or a value), from the key cache. */
void perfev_fill_name(struct perfev_fill *f, const char *k);
/* record[k] = the value on top (popped). */
void perfev_fill_put(struct perfev_fill *f, const char *k);
void perfev_fill_put_int(struct perfev_fill *f, const char *k, uint64_t v);
void perfev_fill_put_bytes(struct perfev_fill *f, const char *k, const unsigned char *p, size_t n);
/* record[lower(name)] = true, name a constant's upper-case name. */
void perfev_fill_put_flag(struct perfev_fill *f, const char *name);
/* t[k] = v for the nested table t on top. */
void perfev_fill_set_int(struct perfev_fill *f, const char *k, uint64_t v);
/* t[k] = the value on top (popped), for the nested table t below it. */
void perfev_fill_set(struct perfev_fill *f, const char *k);

/* Pushes the nested table to fill as record[k]: when refilling, the one
 * the record has or the one a record without k set aside; else a new one
 * (narr, nrec: its sizes). shaped: its keys depend on the attr value
 * `shape` (read_format, branch_sample_type, a regs mask), and a table
 * filled for another shape is not reused. Returns 1 when the table is
 * record[k] already, for perfev_fill_put_nested, which pops it and sets
 * record[k] when needed. */
int perfev_fill_nested(struct perfev_fill *f, const char *k, int narr, int nrec);
int perfev_fill_shaped(struct perfev_fill *f, const char *k, int narr, int nrec, uint64_t shape);
void perfev_fill_put_nested(struct perfev_fill *f, const char *k, int in_place);
/* Pushes the table to fill as item i of the nested table k at index
 * parent (an item table of k that trim took off is reused). Returns 1
 * when it is parent[i] already. */
int perfev_fill_item(struct perfev_fill *f, int parent, const char *k, lua_Integer i, int nrec);
/* Pops the filled item table and makes it parent[i] (parent: an index
 * below it), unless it was there (in_place: perfev_fill_item's result). */
void perfev_fill_put_item(struct perfev_fill *f, int parent, lua_Integer i, int in_place);
/* Removes the items after n of the nested array at idx, when refilling;
 * item tables are kept for k (NULL: the items are not tables). */
void perfev_fill_trim(struct perfev_fill *f, int idx, const char *k, lua_Integer n);
/* Removes every key of the table at idx. */
void perfev_fill_wipe(lua_State *L, int idx);

/* Pushes lower(s): constant names are upper case, record keys and values lower. */
void perfev_push_lower(lua_State *L, const char *s);

#endif
