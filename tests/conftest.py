"""Test parameters are generated from the registries: a new model or driver file is tested by the
existing tests with no edit here. Pairs cover the drivers of the environment running pytest (main,
or the torch_xla one under `make test-xla`); pairs the known-issues registry covers are strict
xfails with the registry id as reason.

Two tiers: `make test` (the fast tier, what a new user runs) checks every concept on the quick suite's
models and eager core drivers; `make test-slow` (CI runs both) holds the rest of the registry matrix and the
tests whose subject is minutes of real work. `slow_reason` says which is which, as data; nothing is skipped."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

from _known_issue_marks import known_issue_marks
from _sizes import halved
from rnnbench import registry
from rnnbench.machine.environments import current, runs
from rnnbench.suites import QUICK


@pytest.fixture(autouse=True)
def _no_inherited_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-xdist's workers set COLUMNS=80 (so would a user's shell): a test sees the width a pipe
    has (none) unless it sets COLUMNS itself, so tables keep every column whichever runner runs it."""
    monkeypatch.delenv("COLUMNS", raising=False)


GRADIENT_DTYPES = ("float64", "float32")
SLOW = pytest.mark.slow
sys.path.insert(0, str(Path(__file__).parent / "plugins"))  # faulty drivers, importable by tests

if current() == "xla":
    # torch's autograd engine sizes its per-device queues at the first backward: the XLA device
    # must exist (torch_xla.device(); importing is not enough) before any plain-torch test runs a
    # backward in this process, or every later XLA backward fails with "INTERNAL ASSERT FAILED ...
    # device_ready_queues_". The runner uses one process per driver, so benchmark rows never mix.
    import torch_xla

    torch_xla.device()


# XLA programs of an unrolled loop whose carry has an elementwise-only path from step to step (the LSTM
# cell state): XLA's fusion makes them grow as T^2 (drivers/jax/loop.py), tens of seconds to compile
# each. The fast tier keeps these drivers on the quick suite's other models.
UNROLLED_XLA_DRIVERS = {"jax_loop", "jax_lax_scan_unroll8"}
CELL_STATE_MODELS = {"lstm", "lstm2"}


# The §1 variants (models/variants.py) change how the carry and the parameters reach the step: the plumbing of
# a recurrence construct (a scan's carry and xs), which is where their registry entries live. A Python loop has
# no such construct: torch_loop runs every variant at both dtypes, and under torch.compile dynamo unrolls the
# same loop, so a variant's compiled graph holds its base model's ops with other graph inputs. There the
# variants run for the quick suite's model families only (every variant kind keeps two or more rows); the rest
# cost an inductor compile each (seconds) and add no mechanism: the CI-time thinning docs/testing.md#tiers names.
UNROLLED_COMPILED_LOOPS = {"torch_loop_compiled"}
VARIANT_SEPARATOR = "@"


# The compiled bug-class drivers (docs/bugs.md §5: ys preallocated and written step by step, by setitem or
# index_put) exist for their buffer write, the same code whatever the step: they run on the quick suite's models
# (matmul RNNs one and two layers deep, an LSTM, a series, a Newton iteration) at a compile each; their eager
# forms keep every model, and torch_loop_compiled compiles every model's step.


@functools.cache
def _meets_a_quick_model(driver_name: str) -> bool:
    driver = registry.get_driver(driver_name)
    return any(driver.supports(registry.get_model(m)) is None for m in QUICK.models)


def thinned_pair(model, driver) -> bool:
    """Not generated: a §1 variant of a model family outside the quick suite on a compiled unrolled loop, and a
    model outside the quick suite on a compiled bug-class driver that runs some quick model (one that runs none, an
    associative scan's, keeps the models it runs)."""
    family, _, variant = model.name.partition(VARIANT_SEPARATOR)
    if family in QUICK.models:
        return False
    if variant and driver.name in UNROLLED_COMPILED_LOOPS:
        return True
    return driver.suite == "bugs" and driver.compiled and _meets_a_quick_model(driver.name)


def slow_pair(model, driver) -> bool:
    """The slow tier holds the pairs outside the quick suite's models on eager core drivers: the other
    models, the bug-class drivers, inductor's compiles (seconds each; the fast tier meets them in the
    README example's test, tests/test_api.py) and the unrolled LSTM programs XLA compiles in T^2."""
    inductor = driver.slow_to_compile
    unrolled_t2 = driver.name in UNROLLED_XLA_DRIVERS and model.name in CELL_STATE_MODELS
    return model.name not in QUICK.models or driver.suite != "core" or inductor or unrolled_t2


def compile_marks(driver_name: str) -> list:
    """[slow] for a driver whose every row is an inductor compile (seconds each), else []: the tier
    rule of slow_pair for tests parametrized by driver alone."""
    return [SLOW] if registry.get_driver(driver_name).slow_to_compile else []


def model_driver_pairs(dtypes: tuple[str, ...] = ()) -> list:
    """Every (model, driver[, dtype]) this environment can run; inapplicable pairs are left out
    here (anchors on other model families) rather than reported as skips."""
    here = current()
    params = []
    for d in registry.drivers().values():
        if not runs(d, here) or "cpu" not in d.devices:  # GPU-only configurations (CUDA graphs): tests/test_gpu_fake.py
            continue
        for m in registry.models().values():
            if d.supports(m) is not None:
                continue
            if m.suite == "bugs" and d.suite == "bugs":
                continue  # each bug-class case runs on the standard drivers; bug-class drivers on core models
            if thinned_pair(m, d):
                continue
            if m.suite == "bugs" and here != "main" and d.compiled:
                # CI time: outside main, bug-class cases run on the eager torch 2.9.0 drivers (where
                # docs/bugs.md §1 lives); `rnnbench run --suite bugs --environments xla` runs them all.
                continue
            if not dtypes:
                tier = [SLOW] if slow_pair(m, d) else []
                params.append(pytest.param(m.name, d.name, marks=tier, id=f"{m.name}-{d.name}"))
                continue
            case = m.make_case(m.sizes_with_defaults(), 0)
            # Bug-class cases and bug-class drivers (a buffer written step by step, docs/bugs.md §5) target
            # dtype-independent failures: float64 only (CI time); the core drivers run the same ops at float32.
            wanted = dtypes if m.suite == "core" and d.suite == "core" else ("float64",)
            if not set(wanted) & set(d.dtypes):  # e.g. the bf16-autocast drivers: their own dtype
                wanted = d.dtypes
            for dtype in wanted:
                marks = known_issue_marks(d.name, m, case, dtype) + ([SLOW] if slow_pair(m, d) else [])
                params.append(pytest.param(m.name, d.name, dtype, marks=marks, id=f"{m.name}-{d.name}-{dtype}"))
    return params


def thinned_second_order_pair(model, driver) -> bool:
    """Not generated: H v of a model outside the quick suite on a bug-class driver that runs some quick model. Its
    mechanism (a buffer write, a remat policy, the reverse flag, fori_loop's lowering) is the same code whatever the
    step, and the quick models hold both kinds of op a remat policy tells apart (dots: rnn, lstm; elementwise
    only: taylor_exp, newton_sqrt); the core drivers take every model's H v (docs/testing.md#tiers)."""
    return model.name not in QUICK.models and driver.suite == "bugs" and _meets_a_quick_model(driver.name)


def second_order_pairs() -> list:
    """Every (core model, driver with a second-order path) of this environment, at float64 and the
    model's halved sizes (tests/_sizes.py), but the thinned ones (thinned_second_order_pair); pairs a
    second-order registry entry covers are strict xfails."""
    here, params = current(), []
    for d in registry.drivers().values():
        if not runs(d, here) or not d.second_order:
            continue
        for m in registry.models().values():
            if m.suite != "core" or d.supports(m) is not None or thinned_second_order_pair(m, d):
                continue
            case = m.make_case(halved(m), 0)  # the case test_hvp_matches_oracle checks
            marks = known_issue_marks(d.name, m, case, "float64", order=2) + ([SLOW] if slow_pair(m, d) else [])
            params.append(pytest.param(m.name, d.name, marks=marks, id=f"{m.name}-{d.name}"))
    return params


def pytest_generate_tests(metafunc):
    names = set(metafunc.fixturenames)
    if {"second_order_model", "second_order_driver"} <= names:
        metafunc.parametrize(("second_order_model", "second_order_driver"), second_order_pairs())
    elif {"model_name", "driver_name", "gradient_dtype"} <= names:
        metafunc.parametrize(("model_name", "driver_name", "gradient_dtype"), model_driver_pairs(GRADIENT_DTYPES))
    elif {"model_name", "driver_name"} <= names:
        metafunc.parametrize(("model_name", "driver_name"), model_driver_pairs())
    elif "hand_oracle_model_name" in names:  # the core models with a hand-derived gradient (Model.oracle)
        core = [m for m in registry.models().values() if m.suite == "core" and m.oracle is not None]
        metafunc.parametrize(
            "hand_oracle_model_name",
            [pytest.param(m.name, marks=[] if m.name in QUICK.models else [SLOW], id=m.name) for m in core],
        )
    elif "core_model_name" in names:
        core = [m for m in registry.models().values() if m.suite == "core"]
        metafunc.parametrize(
            "core_model_name",
            [pytest.param(m.name, marks=[] if m.name in QUICK.models else [SLOW], id=m.name) for m in core],
        )
    elif "model_name" in names:
        metafunc.parametrize("model_name", list(registry.models()))


# The slow tier beyond the generated pairs, by node id prefix (a file, a test, or one parametrization),
# each with why it takes seconds to minutes: `make test-slow` runs them, and CI runs both tiers.
SLOW_TESTS: dict[str, str] = {
    "tests/test_ray_executor.py": "real local Ray clusters, started and stopped per test",
    "tests/test_robustness.py::test_each_fault_costs_only_its_row": "injected crashes and hangs wait out deadlines",
    "tests/test_robustness.py::test_fuzz_crash_or_hang_costs_only_that_body": "a hang waits out its deadline",
    "tests/test_upstream_repros.py::test_repro_agrees_with_the_registry": "each repro compiles in a fresh process",
    "tests/test_idiomatic.py": "the idiomatic study's quick mode: every mechanism compiled and timed",
    "tests/test_roofline.py::test_no_timed_run_row_exceeds_the_peak": "a timed run of every core driver",
    "tests/test_reliability.py::test_any_bytes_as_a_results_file": "Hypothesis over whole results files",
    "tests/test_reliability.py::test_case": "each of the bad-input matrix's cases is a fresh rnnbench process",
    "tests/test_ci_recipe.py::test_recipe_slowdown_exit_1": "the CI recipe end to end: pytest at two commits",
    "tests/test_ci_recipe.py::test_recipe_gradient_bug_exit_1": "the CI recipe end to end: pytest at two commits",
    "tests/test_ci_recipe.py::test_recipe_nothing_measured_exit_3": "the CI recipe end to end: pytest at two commits",
    "tests/test_ci_recipe.py::test_a_planted_slowdown_is_explained_by_the_profile_difference": (
        "two timed rows, each profiled (torch's profiler starts in seconds)"
    ),
    "tests/test_plants.py": "every plant through run rows, the fuzzer and check_recurrence, at two dtypes",
    "tests/test_faults.py": "real rnnbench processes signalled, killed and resumed",
    "tests/test_lifetimes.py": "compare --commits runs and the peak measurement, ended mid-way",
    "tests/test_bisect.py::test_a_planted_wrong_gradient_is_found_in_log2_steps": (
        "rnnbench bisect: a real run of the rows at each probed commit"
    ),
    "tests/test_bisect.py::test_a_planted_slowdown_is_found_and_said_with_its_speed_up": (
        "rnnbench bisect: a real run of the rows at each probed commit"
    ),
    "tests/test_bisect.py::test_bad_is_not_worse_than_good_is_bad_input": "rnnbench bisect: real runs at GOOD and BAD",
    "tests/test_bisect_layers.py::test_a_gradient_bug_in_inductor_alone_is_attributed_to_inductor": (
        "inductor compiles, its caches off"
    ),
    "tests/test_bisect_layers.py::test_without_the_plant_every_torch_layer_is_ok": "an inductor compile",
    "tests/test_bisect_layers.py::test_jax_layers_run_the_step_op_by_op_then_under_jit": "jax with and without jit",
    "tests/test_isolation.py": "workers crashed and hung on purpose, waiting out deadlines",
    "tests/test_html_offline.py": "the site rendered in headless Chromium",
    "tests/test_published_charts.py::test_redraw_writes_every_output": "every published chart redrawn",
    "tests/test_api.py::test_pytrees_on_every_driver": "a pytree step compiled by every driver",
    # lstm2's hand oracle meets every eager driver in the fast tier's gradient matrix; its finite-difference
    # cross-checks take seconds per loss form (two stacked layers' parameters, ten forward passes each)
    "tests/test_oracles.py::test_oracle_matches_finite_differences[lstm2]": "finite differences over lstm2",
    "tests/test_losses.py::test_hand_oracle_under_every_loss[lstm2-": "finite differences over lstm2, per loss form",
    "tests/test_false_alarms.py::test_error_bounds_cover_the_oracle_error[lstm2]": "finite differences over lstm2",
    "tests/test_known_issues.py::test_a_covered_case_where_the_symptom_cannot_show_is_ok": (
        "check_recurrence on torch_scan_compiled: an inductor compile per loss form"
    ),
    "tests/test_fuzz_records.py::test_killed_campaign_resumes_to_the_uninterrupted_summary": "killed campaigns resumed",
    "tests/test_results_file.py::test_two_runs_on_one_file_one_is_refused_and_nothing_interleaves": "two whole runs",
    "tests/test_environments.py::test_a_config_defines_an_environment_that_is_created_on_first_use_and_reused": (
        "creates a Python environment"
    ),
    "tests/test_packaging.py::test_run_needs_none_of_the_extras": (
        "a real timed run in a fresh process with the extras blocked: workers and the GEMM peak"
    ),
    "tests/test_robustness.py::test_killed_run_resumes_without_redoing_rows": "a real run killed, then resumed",
    "tests/test_packaging.py::test_the_wheel_without_frameworks_answers_version_list_and_bugs": (
        "builds the wheel and installs it into a fresh venv"
    ),
    "tests/test_packaging.py::test_the_wheel_without_a_framework_refuses_its_drivers_naming_the_extra": (
        "the installed wheel of the test above"
    ),
}


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m selection reads the marks
def pytest_collection_modifyitems(items: list) -> None:
    for item in items:
        if any(item.nodeid.startswith(prefix) for prefix in SLOW_TESTS):
            item.add_marker(SLOW)
