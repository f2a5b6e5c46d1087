/* The attr userdata: struct perf_event_attr as a byte image, every field
 * read and written by name through the table in attr/fields.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "perfev.h"
#include "fields.h"

/* ---- raw storage: a field is `width` bits at `bit` of a 2/4/8-byte unit ---- */

static uint64_t unit_get(const struct perfev_attr *a, const struct perfev_field *f)
{
  uint64_t v = 0;
  uint32_t v32;
  uint16_t v16;
  switch (f->size) {
  case 2: memcpy(&v16, a->raw + f->off, 2); v = v16; break;
  case 4: memcpy(&v32, a->raw + f->off, 4); v = v32; break;
  default: memcpy(&v, a->raw + f->off, 8); break;
  }
  return v;
}

static void unit_set(struct perfev_attr *a, const struct perfev_field *f, uint64_t v)
{
  uint32_t v32 = (uint32_t)v;
  uint16_t v16 = (uint16_t)v;
  switch (f->size) {
  case 2: memcpy(a->raw + f->off, &v16, 2); break;
  case 4: memcpy(a->raw + f->off, &v32, 4); break;
  default: memcpy(a->raw + f->off, &v, 8); break;
  }
}

static uint64_t field_mask(const struct perfev_field *f)
{
  return f->width >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << f->width) - 1);
}

static uint64_t field_get(const struct perfev_attr *a, const struct perfev_field *f)
{
  return (unit_get(a, f) >> f->bit) & field_mask(f);
}

static void field_set(struct perfev_attr *a, const struct perfev_field *f, uint64_t v)
{
  uint64_t m = field_mask(f) << f->bit;
  unit_set(a, f, (unit_get(a, f) & ~m) | ((v << f->bit) & m));
}

uint64_t perfev_attr_u64(const struct perfev_attr *a, const char *name)
{
  const struct perfev_field *f = perfev_field_find(name);
  return f ? field_get(a, f) : 0;
}

const char *perfev_attr_nonzero_from(const struct perfev_attr *a, size_t off)
{
  for (size_t i = 0; i < perfev_attr_nfields; i++) {
    const struct perfev_field *f = &perfev_attr_fields[i];
    if (f->off >= off && field_get(a, f) != 0)
      return f->name;
  }
  return NULL;
}

/* ---- Lua values to field values ---- */

static const char *nearest_field(const char *name)
{
  return perfev_nearest(name, perfev_attr_fields, perfev_attr_nfields, sizeof perfev_attr_fields[0]);
}

static const struct perfev_field *field_check(lua_State *L, int idx)
{
  const char *name = luaL_checkstring(L, idx);
  const struct perfev_field *f = perfev_field_find(name);
  if (!f) {
    const char *near = nearest_field(name);
    char clip[PERFEV_CLIP];
    if (near)
      luaL_error(L, "perfev.attr: unknown field '%s' (did you mean '%s'?)", name, near);
    luaL_error(L, "perfev.attr: unknown field '%s'", perfev_clip(name, clip));
  }
  return f;
}

/* One name of f's constant table; register names give their mask bits. */
static uint64_t name_value(lua_State *L, const struct perfev_field *f, const char *s, size_t n)
{
  char buf[64];
  uint64_t v;
  const struct perfev_const_table *t =
    perfev_consts_get(f->names == PERFEV_NAMES_REGS ? "REG" : f->consts);
  if (n == 0 || n >= sizeof buf) {
    char clip[PERFEV_CLIP];
    return (uint64_t)luaL_error(L, "perfev.attr: field '%s': bad name '%s'", f->name,
                                perfev_clip(s, clip));
  }
  memcpy(buf, s, n);
  buf[n] = '\0';
  if (!t || !perfev_const_lookup(t, buf, &v)) {
    char *end;
    unsigned long long num = strtoull(buf, &end, 0);
    if (*end == '\0')
      return (uint64_t)num;
    luaL_error(L, "perfev.attr: field '%s': unknown name '%s' (see perfev.core.%s)",
               f->name, buf, t ? t->name : "?");
  }
  if (f->names == PERFEV_NAMES_REGS)
    return (strncmp(buf, "xmm", 3) == 0 || strncmp(buf, "XMM", 3) == 0 ? (uint64_t)3 : 1) << v;
  return v;
}

/* "a|b|c" (also ',' or spaces) as an OR of names. */
static uint64_t names_value(lua_State *L, const struct perfev_field *f, const char *s)
{
  uint64_t v = 0;
  while (*s) {
    size_t n = strcspn(s, "|, ");
    if (n > 0)
      v |= name_value(L, f, s, n);
    s += n;
    s += strspn(s, "|, ");
  }
  return v;
}

static uint64_t list_value(lua_State *L, const struct perfev_field *f, int idx)
{
  uint64_t v = 0;
  size_t n = lua_rawlen(L, idx);
  for (size_t i = 1; i <= n; i++) {
    lua_rawgeti(L, idx, (lua_Integer)i);
    if (perfev_isnum(L, -1))
      v |= (uint64_t)lua_tointeger(L, -1);
    else if (lua_type(L, -1) == LUA_TSTRING)
      v |= names_value(L, f, lua_tostring(L, -1));
    else
      luaL_error(L, "perfev.attr: field '%s': item %d is a %s, expected a name",
                 f->name, (int)i, luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  return v;
}

static uint64_t number_value(lua_State *L, const struct perfev_field *f, int idx)
{
  int ok = 0;
  lua_Integer i = lua_tointegerx(L, idx, &ok);
  if (!ok)
    luaL_error(L, "perfev.attr: field '%s' expects an integer, got %s",
               f->name, lua_tostring(L, idx));
  return (uint64_t)i;
}

static void range_check(lua_State *L, const struct perfev_field *f, uint64_t v)
{
  if (f->is_signed) {
    int64_t s = (int64_t)v;
    if (s < INT32_MIN || s > INT32_MAX)
      luaL_error(L, "perfev.attr: field '%s' is a signed 32-bit value: %I is out of range",
                 f->name, (lua_Integer)s);
    return;
  }
  if (f->width < 64 && v > field_mask(f))
    luaL_error(L, "perfev.attr: field '%s' is %d bit%s wide: %I is out of range (0..%I)",
               f->name, f->width, f->width == 1 ? "" : "s", (lua_Integer)v,
               (lua_Integer)field_mask(f));
}

/* Keeps a C string the kernel will read (uprobe_path, kprobe_func) alive
 * in the attr's user value, keyed by the field offset. */
static uint64_t anchor_string(lua_State *L, int aidx, const struct perfev_field *f, int vidx)
{
  const char *s = lua_tostring(L, vidx);
  perfev_getiuservalue(L, aidx);
  lua_pushvalue(L, vidx);
  lua_rawseti(L, -2, f->off);
  lua_pop(L, 1);
  return (uint64_t)(uintptr_t)s;
}

static uint64_t lua_to_field(lua_State *L, int aidx, const struct perfev_field *f, int vidx)
{
  switch (lua_type(L, vidx)) {
  case LUA_TBOOLEAN:
    if (f->width != 1)
      luaL_error(L, "perfev.attr: field '%s' expects an integer, got boolean", f->name);
    return (uint64_t)lua_toboolean(L, vidx);
  case LUA_TNUMBER:
  case PERFEV_TCDATA:
    return number_value(L, f, vidx);
  case LUA_TSTRING:
    if (f->names == PERFEV_NAMES_CSTR)
      return anchor_string(L, aidx, f, vidx);
    if (f->names != PERFEV_NAMES_NONE)
      return names_value(L, f, lua_tostring(L, vidx));
    break;
  case LUA_TTABLE:
    if (f->names == PERFEV_NAMES_MASK || f->names == PERFEV_NAMES_REGS)
      return list_value(L, f, vidx);
    break;
  default:
    break;
  }
  return (uint64_t)luaL_error(L, "perfev.attr: field '%s' does not take a %s value",
                              f->name, luaL_typename(L, vidx));
}

static void set_field(lua_State *L, int aidx, const struct perfev_field *f, int vidx)
{
  struct perfev_attr *a = perfev_attr_check(L, aidx);
  uint64_t v = lua_to_field(L, aidx, f, vidx);
  range_check(L, f, v);
  field_set(a, f, v);
}

/* The name of a string field (uprobe_path, kprobe_func) whose pointer
 * the attr at idx does not own: non-zero, and not the address of the
 * string it keeps for it (an attr from bytes, or an event's copy, holds
 * another process's or a collected string's address). NULL when none. */
const char *perfev_attr_foreign_string(lua_State *L, int idx)
{
  const struct perfev_attr *a = perfev_attr_check(L, idx);
  const char *found = NULL;
  perfev_getiuservalue(L, idx);
  for (size_t i = 0; i < perfev_attr_nfields && !found; i++) {
    const struct perfev_field *f = &perfev_attr_fields[i];
    uint64_t v;
    if (f->names != PERFEV_NAMES_CSTR || (v = field_get(a, f)) == 0)
      continue;
    lua_rawgeti(L, -1, f->off);
    if (lua_type(L, -1) != LUA_TSTRING || (uint64_t)(uintptr_t)lua_tostring(L, -1) != v)
      found = f->name;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return found;
}

/* ---- constructors ---- */

struct perfev_attr *perfev_attr_check(lua_State *L, int idx)
{
  return (struct perfev_attr *)luaL_checkudata(L, idx, PERFEV_ATTR_MT);
}

static struct perfev_attr *attr_new(lua_State *L)
{
  struct perfev_attr *a = (struct perfev_attr *)perfev_newuserdata(L, sizeof *a);
  memset(a, 0, sizeof *a);
  luaL_setmetatable(L, PERFEV_ATTR_MT);
  lua_newtable(L);
  perfev_setiuservalue(L, -2);
  return a;
}

static void copy_anchors(lua_State *L, int from, int to)
{
  perfev_getiuservalue(L, to);
  perfev_getiuservalue(L, from);
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, -5);
  }
  lua_pop(L, 2);
}

static void fill_from_table(lua_State *L, int aidx, int tidx)
{
  lua_pushnil(L);
  while (lua_next(L, tidx)) {
    const struct perfev_field *f;
    if (lua_type(L, -2) != LUA_TSTRING)
      luaL_error(L, "perfev.attr: field names must be strings, got %s", luaL_typename(L, -2));
    f = field_check(L, -2);
    set_field(L, aidx, f, lua_gettop(L));
    lua_pop(L, 1);
  }
}

struct perfev_attr *perfev_attr_from(lua_State *L, int idx)
{
  struct perfev_attr *a;
  int t;
  idx = lua_absindex(L, idx);
  /* typed before attr_new pushes: with no argument, idx would become the new attr */
  t = lua_type(L, idx);
  if (t != LUA_TNONE && t != LUA_TNIL && t != LUA_TTABLE && !luaL_testudata(L, idx, PERFEV_ATTR_MT))
    luaL_error(L, "perfev.attr: expected a table or an attr, got %s", luaL_typename(L, idx));
  a = attr_new(L);
  if (t == LUA_TUSERDATA) {
    memcpy(a, lua_touserdata(L, idx), sizeof *a);
    copy_anchors(L, idx, lua_gettop(L));
    return a;
  }
  field_set(a, perfev_field_find("size"), PERFEV_ATTR_SIZE);
  if (t == LUA_TTABLE)
    fill_from_table(L, lua_gettop(L), idx);
  return a;
}

static int l_attr(lua_State *L)
{
  perfev_attr_from(L, 1);
  return 1;
}

/* ---- reading fields back ---- */

static void push_field(lua_State *L, int aidx, const struct perfev_field *f)
{
  uint64_t v = field_get(perfev_attr_check(L, aidx), f);
  if (f->names == PERFEV_NAMES_CSTR) {
    perfev_getiuservalue(L, aidx);
    lua_rawgeti(L, -1, f->off);
    lua_remove(L, -2);
    if (lua_type(L, -1) == LUA_TSTRING && (uint64_t)(uintptr_t)lua_tostring(L, -1) == v)
      return;
    lua_pop(L, 1);
  }
  if (f->is_signed)
    lua_pushinteger(L, (lua_Integer)(int32_t)(uint32_t)v);
  else
    lua_pushinteger(L, (lua_Integer)v);
}

static int l_attr_index(lua_State *L)
{
  const struct perfev_field *f;
  perfev_self(L, PERFEV_ATTR_MT);
  luaL_getmetafield(L, 1, "__methods");
  lua_pushvalue(L, 2);
  lua_rawget(L, -2);
  if (!lua_isnil(L, -1))
    return 1;
  f = field_check(L, 2);
  push_field(L, 1, f);
  return 1;
}

static int l_attr_newindex(lua_State *L)
{
  perfev_self(L, PERFEV_ATTR_MT);
  set_field(L, 1, field_check(L, 2), 3);
  return 0;
}

/* Which member of a union a table() or dump names: the one the other
 * fields make meaningful (freq -> sample_freq, breakpoints -> bp_addr). */
static int alias_preferred(const struct perfev_attr *a, const struct perfev_field *f)
{
  uint64_t type = perfev_attr_u64(a, "type");
  if (strcmp(f->name, "sample_period") == 0)
    return !perfev_attr_u64(a, "freq");
  if (strcmp(f->name, "sample_freq") == 0)
    return perfev_attr_u64(a, "freq") != 0;
  if (strcmp(f->name, "wakeup_events") == 0)
    return !perfev_attr_u64(a, "watermark");
  if (strcmp(f->name, "wakeup_watermark") == 0)
    return perfev_attr_u64(a, "watermark") != 0;
  if (strcmp(f->name, "bp_addr") == 0 || strcmp(f->name, "bp_len") == 0)
    return type == PERF_TYPE_BREAKPOINT;
  if (strcmp(f->name, "config1") == 0 || strcmp(f->name, "config2") == 0)
    return type != PERF_TYPE_BREAKPOINT;
  return f->names != PERFEV_NAMES_CSTR && strcmp(f->name, "aux_action") != 0 &&
         strcmp(f->name, "kprobe_addr") != 0 && strcmp(f->name, "probe_offset") != 0;
}

static int l_attr_table(lua_State *L)
{
  struct perfev_attr *a = (struct perfev_attr *)perfev_self(L, PERFEV_ATTR_MT);
  lua_newtable(L);
  for (size_t i = 0; i < perfev_attr_nfields; i++) {
    const struct perfev_field *f = &perfev_attr_fields[i];
    if (field_get(a, f) == 0 || !alias_preferred(a, f) || strcmp(f->name, "size") == 0)
      continue;
    if (f->width == 1)
      lua_pushboolean(L, 1);
    else
      push_field(L, 1, f);
    lua_setfield(L, -2, f->name);
  }
  return 1;
}

static int l_attr_clone(lua_State *L)
{
  perfev_self(L, PERFEV_ATTR_MT);
  perfev_attr_from(L, 1);
  return 1;
}

static int l_attr_bytes(lua_State *L)
{
  struct perfev_attr *a = (struct perfev_attr *)perfev_self(L, PERFEV_ATTR_MT);
  lua_pushlstring(L, (const char *)a->raw, sizeof a->raw);
  return 1;
}

static int l_attr_fields(lua_State *L)
{
  lua_createtable(L, (int)perfev_attr_nfields, 0);
  for (size_t i = 0; i < perfev_attr_nfields; i++) {
    lua_pushstring(L, perfev_attr_fields[i].name);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

/* a == b: the same bytes; an attr is never equal to another class's
 * userdata (Lua calls __eq for any two userdata, one of them an attr) */
static int l_attr_eq(lua_State *L)
{
  const struct perfev_attr *a = (const struct perfev_attr *)luaL_testudata(L, 1, PERFEV_ATTR_MT);
  const struct perfev_attr *b = (const struct perfev_attr *)luaL_testudata(L, 2, PERFEV_ATTR_MT);
  if (!a && !b)
    perfev_self(L, PERFEV_ATTR_MT);   /* called by hand with neither: raises */
  lua_pushboolean(L, a && b && memcmp(a->raw, b->raw, sizeof a->raw) == 0);
  return 1;
}

/* ---- the dump, in the format of `perf stat -vv` ---- */

static void add_flags(luaL_Buffer *b, const struct perfev_field *f, uint64_t v)
{
  const struct perfev_const_table *t = perfev_consts_get(f->consts);
  int first = 1;
  for (int bit = 0; bit < 64; bit++) {
    uint64_t m = (uint64_t)1 << bit;
    const char *name = (v & m) && t ? perfev_const_name(t, m) : NULL;
    if (!name)
      continue;
    if (!first)
      luaL_addchar(b, '|');
    luaL_addstring(b, name);
    first = 0;
    v &= ~m;
  }
  if (v) {
    char num[32];
    snprintf(num, sizeof num, "%s0x%llx", first ? "" : "|", (unsigned long long)v);
    luaL_addstring(b, num);
  }
}

static void add_value(luaL_Buffer *b, const struct perfev_field *f, uint64_t v)
{
  char num[32];
  switch (f->fmt) {
  case PERFEV_FMT_FLAGS: add_flags(b, f, v); return;
  case PERFEV_FMT_HEX: snprintf(num, sizeof num, "%#llx", (unsigned long long)v); break;
  case PERFEV_FMT_SIGNED: snprintf(num, sizeof num, "%d", (int)(int32_t)(uint32_t)v); break;
  default: snprintf(num, sizeof num, "%llu", (unsigned long long)v); break;
  }
  luaL_addstring(b, num);
}

static int l_attr_tostring(lua_State *L)
{
  struct perfev_attr *a = (struct perfev_attr *)perfev_self(L, PERFEV_ATTR_MT);
  static const char rule[] = "------------------------------------------------------------\n";
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, rule);
  luaL_addstring(&b, "perf_event_attr:\n");
  for (size_t i = 0; i < perfev_attr_nfields; i++) {
    const struct perfev_field *f = &perfev_attr_fields[i];
    uint64_t v = field_get(a, f);
    char label[64];
    if (!f->dump || v == 0)
      continue;
    snprintf(label, sizeof label, "  %-32s ", f->dump);
    luaL_addstring(&b, label);
    add_value(&b, f, v);
    luaL_addchar(&b, '\n');
  }
  luaL_addstring(&b, rule);
  luaL_pushresult(&b);
  return 1;
}

int perfev_attr_open_lib(lua_State *L)
{
  static const luaL_Reg meta[] = {
    { "__index", l_attr_index }, { "__newindex", l_attr_newindex },
    { "__tostring", l_attr_tostring }, { "__eq", l_attr_eq }, { NULL, NULL }
  };
  static const luaL_Reg methods[] = {
    { "table", l_attr_table }, { "clone", l_attr_clone }, { "bytes", l_attr_bytes },
    { NULL, NULL }
  };
  perfev_class_register(L, PERFEV_ATTR_MT, meta, methods);
  lua_pushcfunction(L, l_attr);
  lua_setfield(L, -2, "attr");
  lua_pushcfunction(L, l_attr_fields);
  lua_setfield(L, -2, "attr_fields");
  return 0;
}
