# Release artifacts (issue 20): what the registries will serve, built and tested here.
# docs/release.md says what each artifact is, how it is checked and how a tag publishes it.
#
#   make dist         every artifact into target/dist/ (and SHA256SUMS):
#                     - the abi3 wheel (CPython >= 3.9, manylinux_2_17 / manylinux2014) and the sdist
#                     - agentbreaker-<v>.tgz (npm pack, no addon, no install script, one optional
#                       dependency per platform) and agentbreaker-linux-x64-gnu-<v>.tgz (the addon)
#                     - agentbreaker-<v>-1.linux-x86_64.rock: native modules for Lua 5.4, 5.1, LuaJIT
#                     - agentbreaker-c-<v>-linux-x86_64.tar.gz: header, .so, .a, pkg-config files
#                     - agentbreaker-cli-<v>-x86_64-unknown-linux-gnu.tar.gz: the CLI binary
#   make dist-<python|node|lua|c|cli>   one of them
#   make test-dist    each artifact installed into a clean environment with no Rust on PATH and
#                     smoke-tested (tools/dist/test_dist.sh), the version checks, the workflow
#                     check, the sizes (the wheel must stay under 2 MB)
#   make test-dist-<python|node|lua|c|cli|meta>   one of them (the artifact must exist)
#   make test-dist-quick   dist-python and dist-node, then their tests and test-dist-meta: what
#                     `make test` runs
#
# Every native artifact is linked against glibc 2.17 with zig (the `ziglang` wheel from PyPI):
# maturin --zig for the wheel, cargo-zigbuild (crates.io) for the rest, on the ordinary gnu
# target. They share one target dir (target/dist-build) and the `dist` profile (release, stripped),
# so the core is compiled once per feature set, apart from the test builds. The version of
# everything is the workspace version of Cargo.toml (tools/dist/versions.py).

DIST := $(CURDIR)/target/dist
DIST_BUILD := $(CURDIR)/target/dist-build
DIST_TOOLS := $(CURDIR)/target/dist-tools
DIST_PY := $(DIST_TOOLS)/venv/bin/python
DIST_VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' Cargo.toml | head -n 1)
# The platform: Linux on this machine's processor (x86_64 here; aarch64 on an arm64 runner).
DIST_MACHINE := $(shell uname -m)
DIST_TRIPLE := $(DIST_MACHINE)-unknown-linux-gnu
DIST_ARCH := linux-$(DIST_MACHINE)
DIST_NPM_PLATFORM := linux-$(if $(filter aarch64,$(DIST_MACHINE)),arm64,x64)-gnu
DIST_GLIBC := 2.17
# cargo-zigbuild's spelling: cargo builds the gnu target, zig links against glibc 2.17.
DIST_ZIG_TARGET := $(DIST_TRIPLE).$(DIST_GLIBC)
DIST_OUT := $(DIST_BUILD)/$(DIST_TRIPLE)/dist
# cargo-zigbuild lives in target/dist-tools/bin (napi's --cross-compile finds it on PATH as
# `cargo zigbuild`); CARGO_ZIGBUILD_PYTHON_PATH points it and maturin at the venv's ziglang.
DIST_ENV := CARGO_TARGET_DIR=$(DIST_BUILD) CARGO_ZIGBUILD_PYTHON_PATH=$(DIST_PY) \
  PATH="$(DIST_TOOLS)/bin:$$PATH"
DIST_ZIGBUILD := env $(DIST_ENV) $(DIST_TOOLS)/bin/cargo-zigbuild
CARGO_ZIGBUILD_VERSION := 0.24.1
DIST_APT := binutils luarocks liblua5.1-0-dev lua5.4 lua5.1 luajit zip unzip pkg-config gcc make
DIST_ROCK := agentbreaker-$(DIST_VERSION)-1.$(DIST_ARCH).rock
DIST_C_NAME := agentbreaker-c-$(DIST_VERSION)-$(DIST_ARCH)
DIST_CLI_NAME := agentbreaker-$(DIST_VERSION)-$(DIST_TRIPLE)
# (`=`: LUA_SMOKE and NODE_SMOKE come from mk/lua.mk and mk/node.mk, read after this file.)
DIST_TEST = PYTHON=$(PYTHON) DIST=$(DIST) VERSION=$(DIST_VERSION) DIST_TRIPLE=$(DIST_TRIPLE) \
  DIST_ARCH=$(DIST_ARCH) DIST_NPM_PLATFORM=$(DIST_NPM_PLATFORM) \
  LUA_SMOKE='$(LUA_SMOKE)' LUA_REFUSAL='$(LUA_REFUSAL)' \
  NODE_SMOKE="$(subst ./node,agentbreaker,$(NODE_SMOKE))" bash tools/dist/test_dist.sh

TEST_TARGETS += test-dist-quick

.PHONY: dist dist-apt dist-zigbuild dist-versions dist-python dist-node dist-lua dist-c dist-cli dist-sums \
  test-dist test-dist-quick test-dist-meta test-dist-python test-dist-node test-dist-lua \
  test-dist-c test-dist-cli test-dist-sdist

DIST_TOOLS_STAMP := $(DIST_TOOLS)/venv/.requirements

$(DIST_TOOLS_STAMP): tools/dist/requirements.txt
	rm -rf $(DIST_TOOLS)/venv
	$(PYTHON) -m venv $(DIST_TOOLS)/venv
	$(DIST_PY) -m pip install -q --disable-pip-version-check $(PIP_NO_CACHE) -r tools/dist/requirements.txt
	cp tools/dist/requirements.txt $@

## The Debian packages of the builds and the tests: binutils (objdump, readelf, strip), LuaRocks
## and the Lua interpreters, pkg-config, a C compiler.
dist-apt:
	$(call apt_install,$(DIST_APT))

## cargo-zigbuild (crates.io, into target/dist-tools/bin when missing or of another version);
## maturin, ziglang and auditwheel come from PyPI into target/dist-tools/venv ($(DIST_PY)).
dist-zigbuild: $(DIST_TOOLS_STAMP)
	@if ! $(DIST_TOOLS)/bin/cargo-zigbuild --version 2>/dev/null | grep -q ' $(CARGO_ZIGBUILD_VERSION)$$'; then \
	  echo "installing cargo-zigbuild $(CARGO_ZIGBUILD_VERSION) into $(DIST_TOOLS)"; \
	  $(CARGO) install cargo-zigbuild --locked --version $(CARGO_ZIGBUILD_VERSION) --root $(DIST_TOOLS); \
	fi

## Every version agrees with the workspace version (prints it).
dist-versions:
	$(PYTHON) tools/dist/versions.py

## Everything, from scratch, into target/dist.
dist:
	rm -rf $(DIST)
	$(MAKE) --no-print-directory dist-versions
	$(MAKE) --no-print-directory dist-python
	$(MAKE) --no-print-directory dist-node
	$(MAKE) --no-print-directory dist-lua
	$(MAKE) --no-print-directory dist-c
	$(MAKE) --no-print-directory dist-cli
	$(MAKE) --no-print-directory dist-sums

dist-sums:
	cd $(DIST) && rm -f SHA256SUMS && sha256sum * > SHA256SUMS && ls -l

## Python: the abi3 wheel, linked by zig against glibc 2.17 and checked by maturin's own
## manylinux check (--compatibility manylinux2014 fails the build when the wheel is not), then
## shown by auditwheel; and the sdist (maturin takes the workspace crates it needs into it).
dist-python: $(DIST_TOOLS_STAMP) dist-apt
	mkdir -p $(DIST)
	rm -f $(DIST)/agentbreaker-*.whl $(DIST)/agentbreaker-$(DIST_VERSION).tar.gz
	cd python && env $(DIST_ENV) $(DIST_TOOLS)/venv/bin/maturin build --locked --profile dist \
	  --zig --compatibility manylinux2014 --target $(DIST_TRIPLE) --interpreter $(DIST_PY) --out $(DIST)
	cd python && $(DIST_TOOLS)/venv/bin/maturin sdist --out $(DIST)
	$(DIST_TOOLS)/venv/bin/auditwheel show $(DIST)/agentbreaker-$(DIST_VERSION)-cp39-abi3-*.whl \
	  | tee $(DIST_BUILD)/auditwheel.txt
	grep -q '"manylinux_2_17_$(DIST_MACHINE)"' $(DIST_BUILD)/auditwheel.txt

## Node: the addon (napi build --cross-compile: cargo-zigbuild, glibc 2.17), then the two
## tarballs (tools/dist/node_packages.py): the package and its linux-x64-gnu platform package.
## (The napi CLI comes from mk/node.mk's `npm ci` stamp, named here literally: mk/node.mk is read
## after this file, and a prerequisite's variable is expanded when it is read.)
dist-node: dist-apt dist-zigbuild node/node_modules/.package-lock.json
	mkdir -p $(DIST) $(DIST_BUILD)/node
	rm -f $(DIST)/agentbreaker-$(DIST_VERSION).tgz $(DIST)/agentbreaker-$(DIST_NPM_PLATFORM)-*.tgz
	cd node && env $(DIST_ENV) npx --no-install napi build --platform --profile dist \
	  --cross-compile --target $(DIST_ZIG_TARGET) --manifest-path ../bindings/node/Cargo.toml \
	  --target-dir $(DIST_BUILD) --output-dir $(DIST_BUILD)/node --no-js --no-dts-header \
	  --dts $(DIST_BUILD)/node/index.d.ts
	$(PYTHON) tools/dist/glibc.py --max $(DIST_GLIBC) $(DIST_BUILD)/node/agentbreaker.$(DIST_NPM_PLATFORM).node
	$(PYTHON) tools/dist/node_packages.py --out $(DIST) \
	  --addon $(DIST_NPM_PLATFORM)=$(DIST_BUILD)/node/agentbreaker.$(DIST_NPM_PLATFORM).node

# $(call dist_lua_module,<cargo feature>): one module, copied away before the next build
# overwrites it (mlua allows one Lua per build).
define dist_lua_module
	$(DIST_ZIGBUILD) zigbuild --locked --profile dist -p agentbreaker-lua --features $(1) \
	  --target $(DIST_ZIG_TARGET)
	install -D -m 0755 $(DIST_OUT)/libagentbreaker_lua.so $(DIST_BUILD)/rock/src/native/$(1).so

endef

## Lua: a binary rock with the native module for Lua 5.4, Lua 5.1 and LuaJIT and the loader that
## picks one (lua/dist/): `luarocks make` of the generated rockspec into a staging tree, then
## `luarocks pack` of what it installed.
dist-lua: dist-apt dist-zigbuild
	mkdir -p $(DIST)
	rm -rf $(DIST_BUILD)/rock $(DIST)/$(DIST_ROCK)
	$(foreach feature,lua54 lua51 luajit,$(call dist_lua_module,$(feature)))
	$(PYTHON) tools/dist/glibc.py --max $(DIST_GLIBC) $(DIST_BUILD)/rock/src/native/*.so
	cp lua/dist/agentbreaker.lua $(DIST_BUILD)/rock/src/
	sed 's/@VERSION@/$(DIST_VERSION)/g' lua/dist/agentbreaker.rockspec.in \
	  > $(DIST_BUILD)/rock/src/agentbreaker-$(DIST_VERSION)-1.rockspec
	cd $(DIST_BUILD)/rock/src && luarocks --lua-version 5.1 --tree $(DIST_BUILD)/rock/tree \
	  make agentbreaker-$(DIST_VERSION)-1.rockspec
	cd $(DIST) && luarocks --lua-version 5.1 --tree $(DIST_BUILD)/rock/tree \
	  pack agentbreaker $(DIST_VERSION)-1
	test -f $(DIST)/$(DIST_ROCK)

## C: the library linked against glibc 2.17 (build_lib.py through cargo-zigbuild), the committed
## header (it must be what cbindgen generates), pkg-config files that find their own directory,
## and a Makefile whose `make install PREFIX=...` does what `make install-c` does.
dist-c: dist-apt dist-zigbuild
	mkdir -p $(DIST)
	rm -rf $(DIST_BUILD)/c-stage $(DIST)/$(DIST_C_NAME).tar.gz
	env $(DIST_ENV) CARGO=$(DIST_TOOLS)/bin/cargo-zigbuild $(PYTHON) bindings/c/build_lib.py dist $(DIST_BUILD)/c \
	  --locked --target $(DIST_ZIG_TARGET)
	diff -u include/agentbreaker.h $(DIST_BUILD)/c/agentbreaker.h
	$(PYTHON) tools/dist/glibc.py --max $(DIST_GLIBC) $(DIST_OUT)/libagentbreaker.so
	stage=$(DIST_BUILD)/c-stage/$(DIST_C_NAME); \
	install -d $$stage/include $$stage/lib/pkgconfig && \
	install -m 644 include/agentbreaker.h $$stage/include/ && \
	install -m 755 $(DIST_OUT)/libagentbreaker.so $$stage/lib/ && \
	install -m 644 $(DIST_OUT)/libagentbreaker.a $$stage/lib/ && \
	strip --strip-debug $$stage/lib/libagentbreaker.a && \
	install -m 644 tools/dist/c/Makefile tools/dist/c/README.md $$stage/ && \
	for pc in agentbreaker agentbreaker-static; do \
	  sed -e 's|@PREFIX@|$${pcfiledir}/../..|' -e 's|@LIBDIR@|$${prefix}/lib|' \
	      -e 's|@INCLUDEDIR@|$${prefix}/include|' -e 's|@VERSION@|$(DIST_VERSION)|' \
	      -e "s|@NATIVE_STATIC_LIBS@|$$(cat $(DIST_BUILD)/c/native-static-libs)|" \
	      bindings/c/$$pc.pc.in > $$stage/lib/pkgconfig/$$pc.pc; \
	done
	tar -czf $(DIST)/$(DIST_C_NAME).tar.gz --sort=name --owner=0 --group=0 --numeric-owner \
	  -C $(DIST_BUILD)/c-stage $(DIST_C_NAME)

## The CLI: linked against glibc 2.17 (cargo-zigbuild), its glibc symbol versions listed.
dist-cli: dist-apt dist-zigbuild
	mkdir -p $(DIST)
	rm -rf $(DIST_BUILD)/cli-stage $(DIST)/agentbreaker-cli-$(DIST_VERSION)-*.tar.gz
	$(DIST_ZIGBUILD) zigbuild --locked --profile dist -p agentbreaker-cli --target $(DIST_ZIG_TARGET)
	$(PYTHON) tools/dist/glibc.py --max $(DIST_GLIBC) $(DIST_OUT)/agentbreaker
	install -D -m 755 $(DIST_OUT)/agentbreaker $(DIST_BUILD)/cli-stage/$(DIST_CLI_NAME)/agentbreaker
	install -m 644 README.md CHANGELOG.md $(DIST_BUILD)/cli-stage/$(DIST_CLI_NAME)/
	tar -czf $(DIST)/agentbreaker-cli-$(DIST_VERSION)-$(DIST_TRIPLE).tar.gz --sort=name \
	  --owner=0 --group=0 --numeric-owner -C $(DIST_BUILD)/cli-stage $(DIST_CLI_NAME)

## Every artifact of target/dist, installed and smoke-tested without Rust; the sizes.
test-dist: test-dist-meta test-dist-python test-dist-node test-dist-lua test-dist-c test-dist-cli
	@$(DIST_TEST) sizes

## What `make test` runs: the Python and Node artifacts built and tested, and test-dist-meta.
test-dist-quick:
	$(MAKE) --no-print-directory dist-python dist-node
	$(MAKE) --no-print-directory test-dist-meta test-dist-python test-dist-node
	@$(DIST_TEST) sizes

## The versions agree; the tests of tools/dist (the version check and writer, the release
## workflow parsed as YAML and checked); the crates the workflow publishes package (cargo package
## without building them, into target/dist-build/package).
test-dist-meta: $(DIST_TOOLS_STAMP)
	$(PYTHON) tools/dist/versions.py
	$(DIST_PY) -m pytest -q -p no:cacheprovider tools/dist
	$(CARGO) package --quiet --locked --no-verify --allow-dirty -p agentbreaker -p agentbreaker-cli \
	  --target-dir $(DIST_BUILD)

test-dist-python: dist-apt
	@$(DIST_TEST) python

test-dist-node: dist-apt
	@$(DIST_TEST) node

test-dist-lua: dist-apt
	@$(DIST_TEST) lua

test-dist-c: dist-apt
	@$(DIST_TEST) c

test-dist-cli: dist-apt
	@$(DIST_TEST) cli

## Not in test-dist (it needs Rust and takes minutes): a wheel built by pip from the sdist alone.
test-dist-sdist: $(DIST_TOOLS_STAMP)
	rm -rf $(DIST_BUILD)/sdist-wheel
	$(DIST_PY) -m pip wheel -q --disable-pip-version-check $(PIP_NO_CACHE) --no-deps \
	  -w $(DIST_BUILD)/sdist-wheel $(DIST)/agentbreaker-$(DIST_VERSION).tar.gz
	ls -l $(DIST_BUILD)/sdist-wheel
