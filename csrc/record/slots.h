/* The user value of an iteration state (record/iter.c), slot by slot:
 * each part of record iteration keeps what it allocates there, so that
 * the state's __gc has nothing to free. One table of the slots, so that
 * no two parts take the same. */
#ifndef PERFEV_SLOTS_H
#define PERFEV_SLOTS_H

/* fill.c: the interned key strings, at their slot in names[] plus one
 * (1 .. PERFEV_NAME_SLOTS), and the string keys "aside" and "spares" (the
 * nested tables a refilled record set aside). */
#define PERFEV_NAME_SLOTS 64

enum {
  PERFEV_SLOT_CHAINS = 996,   /* tally.c: the callchains of the tallies (a userdata) */
  PERFEV_SLOT_HELD = 997,     /* tally.c: the record held back while tallies are handed out */
  PERFEV_SLOT_TALLY = 998,    /* tally.c: the counts (a userdata, replaced as it grows) */
  PERFEV_SLOT_CHAIN = 999,    /* values.c: the callchain table values mode refills */
  PERFEV_SLOT_KEYS = 1000     /* select.c: the key string of field i at 1000 + i */
};

#endif
