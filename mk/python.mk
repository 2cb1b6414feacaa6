# The Python surface (issue 3): the pyo3 crate bindings/python and the package in python/.
#
#   make test-python   build the wheel with maturin, install it into a fresh virtual environment,
#                      run the conformance runner and the API tests against it, check the stubs
#                      against the module (stubtest) and type-check typed code (mypy --strict)
#   make lint-python   rustfmt and clippy (warnings are errors) of the binding crate
#   make mutate-python the suite's mutation check against the Python runner (not in make test)
#
# Only python3 (with venv and pip) and Rust are needed; maturin, pytest and mypy come from PyPI
# into virtual environments under python/ (ignored by python/.gitignore).

PY_DIR := python
PY_BUILD_VENV := $(PY_DIR)/.venv-build
PY_TEST_VENV := $(PY_DIR)/.venv-test
PY_DIST := $(PY_DIR)/dist
PY_TEST_PY := $(PY_TEST_VENV)/bin/python
PY_MYPY := $(PY_TEST_PY) -m mypy --cache-dir=$(PY_DIR)/.mypy_cache

TEST_TARGETS += test-python
LINT_TARGETS += lint-python

.PHONY: test-python lint-python python-wheel

$(PY_BUILD_VENV)/bin/maturin: $(PY_DIR)/requirements-build.txt
	rm -rf $(PY_BUILD_VENV)
	$(PYTHON) -m venv $(PY_BUILD_VENV)
	$(PY_BUILD_VENV)/bin/python -m pip install -q --disable-pip-version-check -r $(PY_DIR)/requirements-build.txt
	touch $@

## The wheel (abi3: one file for every CPython >= 3.9), in python/dist.
python-wheel: $(PY_BUILD_VENV)/bin/maturin
	rm -rf $(PY_DIST)
	cd $(PY_DIR) && .venv-build/bin/maturin build --quiet --interpreter .venv-build/bin/python --out dist

test-python: python-wheel
	rm -rf $(PY_TEST_VENV)
	$(PYTHON) -m venv $(PY_TEST_VENV)
	$(PY_TEST_PY) -m pip install -q --disable-pip-version-check -r $(PY_DIR)/requirements-test.txt
	$(PY_TEST_PY) -m pip install -q --disable-pip-version-check --no-index $(PY_DIST)/agentbreaker-*.whl
	$(PY_TEST_PY) -I -c "import agentbreaker; print('agentbreaker', agentbreaker.__version__)"
	$(PY_TEST_PY) -m pytest -q -p no:cacheprovider $(PY_DIR)/tests
	$(PY_TEST_PY) -m mypy.stubtest --mypy-config-file $(PY_DIR)/pyproject.toml agentbreaker._native
	$(PY_MYPY) --strict -p agentbreaker
	$(PY_MYPY) --strict $(PY_DIR)/tests $(PY_DIR)/examples

lint-python:
	rustfmt --edition 2024 --check bindings/python/src/*.rs
	$(CARGO) clippy -p agentbreaker-python -- -D warnings

## Not part of `make test` (a few minutes): the suite's mutation check (tools/mutate_scenarios.py)
## run against the Python runner, which must fail every scenario whose expectation was changed.
.PHONY: mutate-python
mutate-python: test-python
	AGENTBREAKER_LIBTEST_OUTPUT=1 $(PYTHON) tools/mutate_scenarios.py --runner \
	  "$(CURDIR)/$(PY_TEST_PY) -m pytest -q -p no:cacheprovider $(CURDIR)/$(PY_DIR)/tests/test_conformance.py"
