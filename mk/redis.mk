# Shared state in Redis (issue 19, contract §12, docs/distributed.md): a FailureBreaker whose state
# lives in Redis, tested against a real redis-server (Debian's package, installed when missing).
#
#   make test-redis         the store tests (sharing, round trips per call, the server killed,
#                           paused with SIGSTOP, restarted empty, its scripts flushed; bad URLs,
#                           wrong passwords, keys of another type, TLS, the password never shown),
#                           8 processes x 10 000 outcomes on one key, 8 processes through a round
#                           of faults, and the conformance suite's `failure` part with its state in
#                           Redis; the same for a Monitor's budget counters (redis_monitor*.rs: 8
#                           processes x 10 000 events on one tenant's task, the cap fleet-wide;
#                           the conformance suite's `monitor` part with its counters in Redis).
#                           Every test starts its own server on a free loopback port with a
#                           temporary folder and stops it at its end, also when it fails; the
#                           conformance run gets one from tools/with_redis.sh.
#   make test-python-redis  the same from Python: FailureBreaker(store=..., key=...) and
#                           Monitor(store=..., key=...), the GIL released for every round trip, the
#                           password never shown (python/tests/test_redis.py), the Python
#                           conformance runner with the `failure` part's state in Redis, and a
#                           smoke run of bench-python-redis
#   make lint-redis         clippy of the core without the `redis` feature (warnings are errors)
#   make reliability-redis  the long forms: 8 x 100 000 outcomes, 10 rounds of faults, the store
#                           tests 5 times over
#   make bench-redis        the store's throughput across 8 processes beside redis-benchmark's
#                           EVALSHA rate on the same server: target/bench/redis.jsonl
#   make bench-python-redis a guarded call from Python through a Redis-backed FailureBreaker
#                           beside pybreaker with CircuitRedisStorage (redis-py) on the same
#                           server: target/bench/python-redis.jsonl
#   make test-c-redis       the store keys of the C config JSON against a real server
#                           (tests/c/redis_test.c, under valgrind)
#   make test-node-redis    the same from Node: new FailureBreaker({store, key}) and new
#                           Monitor({store, key}) in two processes on one key, the CLOSED hot path
#                           answered with the server paused, bad configs, a refused password
#                           (node/test/redis.js; each test starts its own server)
#   make test-lua-redis     the same from Lua (lua/spec/redis_spec.lua) under lua5.4, luajit and
#                           lua5.1, beside one server from tools/with_redis.sh

TEST_TARGETS += test-redis test-python-redis test-c-redis test-node-redis test-lua-redis
LINT_TARGETS += lint-redis
RELIABILITY_TARGETS += reliability-redis
BENCH_TARGETS += bench-redis bench-python-redis

FLEET_OUTCOMES ?= 100000
FAULT_ROUNDS ?= 10
STORE_REPEATS ?= 5

.PHONY: test-redis test-python-redis test-c-redis lint-redis reliability-redis bench-redis \
	bench-python-redis test-node-redis test-lua-redis

test-redis:
	$(call apt_install,redis-server openssl)
	$(CARGO) test -p agentbreaker --test redis_store -- --ignored
	$(CARGO) test -p agentbreaker --test redis_fleet -- --ignored --test-threads=1 --nocapture
	$(CARGO) test -p agentbreaker --test redis_monitor -- --ignored
	$(CARGO) test -p agentbreaker --test redis_monitor_fleet -- --ignored --test-threads=1 \
	  --nocapture
	tools/with_redis.sh sh -c 'export AGENTBREAKER_CONFORMANCE_STORE=$$AGENTBREAKER_REDIS_URL; \
	  $(CARGO) test -p agentbreaker --test conformance -- failure/ && \
	  $(CARGO) test -p agentbreaker --test conformance -- monitor/'

## python-test-env (mk/python.mk): the wheel in a fresh virtual environment.
test-python-redis: python-test-env
	$(call apt_install,redis-server)
	AGENTBREAKER_REDIS_TESTS=1 $(PY_TEST_PY) $(PY_PYTEST) $(PY_DIR)/tests/test_redis.py
	tools/with_redis.sh sh -c 'AGENTBREAKER_CONFORMANCE_STORE=$$AGENTBREAKER_REDIS_URL \
	  $(PY_TEST_PY) $(PY_PYTEST) $(PY_DIR)/tests/test_conformance.py -k failure/ && \
	  $(PY_TEST_PY) $(PY_DIR)/bench/bench_python.py --smoke --redis $$AGENTBREAKER_REDIS_URL \
	  --out $(PY_TEST_VENV)/bench-redis-smoke.jsonl'

## c-deps, c-lib and the C variables: mk/c.mk.
test-c-redis: c-deps c-lib
	$(call apt_install,redis-server)
	mkdir -p $(C_BIN)
	$(CC) $(C_CFLAGS) $(C_TESTS)/redis_test.c -o $(C_BIN)/redis_test $(C_DYNAMIC) $(C_TEST_LIBS)
	tools/with_redis.sh $(C_VALGRIND) $(C_BIN)/redis_test

## node (mk/node.mk): the addon.
test-node-redis: node
	$(call apt_install,redis-server)
	cd node && node --test --test-reporter=spec test/redis.js

## lua and lua-deps (mk/lua.mk): the three modules.
test-lua-redis: lua lua-deps
	$(call apt_install,redis-server)
	tools/with_redis.sh sh -c 'cd lua && for v in "5.4 lua5.4" "jit luajit" "5.1 lua5.1"; do \
	  set -- $$v; LUA_CPATH="$(LUA_OUT)/$$1/?.so;;" $$2 $(BUSTED) -o ./libtest_output.lua \
	  spec/redis_spec.lua || exit 1; done'

lint-redis:
	$(CARGO) clippy -p agentbreaker --no-default-features --all-targets -- -D warnings

reliability-redis:
	$(call apt_install,redis-server openssl)
	@echo "== 8 processes x $(FLEET_OUTCOMES) outcomes, $(FAULT_ROUNDS) rounds of faults"
	AGENTBREAKER_FLEET_OUTCOMES=$(FLEET_OUTCOMES) AGENTBREAKER_FLEET_FAULT_ROUNDS=$(FAULT_ROUNDS) \
	  $(CARGO) test -p agentbreaker --test redis_fleet -- --ignored --test-threads=1 --nocapture
	AGENTBREAKER_FLEET_OUTCOMES=$(FLEET_OUTCOMES) AGENTBREAKER_FLEET_FAULT_ROUNDS=$(FAULT_ROUNDS) \
	  $(CARGO) test -p agentbreaker --test redis_monitor_fleet -- --ignored --test-threads=1 \
	  --nocapture
	@echo "== the store tests $(STORE_REPEATS) times"
	for i in $$(seq $(STORE_REPEATS)); do \
	  $(CARGO) test -q -p agentbreaker --test redis_store -- --ignored --nocapture || exit 1; \
	  $(CARGO) test -q -p agentbreaker --test redis_monitor -- --ignored --nocapture || exit 1; \
	done

bench-redis:
	$(call apt_install,redis-server)
	mkdir -p target/bench
	tools/with_redis.sh env AGENTBREAKER_BENCH_OUT=$(CURDIR)/target/bench/redis.jsonl \
	  $(CARGO) bench -p agentbreaker --bench redis

## python-bench-env (mk/python.mk): the release wheel, pybreaker and redis-py.
bench-python-redis: python-bench-env
	$(call apt_install,redis-server)
	mkdir -p target/bench
	tools/with_redis.sh sh -c '$(PY_BENCH_PY) -I $(PY_DIR)/bench/bench_python.py \
	  --redis $$AGENTBREAKER_REDIS_URL --out target/bench/python-redis.jsonl'

