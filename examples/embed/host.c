/* A host program in the shape of a game loop that embeds Lua and links
 * perfev's C core statically (build/libperfev.a, `make static`).
 *
 *   make embed && build/embed/host examples/embed/game.lua 600
 *   ... build/embed/host examples/embed/game.lua 600 frames.svg   # and a profile of the frames
 *   ... build/embed/host examples/embed/game.lua 600 game.trace.json game.speedscope.json
 *                                          # and the timeline of the frames and zones
 *
 * Every frame the C side "updates the world" (maps fresh memory and
 * computes over it: page faults and CPU time), then game.lua reads the
 * frame's counters with one g:read(t) into a table it reuses. At the end
 * the host times that read against a raw read(2) of the same group leader
 * and checks that closing the group and the state closed every fd.
 * The script's frames object (game.frames, perfev.frames) also gets the
 * host's world update as a zone, "world", marked from C with
 * perfev_frames.h (header-only: calls of the object's methods).
 * With a third argument, the host profiles the frames' Lua by function
 * (perfev.profile, made and driven from C: resumed before each call of
 * game.frame, paused after it, so that the host's own C work between is
 * left out) and writes the profile there (.svg, .folded, ...). An
 * argument ending in .json is a timeline file instead: the frames, the
 * zones (the host's and the script's) and each frame's counts, written by
 * game.write_timeline as Trace Event JSON (.json: Perfetto's UI,
 * chrome://tracing) or speedscope's evented profile (.speedscope.json).
 * doc/embedding.md explains the linking and what pid = 0 counts. */
#ifndef _GNU_SOURCE
#  define _GNU_SOURCE
#endif
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#if LUA_VERSION_NUM == 501 && defined(__has_include)
#  if __has_include(<luajit.h>)
#    include <luajit.h>
#  endif
#endif
#ifdef LUAJIT_VERSION
#  define RUNTIME LUAJIT_VERSION
#else
#  define RUNTIME LUA_RELEASE
#endif

#ifndef LUA_OK
#  define LUA_OK 0
#endif
#include "perfev_frames.h"   /* marks and zones of perfev.frames from C */

/* The one symbol libperfev.a exports. */
int luaopen_perfev_core(lua_State *L);

#define FRAME_PAGES 16   /* fresh pages touched per frame: 16 page faults */
#define TIMED_READS 2000
#define TIMED_ROUNDS 10

static double now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int count_fds(void)
{
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  if (!d)
    return -1;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.')
      n++;
  closedir(d);
  return n - 1;   /* the directory's own fd */
}

/* Makes require "perfev.core" find the statically linked core: Lua 5.3+
 * has luaL_requiref (it also sets package.loaded); LuaJIT, which lacks it,
 * takes the loader in package.preload, which every runtime understands. */
static void preload_perfev(lua_State *L)
{
#if LUA_VERSION_NUM >= 503
  luaL_requiref(L, "perfev.core", luaopen_perfev_core, 0);
  lua_pop(L, 1);
#else
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "preload");
  lua_pushcfunction(L, luaopen_perfev_core);
  lua_setfield(L, -2, "perfev.core");
  lua_pop(L, 2);
#endif
}

/* Where the Lua half of perfev is: an engine ships it with its scripts and
 * sets package.path to it; this example finds the checkout's lua/ from its
 * own place (build/embed/host -> ../../lua), before LUA_PATH's entries. */
static void add_perfev_path(lua_State *L, const char *argv0)
{
  char dir[4096], probe[4200];
  const char *slash = strrchr(argv0, '/');
  int n = slash ? (int)(slash - argv0) : 1;
  snprintf(dir, sizeof dir, "%.*s/../../lua", n, slash ? argv0 : ".");
  snprintf(probe, sizeof probe, "%s/perfev/init.lua", dir);
  if (access(probe, R_OK) != 0)
    return;
  lua_getglobal(L, "package");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;", dir, dir);
  lua_getfield(L, -2, "path");
  lua_concat(L, 2);
  lua_setfield(L, -2, "path");
  lua_pop(L, 1);
}

static int usage(const char *argv0, const char *why)
{
  if (why)
    fprintf(stderr, "host: %s\n", why);
  fprintf(stderr, "usage: %s [GAME.lua [FRAMES [PROFILE.svg|.folded|...] [TIMELINE.json ...]]]\n"
                  "  runs GAME.lua's frame() FRAMES times (default examples/embed/game.lua, 600),\n"
                  "  counting each frame's events; with PROFILE, profiles the frames' Lua;\n"
                  "  each TIMELINE (.json: Trace Event JSON, .speedscope.json) gets the timeline\n"
                  "  of the frames and zones.\n"
                  "  perfev's Lua modules: the checkout's lua/ beside build/, or LUA_PATH.\n", argv0);
  return why ? 2 : 0;
}

/* A frame's world update: fresh pages (page faults) and some arithmetic. */
static unsigned long update_world(unsigned frame)
{
  size_t len = (size_t)FRAME_PAGES * (size_t)sysconf(_SC_PAGESIZE);
  unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  unsigned long sum = frame;
  if (p == MAP_FAILED) {
    perror("mmap");
    exit(1);
  }
  for (size_t i = 0; i < len; i += 64)
    p[i] = (unsigned char)(i ^ frame);
  for (int k = 0; k < 20000; k++)
    for (size_t i = 0; i < len; i += 4096)
      sum = sum * 31 + p[i] + (unsigned long)k;
  munmap(p, len);
  return sum;
}

/* A perfev_frames call's status: exits on error. */
static void frames_ok(lua_State *L, int status, const char *what)
{
  if (status != LUA_OK) {
    fprintf(stderr, "host: %s: %s\n", what, lua_tostring(L, -1));
    exit(1);
  }
}

/* Calls game.<name>() (the game table is at index 1); exits on error. */
static void call_game(lua_State *L, const char *name, int nresults)
{
  lua_getfield(L, 1, name);
  if (lua_pcall(L, 0, nresults, 0) != LUA_OK) {
    fprintf(stderr, "host: game.%s: %s\n", name, lua_tostring(L, -1));
    exit(1);
  }
}

/* The profiler: perfev.profile's object, made by Lua code the host runs,
 * kept in the registry (ref). */
static const char PROFILER[] =
  "return assert(require('perfev').profile { event = 'cpu-clock', period = 100000,"
  " name = 'examples/embed: the frames of game.lua' })";

static int new_profiler(lua_State *L)
{
  if (luaL_dostring(L, PROFILER) != LUA_OK) {
    fprintf(stderr, "host: perfev.profile: %s\n", lua_tostring(L, -1));
    exit(1);
  }
  return luaL_ref(L, LUA_REGISTRYINDEX);
}

/* p:<method>(arg): start, resume, pause, stop, write(path); exits on error.
 * Leaves the first result on the stack. */
static void profiler_call(lua_State *L, int ref, const char *method, const char *arg)
{
  lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
  lua_getfield(L, -1, method);
  lua_insert(L, -2);
  if (arg)
    lua_pushstring(L, arg);
  if (lua_pcall(L, arg ? 2 : 1, 2, 0) != LUA_OK || lua_isnil(L, -2)) {
    fprintf(stderr, "host: profiler:%s: %s\n", method, lua_tostring(L, -1));
    exit(1);
  }
  lua_pop(L, 1);
}

static lua_Number total(lua_State *L, const char *key)
{
  lua_Number v;
  lua_getfield(L, -1, key);
  v = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return v;
}

/* Whether an output named on the command line is a timeline (.json). */
static int is_timeline(const char *path)
{
  size_t n = strlen(path);
  return n > 5 && strcmp(path + n - 5, ".json") == 0;
}

int main(int argc, char **argv)
{
  const char *script = argc > 1 ? argv[1] : "examples/embed/game.lua";
  unsigned frames = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 600;
  const char *profile = NULL;
  int prof = LUA_NOREF;
  perfev_frames fr;
  int have_frames;
  unsigned long world = 0;
  int fds_before, fds_during, fds_after, fd;
  double t0, lua_ns, raw_ns;
  char buf[256];
  lua_State *L;
  char *end = NULL;

  if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0))
    return usage(argv[0], NULL);
  if (argc > 2 && (strtoul(argv[2], &end, 10) == 0 || *end != '\0'))
    return usage(argv[0], "FRAMES must be a positive number");
  if (access(script, R_OK) != 0)
    return usage(argv[0], "cannot read the game script");
  for (int i = 3; i < argc; i++) {
    if (is_timeline(argv[i]))
      continue;
    if (profile)
      return usage(argv[0], "one PROFILE at most (a timeline's name ends in .json)");
    profile = argv[i];
  }
  L = luaL_newstate();
  if (!L)
    return 1;
  luaL_openlibs(L);
  preload_perfev(L);
  add_perfev_path(L, argv[0]);
  fds_before = count_fds();

  if (luaL_dofile(L, script) != LUA_OK) {
    fprintf(stderr, "host: %s: %s\n", script, lua_tostring(L, -1));
    return 1;
  }
  if (!lua_istable(L, -1)) {
    fprintf(stderr, "host: %s must return the game table\n", script);
    return 1;
  }
  lua_settop(L, 1);
  fds_during = count_fds();
  /* the script's perfev.frames object (game.frames), if it has one: the
   * host's own work goes into its zone "world" */
  lua_getfield(L, 1, "frames");
  have_frames = perfev_frames_take(&fr, L) == 0;

  if (profile) {
    prof = new_profiler(L);
    profiler_call(L, prof, "start", NULL);
    profiler_call(L, prof, "pause", NULL);
    lua_settop(L, 1);
  }

  /* the game loop */
  for (unsigned f = 0; f < frames; f++) {
    if (have_frames)
      frames_ok(L, perfev_frames_zone_begin(&fr, "world"), "zone_begin");
    world += update_world(f);
    if (have_frames)
      frames_ok(L, perfev_frames_zone_end(&fr), "zone_end");
    if (profile)
      profiler_call(L, prof, "resume", NULL);
    call_game(L, "frame", 0);
    if (profile) {
      profiler_call(L, prof, "pause", NULL);
      lua_settop(L, 1);
    }
  }

  if (profile) {
    profiler_call(L, prof, "stop", NULL);
    profiler_call(L, prof, "write", profile);
    lua_settop(L, 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, prof);
    lua_getfield(L, -1, "profile");
    lua_insert(L, -2);
    lua_call(L, 1, 1);
    printf("profile=%s\nprofile_samples=%.0f\n", profile, total(L, "samples"));
    lua_settop(L, 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, prof);   /* p:close(): its event's fd, before the fd count */
    lua_getfield(L, -1, "close");
    lua_insert(L, -2);
    lua_call(L, 1, 0);
    luaL_unref(L, LUA_REGISTRYINDEX, prof);
  }

  /* one g:read(t) through Lua against one read(2) of the same leader */
  call_game(L, "leader_fd", 1);
  fd = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  /* alternating blocks, the fastest of each kind: the least disturbed by
   * whatever else the machine runs */
  lua_getfield(L, 1, "read");
  lua_ns = raw_ns = 1e18;
  for (int round = 0; round < TIMED_ROUNDS; round++) {
    double t;
    t0 = now_ns();
    for (int i = 0; i < TIMED_READS; i++) {
      lua_pushvalue(L, -1);
      lua_call(L, 0, 0);
    }
    t = (now_ns() - t0) / TIMED_READS;
    lua_ns = t < lua_ns ? t : lua_ns;
    t0 = now_ns();
    for (int i = 0; i < TIMED_READS; i++)
      if (read(fd, buf, sizeof buf) <= 0) {
        perror("read");
        return 1;
      }
    t = (now_ns() - t0) / TIMED_READS;
    raw_ns = t < raw_ns ? t : raw_ns;
  }
  lua_pop(L, 1);

  /* the timeline files: game.write_timeline(path) */
  for (int i = 3; i < argc; i++) {
    if (!is_timeline(argv[i]))
      continue;
    lua_getfield(L, 1, "write_timeline");
    lua_pushstring(L, argv[i]);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
      fprintf(stderr, "host: game.write_timeline: %s\n", lua_tostring(L, -1));
      return 1;
    }
    printf("timeline=%s\n", argv[i]);
  }

  call_game(L, "totals", 1);
  printf("runtime=%s\n", RUNTIME);
  printf("frames=%.0f\n", total(L, "frames"));
  printf("task_clock_ns=%.0f\n", total(L, "task-clock"));
  printf("page_faults=%.0f\n", total(L, "page-faults"));
  printf("context_switches=%.0f\n", total(L, "context-switches"));
  lua_pop(L, 1);
  printf("read_ns=%.0f\nraw_read_ns=%.0f\nratio=%.2f\n", lua_ns, raw_ns, lua_ns / raw_ns);
  call_game(L, "report", 1);
  fputs(lua_tostring(L, -1), stdout);
  lua_pop(L, 1);

  if (have_frames)
    perfev_frames_release(&fr);
  call_game(L, "close", 0);
  lua_close(L);
  fds_after = count_fds();
  printf("fds_before=%d\nfds_during=%d\nfds_after=%d\n", fds_before, fds_during, fds_after);
  printf("world=%lu\n", world & 0xff);
  return fds_after == fds_before ? 0 : 2;
}
