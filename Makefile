# priorwatch — every target a newcomer needs; `make help` lists them.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help install lock test test-fast lint fmt bench run migrate clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# The runtime dependencies at the versions of requirements.lock (what the image
# installs), the dev tools at their latest. The pins go in as constraints without
# their hashes: hashes would turn on pip's hash checking, which an editable
# install cannot pass.
$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	grep -E '^[A-Za-z0-9]' requirements.lock | sed 's/ *\\$$//' > $(VENV)/constraints.txt
	$(BIN)/pip install --quiet -c $(VENV)/constraints.txt -e '.[dev]'
	touch $(STAMP)

install: $(STAMP) ## create .venv and install priorwatch with its dev tools

# requirements.lock pins every runtime and build dependency with its hashes; the
# Dockerfile installs it with --require-hashes. `make lock` keeps the pins that
# still satisfy pyproject.toml (add or remove a dependency, then run it);
# UPGRADE=1 moves every pin to the latest release.
UPGRADE ?=
lock: $(STAMP) ## re-pin requirements.lock from pyproject.toml (UPGRADE=1: latest releases)
	$(BIN)/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras --all-build-deps \
	  --no-emit-index-url --no-emit-find-links $(if $(UPGRADE),--upgrade) \
	  --output-file requirements.lock pyproject.toml

COVERAGE_FLOOR := 98
# line coverage of app/ and the client measured by `make test`, rounded down; raise it, never lower it
CLIENT := clients/python/priorwatch_client

test: $(STAMP) ## the whole suite (doctests of app/ and the client, unit, SQLite and PostgreSQL integration, e2e); coverage floor on app/ and the client, 100% on app/metrics
	$(BIN)/pytest --doctest-modules app $(CLIENT) tests --cov=app --cov=$(CLIENT) --cov-report=term-missing:skip-covered --cov-fail-under=$(COVERAGE_FLOOR)
	@$(BIN)/coverage report --include='app/metrics/*' --fail-under=100 >/dev/null \
	  || { echo "app/metrics must stay at 100% line coverage:"; $(BIN)/coverage report --include='app/metrics/*' --show-missing --skip-covered; exit 1; }

test-fast: $(STAMP) ## unit tests and doctests, without the slow simulations (no database; under a minute)
	$(BIN)/pytest --doctest-modules app $(CLIENT) tests/unit -m "not slow" -q

lint: $(STAMP) ## ruff lint and format check, mypy strict on app/ and the client
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

fmt: $(STAMP) ## apply ruff's fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# BENCH_QUICK=1 make bench: the long scripts on smaller samples (a few minutes in all).
# bench_fleet.py always runs its --quick size here; the full fleet (1,000 models x 10
# segments) is `.venv/bin/python bench/bench_fleet.py`, long on two cores.
BENCH_QUICK ?=
bench: $(STAMP) ## run the benchmarks in bench/ and print figures and ratios (BENCH_QUICK=1: shorter runs)
	@for f in bench/bench_*.py; do \
	  args=""; \
	  case $$f in */bench_fleet.py) args="--quick";; esac; \
	  if [ -n "$(BENCH_QUICK)" ]; then case $$f in \
	    */bench_coverage.py) args="--quick";; \
	    */bench_maturity.py) args="--quick";; \
	    */bench_drift_power.py) args="--trials 50";; \
	    */bench_worker.py) args="--rounds 1";; \
	  esac; fi; \
	  echo "== $$f$${args:+ $$args}"; $(BIN)/python $$f $$args || exit 1; \
	done

migrate: $(STAMP) ## apply migrations to PRIORWATCH_DATABASE_URL (default: ./priorwatch.db)
	$(BIN)/priorwatch migrate

run: $(STAMP) ## migrate the embedded SQLite database and serve the API on 127.0.0.1:8000
	$(BIN)/priorwatch migrate
	$(BIN)/priorwatch serve --host 127.0.0.1 --port 8000

clean: ## remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .coverage
