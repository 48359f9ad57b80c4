# All set-up goes through `make`: a fresh machine needs only Python 3.11, Java 17 and make.
# Versions are pinned in pyproject.toml; this file only says how to install them.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
UV_VERSION := 0.13.9

.PHONY: setup demo test test-fast lint typecheck bench-learn bench-quality clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required, found " + sys.version' 
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e ".[dev]"
	@touch $@

## README command one: set up and run the demo on generated data.
demo: setup
	$(BIN)/s3tm demo

## README command two (CI runs this): set up and run every test.
test: setup
	$(BIN)/python -m pytest

test-fast: setup
	$(BIN)/python -m pytest -x -q -m "not realdata"

lint: setup
	$(BIN)/ruff check core schemas spark_jobs s3tm dags tests
	$(BIN)/ruff format --check core schemas spark_jobs s3tm dags tests

typecheck: setup
	$(BIN)/mypy

bench-learn: setup
	$(BIN)/s3tm bench learn

bench-quality: setup
	$(BIN)/s3tm bench quality

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
