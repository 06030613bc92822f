# Two commands on a fresh machine. Both install what they need into one cache dir
# ($(AUTHZBENCH_CACHE), default ~/.cache/authzbench), idempotently, with progress output.
AUTHZBENCH_CACHE ?= $(HOME)/.cache/authzbench
export AUTHZBENCH_CACHE
NOX := $(AUTHZBENCH_CACHE)/venv/bin/nox
PYTHON ?= python3

.PHONY: bench decide test lint perf down

$(NOX):
	@echo "authzbench: bootstrapping nox into $(AUTHZBENCH_CACHE)/venv"
	$(PYTHON) -m venv $(AUTHZBENCH_CACHE)/venv
	PIP_CACHE_DIR=$(AUTHZBENCH_CACHE)/pip $(AUTHZBENCH_CACHE)/venv/bin/pip install -q --progress-bar off nox==2026.10.20

# The main job: generate baseline, start + load the default backends natively, run every scenario, report.
bench: $(NOX)
	$(NOX) -s bench -- $(ARGS)

# The answer for a stated target, e.g. ARGS="--relationships 20M --checks 1000 --changes 10 --freshness no-stale".
decide: $(NOX)
	$(NOX) -s decide -- $(ARGS)

# The tests: unit suite + every backend that runs here, against real servers, on the tiny profile.
test: $(NOX)
	$(NOX) -s tests

lint: $(NOX)
	$(NOX) -s lint

perf: $(NOX)
	$(NOX) -s perf

down: $(NOX)
	$(NOX) -s down
