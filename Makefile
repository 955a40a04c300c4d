# make book | make test | make clean     (PRESET=paper|cpu, FRESH=1 are passed on to the notebooks)
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HTML := book/_build/html

export OMP_NUM_THREADS := 1
export PRESET
export FRESH

.PHONY: venv vendor notebooks book test clean

venv: $(STAMP)

$(STAMP): requirements.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -r requirements.txt
	touch $@

vendor:
	scripts/vendor_js.sh

notebooks: venv
	$(PY) scripts/run_notebooks.py

book: venv vendor notebooks
	$(VENV)/bin/jupyter-book build . --path-output book -W -n --keep-going
	@echo "book: $(abspath $(HTML))/index.html"

test: venv
	$(PY) -m pytest -q tests

clean:
	rm -rf book/_build book/figures book/_vendor_js .pytest_cache
