#!/usr/bin/env bash
# Installs the release artifacts of target/dist (make dist) the way a user gets them from the
# registries, each into a clean environment with no Rust toolchain on PATH, and runs a smoke test
# in each: the README's one-line check and one guarded call (mk/dist.mk, make test-dist).
#
# usage: tools/dist/test_dist.sh SURFACE...
#   python   a fresh venv, `pip install --only-binary=:all: <wheel>` (never a build), from a temp dir
#   node     a fresh npm project, `npm install --offline` of the two tarballs from an empty cache
#   lua      fresh LuaRocks trees (5.4; 5.1 shared by lua5.1 and LuaJIT), `luarocks install <rock>`
#   c        a C program built with pkg-config against the unpacked tarball (shared and static),
#            and again after the tarball's `make install PREFIX=...`
#   cli      the binary from its tarball in a temp dir: its glibc symbol versions, --version and the
#            README's replay; then `cargo install --path crates/agentbreaker-cli` (with Rust)
#   sizes    wheel, addon and CLI sizes (fails when the wheel is 2 MB or more)
#
# Environment: DIST (default target/dist), VERSION (default: tools/dist/versions.py), PYTHON,
# CI (pip keeps no cache), LUA_SMOKE / LUA_REFUSAL / NODE_SMOKE (the README's checks, from mk/),
# TEST_DIST_PATH (the clean PATH; default /usr/bin:/bin), DIST_TRIPLE / DIST_NPM_PLATFORM /
# DIST_ARCH (the platform's names; default x86-64 Linux).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PYTHON=${PYTHON:-python3}
DIST=$(cd "${DIST:-target/dist}" && pwd)
VERSION=${VERSION:-$("$PYTHON" tools/dist/versions.py)}
PLATFORM_NPM=${DIST_NPM_PLATFORM:-linux-x64-gnu}
TRIPLE=${DIST_TRIPLE:-x86_64-unknown-linux-gnu}
ARCH=${DIST_ARCH:-linux-x86_64}
GLIBC_MAX=2.17
WHEEL_LIMIT=2000000
NODE_SMOKE=${NODE_SMOKE:-"const ab = require('agentbreaker'); console.log(new ab.FailureBreaker().getStatus().state)"}
LUA_SMOKE=${LUA_SMOKE:-'local cb = require("agentbreaker").CircuitBreaker.new(); for i=1,5 do cb:recordFailure("x") end; print(cb:shouldAllowOperation())'}
LUA_REFUSAL=${LUA_REFUSAL:-'false\tCircuit breaker OPEN. 30 seconds remaining in cooldown. 5 consecutive failures detected. Human intervention required.'}
PIP_NO_CACHE=${CI:+--no-cache-dir}

TMP=$(mktemp -d /tmp/agentbreaker-test-dist.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# The clean environment: nothing of ours (no ~/.cargo/bin, no pyenv, no HOME with caches), only
# the system's /usr/bin and /bin (TEST_DIST_PATH: the release workflow adds the folder of its node).
CLEAN_PATH=${TEST_DIST_PATH:-/usr/bin:/bin}
no_rust() {
  env -i PATH="$CLEAN_PATH" HOME="$TMP/home" TMPDIR="$TMP" LANG=C.UTF-8 ${CI:+CI=true} "$@"
}
mkdir -p "$TMP/home"
if no_rust sh -c 'command -v cargo || command -v rustc || command -v rustup'; then
  echo "test-dist: a Rust toolchain is on $CLEAN_PATH; the artifacts cannot be tested without one" >&2
  exit 1
fi

artifact() { # the one file of target/dist matching a glob
  local found=("$DIST"/$1)
  if [ ! -f "${found[0]}" ] || [ "${#found[@]}" -ne 1 ]; then
    echo "test-dist: expected one $1 in $DIST (run make dist): ${found[*]}" >&2
    exit 1
  fi
  echo "${found[0]}"
}

human() { echo "$(numfmt --to=iec-i --suffix=B --format='%.1f' "$1") ($1 bytes)"; }

test_python() {
  local wheel py dir
  wheel=$(artifact "agentbreaker-$VERSION-cp39-abi3-*manylinux*_${ARCH#linux-}.whl")
  artifact "agentbreaker-$VERSION.tar.gz" > /dev/null
  py=$("$PYTHON" -c 'import sys; print(sys.executable)')
  dir=$TMP/python && mkdir -p "$dir"
  echo "== python: $(basename "$wheel") into a fresh venv (no Rust on PATH)"
  no_rust "$py" -m venv "$dir/venv"
  no_rust "$dir/venv/bin/python" -m pip install -q --disable-pip-version-check $PIP_NO_CACHE \
    --only-binary=:all: "$wheel"
  cp tools/dist/smoke/smoke.py "$dir/"
  # The README's one-line check, then the guarded call; -I: nothing from the current directory.
  local printed
  printed=$(cd "$dir" && no_rust venv/bin/python -I -c "import agentbreaker; print(agentbreaker.__version__)")
  [ "$printed" = "$VERSION" ] || { echo "python: printed $printed, not $VERSION" >&2; exit 1; }
  echo "python: the README's check prints $printed"
  (cd "$dir" && no_rust venv/bin/python -I smoke.py "$VERSION")
}

test_node() {
  local main addon dir printed
  main=$(artifact "agentbreaker-$VERSION.tgz")
  addon=$(artifact "agentbreaker-$PLATFORM_NPM-$VERSION.tgz")
  dir=$TMP/node && mkdir -p "$dir/project" "$dir/cache"
  echo "== node: $(basename "$main") and $(basename "$addon") into a fresh project (empty cache, offline, no Rust on PATH)"
  printf '{ "name": "smoke", "version": "1.0.0", "private": true }\n' > "$dir/project/package.json"
  (cd "$dir/project" && no_rust npm install --offline --no-audit --no-fund --no-update-notifier \
    --loglevel=error --cache "$dir/cache" "$addon" "$main")
  printed=$(cd "$dir/project" && no_rust node -e "$NODE_SMOKE")
  [ "$printed" = CLOSED ] || { echo "node: printed $printed, not CLOSED" >&2; exit 1; }
  echo "node: the README's check prints CLOSED"
  [ -f "$dir/project/node_modules/agentbreaker/index.d.ts" ] || { echo "node: no index.d.ts" >&2; exit 1; }
  cp tools/dist/smoke/smoke.js "$dir/project/"
  (cd "$dir/project" && no_rust node smoke.js "$VERSION" "$PLATFORM_NPM")
}

test_lua() {
  local rock dir
  rock=$(artifact "agentbreaker-$VERSION-1.$ARCH.rock")
  dir=$TMP/lua && mkdir -p "$dir"
  cp tools/dist/smoke/smoke.lua "$dir/"
  # One tree per Lua version; Lua 5.1 and LuaJIT share theirs (lib/lua/5.1), as they do in a system
  # tree: the module picks the native library when it is required.
  for version in 5.4 5.1; do
    echo "== lua: $(basename "$rock") into a fresh Lua $version tree (no Rust on PATH)"
    no_rust luarocks --lua-version "$version" --tree "$dir/tree-$version" install "$rock" > "$dir/install-$version.log" \
      || { cat "$dir/install-$version.log"; exit 1; }
    tail -n 1 "$dir/install-$version.log"
  done
  for run in "5.4 lua5.4 lua54" "5.1 lua5.1 lua51" "5.1 luajit luajit"; do
    set -- $run
    (cd "$dir" && lua_run "$1" "$dir/tree-$1" "$2" -e "$LUA_SMOKE") > "$dir/one-liner-$2.out"
    tail -n 1 "$dir/one-liner-$2.out" | grep -qxF "$(printf "$LUA_REFUSAL")" \
      || { cat "$dir/one-liner-$2.out"; echo "$2: not the seed's refusal" >&2; exit 1; }
    echo "$2: the README's one-line check prints the seed's refusal"
    (cd "$dir" && lua_run "$1" "$dir/tree-$1" "$2" smoke.lua "$3" "$VERSION")
  done
}

# $1: the Lua version, $2: the tree, then the command: run as a user does after
# `eval "$(luarocks --tree TREE path)"`.
lua_run() {
  no_rust bash -c 'version=$1 tree=$2; shift 2; eval "$(luarocks --lua-version "$version" --tree "$tree" path)"; exec "$@"' \
    lua_run "$@"
}

c_example() { # $1: a name, $2: PKG_CONFIG_PATH, $3: the lib dir (rpath)
  local out=$TMP/c/example-$1
  no_rust PKG_CONFIG_PATH="$2" sh -c "cc -std=c11 -Wall -Wextra -Werror -pedantic tests/c/example.c \
    -o '$out-dynamic' \$(pkg-config --cflags --libs agentbreaker) -Wl,-rpath,'$3'"
  no_rust PKG_CONFIG_PATH="$2" sh -c "cc -std=c11 -Wall -Wextra -Werror -pedantic tests/c/example.c \
    -o '$out-static' \$(pkg-config --cflags --libs agentbreaker-static)"
  if ldd "$out-static" | grep -q libagentbreaker; then
    echo "c: example-$1-static is linked to the shared library" >&2; exit 1
  fi
  for link in dynamic static; do
    no_rust "$out-$link" > "$out-$link.txt"
    grep -q "^attempt 4 refused: CIRCUIT_OPEN: Circuit breaker OPEN. 30 seconds remaining" "$out-$link.txt" \
      || { cat "$out-$link.txt"; echo "c: example-$1-$link did not stop at attempt 4" >&2; exit 1; }
  done
  echo "c ($1): the README's example, linked with pkg-config (shared, static), stops at attempt 4"
}

test_c() {
  local tarball dir unpacked prefix
  tarball=$(artifact "agentbreaker-c-$VERSION-$ARCH.tar.gz")
  dir=$TMP/c && mkdir -p "$dir/unpacked"
  echo "== c: $(basename "$tarball") unpacked (no Rust on PATH)"
  tar -xzf "$tarball" -C "$dir/unpacked"
  unpacked=$dir/unpacked/agentbreaker-c-$VERSION-$ARCH
  local modversion
  modversion=$(no_rust PKG_CONFIG_PATH="$unpacked/lib/pkgconfig" pkg-config --modversion agentbreaker)
  [ "$modversion" = "$VERSION" ] || { echo "c: pkg-config says $modversion" >&2; exit 1; }
  c_example unpacked "$unpacked/lib/pkgconfig" "$unpacked/lib"
  "$PYTHON" tools/dist/glibc.py --max "$GLIBC_MAX" "$unpacked/lib/libagentbreaker.so"
  prefix=$dir/prefix
  no_rust make -s -C "$unpacked" install PREFIX="$prefix"
  local installed expected
  installed=$(cd "$prefix" && find . -type f | sort | tr '\n' ' ')
  expected="./include/agentbreaker.h ./lib/libagentbreaker.a ./lib/libagentbreaker.so ./lib/pkgconfig/agentbreaker-static.pc ./lib/pkgconfig/agentbreaker.pc "
  [ "$installed" = "$expected" ] || { echo "c: make install wrote $installed" >&2; exit 1; }
  grep -qx "prefix=$prefix" "$prefix/lib/pkgconfig/agentbreaker.pc" || { echo "c: prefix not written" >&2; exit 1; }
  echo "c: make install PREFIX=... installs what make install-c installs"
  c_example installed "$prefix/lib/pkgconfig" "$prefix/lib"
}

test_cli() {
  local tarball dir bin printed rc
  tarball=$(artifact "agentbreaker-cli-$VERSION-$TRIPLE.tar.gz")
  dir=$TMP/cli && mkdir -p "$dir"
  echo "== cli: $(basename "$tarball") in a temp dir (no Rust on PATH)"
  tar -xzf "$tarball" -C "$dir"
  bin=$dir/agentbreaker-$VERSION-$TRIPLE/agentbreaker
  "$PYTHON" tools/dist/glibc.py --max "$GLIBC_MAX" "$bin"
  cp "$bin" examples/runaway-tool-calls.jsonl "$dir/"
  printed=$(cd "$dir" && no_rust ./agentbreaker --version)
  [ "$printed" = "agentbreaker $VERSION" ] || { echo "cli: --version printed $printed" >&2; exit 1; }
  # The README's main job: the runaway research agent would have been stopped by its budget at its
  # 201st tool call (replay exits 0 whenever the analysis ran, docs/cli.md).
  (cd "$dir" && no_rust ./agentbreaker replay runaway-tool-calls.jsonl) > "$dir/replay.out" 2>&1 && rc=0 || rc=$?
  [ "$rc" -eq 0 ] && grep -q "stopped by rule tool_call_limit: tool calls: 201 of 200" "$dir/replay.out" \
    || { cat "$dir/replay.out"; echo "cli: replay exited $rc" >&2; exit 1; }
  echo "cli: $printed; the README's replay stops the runaway agent at its 201st tool call"
  echo "== cli: cargo install --path crates/agentbreaker-cli (with Rust, into a temp root)"
  cargo install --quiet --locked --path crates/agentbreaker-cli --root "$dir/cargo-root" \
    --target-dir "${CARGO_TARGET_DIR:-$ROOT/target}"
  printed=$(no_rust "$dir/cargo-root/bin/agentbreaker" --version)
  [ "$printed" = "agentbreaker $VERSION" ] || { echo "cli: cargo install gave $printed" >&2; exit 1; }
  echo "cli: cargo install --path crates/agentbreaker-cli installs $printed"
}

test_sizes() {
  local wheel addon cli size
  echo "== sizes"
  if wheel=$(ls "$DIST"/agentbreaker-"$VERSION"-cp39-abi3-*.whl 2>/dev/null); then
    size=$(stat -c %s "$wheel")
    echo "wheel   $(human "$size")  $(basename "$wheel")"
    if [ "$size" -ge "$WHEEL_LIMIT" ]; then
      echo "the wheel is $size bytes: keep it under $WHEEL_LIMIT" >&2; exit 1
    fi
  fi
  if addon=$(ls "$DIST"/agentbreaker-"$PLATFORM_NPM"-"$VERSION".tgz 2>/dev/null); then
    tar -xzf "$addon" -C "$TMP" package/agentbreaker.$PLATFORM_NPM.node
    echo "addon   $(human "$(stat -c %s "$TMP/package/agentbreaker.$PLATFORM_NPM.node")")  agentbreaker.$PLATFORM_NPM.node ($(human "$(stat -c %s "$addon")") packed)"
  fi
  if cli=$(ls "$DIST"/agentbreaker-cli-"$VERSION"-"$TRIPLE".tar.gz 2>/dev/null); then
    tar -xzf "$cli" -C "$TMP" "agentbreaker-$VERSION-$TRIPLE/agentbreaker"
    echo "cli     $(human "$(stat -c %s "$TMP/agentbreaker-$VERSION-$TRIPLE/agentbreaker")")  agentbreaker ($(human "$(stat -c %s "$cli")") packed)"
  fi
  for other in "$DIST"/*.rock "$DIST"/agentbreaker-c-*.tar.gz "$DIST"/agentbreaker-"$VERSION".tar.gz "$DIST"/agentbreaker-"$VERSION".tgz; do
    [ -f "$other" ] && echo "        $(human "$(stat -c %s "$other")")  $(basename "$other")"
  done
  return 0
}

[ $# -gt 0 ] || { echo "usage: $0 python|node|lua|c|cli|sizes..." >&2; exit 2; }
for surface in "$@"; do
  case $surface in
    python|node|lua|c|cli|sizes) "test_$surface" ;;
    *) echo "unknown surface $surface" >&2; exit 2 ;;
  esac
done
