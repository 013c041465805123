# The two commands: `make demo` and `make test`. Each creates or reuses .venv and installs what it needs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# One thread for BLAS/OpenMP: on a 2-core machine two threads collapse when anything else runs.
export OPENBLAS_NUM_THREADS := 1
export OMP_NUM_THREADS := 1

.PHONY: test demo bench clean

$(VENV)/.installed-test: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e '.[test]'
	touch $@

test: $(VENV)/.installed-test
	$(PY) -m pytest -q

demo: $(VENV)/.installed-test
	$(PY) examples/quickstart.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
