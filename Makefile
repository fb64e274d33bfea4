# Two entry points: `make run` (the main job on the local default) and `make test`.
PY := .venv/bin/python
STAMP := .venv/.installed
# pytest-xdist workers for `make test` and `make unit` (docs/ci.md: 2 vs 3 measured on 2 cores).
TEST_WORKERS ?= 2
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadgroup
# With MODELPLANE_PHASES set (.ci/run sets it), each step's wall time becomes a row of CI's phase
# table (scripts/phases); otherwise the commands run as they are.
PHASE = $(if $(MODELPLANE_PHASES),scripts/phases run '$(1)' --,)

# Once per clone (and again when pyproject.toml changes): a few minutes of downloads, so pip
# says what it fetches instead of staying silent. --no-compile: pip would byte-compile all of
# pulumi-aws and pulumi-gcp (5,555 generated modules, 256 MB of source, most never imported);
# Python compiles what is imported, on first import (docs/ci.md, "Setting up the venv").
$(STAMP): pyproject.toml
	@echo "make: installing the Python packages into .venv (first time only; a few minutes, pip lists each package)"
	test -x $(PY) || python3 -m venv .venv
	$(call PHASE,setup: pip) $(PY) -m pip install -q --upgrade pip
	$(call PHASE,setup: packages) $(PY) -m pip install --progress-bar off --no-compile -e '.[dev]'
	touch $(STAMP)
	@echo "make: .venv is ready (.venv/bin/modelplane, .venv/bin/kubectl, .venv/bin/traefik)"

.PHONY: setup run test tools lint unit
setup: $(STAMP)

# The demo: plan examples/kind, start engines and both Traefik hops on 127.0.0.1,
# split 200 requests through every service, stop everything.
run: $(STAMP)
	@echo "make: the demo: plan examples/kind, start its mock engines and gateways on 127.0.0.1, split 200 requests"
	.venv/bin/modelplane demo examples/kind

# The real Pulumi engine for the engine tests and the control plane for the sim tests:
# built once per machine (cached outside the repository), or the pulumi already on PATH.
# If they cannot be built, those tests skip with the reason, and this says so loudly
# instead of failing the rest.
tools: $(STAMP)
	@$(call PHASE,tools) scripts/bootstrap-tools || { \
	  echo; \
	  echo '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!'; \
	  echo '!!! Some real-engine or sim tools could not be built on this machine.      !!!'; \
	  echo '!!! Their tests (pytest -m engine / -m sim) will be SKIPPED, not run.      !!!'; \
	  echo '!!! See the messages above, docs/engine-tools.md and docs/sim.md.          !!!'; \
	  echo '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!'; \
	  echo; }

# ruff (every Python file of the repository) and mypy (the packages pyproject.toml names,
# strict on modelplane/): any finding fails `make test`, so CI fails on it. mypy's
# incremental cache (.mypy_cache/, ignored by git) keeps a re-run to seconds.
lint: $(STAMP)
	$(call PHASE,lint: ruff) .venv/bin/ruff check .
	$(call PHASE,lint: mypy) $(PY) -m mypy

# The fast loop while editing: unit and property tests only (no real processes, no engine,
# no sim), a couple of minutes. `make test` runs these and everything else.
unit: $(STAMP)
	$(PY) -m pytest $(PYTEST_PARALLEL) tests/unit tests/property -q

# The whole suite on TEST_WORKERS xdist workers (tests/parallel.py groups the modules that share
# processes), then the 25 slowest tests.
test: $(STAMP) lint tools
	$(call PHASE,pytest) $(PY) -m pytest $(PYTEST_PARALLEL) --durations=25
