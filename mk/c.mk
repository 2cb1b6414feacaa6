# The C surface (issue 6): libagentbreaker.so / libagentbreaker.a built from bindings/c, the
# cbindgen-generated include/agentbreaker.h (committed; the tests fail when it is not current),
# pkg-config files, and the C tests in tests/c.
#
#   make test-c                      everything below, as CI runs it
#   make test-c-bad-input            the bad-input matrix (docs/bad-input/c.md), also under valgrind
#   make test-c-panic                the panic boundary, against a test-panic build (target/c-panic)
#   make bench-c                     the benchmark: target/bench/c.jsonl (not part of `make test`)
#   make lint-c                      rustfmt and clippy for bindings/c
#   make c-lib                       build the library (C_PROFILE=release by default) and
#                                    target/c/pkgconfig/agentbreaker{,-static}.pc for the build tree
#   make c-header                    regenerate include/agentbreaker.h after changing bindings/c/src
#   make install-c PREFIX=/usr/local install the header, both libraries and the pkg-config files

C_TARGET_DIR := $(abspath $(or $(CARGO_TARGET_DIR),$(CURDIR)/target))
C_PROFILE ?= release
C_LIB_DIR := $(C_TARGET_DIR)/$(if $(filter dev,$(C_PROFILE)),debug,$(C_PROFILE))
C_BUILD := $(C_TARGET_DIR)/c
C_BIN := $(C_BUILD)/bin
C_STAGE := $(C_BUILD)/stage
C_TESTS := tests/c
C_APT := libcjson-dev valgrind pkg-config g++
C_WARNINGS := -std=c11 -Wall -Wextra -Werror -pedantic
C_CFLAGS := $(C_WARNINGS) -g -O1 -Iinclude -I$(C_TESTS)
C_TEST_LIBS := -lcjson -lm -pthread
C_DYNAMIC := -L$(C_LIB_DIR) -lagentbreaker -Wl,-rpath,$(C_LIB_DIR)
C_STATIC := $(C_LIB_DIR)/libagentbreaker.a $$(cat $(C_BUILD)/native-static-libs)
C_VALGRIND := valgrind -q --leak-check=full --error-exitcode=1 --num-callers=50 \
	--suppressions=$(C_TESTS)/valgrind.supp
PREFIX ?= /usr/local
# The library with the core's `test-panic` trigger, in a target dir of its own so that the
# normal build never has it.
C_PANIC_TARGET_DIR := $(C_TARGET_DIR)/c-panic
C_PANIC_LIB_DIR := $(C_PANIC_TARGET_DIR)/release
C_BENCH_OUT := $(CURDIR)/target/bench/c.jsonl
C_BENCH_CFLAGS := $(C_WARNINGS) -O2 -Iinclude

TEST_TARGETS += test-c test-c-bad-input test-c-panic
LINT_TARGETS += lint-c
BENCH_TARGETS += bench-c
RELIABILITY_TARGETS += test-c-bad-input test-c-panic

.PHONY: test-c test-c-bad-input test-c-panic bench-c lint-c c-deps c-lib c-header c-header-check \
	install-c

# $(call c_pkgconfig,prefix,libdir,includedir,destination dir): writes agentbreaker.pc (shared
# library; Libs.private for --static) and agentbreaker-static.pc (links the archive itself).
define c_pkgconfig
	mkdir -p $(4)
	for pc in agentbreaker agentbreaker-static; do \
	  sed -e 's|@PREFIX@|$(1)|' -e 's|@LIBDIR@|$(2)|' -e 's|@INCLUDEDIR@|$(3)|' \
	      -e "s|@VERSION@|$$(cat $(C_BUILD)/version)|" \
	      -e "s|@NATIVE_STATIC_LIBS@|$$(cat $(C_BUILD)/native-static-libs)|" \
	      bindings/c/$$pc.pc.in > $(4)/$$pc.pc; \
	done
endef

# $(call c_install,prefix): installs what c-lib built under prefix.
define c_install
	install -d $(DESTDIR)$(1)/include $(DESTDIR)$(1)/lib
	install -m 644 $(C_BUILD)/agentbreaker.h $(DESTDIR)$(1)/include/agentbreaker.h
	install -m 755 $(C_LIB_DIR)/libagentbreaker.so $(DESTDIR)$(1)/lib/libagentbreaker.so
	install -m 644 $(C_LIB_DIR)/libagentbreaker.a $(DESTDIR)$(1)/lib/libagentbreaker.a
	$(call c_pkgconfig,$(1),$${prefix}/lib,$${prefix}/include,$(DESTDIR)$(1)/lib/pkgconfig)
endef

## C: the Debian packages the C tests need (cJSON, valgrind, pkg-config, a C++ compiler).
c-deps:
	$(call apt_install,$(C_APT))

## C: build libagentbreaker.{so,a} (and the header cbindgen generates, into target/c/).
c-lib:
	$(PYTHON) bindings/c/build_lib.py $(C_PROFILE) $(C_BUILD)
	$(call c_pkgconfig,$(CURDIR),$(C_LIB_DIR),$(CURDIR)/include,$(C_BUILD)/pkgconfig)

## C: copy the freshly generated header over the committed include/agentbreaker.h.
c-header: c-lib
	cp $(C_BUILD)/agentbreaker.h include/agentbreaker.h
	rm -f include/.gitkeep

## C: fail when the committed header differs from what cbindgen generates now.
c-header-check: c-lib
	@if ! diff -u include/agentbreaker.h $(C_BUILD)/agentbreaker.h; then \
	  echo "include/agentbreaker.h is not what cbindgen generates: run 'make c-header'" >&2; \
	  exit 1; \
	fi
	@echo "include/agentbreaker.h is current"

## C: install the header, both libraries and the pkg-config files under $(PREFIX) (DESTDIR too).
install-c: c-lib
	$(call c_install,$(PREFIX))

## C, the binding tested through its ABI: the header alone as C and as C++; the conformance
## runner, the API tests and the misuse tests, each linked dynamically and statically and run under
## valgrind; the suite's mutation check against the C runner; the README example built with
## pkg-config against an installed copy.
test-c: c-deps c-header-check
	mkdir -p $(C_BIN)
	@echo "== the header alone, as C and as C++ (and a C++ program linked against the library)"
	$(CC) $(C_WARNINGS) -Iinclude -c $(C_TESTS)/header_only.c -o $(C_BIN)/header_only_c.o
	$(CXX) -x c++ -std=c++11 -Wall -Wextra -Werror -pedantic -Iinclude \
	  -c $(C_TESTS)/header_only.c -o $(C_BIN)/header_only_cpp.o
	$(CXX) $(C_BIN)/header_only_cpp.o -o $(C_BIN)/header_only_cpp $(C_DYNAMIC)
	$(C_BIN)/header_only_cpp
	@echo "== building the C tests, linked dynamically and statically"
	for test in conformance api_test misuse_test; do \
	  $(CC) $(C_CFLAGS) $(C_TESTS)/$$test.c -o $(C_BIN)/$$test-dynamic $(C_DYNAMIC) $(C_TEST_LIBS); \
	  $(CC) $(C_CFLAGS) $(C_TESTS)/$$test.c -o $(C_BIN)/$$test-static $(C_STATIC) $(C_TEST_LIBS); \
	done
	if ldd $(C_BIN)/conformance-static | grep libagentbreaker; then \
	  echo "conformance-static is not statically linked" >&2; exit 1; \
	fi
	for test in conformance api_test misuse_test; do \
	  for link in dynamic static; do \
	    echo "== $$test ($$link, valgrind)"; \
	    $(C_VALGRIND) $(C_BIN)/$$test-$$link; \
	  done; \
	done
	@echo "== mutation check: every changed expectation must make the C runner fail"
	$(PYTHON) tools/mutate_scenarios.py --suite "$(AGENTBREAKER_CONFORMANCE_DIR)" \
	  --runner "$(C_BIN)/conformance-dynamic --libtest"
	@echo "== the README example, built with pkg-config against an installed copy"
	rm -rf $(C_STAGE)
	$(call c_install,$(C_STAGE))
	export PKG_CONFIG_PATH=$(C_STAGE)/lib/pkgconfig; \
	$(CC) $(C_WARNINGS) $(C_TESTS)/example.c -o $(C_BIN)/example-dynamic \
	  $$(pkg-config --cflags --libs agentbreaker) -Wl,-rpath,$(C_STAGE)/lib; \
	$(CC) $(C_WARNINGS) $(C_TESTS)/example.c -o $(C_BIN)/example-static \
	  $$(pkg-config --cflags --libs agentbreaker-static)
	for link in dynamic static; do \
	  $(C_VALGRIND) $(C_BIN)/example-$$link > $(C_BIN)/example-$$link.out; \
	  cat $(C_BIN)/example-$$link.out; \
	  grep -q "^attempt 4 refused: CIRCUIT_OPEN: Circuit breaker OPEN. 30 seconds remaining" \
	    $(C_BIN)/example-$$link.out; \
	done
	@echo "== the benchmark builds (warnings are errors) and runs (one short loop per operation)"
	$(CC) $(C_BENCH_CFLAGS) $(C_TESTS)/bench.c $(C_TESTS)/bench_peer.c -o $(C_BIN)/bench $(C_DYNAMIC)
	rm -rf $(C_BUILD)/bench-smoke && mkdir -p $(C_BUILD)/bench-smoke
	$(C_BIN)/bench --smoke $(C_BUILD)/bench-smoke/c.jsonl > /dev/null
	$(PYTHON) tools/bench_table.py --dir $(C_BUILD)/bench-smoke > /dev/null

## C: the bad-input matrix (issue 10): every argument of every entry point (and every field of its
## JSON) against wrong type, null, NaN, +-Inf, negative, zero, huge, a 10 MB string, invalid UTF-8
## and NULL; each cell's outcome as docs/bad-input/c.md says (the file is generated from the
## test's table and must be current), the objects still working after each. Then again under
## valgrind, with 1 MiB strings instead of 10 MiB to keep it short.
test-c-bad-input: c-deps c-lib
	mkdir -p $(C_BIN)
	$(CC) $(C_CFLAGS) $(C_TESTS)/bad_input_test.c -o $(C_BIN)/bad_input_test $(C_DYNAMIC) \
	  $(C_TEST_LIBS)
	$(C_BIN)/bad_input_test --markdown > $(C_BUILD)/bad-input-table.md
	sed -n '/^<!-- TABLE:BEGIN -->$$/,/^<!-- TABLE:END -->$$/p' docs/bad-input/c.md \
	  | sed '1d;$$d' > $(C_BUILD)/bad-input-table.committed.md
	@if ! diff -u $(C_BUILD)/bad-input-table.committed.md $(C_BUILD)/bad-input-table.md; then \
	  echo "docs/bad-input/c.md is not the test's table: put the output of" \
	    "'$(C_BIN)/bad_input_test --markdown' between its TABLE markers" >&2; \
	  exit 1; \
	fi
	@echo "== the bad-input matrix"
	$(C_BIN)/bad_input_test
	@echo "== the bad-input matrix under valgrind (1 MiB strings)"
	$(C_VALGRIND) $(C_BIN)/bad_input_test --big-bytes 1048576 > $(C_BUILD)/bad-input-valgrind.out
	tail -n 1 $(C_BUILD)/bad-input-valgrind.out

## C: the panic boundary (issue 10). The library built with the core's test-panic trigger (into
## target/c-panic) must turn a panic inside a breaker's lock, in analyze, in a guarded call, a
## strategy and a loop into AB_ERR_INTERNAL with a readable message, and every handle must keep
## working: linked dynamically and statically, under valgrind. The normal library must not have
## the trigger.
test-c-panic: c-deps c-lib
	CARGO_TARGET_DIR=$(C_PANIC_TARGET_DIR) $(CARGO) build -p agentbreaker-c --lib --release \
	  --features test-panic
	mkdir -p $(C_BIN)
	$(CC) $(C_CFLAGS) $(C_TESTS)/panic_test.c -o $(C_BIN)/panic_test-dynamic \
	  -L$(C_PANIC_LIB_DIR) -lagentbreaker -Wl,-rpath,$(C_PANIC_LIB_DIR) $(C_TEST_LIBS)
	$(CC) $(C_CFLAGS) $(C_TESTS)/panic_test.c -o $(C_BIN)/panic_test-static \
	  $(C_PANIC_LIB_DIR)/libagentbreaker.a $$(cat $(C_BUILD)/native-static-libs) $(C_TEST_LIBS)
	$(CC) $(C_CFLAGS) $(C_TESTS)/panic_test.c -o $(C_BIN)/panic_test-normal $(C_DYNAMIC) \
	  $(C_TEST_LIBS)
	@echo "== the normal library has no panic trigger"
	@if $(C_BIN)/panic_test-normal --check-trigger; then \
	  echo "$(C_LIB_DIR)/libagentbreaker.so panics on the test trigger" >&2; exit 1; \
	fi
	@# Each caught panic prints the panic hook's message to stderr; that is expected.
	for link in dynamic static; do \
	  echo "== panic boundary ($$link, valgrind)"; \
	  RUST_BACKTRACE=0 $(C_VALGRIND) $(C_BIN)/panic_test-$$link; \
	done

## C: the benchmark (issue 9), linked against the release library: target/bench/c.jsonl.
bench-c: c-lib
	$(if $(filter release,$(C_PROFILE)),,$(error bench-c measures the release library (C_PROFILE=release)))
	mkdir -p $(C_BIN) $(dir $(C_BENCH_OUT))
	$(CC) $(C_BENCH_CFLAGS) $(C_TESTS)/bench.c $(C_TESTS)/bench_peer.c -o $(C_BIN)/bench $(C_DYNAMIC)
	$(C_BIN)/bench $(C_BENCH_OUT)

## C: rustfmt and clippy (warnings are errors) for bindings/c.
lint-c:
	rustfmt --edition 2024 --check bindings/c/build.rs bindings/c/src/*.rs
	$(CARGO) clippy -p agentbreaker-c --all-targets -- -D warnings
