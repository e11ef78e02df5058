# Two commands do all set-up:  `make bench` (the default comparison, `--suite quick`) and `make test`.
# Each creates the environment first if it is missing.
# `make bench-all` (every core model, `--suite core`) / `make test-xla` also create the torch 2.9.0 +
# torch_xla environment (~7 GB).
PYTHON   ?= python3
VENV     ?= .venv
BIN       = $(VENV)/bin
XLA_VENV ?= .venv-xla
XLA_BIN   = $(XLA_VENV)/bin
# The runner finds the torch_xla environment's interpreter through this variable.
export RNNBENCH_XLA_PYTHON ?= $(abspath $(XLA_BIN))/python

# Tests that run inside the torch_xla environment (torch 2.9.0); jax and the vendor anchors are main-only.
XLA_TESTS = tests/test_gradients.py tests/test_reference_cases.py tests/test_known_issues.py tests/test_upstream_repros.py tests/test_torch_xla.py \
            tests/test_second_order.py

.PHONY: venv venv-xla bench bench-all test test-slow test-all test-xla lint clean clean-xla

venv: $(VENV)/.installed

# The main environment from its lock (every package pinned with its hashes: requirements/locks/main.lock,
# made from requirements/main.txt and its extras charts, ray and dev): what `make bench` and `make test` need.
$(VENV)/.installed: requirements/locks/main.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q --require-hashes -r requirements/locks/main.lock
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $@

# Resolve the lock files again from requirements/*.txt (uv, pip's package sources).
.PHONY: lock
lock: venv
	$(BIN)/rnnbench env lock main xla

venv-xla: $(XLA_VENV)/.installed

# Created by rnnbench from its entry in src/rnnbench/environments.toml (uv; ~1 min, 7 GB); rebuilt
# when requirements/xla.txt changes.
$(XLA_VENV)/.installed: requirements/xla.txt requirements/locks/xla.lock pyproject.toml | venv
	$(BIN)/rnnbench env create xla
	touch $@

bench: venv
	$(BIN)/rnnbench run

bench-all: venv venv-xla
	$(BIN)/rnnbench run --suite core

# Tests whose subjects are processes, time and the machine (signals and timeouts, two writers, CPU pinning, timing,
# clusters, servers, environments created, compile caches) run alone, after the others, which share
# nothing but read-only files and run on TEST_WORKERS pytest-xdist workers. --durations: the slowest
# tests close each part's output (where CI's time goes).
TEST_WORKERS ?= auto
# An inherited PYTHONDONTWRITEBYTECODE=1 makes every pytest process (each worker, each part, each tier) compile and
# assertion-rewrite every test module again (seconds of each process's start); the tests keep their bytecode (git
# ignores __pycache__).
test test-slow test-xla: export PYTHONDONTWRITEBYTECODE :=
ALONE_TESTS = tests/test_faults.py tests/test_lifetimes.py tests/test_isolation.py tests/test_local_pool.py \
              tests/test_robustness.py tests/test_fuzz_records.py tests/test_ray_executor.py tests/test_threads.py \
              tests/test_roofline.py tests/test_benchmarks.py tests/test_idiomatic.py tests/test_environments.py \
              tests/test_packaging.py tests/test_html_offline.py tests/test_published_charts.py tests/test_gpu_fake.py \
              tests/test_compile_reuse.py tests/test_api_keep_compiles.py tests/test_results_file.py
# `make test` is the fast tier (what a new user runs); `make test-slow` the rest, which CI (.ci/run) runs
# too: the `slow` mark, given in tests/conftest.py (the registry matrix beyond the quick suite, inductor's
# compiles, minutes-long process and study tests). `make test-all` runs both.
test: venv
	$(BIN)/python -m pytest -m "not slow" -n $(TEST_WORKERS) --durations=10 $(addprefix --ignore=,$(ALONE_TESTS))
	$(BIN)/python -m pytest -m "not slow" --durations=10 $(ALONE_TESTS)

test-slow: venv
	$(BIN)/python -m pytest -m slow -n $(TEST_WORKERS) --durations=25 $(addprefix --ignore=,$(ALONE_TESTS))
	$(BIN)/python -m pytest -m slow --durations=25 $(ALONE_TESTS)

test-all: test test-slow

# The torch_xla / torch 2.9.0 tests in their own interpreter, then the cross-environment tests from
# the main one (required here: they fail instead of skipping when the environment is missing).
test-xla: venv venv-xla
	PJRT_DEVICE=CPU $(XLA_BIN)/python -m pytest -n $(TEST_WORKERS) --durations=10 $(XLA_TESTS)
	RNNBENCH_REQUIRE_XLA=1 $(BIN)/python -m pytest -m cross_environment

# ruff (pyproject.toml [tool.ruff]): the lint rules, then whether the tree is formatted as ruff would.
# ruff is pinned in requirements/dev.txt, in the main environment's lock.
lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) results .pytest_cache

clean-xla:
	rm -rf $(XLA_VENV)

# --- asv: the curated set, offline HTML (benchmarks/, docs/measuring.md#asv) ---
# `make asv-curated` compares HEAD with ASV_BASE on the curated set (one driver per mechanism,
# 7-11 minutes a commit on 2 shared cores); `make asv-publish` writes .asv/html and vendors the page's
# scripts so it renders with no network; `make check-html` loads both HTML outputs in headless
# Chromium that can reach only 127.0.0.1 (fails when Chromium is missing: apt-get install chromium).
ASV_BASE ?= HEAD~1
.PHONY: asv-curated asv-publish check-html charts

# Redraw every chart published under docs/ from its committed records (docs/charts.toml).
charts: venv
	$(BIN)/python -m rnnbench.report.site.published docs/charts.toml

# The site, one folder readable offline (docs/site.toml, rnnbench.report.site.build): a results index,
# the report page of each committed records set and of the newest results/run-*.jsonl (after
# `make bench`), every docs/results page, and the asv history when .asv/results holds some
# (published and vendored first). Not committed: it is rebuilt from what is. `make check-html`
# renders it in headless Chromium (tests/test_html_offline.py). It replaces only a folder it made
# (its .rnnbench-site marker; any other non-empty SITE_DIR is refused, untouched), by a rename once
# the new site is whole.
SITE_DIR ?= site
.PHONY: site
site: venv
	@if ls .asv/results/*/*.json >/dev/null 2>&1; then $(MAKE) asv-publish; fi
	$(BIN)/python -m rnnbench.report.site docs/site.toml $(SITE_DIR) $$([ -f .asv/html/index.html ] && echo --asv-html .asv/html)

asv-curated: venv
	$(BIN)/asv continuous --show-stderr -b Curated $(ASV_BASE) HEAD

asv-publish: venv
	$(BIN)/asv publish
	$(BIN)/python benchmarks/offline_html.py vendor .asv/html

check-html: venv
	RNNBENCH_REQUIRE_CHROMIUM=1 $(BIN)/python -m pytest -p no:cacheprovider tests/test_html_offline.py tests/test_safe_outputs.py
	@if [ -f .asv/html/index.html ]; then \
	  $(BIN)/python benchmarks/offline_html.py vendor .asv/html && \
	  $(BIN)/python benchmarks/offline_html.py check .asv/html --expect bench_recurrence; fi

# The idiomatic comparison (docs/measuring.md#the-idiomatic-comparison): each rnnbench mechanism
# against its framework's best idiomatic form of the same math; ~15 minutes on 2 cores. Writes
# docs/results/<date>-idiomatic.{jsonl,md} and -tgrowth.{jsonl,png}.
.PHONY: idiomatic
idiomatic: venv
	$(BIN)/python -m rnnbench.study.idiomatic --out docs/results/$$(date +%F)-idiomatic
