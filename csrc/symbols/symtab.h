/* A symbol table as perf report keeps one (symbols/symtab.c): entries are
 * added in their file's order, then finished (sorted by start, perf's best
 * symbol kept at each start, a zero size ended at the next start) and
 * looked up by address in C. symbols/elf.c adds an ELF file's entries and
 * PLT stubs to it without a Lua value per symbol. */
#ifndef PERFEV_SYMTAB_H
#define PERFEV_SYMTAB_H
#include <stddef.h>
#include <stdint.h>
#include "perfev.h"

struct perfev_symtab;

/* The table being built at index idx (raises unless it is one, or when it
 * is already finished). */
struct perfev_symtab *perfev_symtab_building(lua_State *L, int idx);
/* Adds one entry: name (len bytes) followed by suffix (a C string, or
 * NULL); the bytes are copied. Raises on out of memory (the table owns
 * what it allocated: its __gc frees it). */
void perfev_symtab_add(lua_State *L, struct perfev_symtab *t, int64_t start, uint64_t size, int bind,
                       const char *name, size_t len, const char *suffix);

/* Gives t a mapping (mmap'd: len bytes at map) to unmap at its __gc
 * (unmapped at once, and raises, when t holds too many). */
void perfev_symtab_own(lua_State *L, struct perfev_symtab *t, void *map, size_t len);
/* The string table t's ELF entries are named in (len bytes at strings,
 * within a mapping t owns); raises when t has one already. */
void perfev_symtab_strings(lua_State *L, struct perfev_symtab *t, const char *strings, size_t len);
/* Adds one entry named by the string at off of that string table. */
void perfev_symtab_add_named(lua_State *L, struct perfev_symtab *t, int64_t start, uint64_t size, int bind,
                             size_t off);

#endif
