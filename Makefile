# lomtree: `make demo` and `make test` work on a fresh machine with only Python 3.11 and pip.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.installed
DATA   ?= ../shared/datasets
DEMO   := bench/demo

.PHONY: all install aot dev demo test test-nojit bench bench-quick fuzz data clean

all: test

# editable_mode=compat: a plain path in a .pth file; the default mode's import hook costs every
# command 15-20 ms of start-up. setuptools calls the mode transitional: if it goes, the default.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[test,dask]' --config-settings editable_mode=compat 2>/dev/null || \
		$(PIP) install --quiet -e '.[test,dask]'
	touch $(STAMP)

install: $(STAMP)

# Ahead-of-time kernels (lomtree_cli/aot.py): one extension module, so that commands start without
# importing numba (0.3-0.5 s). Also byte-compiles the package (an editable install does not, and
# with PYTHONDONTWRITEBYTECODE every command would compile its modules again). Without a C
# compiler the build says so and commands use numba's JIT.
aot: $(STAMP)
	$(PY) -m compileall -q lomtree_cli
	$(PY) -m lomtree_cli.aot

# optional extras for benchmarks: Vowpal Wabbit (the yardstick) and matplotlib (plots)
dev: $(STAMP)
	$(PIP) install --quiet -e '.[test,bench]' --config-settings editable_mode=compat 2>/dev/null || \
		$(PIP) install --quiet -e '.[test,bench]'

# The main job on an embedded default: a generated stream with 1,000 classes (no download): classes
# share a 4,000-feature vocabulary, half of each prototype is dropped, Zipf class frequencies.
demo: aot
	mkdir -p $(DEMO)
	$(PY) -m data_scripts.synthetic -k 1000 -n 100000 --seed 1 --noise 0.5 --vocab 4000 --noise-features 6 \
	    --zipf 0.7 --out $(DEMO)/train.vw --test-out $(DEMO)/test.vw --test-n 10000
	$(VENV)/bin/lomtree train -r plt -k 1000 -b 22 $(DEMO)/train.vw -f $(DEMO)/model.lt --report $(DEMO)/train.json
	$(VENV)/bin/lomtree predict -i $(DEMO)/model.lt $(DEMO)/test.vw -p $(DEMO)/preds.txt --report $(DEMO)/test.json
	$(PY) -c "import json; r=json.load(open('$(DEMO)/test.json')); print('held-out error: %.4f on %d examples' % (r['average_loss'], r['examples']))"

test: aot
	$(PY) -m pytest -q -p no:cacheprovider

test-nojit: $(STAMP)
	NUMBA_DISABLE_JIT=1 $(PY) -m pytest -q -p no:cacheprovider -x

# The benchmark suite (configs/*.toml, data_scripts/bench.py): every reduction on every
# dataset (one pass and tuned passes) beside VW's --oaa/--log_multi/--ect, a synthetic k sweep and
# the throughput-vs-VW figures -> bench/results.json, bench/results.md, bench/*.png.
bench: dev aot
	$(PY) -m data_scripts.prepare_all --data-dir $(DATA) --synthetic-k 100 1000 10000 100000
	$(PY) -m data_scripts.bench
	$(PY) -m data_scripts.bench_multilabel --data-dir $(DATA)
	$(PY) -m data_scripts.bench_pypi --data-dir $(DATA)
	$(PY) -m data_scripts.bench_river --out bench/river.json
	$(PY) -m data_scripts.bench_scalar --data-dir $(DATA)

# The same on a small scale for development (under 5 minutes): Sector only, <= 3 passes, k = 100..10,000
# for OAA, LOMtree and Filter tree.
bench-quick: dev aot
	$(PY) -m data_scripts.prepare_all --data-dir $(DATA) --synthetic-k 100 1000 10000
	$(PY) -m data_scripts.bench --quick

# Parser fuzzing (not part of `make test`): atheris, coverage-guided, FUZZ_RUNS inputs per
# parser (VW, LIBSVM); every input is also checked against the pure-Python reference parser.
# New corpus entries go to bench/fuzz/corpus-*, crashes to bench/fuzz/.
FUZZ_RUNS ?= 100000
# and FUZZ_MODELS crafted model files through inspect, predict and train -i (fuzz/models.py)
FUZZ_MODELS ?= 300
fuzz: $(STAMP)
	$(PIP) install --quiet -e '.[test,fuzz]'
	mkdir -p bench/fuzz/corpus-vw bench/fuzz/corpus-libsvm
	$(PY) -m fuzz.fuzz_parsers --target vw -atheris_runs=$(FUZZ_RUNS) -max_len=1024 -timeout=20 \
	    -dict=fuzz/parsers.dict -artifact_prefix=bench/fuzz/ bench/fuzz/corpus-vw fuzz/seeds/vw
	$(PY) -m fuzz.fuzz_parsers --target libsvm -atheris_runs=$(FUZZ_RUNS) -max_len=1024 -timeout=20 \
	    -dict=fuzz/parsers.dict -artifact_prefix=bench/fuzz/ bench/fuzz/corpus-libsvm fuzz/seeds/libsvm
	$(PY) -m data_scripts.fuzz_campaign -n 0 --models $(FUZZ_MODELS) --json bench/fuzz/models.json

data: $(STAMP)
	$(PY) -m data_scripts.prepare_all --data-dir $(DATA)
	$(PY) -m data_scripts.pypi_tasks --data-dir $(DATA) --out-dir bench/data/pypi

clean:
	rm -rf $(VENV) bench/data bench/demo build *.egg-info
