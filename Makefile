# Two commands set everything up on a fresh machine: `make run` and `make test`.
# Both bootstrap their own virtualenv (.venv) from the pinned requirements files.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: run test test-unit test-functional test-integration bench lint package templates clean system-deps

$(STAMP): requirements.txt requirements-dev.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

# Debian and npm packages the integration tests need (Chromium for browser tests, the corporate IdP).
system-deps:
	@bash infra/scripts/system_deps.sh

run: $(STAMP)
	$(BIN)/python -m infra.local_run

test: $(STAMP) system-deps
	$(BIN)/python -m pytest tests

test-unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit

test-functional: $(STAMP)
	$(BIN)/python -m pytest tests/functional

test-integration: $(STAMP) system-deps
	$(BIN)/python -m pytest tests/integration

bench: $(STAMP)
	$(BIN)/python -m bench

lint: $(STAMP)
	$(BIN)/ruff check .

templates: $(STAMP)
	$(BIN)/python -m infra.template build/infra

clean:
	rm -rf $(VENV) .local build .pytest_cache
