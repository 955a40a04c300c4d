# make book | make test | make lab | make paper | make clean     (PRESET=paper|cpu, FRESH=1 are passed on to the notebooks)
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HTML := book/_build/html

export OMP_NUM_THREADS := 1
export PRESET
export FRESH

.PHONY: venv venv-devinterp2 vendor notebooks book test lab paper clean

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -r requirements.txt
	$(PY) -m pip install --no-deps ai2-olmo==0.6.0
	$(PY) -m pip install --no-deps --no-build-isolation -e .
	touch $@

# devinterp 2.0.1 for benchmarks/llc_devinterp2_bench.py: it cannot share .venv with devinterp 1.3.2, so it gets its own
# venv, which sees .venv's packages (torch, plateau_lib) through a .pth file placed after its own site-packages and
# installs only devinterp 2.0.1 and what .venv lacks (zarr, xarray, ...); its devinterp shadows .venv's 1.3.2.
DI2_VENV := .venv-devinterp2
DI2_PY := $(DI2_VENV)/bin/python
DI2_STAMP := $(DI2_VENV)/.installed

venv-devinterp2: $(DI2_STAMP)

$(DI2_STAMP): $(STAMP) Makefile
	test -x $(DI2_PY) || python3 -m venv $(DI2_VENV)
	main=$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \
	own=$$($(DI2_PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \
	echo "import site; site.addsitedir('$$main')" > $$own/zz_main_venv.pth
	$(DI2_PY) -m pip install devinterp==2.0.1
	$(DI2_PY) -c "from importlib.metadata import version; import devinterp, torch, plateau_lib; \
	  assert version('devinterp') == '2.0.1' and '$(DI2_VENV)' in devinterp.__file__, devinterp.__file__"
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

# JupyterLab on a working copy of the notebooks (.cache/lab: citations as author-year text, plateau_lib.book.lab;
# copies you edit there are kept), on this machine only (127.0.0.1), with a fresh token; offline. The venv's Python
# is the notebooks' kernel ("python3"). PORT=8889 make lab picks another port.
PORT ?= 8888
lab: venv
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (plateau-companion .venv)" >/dev/null
	$(PY) -c "from plateau_lib.book import lab; lab.main()"
	@token=$$($(PY) -c 'import secrets; print(secrets.token_hex(16))'); \
	echo "JupyterLab: http://127.0.0.1:$(PORT)/lab?token=$$token  (Ctrl-C stops it)"; \
	$(VENV)/bin/jupyter lab --ip 127.0.0.1 --port $(PORT) --no-browser --notebook-dir .cache/lab \
	  --IdentityProvider.token=$$token --ServerApp.port_retries=0 --LabApp.extension_manager=readonly \
	  $(if $(filter 0,$(shell id -u)),--allow-root)

# The paper-preset runs the pages declare (plateau_lib/<chapter>/presets.py, gathered by plateau_lib/chapters.py) into results/ to commit: all of them on a GPU,
# without one those within 3 CPU-hours each on two workers. LIST=1 lists every run with its status and GPU and
# CPU cost; REPLACE_CPU=1 recomputes paper runs made on a CPU; FORCE_CPU=1 runs everything without a GPU. Without this venv (e.g. a lent GPU with torch): python -m plateau_lib paper
paper: venv
	$(PY) -m plateau_lib paper $(if $(LIST),--list) $(if $(REPLACE_CPU),--replace-cpu) $(if $(FORCE_CPU),--force-cpu)

clean:
	rm -rf book/_build book/figures book/_vendor_js .pytest_cache
