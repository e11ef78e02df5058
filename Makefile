# Two commands do all set-up:  `make bench` (the default comparison) and `make test`.
# Each creates the environment first if it is missing.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: venv bench test clean

venv: $(VENV)/.installed

$(VENV)/.installed: requirements/main.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements/main.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $@

bench: venv
	$(BIN)/rnnbench run

test: venv
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) results .pytest_cache
