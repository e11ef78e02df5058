"""`--suite gpu`: the recurrent models at real sizes on one CUDA GPU, planned so that one call of a
few minutes leaves a useful table even with every compile cold.

Rows: LSTM, Elman RNN and the stacked LSTM at T in {256, 1024}, B = 64, I = 256, H in {512, 1024},
float32 and bfloat16, on one driver per mechanism, the cuDNN layers, and the CUDA-graph
configurations of the compiled loop and scan.

Order: stages, each one (size, dtype, model), cheapest first (T*H, then float32 before bfloat16,
then the LSTM, the design card's headline, before the RNN and the stacked LSTM). Within a stage the
drivers run cheapest first: vendor layers (no compile), jax's scans (seconds), eager loops, then
the compiles that take a minute or more. Every record is written as its row ends, so a call cut by
an outer limit keeps every row it finished; a stage starts its own workers (a few seconds each),
the price of having every mechanism at the smallest size before any at a larger one.

Limits: a first call (compile) longer than DEFAULT_COMPILE_BUDGET_S becomes a `timeout` record with
its elapsed time (rnnbench.run.compile_budget); a row longer than DEFAULT_TIMEOUT_S (two compiles,
jax's forward is compiled apart, plus checking and timing) is killed and recorded as `timeout`.
Both are defaults; --compile-budget and --timeout override them. The budget is sized from the cold
first calls measured on an H100 (docs/gpu.md): inductor's scan finishes within it, and an unrolled
compiled loop, whose compile grows with T, is stopped at it instead of taking the call's time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import groupby
from typing import Any

from rnnbench.errors import InputError

MODELS = ("lstm", "rnn", "lstm2")
DTYPES = ("float32", "bfloat16")
SIZES = tuple({"T": T, "B": 64, "I": 256, "H": H} for T in (256, 1024) for H in (512, 1024))
# cheapest first: vendor layers, jax scans, eager loop, unrolled jit loop, inductor (scan, then the unrolled loop)
DRIVERS = (
    "torch_nn_lstm",
    "torch_nn_rnn",
    "jax_lax_scan",
    "flax_scan",
    "torch_loop",
    "jax_loop",
    "torch_scan_compiled",
    "torch_scan_compiled_cudagraphs",
    "torch_loop_compiled",
    "torch_loop_compiled_cudagraphs",
)
DEFAULT_COMPILE_BUDGET_S = 90.0
DEFAULT_TIMEOUT_S = 240.0
SUITE_DEFAULTS = ("device", "dtypes", "timeout", "compile_budget")  # run settings a suite may default


def with_sizes(jobs: Sequence[Any], sizes_given: bool) -> list[Any]:
    """Each job once per SIZES entry, unless the user gave --sizes (then theirs hold)."""
    import dataclasses

    if sizes_given:
        return list(jobs)
    return [dataclasses.replace(job, sizes={**job.sizes, **size}) for size in SIZES for job in jobs]


def _rank(sequence: Sequence[str], name: str) -> int:
    return sequence.index(name) if name in sequence else len(sequence)


def stage_key(job: Any) -> tuple:
    """(work per step, dtype, model): the order stages run in."""
    from rnnbench import registry

    sizes = registry.get_model(job.model).sizes_with_defaults(job.sizes)
    return (
        sizes.get("T", 1) * sizes.get("H", 1),
        sizes.get("T", 1),
        _rank(DTYPES, job.dtype),
        _rank(MODELS, job.model),
        job.model,
        job.dtype,
        sorted(sizes.items()),
    )


def stages(jobs: Iterable[Any]) -> list[list[Any]]:
    """The jobs in stages (stage_key), each stage's jobs in DRIVERS order."""
    ordered = sorted(jobs, key=lambda j: (stage_key(j), _rank(DRIVERS, j.driver), j.driver))
    return [list(group) for _, group in groupby(ordered, key=stage_key)]


def plan(jobs: Sequence[Any], sizes_given: bool) -> list[Any]:
    """The suite's jobs in the order they run (stages flattened)."""
    return [job for stage in stages(with_sizes(jobs, sizes_given)) for job in stage]


def check_device(device: str, frameworks: Iterable[Any]) -> None:
    """InputError (one line, exit 2) unless `device` is a CUDA device one of `frameworks` sees. The
    frameworks are asked in order and the first that sees it ends the check."""
    if device == "cpu":
        raise InputError("--suite gpu runs on a CUDA GPU: use --device cuda (or another suite on the CPU)")
    reasons = []
    for framework in frameworks:
        why = framework.available() or framework.device_missing(device)
        if why is None:
            return
        reasons.append(f"{framework.name}: {why}")
    raise InputError(f"--suite gpu --device {device}: no GPU here ({'; '.join(reasons) or 'no framework'})")


def check_jobs(device: str, jobs: Sequence[Any]) -> None:
    """check_device with the frameworks of the jobs' drivers, in the jobs' order."""
    from rnnbench import registry

    frameworks = {id(fw): fw for fw in (registry.get_driver(j.driver).framework for j in jobs)}
    check_device(device, frameworks.values())


# The suite as `rnnbench run` selects it: the models, drivers and environments on each axis, the
# settings it defaults (SUITE_DEFAULTS; flags and config files override them), and its hooks.
SUITE: dict[str, Any] = {
    "models": MODELS,
    "drivers": DRIVERS,
    "environments": ("main",),
    "device": "cuda",
    "dtypes": ",".join(DTYPES),
    "timeout": DEFAULT_TIMEOUT_S,
    "compile_budget": DEFAULT_COMPILE_BUDGET_S,
    "check_device": check_jobs,
    "plan": plan,
    "stages": stages,
}
