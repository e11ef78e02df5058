"""`--suite gpu` (rnnbench.suites.GPU): the order its rows run in and the device it needs.

Order: stages, each one (size, dtype, model), cheapest first (T*H, then the suite's dtypes and
models in the order it lists them: float32 before bfloat16, the LSTM, the design card's headline,
before the RNN and the stacked LSTM). Within a stage the drivers run in the suite's order, cheapest
first: vendor layers (no compile), jax's scans (seconds), eager loops, then the compiles that take
a minute or more. Every record is written as its row ends, so a call cut by an outer limit keeps
every row it finished; a stage starts its own workers (a few seconds each), the price of having
every mechanism at the smallest size before any at a larger one.

Limits: the suite's compile budget and timeout (rnnbench.suites.GPU, with their reasons) are
defaults; --compile-budget and --timeout override them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import groupby
from typing import Any

from rnnbench import registry
from rnnbench.errors import InputError
from rnnbench.suites import GPU


def _rank(sequence: Sequence[str], name: str) -> int:
    return sequence.index(name) if name in sequence else len(sequence)


def stage_key(job: Any) -> tuple:
    """(work per step, dtype, model): the order stages run in."""
    sizes = registry.get_model(job.model).sizes_with_defaults(job.sizes)
    return (
        sizes.get("T", 1) * sizes.get("H", 1),
        sizes.get("T", 1),
        _rank(GPU.dtypes, job.dtype),
        _rank(GPU.models, job.model),
        job.model,
        job.dtype,
        sorted(sizes.items()),
    )


def stages(jobs: Iterable[Any]) -> list[list[Any]]:
    """The jobs in stages (stage_key), each stage's jobs in the suite's driver order."""
    ordered = sorted(jobs, key=lambda j: (stage_key(j), _rank(GPU.drivers, j.driver), j.driver))
    return [list(group) for _, group in groupby(ordered, key=stage_key)]


def order(jobs: Iterable[Any]) -> list[Any]:
    """The suite's jobs in the order they run (stages flattened)."""
    return [job for stage in stages(jobs) for job in stage]


def check_jobs(device: str, jobs: Sequence[Any]) -> None:
    """InputError (one line, exit 2) unless `device` is a CUDA device that one of the frameworks of
    the jobs' drivers sees, asked in the jobs' order (the first that sees it ends the check)."""
    if device == "cpu":
        raise InputError("--suite gpu runs on a CUDA GPU: use --device cuda (or another suite on the CPU)")
    reasons = []
    for framework in {id(fw): fw for fw in (registry.get_driver(j.driver).framework for j in jobs)}.values():
        why = framework.available() or framework.device_missing(device)
        if why is None:
            return
        reasons.append(f"{framework.name}: {why}")
    raise InputError(f"--suite gpu --device {device}: no GPU here ({'; '.join(reasons) or 'no framework'})")
