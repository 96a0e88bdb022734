# `make demo` and `make test` work from a fresh clone: each creates .venv and installs the
# project with the tested pins (constraints.txt) when missing or out of date.
PYTHON_SYSTEM ?= python3
VENV ?= .venv
PYTHON := $(VENV)/bin/python
INSTALLED := $(VENV)/.fedsim-installed
RESULTS ?= results
PYTEST_ARGS ?=
# The suite runs on this many worker processes (pytest-xdist), each with one torch thread. Most of
# its time is spent starting processes and waiting on them (torchrun, Flower, Ray), which leaves a
# core idle: two workers keep both of a 2-core machine busy. With torch's default two threads each,
# they oversubscribed it and single tests ran 20 to 60 times slower (OpenMP's threads spin while
# they wait). `TEST_WORKERS=0` runs the suite in one process with torch's default thread count;
# `TEST_THREADS=default` gives each worker torch's default thread count too, its OpenMP threads
# waiting passively (OMP_WAIT_POLICY) rather than spinning while the other worker's run.
TEST_WORKERS ?= 2
TEST_THREADS ?= 1
WORKER_ENV := $(if $(filter 0,$(TEST_WORKERS)),,$(if $(filter default,$(TEST_THREADS)),OMP_WAIT_POLICY=PASSIVE,OMP_NUM_THREADS=$(TEST_THREADS)))
PYTEST := env $(WORKER_ENV) $(PYTHON) -m pytest -n $(TEST_WORKERS) --dist worksteal

# The arithmetics the suite must hold under (DESIGN.md "Numerics"): ATen, MKL and oneDNN each pick their
# kernels by CPU, and the thread count changes the order of sums. `make test-arithmetic ARITHMETIC=plain`
# runs the suite as a machine with other kernels would; PYTEST_ARGS narrows it as for `make test`.
ARITHMETIC ?= machine
ARITHMETIC_ENV_machine :=
ARITHMETIC_ENV_avx2 := ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 ONEDNN_MAX_CPU_ISA=AVX2
ARITHMETIC_ENV_plain := ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE ONEDNN_MAX_CPU_ISA=SSE41 OMP_NUM_THREADS=1
ARITHMETICS := machine avx2 plain

.PHONY: demo test test-arithmetic docs install clean

install: $(INSTALLED)

$(INSTALLED): setup.cfg pyproject.toml constraints.txt
	test -x $(PYTHON) || $(PYTHON_SYSTEM) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip setuptools wheel
	$(PYTHON) -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $@

# The main job: the three strategies compared on mnist-5k under a Dir(0.1) partition of 10 clients.
# Each demo starts afresh: `fedsim compare` refuses to overwrite a folder that holds a run.
demo: $(INSTALLED)
	rm -rf $(RESULTS)/demo
	$(PYTHON) benchmarks/partition_report.py --dataset mnist-5k --out $(RESULTS)/partitions
	$(VENV)/bin/fedsim compare --strategies allreduce,reweighted,fedavg --dataset mnist-5k --model cnn \
		--partition dirichlet --alpha 0.1 --num-partitions 10 --rounds 10 --batch-size 10 --lr 0.05 \
		--out $(RESULTS)/demo

# The site, offline: every warning (a broken cross-reference, a public name without a docstring, a
# page outside the table of contents) is an error; the gallery's scripts run as it builds. `make
# test` builds it first, since a test opens it in a browser.
docs: $(INSTALLED)
	MPLBACKEND=Agg $(PYTHON) -m sphinx -b html -W --keep-going -n -q docs docs/_build/html

test: $(INSTALLED) docs
	$(PYTEST) --durations=10 $(PYTEST_ARGS)

test-arithmetic: $(INSTALLED)
	@case " $(ARITHMETICS) " in *" $(ARITHMETIC) "*) ;; \
	  *) echo "ARITHMETIC must be one of: $(ARITHMETICS); got '$(ARITHMETIC)'" >&2; exit 2;; esac
	@echo "the test suite under the $(ARITHMETIC) arithmetic: $(or $(ARITHMETIC_ENV_$(ARITHMETIC)),the machine's own kernels)"
	env $(ARITHMETIC_ENV_$(ARITHMETIC)) $(PYTEST) $(PYTEST_ARGS)

clean:
	rm -rf $(RESULTS) .pytest_cache .hypothesis build *.egg-info docs/_build docs/gallery
