/* The layout of struct perf_event_attr as data: one row per field name. */
#ifndef PERFEV_ATTR_FIELDS_H
#define PERFEV_ATTR_FIELDS_H

#include <stddef.h>
#include <stdint.h>

enum perfev_names {
  PERFEV_NAMES_NONE,   /* plain number */
  PERFEV_NAMES_ENUM,   /* one name of the table, or a number */
  PERFEV_NAMES_MASK,   /* a list (or "a|b" string) of names, or a number */
  PERFEV_NAMES_REGS,   /* like MASK, but each name is a register index */
  PERFEV_NAMES_CSTR    /* a Lua string the attr keeps alive; stores its address */
};

enum perfev_fmt { PERFEV_FMT_UNSIGNED, PERFEV_FMT_SIGNED, PERFEV_FMT_HEX, PERFEV_FMT_FLAGS };

struct perfev_field {
  const char *name;
  uint16_t off;         /* byte offset of the field's storage unit */
  uint8_t size;         /* 2, 4 or 8 bytes */
  uint8_t bit;          /* first bit inside the unit (bitfields) */
  uint8_t width;        /* bits; size * 8 for whole fields */
  uint8_t is_signed;
  uint8_t names;        /* enum perfev_names */
  uint8_t fmt;          /* how tostring prints it, as perf does */
  const char *consts;   /* constant table for names, or NULL */
  const char *dump;     /* label in the dump; NULL for an alias (not printed) */
};

extern const struct perfev_field perfev_attr_fields[];
extern const size_t perfev_attr_nfields;

const struct perfev_field *perfev_field_find(const char *name);

#endif
