# The Python surface (issue 3): the pyo3 crate bindings/python and the package in python/.
#
#   make test-python           build the wheel with maturin, install it into a fresh virtual
#                              environment, run the conformance runner and the API tests against it
#                              (the bad-input matrix and the panic tests' normal-build half among
#                              them), smoke-run the benchmark, check the stubs against the module
#                              (stubtest) and type-check typed code (mypy --strict)
#   make test-python-panic     the panic boundary: a wheel built with the `test-panic` feature, in
#                              its own virtual environment, must raise InternalError and keep working
#   make test-python-bad-input the bad-input matrix alone (docs/bad-input/python.md)
#   make lint-python           rustfmt and clippy (warnings are errors) of the binding crate
#   make bench-python          a release wheel beside pybreaker, loopguard and a pure-Python breaker:
#                              target/bench/python.jsonl (not in make test; about a minute)
#   make mutate-python         the suite's mutation check against the Python runner (not in make test)
#   make test-python-integrations
#                              the framework adapters (agentbreaker.integrations, issue 17): LangChain,
#                              the OpenAI Agents SDK, pydantic-ai and the Claude Agent SDK from
#                              requirements-integrations.txt in their own virtual environment (the
#                              core wheel's tests above run without them), their tests, examples,
#                              benchmark smoke run and mypy --strict
#   make test-python-integrations-oldest
#                              the adapters' tests against the oldest framework versions the extras
#                              allow (requirements-integrations-oldest.txt)
#   make bench-python-integrations
#                              each adapter's cost per tool call on its framework's test double, with
#                              and without it in one run: target/bench/python-integrations.jsonl
#
# Only python3 (with venv and pip) and Rust are needed; maturin, pytest, mypy and the benchmark's
# peers come from PyPI into virtual environments under python/ (ignored by python/.gitignore) and
# target/python/ (the panic and benchmark builds, kept apart from the normal wheel).

PY_DIR := python
PY_BUILD_VENV := $(PY_DIR)/.venv-build
PY_TEST_VENV := $(PY_DIR)/.venv-test
PY_DIST := $(PY_DIR)/dist
PY_TEST_PY := $(PY_TEST_VENV)/bin/python
PY_MYPY := $(PY_TEST_PY) -m mypy --cache-dir=$(PY_DIR)/.mypy_cache
PY_PIP := -m pip install -q --disable-pip-version-check $(PIP_NO_CACHE)
PY_PYTEST := -m pytest -q -p no:cacheprovider
# The panic-boundary build and the benchmark build: their own wheels and environments.
PY_PANIC_DIR := target/python/panic
PY_PANIC_PY := $(PY_PANIC_DIR)/venv/bin/python
PY_BENCH_DIR := target/python/bench
PY_BENCH_PY := $(PY_BENCH_DIR)/venv/bin/python
# The framework adapters: LangChain v1 and pydantic-ai need Python 3.11 or newer (the wheel itself
# supports 3.9), so their environment may use another interpreter than $(PYTHON).
PYTHON_INTEGRATIONS ?= $(PYTHON)
PY_INT_VENV := $(PY_DIR)/.venv-integrations
PY_INT_PY := $(PY_INT_VENV)/bin/python
PY_INT_OLD_VENV := $(PY_DIR)/.venv-integrations-oldest
PY_INT_BENCH_DIR := target/python/integrations-bench
PY_INT_BENCH_PY := $(PY_INT_BENCH_DIR)/venv/bin/python
# The adapters and their examples import their frameworks: the core environment checks them not.
PY_INT_MODULES := agentbreaker/integrations/(langchain|openai_agents|pydantic_ai|claude_agent_sdk)\.py$$
PY_INT_EXAMPLES := examples/(integrations_[a-z_]+|_fake_claude_cli)\.py$$

TEST_TARGETS += test-python test-python-panic test-python-integrations \
	test-python-integrations-oldest
LINT_TARGETS += lint-python
BENCH_TARGETS += bench-python bench-python-integrations
RELIABILITY_TARGETS += test-python-panic test-python-bad-input

.PHONY: test-python test-python-panic test-python-bad-input python-test-env lint-python \
	python-wheel bench-python python-bench-env test-python-integrations python-integrations-env \
	bench-python-integrations python-integrations-check test-python-integrations-oldest

$(PY_BUILD_VENV)/bin/maturin: $(PY_DIR)/requirements-build.txt
	rm -rf $(PY_BUILD_VENV)
	$(PYTHON) -m venv $(PY_BUILD_VENV)
	$(PY_BUILD_VENV)/bin/python $(PY_PIP) -r $(PY_DIR)/requirements-build.txt
	touch $@

## The wheel (abi3: one file for every CPython >= 3.9), in python/dist. A debug build (maturin's
## default): the tests don't need speed; bench-python builds its own release wheel.
python-wheel: $(PY_BUILD_VENV)/bin/maturin
	rm -rf $(PY_DIST)
	cd $(PY_DIR) && .venv-build/bin/maturin build --quiet --interpreter .venv-build/bin/python --out dist

## A fresh test environment with the wheel, the test tools and the benchmark's peers (for its
## smoke run and its type check).
python-test-env: python-wheel
	rm -rf $(PY_TEST_VENV)
	$(PYTHON) -m venv $(PY_TEST_VENV)
	$(PY_TEST_PY) $(PY_PIP) -r $(PY_DIR)/requirements-test.txt -r $(PY_DIR)/requirements-bench.txt
	$(PY_TEST_PY) $(PY_PIP) --no-index $(PY_DIST)/agentbreaker-*.whl
	$(PY_TEST_PY) -I -c "import agentbreaker; print('agentbreaker', agentbreaker.__version__)"

test-python: python-test-env
	$(PY_TEST_PY) $(PY_PYTEST) $(PY_DIR)/tests
	$(PY_TEST_PY) $(PY_DIR)/bench/bench_python.py --smoke --out $(PY_TEST_VENV)/bench-smoke.jsonl
	$(PY_TEST_PY) $(PY_DIR)/bench/cold_observe.py --smoke
	$(PY_TEST_PY) -m mypy.stubtest --mypy-config-file $(PY_DIR)/pyproject.toml agentbreaker._native
	$(PY_MYPY) --strict -p agentbreaker --exclude '$(PY_INT_MODULES)'
	$(PY_MYPY) --strict $(PY_DIR)/tests $(PY_DIR)/examples $(PY_DIR)/bench \
	  --exclude '$(PY_INT_EXAMPLES)' --exclude 'bench/bench_integrations\.py$$'

## The bad-input matrix alone (it also runs in test-python).
test-python-bad-input: python-test-env
	$(PY_TEST_PY) $(PY_PYTEST) $(PY_DIR)/tests/test_bad_input*.py

## The panic boundary: the core's `test-panic` feature makes `record_failure` (inside the
## breaker's lock) and `analyze` panic on a trigger string; every such call must raise
## InternalError (code INTERNAL) and leave the object working. A separate wheel and environment,
## so the normal wheel stays panic-free (test-python checks that half).
test-python-panic: $(PY_BUILD_VENV)/bin/maturin
	rm -rf $(PY_PANIC_DIR)
	cd $(PY_DIR) && .venv-build/bin/maturin build --quiet --features test-panic \
	  --interpreter .venv-build/bin/python --out $(CURDIR)/$(PY_PANIC_DIR)/dist
	$(PYTHON) -m venv $(PY_PANIC_DIR)/venv
	$(PY_PANIC_PY) $(PY_PIP) -r $(PY_DIR)/requirements-test.txt
	$(PY_PANIC_PY) $(PY_PIP) --no-index $(PY_PANIC_DIR)/dist/agentbreaker-*.whl
	AGENTBREAKER_EXPECT_TEST_PANIC=1 $(PY_PANIC_PY) $(PY_PYTEST) $(PY_DIR)/tests/test_panic*.py

lint-python:
	rustfmt --edition 2024 --check bindings/python/src/*.rs
	$(CARGO) clippy -p agentbreaker-python -- -D warnings
	$(CARGO) clippy -p agentbreaker-python --features test-panic -- -D warnings

## The benchmark environment: a release wheel beside pybreaker, loopguard and redis-py
## (requirements-bench.txt) in a fresh virtual environment (bench-python-redis in mk/redis.mk
## uses it too).
python-bench-env: $(PY_BUILD_VENV)/bin/maturin
	rm -rf $(PY_BENCH_DIR)
	cd $(PY_DIR) && .venv-build/bin/maturin build --release --quiet \
	  --interpreter .venv-build/bin/python --out $(CURDIR)/$(PY_BENCH_DIR)/dist
	$(PYTHON) -m venv $(PY_BENCH_DIR)/venv
	$(PY_BENCH_PY) $(PY_PIP) -r $(PY_DIR)/requirements-bench.txt
	$(PY_BENCH_PY) $(PY_PIP) --no-index $(PY_BENCH_DIR)/dist/agentbreaker-*.whl

## Benchmarks (issue 9): a release wheel, pybreaker and loopguard in one environment; ours and the
## peers measured interleaved in one process. Writes target/bench/python.jsonl.
bench-python: python-bench-env
	$(PY_BENCH_PY) -I $(PY_DIR)/bench/bench_python.py --out target/bench/python.jsonl

## Not part of `make test` (a few minutes): the suite's mutation check (tools/mutate_scenarios.py)
## run against the Python runner, which must fail every scenario whose expectation was changed.
.PHONY: mutate-python
mutate-python: test-python
	AGENTBREAKER_LIBTEST_OUTPUT=1 $(PYTHON) tools/mutate_scenarios.py --runner \
	  "$(CURDIR)/$(PY_TEST_PY) -m pytest -q -p no:cacheprovider $(CURDIR)/$(PY_DIR)/tests/test_conformance.py"

## The framework adapters (issue 17). Their own environment: the wheel, the test tools and the
## pinned frameworks of requirements-integrations.txt (pip keeps no cache under CI).
python-integrations-check:
	@$(PYTHON_INTEGRATIONS) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { \
	  echo "test-python-integrations needs Python 3.11 or newer (LangChain v1, pydantic-ai):" \
	    "$(PYTHON_INTEGRATIONS) is $$($(PYTHON_INTEGRATIONS) -V 2>&1); set PYTHON_INTEGRATIONS=python3.11"; exit 1; }

python-integrations-env: python-wheel python-integrations-check
	rm -rf $(PY_INT_VENV)
	$(PYTHON_INTEGRATIONS) -m venv $(PY_INT_VENV)
	$(PY_INT_PY) $(PY_PIP) -r $(PY_DIR)/requirements-test.txt -r $(PY_DIR)/requirements-integrations.txt
	$(PY_INT_PY) $(PY_PIP) --no-index $(PY_DIST)/agentbreaker-*.whl

## The adapters' tests (each a real agent loop of its framework on the framework's test double,
## no network, no key), the examples (run by the tests), the benchmark's smoke run, and mypy
## --strict over the adapters, their tests and examples (docs/integrations.md: where the
## frameworks' types fall short).
test-python-integrations: python-integrations-env
	$(PY_INT_PY) $(PY_PYTEST) $(PY_DIR)/tests_integrations
	$(PY_INT_PY) $(PY_DIR)/bench/bench_integrations.py --smoke --out $(PY_INT_VENV)/bench-smoke.jsonl
	$(PY_INT_PY) -m mypy --cache-dir=$(PY_DIR)/.mypy_cache-integrations --strict -p agentbreaker.integrations
	cd $(PY_DIR) && .venv-integrations/bin/python -m mypy --cache-dir=.mypy_cache-integrations --strict \
	  tests_integrations examples/integrations_*.py examples/_fake_claude_cli.py bench/bench_integrations.py

## The lower ends of the extras' version ranges: the same tests on the oldest frameworks allowed.
test-python-integrations-oldest: python-wheel python-integrations-check
	rm -rf $(PY_INT_OLD_VENV)
	$(PYTHON_INTEGRATIONS) -m venv $(PY_INT_OLD_VENV)
	$(PY_INT_OLD_VENV)/bin/python $(PY_PIP) -r $(PY_DIR)/requirements-test.txt \
	  -r $(PY_DIR)/requirements-integrations-oldest.txt
	$(PY_INT_OLD_VENV)/bin/python $(PY_PIP) --no-index $(PY_DIST)/agentbreaker-*.whl
	$(PY_INT_OLD_VENV)/bin/python $(PY_PYTEST) $(PY_DIR)/tests_integrations

## Each adapter's cost per tool call, measured on its framework's test double with and without
## it, interleaved in one process, on a release wheel: target/bench/python-integrations.jsonl.
bench-python-integrations: $(PY_BUILD_VENV)/bin/maturin python-integrations-check
	rm -rf $(PY_INT_BENCH_DIR)
	cd $(PY_DIR) && .venv-build/bin/maturin build --release --quiet \
	  --interpreter .venv-build/bin/python --out $(CURDIR)/$(PY_INT_BENCH_DIR)/dist
	$(PYTHON_INTEGRATIONS) -m venv $(PY_INT_BENCH_DIR)/venv
	$(PY_INT_BENCH_PY) $(PY_PIP) -r $(PY_DIR)/requirements-integrations.txt
	$(PY_INT_BENCH_PY) $(PY_PIP) --no-index $(PY_INT_BENCH_DIR)/dist/agentbreaker-*.whl
	mkdir -p target/bench
	$(PY_INT_BENCH_PY) -I $(PY_DIR)/bench/bench_integrations.py --out target/bench/python-integrations.jsonl
