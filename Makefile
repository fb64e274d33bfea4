# Two entry points: `make run` (the main job on the local default) and `make test`.
PY := .venv/bin/python
STAMP := .venv/.installed

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

.PHONY: setup run test
setup: $(STAMP)

run: $(STAMP)
	$(PY) -m modelplane plan examples/kind

test: $(STAMP)
	$(PY) -m pytest
