# dmlbook: two commands for readers (make book, make test), a few more for maintainers.
# Everything runs inside .venv, created on first use; torch is pinned to the CPU build through
# constraints.txt so that no CUDA wheels are pulled on a CPU machine.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.dmlbook-installed
PYTEST_NOTEBOOKS := --nbval --nbval-current-env --nbval-cell-timeout=300 --nbval-sanitize-with book/sanitize.cfg
JOBS   ?= 2
# Idle OpenMP threads sleep instead of spinning (two test workers share two cores).
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: help install book test test-unit test-book refresh lab lint format bench verify-backbones clean

help:
	@echo "make book     install (if needed), execute every chapter into build/book/ and render HTML"
	@echo "make test     install (if needed), run the unit tests and every chapter under nbval"
	@echo "make lab      JupyterLab on the book"
	@echo "make refresh  re-execute chapters in place to refresh stored outputs (CHAPTERS=... for some)"
	@echo "make lint     ruff check and format check"
	@echo "make bench    CPU benchmarks, results under bench/results/"
	@echo "make verify-backbones  ResNet/BN-Inception against torchvision and the port (downloads them)"

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing dmlbook and its dependencies into $(VENV) (first run: a few minutes) ..."
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[book,test]" 2>&1 \
		| grep -v "^WARNING: Location 'file:" || true
	$(BIN)/python -c "import dmlbook, torch, nbval, sympy; print('dmlbook', dmlbook.__version__, '| torch', torch.__version__)"
	@touch $(STAMP)

install: $(STAMP)

book: $(STAMP)
	$(BIN)/python tools/book.py build

test: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) --dist loadfile $(PYTEST_NOTEBOOKS) tests book

test-unit: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) --dist loadfile tests

test-book: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) --dist loadfile $(PYTEST_NOTEBOOKS) book

refresh: $(STAMP)
	$(BIN)/python tools/book.py refresh $(CHAPTERS)

lab: $(STAMP)
	$(BIN)/jupyter lab book

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(STAMP)
	$(BIN)/python bench/bench_recall.py
	$(BIN)/python bench/bench_ms.py
	$(BIN)/python bench/bench_input_pipeline.py

# The reference model code, installed beside (not into) the venv: torchvision 0.28 is the release
# built for torch 2.13; neither package is a dependency of dmlbook.
REFS := build/refs
verify-backbones: $(STAMP)
	@test -d $(REFS)/pretrainedmodels || $(BIN)/python -m pip install --quiet --disable-pip-version-check \
		--no-deps --target $(REFS) torchvision==0.28.0 pretrainedmodels==0.7.4
	PYTHONPATH=$(REFS) $(BIN)/python bench/verify_backbones.py

clean:
	rm -rf build book/_build .pytest_cache .hypothesis
