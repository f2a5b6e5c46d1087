# perfev: Linux perf events for Lua.
#
#   make            build build/perfev/core.so against $(LUA)'s headers
#   make demo       install what is missing (as root), run examples/quickstart.lua
#   make test       install what is missing (as root), run the busted specs
#   make lint       luacheck, C with -Werror, cppcheck (when installed), no circle between csrc/'s
#                   concerns, no function over 100 lines (Lua) or 80 (C), rockspec in sync
#   make check      specs under ASan+UBSan, then under valgrind's leak check (budget: check-valgrind)
#   make bench      every bench/*.lua
#   make rockcheck  `luarocks make` into a temporary tree, offline, and require it
#   make check-user the user's path: make install into a temporary prefix, every command,
#                   output, example and recipe as README and doc/ write them (tools/check-user.sh)
#   make install    PREFIX=/usr/local DESTDIR= (modules and bin/perfev) ; make uninstall ; make clean
#   make static     build/libperfev.a ; make embed: examples/embed's host
#   make core-luajit  the core for nginx's LuaJIT (examples/openresty)
#   make test-luajit-debian  the suite on Debian's luajit, unpacked in build/
#
# Runtimes: LUA=lua5.4 (default), LUA=lua5.3, LUA=luajit (OpenResty's
# luajit2, as nginx's lua module runs it): `make test LUA=luajit`. LUA_PC is
# its pkg-config name (default: $(LUA)). Lua 5.1/5.2 are refused.
# Modules are found from the repo root with
#   LUA_CPATH='build/?.so;;' LUA_PATH='lua/?.lua;lua/?/init.lua;;'

LUA       ?= lua5.4
LUA_PC    ?= $(LUA)
CFLAGS    ?= -O2 -g
WARNFLAGS ?= -Wall -Wextra -Werror
CPPFLAGS  ?=
LDFLAGS   ?=
PREFIX    ?= /usr/local
DESTDIR   ?=
LUAROCKS  ?= luarocks
VALGRIND  ?= valgrind
CPPCHECK  ?= cppcheck
BUSTED_FLAGS ?=
# tools/deps.sh flags: DEPS_FLAGS=-n only checks, never runs apt-get.
DEPS_FLAGS ?=

# Flags every C file of the project is compiled with; CFLAGS adds to them.
# Symbols are hidden: the module exports luaopen_perfev_core alone
# (PERFEV_EXPORT in csrc/perfev.h), which `make lint` checks.
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE -fPIC -fvisibility=hidden -Icsrc

# Sanitizer build (make check): gcc, whose runtimes are preloaded below.
ASAN_CC     ?= gcc
ASAN_CFLAGS ?= -O1 -g
SAN_FLAGS   := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer

# Computed once, on first use (after `deps` has run, on a fresh machine).
LUA_CFLAGS = $(eval LUA_CFLAGS := $(call lua_cflags))$(LUA_CFLAGS)
lua_cflags = $(if $(shell pkg-config --exists '$(LUA_PC)' 2>/dev/null && echo y),$(shell pkg-config --cflags '$(LUA_PC)'),$(error pkg-config does not know '$(LUA_PC)': run 'make deps', or set LUA_PC or LUA_CFLAGS))
LUA_VERSION = $(eval LUA_VERSION := $(call lua_version))$(LUA_VERSION)
lua_version = $(or $(shell $(LUA) -e 'print((_VERSION:match("%d+%.%d+")))' 2>/dev/null),$(error cannot run '$(LUA)' to read its version: run 'make deps' or set LUA_VERSION))
ASAN_RT  = $(shell $(ASAN_CC) -print-file-name=libasan.so)
UBSAN_RT = $(shell $(ASAN_CC) -print-file-name=libubsan.so)

INSTALL_BIN  ?= $(PREFIX)/bin
INSTALL_CMOD ?= $(PREFIX)/lib/lua/$(LUA_VERSION)
INSTALL_LMOD ?= $(PREFIX)/share/lua/$(LUA_VERSION)

SRCS      := $(sort $(wildcard csrc/*.c csrc/*/*.c))
OBJS      := $(SRCS:csrc/%.c=build/obj/%.o)
ASAN_OBJS := $(SRCS:csrc/%.c=build/asan/obj/%.o)
LUA_MODS  := $(sort $(shell find lua -name '*.lua' 2>/dev/null))
CORE      := build/perfev/core.so
ASAN_CORE := build/asan/perfev/core.so
SPEC_HELPERS  := $(patsubst spec/helper/%.c,build/spec/%.so,$(wildcard spec/helper/*.c))
BENCH_HELPERS := $(patsubst bench/helper/%.c,build/bench/%.so,$(wildcard bench/helper/*.c))
ROCKSPEC  := perfev-scm-1.rockspec
FLAGS_STAMP := build/flags.stamp

# ---- what `deps` checks (KIND:WHAT:DEBIAN-PACKAGE, see tools/deps.sh) ----
# LUA=luajit is OpenResty's LuaJIT (Debian's luajit2: the one nginx's lua
# module runs); Debian's own luajit conflicts with it and is tested unpacked
# beside it (make test-luajit-debian).
ifneq ($(filter luajit%,$(notdir $(LUA))),)
LUA_DEB     ?= luajit2
LUA_DEV_DEB ?= libluajit2-5.1-dev
LUA_H       ?= /usr/include/luajit-2.1/lua.h
LUA_CMOD_DIR ?= 5.1
else
LUA_DEB     ?= $(notdir $(LUA))
LUA_DEV_DEB ?= lib$(notdir $(LUA))-dev
LUA_H       ?= /usr/include/$(notdir $(LUA))/lua.h
LUA_CMOD_DIR ?= $(patsubst lua%,%,$(notdir $(LUA)))
endif
DEPS := cmd:$(LUA):$(LUA_DEB) \
        file:$(LUA_H):$(LUA_DEV_DEB) \
        cmd:gcc:gcc \
        file:/usr/include/stdio.h:libc6-dev \
        file:/usr/include/linux/perf_event.h:linux-libc-dev \
        cmd:make:make \
        cmd:pkg-config:pkg-config \
        pc:$(LUA_PC):$(LUA_DEV_DEB) \
        cmd:busted:lua-busted \
        lua:$(LUA)/busted.runner:lua-busted \
        cmd:luacheck:lua-check \
        lua:$(LUA)/cjson:lua-cjson \
        lua:$(LUA)/zlib:lua-zlib \
        lua:$(LUA)/argparse:lua-argparse \
        lua:$(LUA)/socket:lua-socket \
        lua:$(LUA)/term:lua-term \
        cmd:go:golang-go \
        cmd:chromium:chromium \
        cmd:npm:npm \
        cmd:objcopy:binutils \
        cmd:luajit:luajit2 \
        cmd:lua5.3:lua5.3 \
        file:/usr/include/luajit-2.1/lua.h:libluajit2-5.1-dev \
        cmd:nginx:nginx \
        file:/usr/lib/nginx/modules/ngx_http_lua_module.so:libnginx-mod-http-lua \
        cmd:curl:curl \
        cmd:promtool:prometheus \
        cmd:prometheus:prometheus \
        cmd:wrk:wrk
DEPS_CHECK := cmd:$(VALGRIND):valgrind
DEPS_ROCK  := cmd:$(LUAROCKS):luarocks

# On a fresh machine `deps` must finish before anything is compiled, also
# under make -j: every build rule waits for it when a goal below is asked.
NEED_DEPS := $(if $(filter test demo lint check check-asan check-valgrind bench rockcheck,$(MAKECMDGOALS)),deps)

# ---- how specs, the demo and benchmarks find the modules ----
RUN_LPATH  := lua/?.lua;lua/?/init.lua
TEST_CPATH := build/?.so;build/spec/?.so
ASAN_CPATH := build/asan/?.so;build/spec/?.so
# Busted runs under $(LUA) itself (tools/busted.lua is busted's runner);
# --ignore-lua keeps .busted's `lua` pin from re-executing another Lua.
BUSTED_RUN  = $(LUA) tools/busted.lua --ignore-lua
VALGRIND_RUN = $(VALGRIND) -q --error-exitcode=1 --leak-check=full --suppressions=spec/valgrind.supp \
               --errors-for-leak-kinds=definite --show-leak-kinds=definite $(VALGRIND_FLAGS)

.PHONY: all deps deps-check deps-rock test demo lint lint-lua lint-c lint-layers cppcheck files-doc files-doc-check \
        rockspec rockspec-check check check-asan check-valgrind bench rockcheck \
        spec-helpers bench-helpers install uninstall clean FORCE

all: $(CORE)

# ---- the C core ----
$(CORE): $(OBJS) | $(NEED_DEPS)
	$(if $(SRCS),,$(error no csrc/**.c to build))
	@mkdir -p $(@D)
	$(CC) -shared $(LDFLAGS) -o $@ $(OBJS)

build/obj/%.o: csrc/%.c $(FLAGS_STAMP) | $(NEED_DEPS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(WARNFLAGS) $(CFLAGS) $(CPPFLAGS) $(LUA_CFLAGS) -MMD -MP -c -o $@ $<

$(ASAN_CORE): $(ASAN_OBJS) | $(NEED_DEPS)
	$(if $(SRCS),,$(error no csrc/**.c to build))
	@mkdir -p $(@D)
	$(ASAN_CC) -shared $(SAN_FLAGS) $(LDFLAGS) -o $@ $(ASAN_OBJS)

build/asan/obj/%.o: csrc/%.c $(FLAGS_STAMP) | $(NEED_DEPS)
	@mkdir -p $(@D)
	$(ASAN_CC) $(BASE_CFLAGS) $(WARNFLAGS) $(ASAN_CFLAGS) $(SAN_FLAGS) $(CPPFLAGS) $(LUA_CFLAGS) -MMD -MP -c -o $@ $<

# Everything is rebuilt when the compiler, flags or Lua change (make LUA=lua5.3).
$(FLAGS_STAMP): FORCE | $(NEED_DEPS)
	@mkdir -p $(@D)
	@echo '$(CC) $(BASE_CFLAGS) $(WARNFLAGS) $(CFLAGS) $(CPPFLAGS) $(LUA_CFLAGS) $(LDFLAGS) | $(ASAN_CC) $(ASAN_CFLAGS)' > $@.new
	@if cmp -s $@ $@.new; then rm -f $@.new; else mv -f $@.new $@; fi

FORCE:

# ---- helpers for specs and benchmarks (C modules outside the library) ----
# Their symbols keep the default visibility: Lua must find their luaopen_*.
HELPER_CFLAGS := $(BASE_CFLAGS) -fvisibility=default
spec-helpers: $(SPEC_HELPERS)
bench-helpers: $(BENCH_HELPERS)

# They include csrc/compat.h like the core, and link its out-of-line half.
build/spec/%.so: spec/helper/%.c csrc/compat.c $(FLAGS_STAMP) | $(NEED_DEPS)
	@mkdir -p $(@D)
	$(CC) $(HELPER_CFLAGS) $(WARNFLAGS) $(CFLAGS) $(CPPFLAGS) $(LUA_CFLAGS) -MMD -MP -shared $(LDFLAGS) -o $@ $< csrc/compat.c

build/bench/%.so: bench/helper/%.c csrc/compat.c $(FLAGS_STAMP) | $(NEED_DEPS)
	@mkdir -p $(@D)
	$(CC) $(HELPER_CFLAGS) $(WARNFLAGS) $(CFLAGS) $(CPPFLAGS) $(LUA_CFLAGS) -MMD -MP -shared $(LDFLAGS) -o $@ $< csrc/compat.c

-include $(OBJS:.o=.d) $(ASAN_OBJS:.o=.d) $(SPEC_HELPERS:.so=.d) $(BENCH_HELPERS:.so=.d)

# ---- dependencies: apt-get as root, else the command to run ----
deps:
	@sh tools/deps.sh $(DEPS_FLAGS) $(DEPS)

deps-check: deps
	@sh tools/deps.sh $(DEPS_FLAGS) $(DEPS_CHECK)

deps-rock: deps
	@sh tools/deps.sh $(DEPS_FLAGS) $(DEPS_ROCK)

comma := ,

# ---- the two commands of the README ----
# The specs that build more (examples/embed) call make with these, so that
# nothing is rebuilt for another Lua.
SPEC_MAKE_ARGS = LUA='$(LUA)' LUA_PC='$(LUA_PC)' LUA_CFLAGS='$(LUA_CFLAGS)' EMBED_LUA_LIBS='$(EMBED_LUA_LIBS)'

# Spec files that still fail on LuaJIT: `make test LUA=luajit` leaves them
# out and names them when it starts; `make test LUA=luajit LUAJIT_GAPS=`
# runs every file. Empty now: every spec file runs on LuaJIT.
LUAJIT_GAPS ?=
TEST_GAPS = $(if $(filter luajit%,$(notdir $(LUA))),$(LUAJIT_GAPS))

test: deps all spec-helpers
	$(if $(TEST_GAPS),@echo "make test: on $(LUA) these spec files are left out (known gaps of issue 11): $(TEST_GAPS:%=spec/%_spec.lua)")
	env -u PERFEV_CHECK PERFEV_MAKE_ARGS="$(SPEC_MAKE_ARGS)" LUA_PATH='$(RUN_LPATH);;' LUA_CPATH='$(TEST_CPATH);;' \
	  $(BUSTED_RUN) --lpath='$(RUN_LPATH)' --cpath='$(TEST_CPATH)' $(TEST_GAPS:%=--exclude-pattern=^%_spec) \
	  $(BUSTED_FLAGS) spec

demo: deps all
	LUA_PATH='$(RUN_LPATH);;' LUA_CPATH='build/?.so;;' $(LUA) examples/quickstart.lua

# ---- lint ----
lint: deps lint-lua lint-c lint-layers rockspec-check files-doc-check

# Every Lua file that must run everywhere also parses under LuaJIT and Lua
# 5.3 (fuzz/attrs.lua and driver.lua are embedded in the 5.4 fuzzers only).
PARSE_LUA = $(filter-out fuzz/attrs.lua fuzz/driver.lua,$(shell find lua spec examples bench tools fuzz -name '*.lua' 2>/dev/null)) bin/perfev
lint-lua: | deps
	luacheck $(wildcard lua spec examples bench tools fuzz bin/perfev)
	@echo "luajit tools/parse-all.lua ... (every Lua file)"; luajit tools/parse-all.lua $(PARSE_LUA)
	@echo "lua5.3 tools/parse-all.lua ..."; lua5.3 tools/parse-all.lua $(PARSE_LUA)
	@echo "lua5.4 tools/check-function-length.lua luac5.4 $(MAX_FUNCTION_LINES) lua/..."; \
	  lua5.4 tools/check-function-length.lua luac5.4 $(MAX_FUNCTION_LINES) $(LUA_MODS)

# No Lua function of the library over this many lines, no C function of the
# core over MAX_C_FUNCTION_LINES (issue 21; tools/check-c-function-length.lua).
MAX_FUNCTION_LINES ?= 100
MAX_C_FUNCTION_LINES ?= 80

# The C is compiled with -Wall -Wextra -Werror by the build itself; this also
# checks that core.so links nothing but libc (never liblua) and exports
# nothing but luaopen_* (every other symbol is hidden).
lint-c: all spec-helpers bench-helpers cppcheck
	@bad=$$(readelf -d $(CORE) | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -v '^libc\.so\.' || true); \
	if [ -n "$$bad" ]; then echo "lint: $(CORE) must link nothing but libc, it needs: $$bad" >&2; exit 1; fi
	@bad=$$(nm -D --defined-only $(CORE) | awk '{ print $$3 }' | grep -v '^luaopen_' || true); \
	if [ -n "$$bad" ]; then echo "lint: $(CORE) must export luaopen_* alone, it exports:" $$bad >&2; exit 1; fi

# No circle between the concerns of csrc/ (its folders, and each base file
# at the top): counted over who uses whose non-static functions, globals,
# macros and types, not over #include lines (tools/check-layers.lua); and no
# C function over MAX_C_FUNCTION_LINES.
lint-layers: | $(NEED_DEPS)
	@echo "$(LUA) tools/check-layers.lua csrc/**.[ch]"; $(LUA) tools/check-layers.lua $(sort $(wildcard csrc/*.[ch] csrc/*/*.[ch]))
	@echo "$(LUA) tools/check-c-function-length.lua $(MAX_C_FUNCTION_LINES) csrc/**.c"; \
	  $(LUA) tools/check-c-function-length.lua $(MAX_C_FUNCTION_LINES) $(SRCS)

cppcheck: | $(NEED_DEPS)
	@if command -v $(CPPCHECK) >/dev/null 2>&1; then \
	  echo "$(CPPCHECK) csrc spec/helper bench/helper fuzz"; \
	  $(CPPCHECK) --quiet --error-exitcode=1 --enable=warning,portability --std=c11 \
	    --inline-suppr --suppress=missingIncludeSystem -D__linux__ -D__x86_64__ -D_GNU_SOURCE \
	    -Icsrc $(wildcard csrc spec/helper bench/helper fuzz); \
	else echo "lint: $(CPPCHECK) not installed, skipped"; fi

# perfev-scm-1.rockspec lists every csrc/**.c and lua/**.lua: `make rockspec`
# rewrites it from the tree, `make rockspec-check` fails when it is stale.
rockspec: | $(NEED_DEPS)
	$(LUA) tools/gen-rockspec.lua $(SRCS) -- $(LUA_MODS) > $(ROCKSPEC).tmp
	mv $(ROCKSPEC).tmp $(ROCKSPEC)

rockspec-check: | $(NEED_DEPS)
	@$(LUA) tools/gen-rockspec.lua $(SRCS) -- $(LUA_MODS) | diff -u $(ROCKSPEC) - >&2 || \
	  { echo "lint: $(ROCKSPEC) does not list csrc/**.c and lua/**.lua as they are: run 'make rockspec'" >&2; exit 1; }
	@if command -v $(LUAROCKS) >/dev/null 2>&1; then echo "$(LUAROCKS) lint $(ROCKSPEC)"; $(LUAROCKS) lint $(ROCKSPEC); \
	else echo "lint: $(LUAROCKS) not installed, 'luarocks lint' skipped"; fi

# The file tables of doc/architecture.md (lua/, bin/perfev) and
# doc/architecture-core.md (csrc/): every file with the first sentence of
# its opening comment, generated between '<!-- files: ... -->' lines.
# `make files-doc` rewrites them; lint fails when one is stale, a file says
# nothing of what it holds or is in no table, or when README.md or doc/
# names a path of the tree that does not exist.
FILES_DOCS := doc/architecture.md doc/architecture-core.md
FILES_LIST  = $(sort $(shell find csrc -name '*.[ch]')) bin/perfev $(LUA_MODS)
files-doc: | $(NEED_DEPS)
	$(LUA) tools/gen-files-doc.lua $(FILES_DOCS) -- $(FILES_LIST)

files-doc-check: | $(NEED_DEPS)
	@$(LUA) tools/gen-files-doc.lua --check $(FILES_DOCS) -- $(FILES_LIST)
	@$(LUA) tools/check-doc-paths.lua README.md doc/*.md

# ---- check: sanitizers, then valgrind ----
check: check-asan check-valgrind

check-asan: deps-check $(ASAN_CORE) spec-helpers
	@test -f '$(ASAN_RT)' && test -f '$(UBSAN_RT)' || \
	  { echo "check: $(ASAN_CC) has no libasan.so/libubsan.so" >&2; exit 1; }
	PERFEV_CHECK=asan LD_PRELOAD='$(ASAN_RT) $(UBSAN_RT)' \
	  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  LUA_PATH='$(RUN_LPATH);;' LUA_CPATH='$(ASAN_CPATH);;' \
	  $(BUSTED_RUN) --lpath='$(RUN_LPATH)' --cpath='$(ASAN_CPATH)' $(BUSTED_FLAGS) spec

# Under valgrind the Lua interpreter runs busted directly (no re-exec). The
# pass has a budget: VALGRIND_BUDGET minutes on the development VM (2 cores
# shared with other work). To keep to it, the specs tagged with a tag of
# VALGRIND_SKIP (in the test's or the describe's name) are left out, and
# named with the reason when the run starts; they still run in `make test`
# and under ASan+UBSan in check-asan:
#   #slow              100k-iteration loops, large files (/proc/kallsyms too),
#                      Chromium, go tool pprof
#   #perf_heavy        drive the perf tool (perf stat/record -vv, perf record,
#                      script, report) over hundreds of inputs or recordings,
#                      or sample at the rate limit: valgrind runs the Lua side
#                      20-50x slower (parse_perf_spec alone: over ten minutes),
#                      while the C they reach runs under valgrind in the other
#                      specs (parse, decode, perfdata*, ring, encode ...)
#   #valgrind_differs  what valgrind changes: it runs one thread at a time
#                      (per-thread counts are not native ones), a translated
#                      copy of the code (sampled user ips land in its code
#                      cache, outside every file mapping) and its own memory
#                      manager (the process's page faults are its own)
VALGRIND_BUDGET ?= 20
# a test or describe line whose name carries tag $(1); how it is printed
tagged_re = (it|describe)[(].*\#$(1)([^a-z_]|$$)
tagged_name = s/^([^:]*:[0-9]+):[[:space:]]*(it|describe)[(][(]?"?/  \1: /;
VALGRIND_SKIP   ?= slow perf_heavy valgrind_differs
VALGRIND_WHY_slow = 100k-iteration loops, large files (/proc/kallsyms too), Chromium, go tool pprof: hours under valgrind
VALGRIND_WHY_perf_heavy = the perf tool (stat/record -vv, record, script, report) over hundreds of \
  inputs or recordings, or sampling at the rate limit: minutes each under valgrind (the C they reach runs \
  under valgrind in the other specs, and in check-asan)
VALGRIND_WHY_valgrind_differs = valgrind runs one thread at a time, a translated copy of the code and \
  its own memory manager: per-thread counts, sampled user ips and page faults are not native ones
check-valgrind: deps-check all spec-helpers $(if $(filter check,$(MAKECMDGOALS)),check-asan)
	@$(foreach t,$(VALGRIND_SKIP),echo "check-valgrind: leaves out #$(t): $(VALGRIND_WHY_$(t)):"; \
	  grep -n -E '$(call tagged_re,$(t))' spec/*_spec.lua | sed -E '$(tagged_name) s/ *#$(t).*//';)
	@echo "check-valgrind: budget $(VALGRIND_BUDGET) min"
	@start=$$(date +%s); \
	PERFEV_CHECK=valgrind LUA_PATH='$(RUN_LPATH);;' LUA_CPATH='$(TEST_CPATH);;' \
	  $(VALGRIND_RUN) $(BUSTED_RUN) --lpath='$(RUN_LPATH)' --cpath='$(TEST_CPATH)' \
	  --exclude-tags=$(subst $(eval) ,$(comma),$(strip $(VALGRIND_SKIP))) $(BUSTED_FLAGS) spec; \
	rc=$$?; took=$$(( ($$(date +%s) - start + 59) / 60 )); \
	echo "check-valgrind: $$(test $$rc = 0 && echo passed || echo FAILED) in $$took min (budget $(VALGRIND_BUDGET) min$$(test $$took -le $(VALGRIND_BUDGET) || echo ': OVER'))"; \
	exit $$rc

# ---- benchmarks ----
# (./?/init.lua: bench.support, which LuaJIT's default path does not find)
bench: all bench-helpers
	@set -e; for f in $(sort $(wildcard bench/*.lua)); do \
	  echo "== $$f"; \
	  LUA_PATH='$(RUN_LPATH);./?/init.lua;;' LUA_CPATH='build/?.so;build/bench/?.so;;' $(LUA) $$f; \
	done

# ---- luarocks, offline, into a temporary tree ----
rockcheck: deps-rock
	sh tools/rockcheck.sh '$(LUA)' '$(LUA_VERSION)' '$(LUAROCKS)' $(ROCKSPEC)

# ---- fuzzing: libFuzzer (clang) over the record decoder and encode/decode ----
# `make fuzz` runs each target for FUZZ_SECONDS from the seeds in
# fuzz/corpus/decode (new inputs go to build/fuzz/corpus/, crashes to
# fuzz/crashes/); `make fuzz-seed` rewrites the seeds from this machine.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_FLAGS   ?=
FUZZ_CFLAGS  ?= -O1 -g
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_TARGETS := decode roundtrip
FUZZ_BINS    := $(FUZZ_TARGETS:%=build/fuzz/%_fuzz)
FUZZ_OBJS    := $(SRCS:csrc/%.c=build/fuzz/obj/%.o)
FUZZ_LUA_LIBS = $(shell pkg-config --libs '$(LUA_PC)')

.PHONY: fuzz fuzz-build fuzz-seed
fuzz: fuzz-build
	@mkdir -p fuzz/crashes
	@set -e; for t in $(FUZZ_TARGETS); do \
	  mkdir -p build/fuzz/corpus/$$t; \
	  echo "== fuzz $$t: $(FUZZ_SECONDS)s"; \
	  build/fuzz/$${t}_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -print_final_stats=1 \
	    -artifact_prefix=fuzz/crashes/$$t- $(FUZZ_FLAGS) build/fuzz/corpus/$$t fuzz/corpus/decode; \
	done

fuzz-build: $(FUZZ_BINS)

fuzz-seed: all
	LUA_PATH='$(RUN_LPATH);;' LUA_CPATH='build/?.so;;' $(LUA) fuzz/seed.lua fuzz/corpus/decode
	LUA_PATH='$(RUN_LPATH);;' LUA_CPATH='build/?.so;;' $(LUA) fuzz/seed_perfdata.lua fuzz/corpus/perfdata $(FUZZ_PERFDATA_MAX_LEN)

build/fuzz/%_fuzz: fuzz/%_fuzz.c fuzz/fuzz_lua.h build/fuzz/fuzz_sources.h $(FUZZ_OBJS)
	$(FUZZ_CC) $(BASE_CFLAGS) $(WARNFLAGS) $(FUZZ_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer $(LUA_CFLAGS) \
	  -Ibuild/fuzz -o $@ $< $(FUZZ_OBJS) $(FUZZ_LUA_LIBS) -lm

# The core under clang, with the same -Werror as under gcc.
build/fuzz/obj/%.o: csrc/%.c $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(BASE_CFLAGS) $(WARNFLAGS) $(FUZZ_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link \
	  $(CPPFLAGS) $(LUA_CFLAGS) -MMD -MP -c -o $@ $<

build/fuzz/fuzz_sources.h: fuzz/embed.lua fuzz/attrs.lua fuzz/driver.lua
	@mkdir -p $(@D)
	$(LUA) fuzz/embed.lua fuzz_attrs=fuzz/attrs.lua fuzz_driver=fuzz/driver.lua > $@.tmp
	mv $@.tmp $@

-include $(FUZZ_OBJS:.o=.d)

# The perf.data reader: whole files through perfev.perfdata (header, attrs,
# features, records in both orders), seeds in fuzz/corpus/perfdata (real
# recordings of each kind and two files built byte by byte; `make fuzz-seed`
# remakes them). The max_len fits a real recording (perf's own header alone
# is tens of KB; the recordings of the issue were 97-670 KB).
FUZZ_PERFDATA_MAX_LEN ?= 1048576
.PHONY: fuzz-perfdata
fuzz: fuzz-perfdata
fuzz-build: build/fuzz/perfdata_fuzz
fuzz-perfdata: build/fuzz/perfdata_fuzz
	@mkdir -p fuzz/crashes build/fuzz/corpus/perfdata
	@echo "== fuzz perfdata: $(FUZZ_SECONDS)s"
	build/fuzz/perfdata_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=$(FUZZ_PERFDATA_MAX_LEN) -print_final_stats=1 \
	  -artifact_prefix=fuzz/crashes/perfdata- $(FUZZ_FLAGS) build/fuzz/corpus/perfdata fuzz/corpus/perfdata

# ---- static library and the embedding example (doc/embedding.md) ----
# build/libperfev.a holds one relocatable object whose only global symbol is
# luaopen_perfev_core: the core's internal names cannot clash with a host's.
# The host links Lua statically, as game engines do, with -Wl,-E so that C
# modules loaded later (cjson.so) find Lua's API in the executable.
STATIC_LIB := build/libperfev.a
EMBED_HOST := build/embed/host
EMBED_LUA_LIBS = -Wl,-Bstatic $(shell pkg-config --libs-only-l '$(LUA_PC)') -Wl,-Bdynamic -lm -ldl -Wl,-E

.PHONY: static embed
static: $(STATIC_LIB)
embed: $(EMBED_HOST)

$(STATIC_LIB): $(OBJS) | $(NEED_DEPS)
	@mkdir -p $(@D)
	$(LD) -r -o build/perfev-static.o $(OBJS)
	objcopy --keep-global-symbol=luaopen_perfev_core build/perfev-static.o
	rm -f $@
	$(AR) rcs $@ build/perfev-static.o

$(EMBED_HOST): examples/embed/host.c examples/embed/perfev_frames.h $(STATIC_LIB) $(FLAGS_STAMP) | $(NEED_DEPS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(WARNFLAGS) $(CFLAGS) $(CPPFLAGS) $(LUA_CFLAGS) -o $@ $< $(STATIC_LIB) \
	  $(LDFLAGS) $(EMBED_LUA_LIBS)

# ---- the core for nginx: built against LuaJIT beside the $(LUA) build ----
# OpenResty's ngx_http_lua runs LuaJIT: build/luajit/perfev/core.so is the
# core compiled against NGX_LUA_PC's headers (examples/openresty, its spec).
NGX_LUA_PC ?= luajit
NGX_CORE   := build/luajit/perfev/core.so
NGX_OBJS   := $(SRCS:csrc/%.c=build/luajit/obj/%.o)
NGX_LUA_CFLAGS = $(shell pkg-config --cflags '$(NGX_LUA_PC)')

.PHONY: core-luajit
core-luajit: $(NGX_CORE)

$(NGX_CORE): $(NGX_OBJS) | $(NEED_DEPS)
	@mkdir -p $(@D)
	$(CC) -shared $(LDFLAGS) -o $@ $(NGX_OBJS)

build/luajit/obj/%.o: csrc/%.c $(FLAGS_STAMP) | $(NEED_DEPS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(WARNFLAGS) $(CFLAGS) $(CPPFLAGS) $(NGX_LUA_CFLAGS) -MMD -MP -c -o $@ $<

-include $(NGX_OBJS:.o=.d)

# ---- Debian's own LuaJIT, beside OpenResty's ----
# Debian's luajit/libluajit-5.1-dev conflict with luajit2/libluajit2-5.1-dev
# (OpenResty's fork, which the installed nginx lua module may run): instead of
# swapping the system's packages, apt-get download fetches Debian's and they
# are unpacked under build/debian-luajit, where the whole suite runs on them.
DEB_LUAJIT_DIR  := build/debian-luajit
DEB_LUAJIT_DEBS := luajit libluajit-5.1-2 libluajit-5.1-dev libluajit-5.1-common
DEB_LUAJIT_LIB   = $(abspath $(DEB_LUAJIT_DIR))/usr/lib/x86_64-linux-gnu
DEB_LUAJIT       = $(abspath $(DEB_LUAJIT_DIR))/usr/bin/luajit

.PHONY: debian-luajit test-luajit-debian
debian-luajit: $(DEB_LUAJIT_DIR)/.unpacked

$(DEB_LUAJIT_DIR)/.unpacked:
	rm -rf $(DEB_LUAJIT_DIR) && mkdir -p $(DEB_LUAJIT_DIR)/debs
	cd $(DEB_LUAJIT_DIR)/debs && apt-get download $(DEB_LUAJIT_DEBS)
	for d in $(DEB_LUAJIT_DIR)/debs/*.deb; do dpkg-deb -x "$$d" $(DEB_LUAJIT_DIR); done
	touch $@

# The flags stamp rebuilds build/ for it (and back for the next plain make).
test-luajit-debian: debian-luajit
	LD_LIBRARY_PATH='$(DEB_LUAJIT_LIB)' $(MAKE) test LUA='$(DEB_LUAJIT)' LUA_PC=luajit \
	  LUA_CFLAGS='-I$(abspath $(DEB_LUAJIT_DIR))/usr/include/luajit-2.1' \
	  EMBED_LUA_LIBS='$(DEB_LUAJIT_LIB)/libluajit-5.1.a -lm -ldl -Wl,-E'

# ---- the examples, run as a user runs them (CI: on Lua 5.3) ----
# Each example's output goes to build/examples/NAME.out (its last lines are
# shown); examples/record.lua writes its perf.data there too.
EXAMPLES     := $(sort $(wildcard examples/*.lua))
EXAMPLES_OUT := build/examples

.PHONY: examples
examples: deps all embed
	@mkdir -p $(EXAMPLES_OUT)
	@set -e; for f in $(EXAMPLES); do \
	  n=$$(basename $$f .lua); args=; \
	  if [ $$n = record ]; then args=$(EXAMPLES_OUT)/perf.data; fi; \
	  echo "== $$f ($(LUA))"; \
	  if ! LUA_PATH='$(RUN_LPATH);;' LUA_CPATH='build/?.so;;' $(LUA) $$f $$args > $(EXAMPLES_OUT)/$$n.out 2>&1; then \
	    cat $(EXAMPLES_OUT)/$$n.out; echo "examples: $$f failed" >&2; exit 1; \
	  fi; \
	  tail -n 3 $(EXAMPLES_OUT)/$$n.out; \
	done
	@echo "== examples/embed ($(LUA))"
	LUA_PATH='$(RUN_LPATH);;' $(EMBED_HOST) examples/embed/game.lua 300

# ---- the user's path: install into a temporary prefix, use as README and doc/ say ----
.PHONY: check-user
check-user: deps deps-rock all
	bash tools/check-user.sh '$(LUA)' '$(LUAROCKS)'

# ---- install ----
INSTALL_MAN ?= $(PREFIX)/share/man/man1
INSTALL_DOC ?= $(PREFIX)/share/doc/perfev
DOCS := README.md $(sort $(wildcard doc/*.md))

# The man page, made from the command's own parser (what --help says).
build/perfev.1: tools/gen-man.lua $(LUA_MODS) $(CORE)
	LUA_PATH='$(RUN_LPATH);;' LUA_CPATH='build/?.so;;' $(LUA) tools/gen-man.lua > $@.tmp
	mv $@.tmp $@

install: all build/perfev.1
	sh tools/install.sh install '$(DESTDIR)$(INSTALL_CMOD)' '$(DESTDIR)$(INSTALL_LMOD)' $(CORE) $(LUA_MODS)
	@# the perfev command, its first line naming the Lua it was built for, and
	@# where its modules are (without DESTDIR: where they will be once packaged)
	@mkdir -p build/bin
	sed -e '1s|.*|#!$(if $(findstring /,$(LUA)),$(LUA),/usr/bin/env $(LUA))|' \
	    -e 's|^local installed = nil .*|local installed = { lmod = [[$(INSTALL_LMOD)]], cmod = [[$(INSTALL_CMOD)]] }|' \
	    bin/perfev > build/bin/perfev
	sh tools/install.sh files '$(DESTDIR)$(INSTALL_LMOD)' '$(DESTDIR)$(INSTALL_BIN)' 0755 build/bin/perfev
	sh tools/install.sh files '$(DESTDIR)$(INSTALL_LMOD)' '$(DESTDIR)$(INSTALL_MAN)' 0644 build/perfev.1
	sh tools/install.sh files '$(DESTDIR)$(INSTALL_LMOD)' '$(DESTDIR)$(INSTALL_DOC)' 0644 $(DOCS)

# Removes what install put there and the directories it created.
uninstall:
	sh tools/install.sh uninstall '$(DESTDIR)$(INSTALL_CMOD)' '$(DESTDIR)$(INSTALL_LMOD)' \
	  '$(DESTDIR)$(INSTALL_BIN)/perfev' '$(DESTDIR)$(INSTALL_MAN)/perfev.1' $(patsubst %,'$(DESTDIR)$(INSTALL_DOC)/%',$(notdir $(DOCS)))

clean:
	rm -rf build
