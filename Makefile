# `make demo` and `make test` work from a fresh clone: each creates .venv and installs the
# project with the tested pins (constraints.txt) when missing or out of date.
PYTHON_SYSTEM ?= python3
VENV ?= .venv
PYTHON := $(VENV)/bin/python
INSTALLED := $(VENV)/.fedsim-installed
RESULTS ?= results
PYTEST_ARGS ?=

.PHONY: demo test install clean

install: $(INSTALLED)

$(INSTALLED): setup.cfg pyproject.toml constraints.txt
	test -x $(PYTHON) || $(PYTHON_SYSTEM) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip setuptools wheel
	$(PYTHON) -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $@

demo: $(INSTALLED)
	$(PYTHON) benchmarks/partition_report.py --dataset mnist-5k --out $(RESULTS)/partitions

test: $(INSTALLED)
	$(PYTHON) -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(RESULTS) .pytest_cache .hypothesis build *.egg-info
