# The README's two commands, `make book` and `make test`, and their helpers.
# Everything runs inside a virtual environment made on first use.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Pinned here (a local CPU build on the project's machines); the package itself accepts a range.
TORCH_SPEC ?= torch==2.13.0
# Optional extra index for torch, e.g. the CPU wheel index on a CI runner.
TORCH_INDEX_URL ?=
STAMP := $(VENV)/.installed
JOBS ?= 2

.PHONY: help install book test test-unit test-notebooks test-outputs strip clean

help:
	@echo "make book   build the HTML book into _build/html (executes every notebook, strict)"
	@echo "make test   unit and property tests, nbval over every notebook, the strict book build,"
	@echo "            and nbval re-checking tagged outputs of the executed book"
	@echo "make strip  remove outputs from the notebooks before committing"

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)" $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL))
	$(BIN)/python -m pip install -q -e ".[book,test]"
	touch $(STAMP)

install: $(STAMP)

# The execution cache is keyed on each notebook's code cells only, so a change to the package must
# empty it, or the book would show outputs of the old code.
PACKAGE_STAMP := _build/.package-stamp
$(PACKAGE_STAMP): $(wildcard pe_tutorial/*.py)
	rm -rf _build/.jupyter_cache
	mkdir -p _build && touch $@

# Strict: warnings are errors, and --all re-reads every page so a failing notebook cannot hide behind
# a previous build (unchanged notebooks still come from the execution cache).
book: install $(PACKAGE_STAMP)
	$(BIN)/jupyter-book build . --all -W -n --keep-going

test-unit: install
	$(BIN)/python -m pytest tests -n $(JOBS) -q

# --dist loadfile keeps each notebook in one kernel; nbval runs each notebook from its own folder.
test-notebooks: install
	MPLBACKEND=Agg $(BIN)/python -m pytest book --nbval-lax --nbval-current-env -n $(JOBS) --dist loadfile -q -p no:cacheprovider

# The book build stores every executed notebook in _build/jupyter_execute; running those again with
# nbval compares the cells tagged nbval-check-output against the build's outputs, so a tagged cell
# that is not deterministic fails here.
test-outputs: book
	MPLBACKEND=Agg $(BIN)/python -m pytest _build/jupyter_execute/book --nbval-lax --nbval-current-env -n $(JOBS) --dist loadfile -q -p no:cacheprovider

test: test-unit test-notebooks book test-outputs

strip: install
	$(BIN)/python tools/strip_notebooks.py book

clean:
	rm -rf _build .pytest_cache .hypothesis
