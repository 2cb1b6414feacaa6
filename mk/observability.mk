# Observability (issue 22, docs/observability.md): the metrics vocabulary's surfaces outside the
# core's own tests.
#
#   make test-observability   the CLI end to end (tests/observability): `run`, `loop` and `hook`
#                             with --metrics-file and `status --prometheus`, their text parsed by
#                             prometheus_client's own parser; `agentbreaker report` pages opened in
#                             a real headless browser (Debian's chromium, installed here) and
#                             checked on a screenshot (Pillow) for the halt marker
#   make test-python-otel     agentbreaker.integrations.otel with the real OpenTelemetry SDK (its
#                             InMemoryMetricReader and InMemorySpanExporter), in its own virtual
#                             environment: the core wheel's test environment has no OpenTelemetry
#   make bench-python-otel    what instrumenting a Monitor costs per observe with no meter provider
#                             configured: target/bench/python-otel.jsonl (after bench-python, whose
#                             release wheel it installs)
#
# The Rust side of the bench (the recorder and the registry per verdict) is in bench-rust.

OBS_DIR := target/observability
OBS_PY := $(OBS_DIR)/venv/bin/python
OTEL_DIR := target/python/otel
OTEL_PY := $(OTEL_DIR)/venv/bin/python
OTEL_BENCH_PY := $(OTEL_DIR)/bench-venv/bin/python

TEST_TARGETS += test-observability test-python-otel
BENCH_TARGETS += bench-python-otel

.PHONY: test-observability test-python-otel bench-python-otel

$(OBS_PY): tests/observability/requirements.txt
	rm -rf $(OBS_DIR)/venv
	$(PYTHON) -m venv $(OBS_DIR)/venv
	$(OBS_PY) -m pip install -q --disable-pip-version-check $(PIP_NO_CACHE) -r tests/observability/requirements.txt
	touch $@

test-observability: $(OBS_PY)
	$(call apt_install,chromium)
	$(CARGO) build -q -p agentbreaker-cli
	AGENTBREAKER_BIN=$(CURDIR)/target/debug/agentbreaker $(OBS_PY) -m pytest -q -p no:cacheprovider \
	  tests/observability

## The wheel of make python-wheel (debug build), the real SDK pinned in
## python/requirements-otel.txt, and the tests in python/tests_otel (outside python/tests, which
## the core test environment runs without OpenTelemetry). mypy checks the otel module only: the
## framework adapters beside it are checked where their frameworks are installed
## (make test-python-integrations).
test-python-otel: python-wheel
	rm -rf $(OTEL_DIR)/venv
	$(PYTHON) -m venv $(OTEL_DIR)/venv
	$(OTEL_PY) $(PY_PIP) -r $(PY_DIR)/requirements-test.txt -r $(PY_DIR)/requirements-otel.txt
	$(OTEL_PY) $(PY_PIP) --no-index $(PY_DIST)/agentbreaker-*.whl
	$(OTEL_PY) $(PY_PYTEST) $(PY_DIR)/tests_otel
	$(OTEL_PY) -m mypy --cache-dir=$(OTEL_DIR)/.mypy_cache --strict -m agentbreaker.integrations.otel
	$(OTEL_PY) -m mypy --cache-dir=$(OTEL_DIR)/.mypy_cache --strict $(PY_DIR)/tests_otel

## opentelemetry-api only (no SDK: no meter provider configured), the release wheel of
## bench-python.
bench-python-otel: bench-python
	rm -rf $(OTEL_DIR)/bench-venv
	$(PYTHON) -m venv $(OTEL_DIR)/bench-venv
	$(OTEL_BENCH_PY) $(PY_PIP) $$(grep -E '^opentelemetry-api==' $(PY_DIR)/requirements-otel.txt)
	$(OTEL_BENCH_PY) $(PY_PIP) --no-index $(PY_BENCH_DIR)/dist/agentbreaker-*.whl
	$(OTEL_BENCH_PY) -I $(PY_DIR)/bench/bench_otel.py --out target/bench/python-otel.jsonl
