"""pytest-benchmark: forward+backward of every driver on the RNN and LSTM, grouped by model.

The benchmarked callable is Prepared.loss_and_grads (forward + backward + canonical gradients
read back), and its *returned* value is judged against the float64 oracle with the one tolerance
policy: a wrong gradient fails the test whatever its speed. Gradient error, tolerance, compile
(first call) seconds, threads and driver settings go into extra_info.

Normal runs pass --benchmark-disable (pyproject addopts): each callable runs once, so these stay
as cheap as a gradient test. Timed:
    .venv/bin/python -m pytest tests/test_benchmarks.py --benchmark-enable --benchmark-json=results/benchmark.json
"""

from __future__ import annotations

import os

import pytest

from _known_issue_marks import known_issue_marks
from rnnbench import registry
from rnnbench.run.checked import NotApplicable, prepare_checked, verify

BENCH_MODELS = ("rnn", "lstm")


def bench_pairs() -> list:
    """Pairs the main environment runs, less those a registered upstream bug covers: they have no
    speed to measure (test_gradients holds them as strict xfails)."""
    pairs = []
    for m in BENCH_MODELS:
        model = registry.get_model(m)
        case = model.make_case(model.sizes_with_defaults(), 0)
        for d in registry.drivers().values():
            if "main" in d.environments and d.supports(model) is None and not known_issue_marks(d.name, model, case, "float32"):
                pairs.append(pytest.param(m, d.name, id=f"{m}-{d.name}"))
    return pairs


@pytest.fixture
def one_torch_thread():
    """torch intra-op threads pinned to 1 for the benchmark (restored after): with as many threads
    as cores, a shared machine turns OpenMP barriers into waits of milliseconds. jax's thread pool
    is fixed at import (XLA_FLAGS); it is recorded as it is."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield 1
    torch.set_num_threads(before)


@pytest.mark.parametrize(("bench_model", "bench_driver"), bench_pairs())
def test_fwd_bwd(benchmark, one_torch_thread: int, bench_model: str, bench_driver: str) -> None:
    try:
        check, prepared = prepare_checked(bench_model, bench_driver)
    except NotApplicable as exc:
        pytest.skip(str(exc))
    benchmark.group = f"{bench_model} fwd+bwd (float32, default sizes)"
    model = registry.get_model(bench_model)
    benchmark.extra_info.update(
        model=bench_model,
        driver=bench_driver,
        sizes=model.sizes_with_defaults(),
        dtype="float32",
        first_call_s=check.first_call_s,
        driver_settings={k: str(v) for k, v in prepared.settings.items()},
        torch_threads=_torch_threads(),
        xla_flags=os.environ.get("XLA_FLAGS", ""),
    )
    loss, grads = benchmark(prepared.loss_and_grads)
    judged = verify(bench_model, loss, grads, driver_name=bench_driver)
    benchmark.extra_info.update(max_rel_error=judged.max_rel_error, tolerance=judged.tolerance.max_rel_error,
                                oracle=judged.oracle_kind, status=judged.status)
    assert judged.status == "ok", judged.report


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()
