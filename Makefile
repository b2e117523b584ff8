# lomtree: `make demo` and `make test` work on a fresh machine with only Python 3.11 and pip.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.installed
DATA   ?= ../shared/datasets
DEMO   := bench/demo

.PHONY: all install dev demo test test-nojit bench bench-quick fuzz data clean

all: test

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# optional extras for benchmarks: Vowpal Wabbit (the yardstick) and matplotlib (plots)
dev: $(STAMP)
	$(PIP) install --quiet -e '.[test,bench]'

# The main job on an embedded default: a generated stream with 1,000 classes (no download).
demo: $(STAMP)
	mkdir -p $(DEMO)
	$(PY) -m data_scripts.synthetic -k 1000 -n 100000 --seed 1 --noise 0.2 --out $(DEMO)/train.vw \
	    --test-out $(DEMO)/test.vw --test-n 10000
	$(VENV)/bin/lomtree train -r lomtree -k 1000 -b 22 $(DEMO)/train.vw -f $(DEMO)/model.lt --report $(DEMO)/train.json
	$(VENV)/bin/lomtree predict -i $(DEMO)/model.lt $(DEMO)/test.vw -p $(DEMO)/preds.txt --report $(DEMO)/test.json
	$(PY) -c "import json; r=json.load(open('$(DEMO)/test.json')); print('held-out error: %.4f on %d examples' % (r['average_loss'], r['examples']))"

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider

test-nojit: $(STAMP)
	NUMBA_DISABLE_JIT=1 $(PY) -m pytest -q -p no:cacheprovider -x

bench: dev
	$(PY) -m data_scripts.prepare_all --data-dir $(DATA)
	$(PY) -m data_scripts.bench_foundation --data-dir $(DATA)

bench-quick: dev
	$(PY) -m data_scripts.prepare_all --data-dir $(DATA)
	$(PY) -m data_scripts.bench_foundation --data-dir $(DATA) --quick

data: $(STAMP)
	$(PY) -m data_scripts.prepare_all --data-dir $(DATA)

clean:
	rm -rf $(VENV) bench/data bench/demo build *.egg-info
