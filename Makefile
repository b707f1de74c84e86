# Two commands set everything up on a fresh machine: `make run` and `make test`.
# Both bootstrap their own virtualenv (.venv) from the pinned requirements files.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: run token test test-unit test-functional test-integration bench lint package templates clean system-deps

$(STAMP): requirements.txt requirements-dev.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade "pip<26.3"  # chalice 1.34 requires pip<26.3
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

# Debian and npm packages the integration tests need (Chromium for browser tests, the corporate IdP).
system-deps:
	@bash infra/scripts/system_deps.sh

run: $(STAMP)
	$(BIN)/python -m infra.local_run

# A fresh 15-minute access token for the demo user of a running `make run` (TOKEN=$$(make -s token)); needs the venv `make run` made.
token:
	@$(BIN)/python -m infra.demo_token

test: lint system-deps
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

# Deployment artefacts for every stage. Lambda runs python3.12 (Amazon Linux 2023, glibc 2.34): duckdb and
# cbor2 ship only manylinux_2_28 wheels, which python3.11's runtime (glibc 2.26) cannot load.
PY_DEPLOY ?= python3.12
STAGES ?= identity-dev platform-dev gateway-dev app-dev workers-dev
package: templates
	$(PY_DEPLOY) -m venv .venv-deploy
	.venv-deploy/bin/pip install --quiet chalice==1.34.0
	for stage in $(STAGES); do .venv-deploy/bin/chalice package --stage $$stage build/package/$$stage || exit 1; done

clean:
	rm -rf $(VENV) .local build .pytest_cache
