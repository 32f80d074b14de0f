# dmlbook: two commands for readers (make book, make test), a few more for maintainers.
# Everything runs inside .venv, created on first use. constraints.txt pins torch==2.13.0; which
# build of it is installed depends on where pip looks: PyPI's Linux wheel is the CUDA build (plus
# about 15 nvidia-* packages, several GB), PyTorch's CPU index has the CPU build. TORCH_INDEX
# names the index torch comes from (default: the CPU index); `make install TORCH_INDEX=` uses
# plain PyPI (the CUDA 13 build), `TORCH_INDEX=https://download.pytorch.org/whl/cu126` another
# CUDA build. When the index cannot be reached, pip's own configuration decides (a warning says so).

SHELL  := bash
.SHELLFLAGS := -o pipefail -c
PYTHON ?= python3
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.dmlbook-installed
# The cell timeout is wall-clock: only a guard against a hung kernel. A chapter's 45 s of CPU can
# take many minutes of wall time on a busy machine (a timed-out cell is interrupted and fails), so
# the guard is an hour; the CPU budget of each chapter is what `make refresh` enforces.
PYTEST_NOTEBOOKS := --nbval --nbval-current-env --nbval-cell-timeout=3600 --nbval-sanitize-with book/sanitize.cfg
JOBS   ?= 2
# Idle OpenMP threads sleep instead of spinning (two test workers share two cores).
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: help install book check-book test test-quick test-unit test-book refresh lab lint format bench verify-backbones clean \
	coursework grade gpu-check map mutation reading-times soundness

help:
	@echo "make book     install (if needed), execute every chapter into build/book/ and render HTML"
	@echo "make test     install (if needed), run the unit tests and every chapter under nbval"
	@echo "make test-quick  the inner loop: unit tests without the chapters, the browser and slow tests"
	@echo "make check-book  open the rendered book offline in headless Chromium (maths and its errors, no network, links and anchors)"
	@echo "make lab      JupyterLab on your own copy of the student edition, build/lab-student/"
	@echo "make lab EDITION=instructor  the same with the answers (REFRESH=1: copy the book afresh)"
	@echo "make refresh  re-execute chapters in place to refresh stored outputs (CHAPTERS=... for some)"
	@echo "make lint     ruff check and format check"
	@echo "make map     regenerate MAP.md's layer, chapter and module tables and CONTRIBUTING.md's layer list (tests/test_map.py checks them)"
	@echo "make reading-times  recompute the introduction's reading times from the chapters"
	@echo "make mutation  mutation testing of losses, mining, surgery (AREAS=mining ...; long, not in test)"
	@echo "               AREAS=losses ONLY=dmlbook/losses/triplet.py: only those files of the area"
	@echo "make soundness prove_equal's soundness search with 10,000 random statements (not in test)"
	@echo "make bench    CPU benchmarks, results under bench/results/"
	@echo "make gpu-check  on a GPU machine: the prepared GPU measurements (8 min), build/gpu-check/"
	@echo "make verify-backbones  ResNet/BN-Inception against torchvision and the port (downloads them)"
	@echo "make book EDITION=instructor  the book with the exercises' answers shown (default: student)"
	@echo "make coursework  student releases + autograders of every assignment, build/coursework/"
	@echo "make grade SUBMISSIONS=dir  grade a folder of submitted notebooks, each in a sandbox, into CSV"

# One line per package pip collects, then (pip's "Installing collected packages" is silent for
# minutes) how many are in place every 10 s: tools/heartbeat.py.
$(STAMP): pyproject.toml setup.py constraints.txt
	@test -x $(BIN)/python || $(PYTHON) tools/heartbeat.py run "creating $(VENV)" $(PYTHON) -m venv $(VENV)
	@index=""; \
	if [ -n "$(TORCH_INDEX)" ]; then \
		echo "checking that $(TORCH_INDEX) (torch's builds) can be reached, 10 s at most ..."; \
		if $(BIN)/python -c "import urllib.request as u; u.urlopen('$(TORCH_INDEX)/', timeout=10)" 2>/dev/null; \
		then index="--extra-index-url $(TORCH_INDEX)"; echo "torch from $(TORCH_INDEX)"; \
		else echo "warning: $(TORCH_INDEX) cannot be reached: torch comes from pip's configured sources" \
			"(plain PyPI: the CUDA build; see docs/research.md, Install)"; fi; \
	fi; \
	echo "installing dmlbook and its dependencies into $(VENV) (first run: a few minutes) ..."; \
	$(BIN)/python tools/heartbeat.py pip install --disable-pip-version-check --progress-bar off \
		$$index -c constraints.txt -e ".[book,test]"
	@$(BIN)/python tools/heartbeat.py run "checking the install (the first imports compile)" \
		$(BIN)/python -c "import dmlbook, torch, nbval, sympy; print('dmlbook', dmlbook.__version__, '| torch', torch.__version__, '| CUDA build' if torch.version.cuda else '| CPU build')"
	@touch $(STAMP)

install: $(STAMP)

# EDITION=student (default: answers removed, build/book/) or instructor (build/book-instructor/)
EDITION ?= student
book: $(STAMP)
	$(BIN)/python tools/book.py build --edition $(EDITION)

# The rendered book opened in headless Chromium with the network cut off (after `make book`).
check-book: $(STAMP)
	$(BIN)/python tools/book_check.py build/book/_build/html

test: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) --dist loadfile $(PYTEST_NOTEBOOKS) tests book

# The inner loop (docs/maintainers.md): the unit tests without the chapters, the browser and the
# tests marked slow (pyproject.toml's markers). `make test` stays the full gate.
test-quick: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) --dist loadfile -m "not slow" tests

test-unit: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) --dist loadfile tests

test-book: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) --dist loadfile $(PYTEST_NOTEBOOKS) book

# Chapters run on AVX2 kernels, as an ordinary CPU would (KERNELS=native: this CPU's own); the
# 45 s CPU budget it checks is for such a CPU (tools/book.py, "Time budget").
refresh: $(STAMP)
	$(BIN)/python tools/book.py refresh $(if $(KERNELS),--kernels $(KERNELS)) $(CHAPTERS)

# Jupyter refuses to start as root (containers, cloud notebooks) unless told it may.
# tools/jupyter/ (first on JUPYTER_CONFIG_PATH) hides the book's machinery from the file browser.
# JupyterLab serves the reader's working copy, build/lab-$(EDITION)/ (tools/lab.py: the student
# edition without answers by default; made on first use, never overwritten; REFRESH=1 moves it
# aside and copies the book afresh), so the reader's work never lands in book/.
LAB_CONFIG := $(CURDIR)/tools/jupyter
lab: $(STAMP)
	@if [ "$$(id -u)" = 0 ]; then echo "running as root: starting JupyterLab with --allow-root"; fi
	@copy="$$($(BIN)/python tools/lab.py prepare --edition $(EDITION) $(if $(REFRESH),--refresh))" && \
	JUPYTER_CONFIG_PATH="$(LAB_CONFIG)$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
		$(BIN)/jupyter lab "$$copy" $$( [ "$$(id -u)" = 0 ] && echo --allow-root )

# MAP.md's layer, chapter -> module and module -> test tables and CONTRIBUTING.md's layer list,
# regenerated from the sources and tools/layers.py (standard library only: no install needed);
# tests/test_map.py fails while they are stale.
map:
	$(PYTHON) tools/map_tables.py

# The introduction's reading times, computed from the stored chapters (standard library only);
# tests/test_book_teaching.py fails while book/intro.md holds another table.
reading-times:
	$(PYTHON) tools/reading_times.py --write

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(STAMP)
	$(BIN)/python bench/bench_floor.py
	$(BIN)/python bench/bench_recall.py
	$(BIN)/python bench/bench_ms.py
	$(BIN)/python bench/bench_input_pipeline.py

# The GPU check (bench/gpu_check.py): on a GPU machine, from the source tree, with that machine's own
# python3 and torch (no install step, no .venv); at most 8 minutes on one H100, results written as they
# come under GPU_CHECK_OUT. GPU_CHECK_ARGS="--smoke" runs the same parts on the CPU at toy sizes.
GPU_CHECK_OUT ?= build/gpu-check
gpu-check:
	PYTHONPATH=. $(PYTHON) bench/gpu_check.py --out $(GPU_CHECK_OUT) $(GPU_CHECK_ARGS)

# The reference model code, installed beside (not into) the venv: torchvision 0.28 is the release
# built for torch 2.13; neither package is a dependency of dmlbook.
REFS := build/refs
verify-backbones: $(STAMP)
	@test -d $(REFS)/pretrainedmodels || $(BIN)/python -m pip install --quiet --disable-pip-version-check \
		--no-deps --target $(REFS) torchvision==0.28.0 pretrainedmodels==0.7.4
	PYTHONPATH=$(REFS) $(BIN)/python bench/verify_backbones.py

# Coursework (book/91_instructors): otter assign builds each assignment's student release and
# Gradescope-ready autograder (refused when the reference solution fails a test or the release
# leaks a solution), then the student kit. ASSIGNMENTS=... builds some. Grading runs each
# submission in its own bubblewrap sandbox (no network, no view of the tests or the repository)
# under limits: TIMEOUT (seconds per submission, 300), MEMORY (4G), PARALLEL (default: every
# core); ISOLATION=process grades without bubblewrap, with a printed warning (weaker).
coursework: $(STAMP)
	$(BIN)/python tools/coursework.py build $(ASSIGNMENTS)

TIMEOUT ?= 300
MEMORY ?= 4G
ISOLATION ?= sandbox
grade: $(STAMP)
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=folder-of-notebooks [TIMEOUT=300 MEMORY=4G PARALLEL=n PDF=1]"; exit 2; }
	$(BIN)/python tools/coursework.py grade $(SUBMISSIONS) --timeout $(TIMEOUT) --memory $(MEMORY) \
		--isolation $(ISOLATION) $(if $(PARALLEL),--parallel $(PARALLEL)) $(if $(PDF),--pdf)

# Mutation testing (tools/mutation.py, mutmut): each area's code mutated one edit at a time against
# its fast test selection; a survivor must be killed by a test or argued equivalent in
# tools/mutation_equivalent.md. Not part of `make test` (minutes to an hour of CPU per area).
mutation: $(STAMP)
	$(BIN)/python tools/mutation.py $(AREAS) $(if $(ONLY),--only $(ONLY))

# prove_equal's soundness search (issue 38) with 10,000 random statements instead of the suite's
# 2,000: fails on any statement proved that is false or undefined at a point it allows.
soundness: $(STAMP)
	DMLBOOK_SOUNDNESS_EXAMPLES=10000 $(BIN)/python -m pytest -q -n 0 tests/symbolic/test_proofs_soundness.py

clean:
	rm -rf build book/_build .pytest_cache .hypothesis
