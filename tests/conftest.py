"""Test parameters are generated from the registries: a new model or driver file is tested by the
existing tests with no edit here. Pairs cover the drivers of the environment running pytest (main,
or the torch_xla one under `make test-xla`); pairs the known-issues registry covers are strict
xfails with the registry id as reason."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from _known_issue_marks import known_issue_marks
from _sizes import halved
from rnnbench import registry
from rnnbench.run.environments import current, runs

GRADIENT_DTYPES = ("float64", "float32")
sys.path.insert(0, str(Path(__file__).parent / "plugins"))  # faulty drivers, importable by tests

if current() == "xla":
    # torch's autograd engine sizes its per-device queues at the first backward: the XLA device
    # must exist (torch_xla.device(); importing is not enough) before any plain-torch test runs a
    # backward in this process, or every later XLA backward fails with "INTERNAL ASSERT FAILED ...
    # device_ready_queues_". The runner uses one process per driver, so benchmark rows never mix.
    import torch_xla

    torch_xla.device()


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
            if m.suite == "bugs" and here != "main" and d.compiled:
                # CI time: outside main, bug-class cases run on the eager torch 2.9.0 drivers (where
                # docs/bugs.md §1 lives); `rnnbench run --suite bugs --environments xla` runs them all.
                continue
            if not dtypes:
                params.append(pytest.param(m.name, d.name, id=f"{m.name}-{d.name}"))
                continue
            case = m.make_case(m.sizes_with_defaults(), 0)
            # Bug-class cases target dtype-independent failures: float64 only (CI time).
            wanted = dtypes if m.suite == "core" else ("float64",)
            if not set(wanted) & set(d.dtypes):  # e.g. the bf16-autocast drivers: their own dtype
                wanted = d.dtypes
            for dtype in wanted:
                marks = known_issue_marks(d.name, m, case, dtype)
                params.append(pytest.param(m.name, d.name, dtype, marks=marks, id=f"{m.name}-{d.name}-{dtype}"))
    return params


def second_order_pairs() -> list:
    """Every (core model, driver with a second-order path) of this environment, at float64 and the
    model's halved sizes (tests/_sizes.py); pairs a second-order registry entry covers are strict
    xfails."""
    here, params = current(), []
    for d in registry.drivers().values():
        if not runs(d, here) or not d.second_order:
            continue
        for m in registry.models().values():
            if m.suite != "core" or d.supports(m) is not None:
                continue
            case = m.make_case(halved(m), 0)  # the case test_hvp_matches_oracle checks
            marks = known_issue_marks(d.name, m, case, "float64", order=2)
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
    elif "core_model_name" in names:
        metafunc.parametrize("core_model_name", [m.name for m in registry.models().values() if m.suite == "core"])
    elif "model_name" in names:
        metafunc.parametrize("model_name", list(registry.models()))
