# The two commands: `make grade` (build the course, grade the sample class, check its grades) and `make test`.
# Both set up .venv on first use; nothing needs installing by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
OUT ?= out/sample_class
# Seconds a cell may run when grading: room for a slow or busy machine (a grade is not a speed test).
TIMEOUT ?= 60
# PyTorch's own index serves the CPU-only build; where it cannot be reached, the default index is used.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
PIP := $(BIN)/python -m pip --disable-pip-version-check

.PHONY: install build grade test test-fast bench compat book browser sandbox lint clean gpu

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# torch first, from the exact pin: the CPU build where PyTorch's index is reachable (README, "Set-up").
	@$(PIP) install --quiet --retries 1 --timeout 20 --index-url $(TORCH_INDEX) torch==2.13.0 2>$(VENV)/torch-index.log \
	  || { echo "PyTorch's CPU index ($(TORCH_INDEX)) not reachable: torch==2.13.0 from the default index"; \
	       $(PIP) install --quiet torch==2.13.0; }
	$(PIP) install --quiet -e ".[dev]"
	@touch $(STAMP)

install: $(STAMP)

build: install
	$(BIN)/transformer-course build

# Grades the sample class (with autograder/deadlines.toml), writes the class report (late students, similar
# answers), then checks every score, status, feedback keyword, late penalty and flagged copy against
# autograder/sample_class.toml: a wrong grade, or a notebook the grader failed on, fails it.
grade: build
	$(BIN)/transformer-course grade autograder/submitted --out $(OUT) --timeout $(TIMEOUT) --deadlines autograder/deadlines.toml
	$(BIN)/transformer-course report $(OUT)
	$(BIN)/python -m quality.expected $(OUT)

# Two pytest processes side by side (CONTRIBUTING, "Build, test, commit"; the groups: tests/conftest.py).
PYTEST_PROCESSES ?= 2
XDIST = -n $(PYTEST_PROCESSES) --no-loadscope-reorder

test: install
	$(BIN)/python -m pytest -q $(XDIST)

# The contributor's loop (CONTRIBUTING, "Build, test, commit"): every test that starts no kernel, in a few minutes.
test-fast: install
	COURSE_TEST_FAST=1 $(BIN)/python -m pytest -q -m "not slow and not heavy" $(XDIST)

# BENCH_FLAGS: e.g. --check-only --record FILE (`check` against the notebooks' own cells alone, ~10 min),
# --hostile-only (a hostile class with 1 and 2 workers, and every property test's long profile, ~15 min),
# or --class-only --record FILE (a class of 30 graded by serial nbgrader and by ours, ~60 min).
BENCH_FLAGS ?=
bench: build
	$(BIN)/python -m quality.bench $(BENCH_FLAGS)

# The solution notebooks executed under the oldest and newest torch the course supports
# (environments in .venv-compat/, about 6 GB each where only CUDA builds can be had).
COMPAT_TORCH ?= 2.6.0 2.14.1
COMPAT_PYTHON ?= $(BIN)/python
COMPAT_FLAGS ?=
compat: install
	$(BIN)/python scripts/compat.py --python $(COMPAT_PYTHON) $(COMPAT_FLAGS) $(COMPAT_TORCH)

# The training notebooks' solutions (07, 08) top to bottom on a GPU, `gpu` configuration: logs and figures in
# build/gpu/, the lines docs/benchmarks.md's GPU rows quote printed at the end. GPU_PYTHON must have a CUDA
# build of torch (the .venv holds the CPU build) with sentencepiece, sacrebleu, matplotlib, seaborn and tqdm.
GPU_PYTHON ?= python3
GPU_FLAGS ?=
GPU_SPEED_FLAGS ?=
# Then scripts/gpu_speed.py: the training time to validation BLEU 38, tokens/s, TFLOP/s against the card's peak.
gpu: build
	MULTI30K_DIR=$${MULTI30K_DIR:-$(CURDIR)/../shared/data/multi30k} $(GPU_PYTHON) scripts/gpu_run.py $(GPU_FLAGS)
	MULTI30K_DIR=$${MULTI30K_DIR:-$(CURDIR)/../shared/data/multi30k} $(GPU_PYTHON) scripts/gpu_speed.py $(GPU_SPEED_FLAGS)

# A static HTML book of the executed solutions: build/book/_build/html/index.html
book: install
	$(BIN)/python -m transformer_course.course.book

# Chromium for the browser test (tests/test_browser.py); the test skips, saying why, without it.
browser: install
	bash scripts/install_tool.sh chromium chromium "tests/test_browser.py will skip"

# bubblewrap, the sandbox grading kernels run in (src/transformer_course/grading/kernel/sandbox.py); without it
# the grader runs kernels unsandboxed and says so.
sandbox:
	bash scripts/install_tool.sh bubblewrap bwrap "grading runs unsandboxed"

lint: install
	$(BIN)/ruff check .

clean:
	rm -rf build out autograder/source/*/*.ipynb
