# The two commands: `make grade` (build the course and grade the sample class) and `make test`.
# Both set up .venv on first use; nothing needs installing by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
OUT ?= out/sample_class
TIMEOUT ?= 20

.PHONY: install build grade test bench book browser lint clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first, from the exact pin: the CPU build (see README, "Installing").
	$(BIN)/python -m pip install --quiet --disable-pip-version-check torch==2.13.0
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[dev]"
	@touch $(STAMP)

install: $(STAMP)

build: install
	$(BIN)/transformer-course build

grade: build
	$(BIN)/transformer-course grade autograder/submitted --out $(OUT) --timeout $(TIMEOUT)

test: install
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python -m transformer_course.bench

# A static HTML book of the executed solutions: build/book/_build/html/index.html
book: install
	$(BIN)/python -m transformer_course.book

# Chromium for the browser test (tests/test_browser.py); the test skips, saying why, without it.
browser: install
	bash scripts/install_browser.sh

lint: install
	$(BIN)/ruff check .

clean:
	rm -rf build out autograder/source/*/*.ipynb
