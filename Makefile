# Two commands on a fresh machine:  `make run` (set up + start the bot), `make test` (set up + run the tests).
# Both create and use .venv/ in the repo root.
#
# PyTorch: whisper needs torch. `pip install torch==2.13.0` takes the CPU build where a CPU wheel is on
# the pip path (as on our CI machines); the pin is also passed as a constraint so whisper can never pull
# a newer multi-gigabyte CUDA build. With a GPU, choose your own build: `make run TORCH='torch==2.13.0'`
# from the CUDA index, or `make run TORCH=torch`.
#
# faster-whisper (VOICE_ENGINE=faster-whisper) is the optional extra `.[faster]`: installed in a second pip call
# whose failure only prints a line (no wheel for this platform, no network), so the set-up never fails on it.
# Tests: the bot's own modules are compiled once before pytest (pip does not compile an editable install, and three
# workers would each compile them at once); bytecode is written even where the environment says
# PYTHONDONTWRITEBYTECODE (each xdist worker and each bot or runner process a test starts would compile every module
# again, and pytest would rewrite every test's asserts again); one and a half xdist workers per core, and idle workers
# steal queued tests (the long ones otherwise leave one worker busy at the end).
# The Temporal SDK (TASK_ENGINE=temporal) is the optional extra `.[temporal]`, installed the same way.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
TORCH   ?= torch==2.13.0
STAMP   := $(VENV)/.installed
# xdist workers: one and a half per core (much of an e2e test's time is waiting on processes, git and the fakes;
# measured on 2 cores: 130 s with 3 workers, 142 s with 4, 161-167 s with 2)
TEST_JOBS ?= $(shell echo $$(( $$(nproc) * 3 / 2 )))

.PHONY: run test setup system-deps bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	printf '%s\n' '$(TORCH)' > $(VENV)/constraints.txt
	$(BIN)/pip install --disable-pip-version-check -q '$(TORCH)'
	$(BIN)/pip install --disable-pip-version-check -q -c $(VENV)/constraints.txt -e '.[test]'
	$(BIN)/pip install --disable-pip-version-check -q -c $(VENV)/constraints.txt -e '.[faster]' \
		|| echo 'faster-whisper did not install here: VOICE_ENGINE=faster-whisper is unavailable and its tests skip'
	$(BIN)/pip install --disable-pip-version-check -q -c $(VENV)/constraints.txt -e '.[temporal]' \
		|| echo 'temporalio did not install here: TASK_ENGINE=temporal is unavailable and its tests skip'
	touch $@

setup: $(STAMP) system-deps

# Chromium (frontend screenshots) and espeak-ng (speech fixtures) from Debian, where we are allowed to; then the
# frontend worker's browser (chrome-devtools-mcp, pinned, into .tools/) where node/npm and Chromium exist.
# Never fatal: the features and tests that need them say so and skip.
system-deps:
	@sh scripts/install-system-deps.sh || true
	@sh scripts/install-browser.sh || true

run: setup
	$(BIN)/python -m telegram_bot

test: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m tests.js_tools
	$(BIN)/python -m compileall -q -j 0 agents telegram_bot bench
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist worksteal

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV)
