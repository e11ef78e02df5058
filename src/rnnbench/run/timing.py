"""Steady-state timing: warm up, repeat until a time budget or a count, report median and IQR.

Every timed call ends with `block(result)`, so asynchronous frameworks (jax dispatch, CUDA
queues, lazy torch_xla) are timed to completion, not to the end of dispatch. Means and standard
deviations are not reported: on a shared machine outliers are one-sided, and the median with
quartiles resists them.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np


@dataclass(frozen=True)
class TimingConfig:
    warmup: int = 2  # untimed calls after the first (compiling) call
    min_repeats: int = 5
    max_repeats: int = 200
    budget_s: float = 1.0  # stop repeating once this much time was spent (after min_repeats)


@dataclass(frozen=True)
class Timing:
    median_ms: float
    q1_ms: float
    q3_ms: float
    min_ms: float
    max_ms: float
    repeats: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure(fn: Callable[[], Any], block: Callable[[Any], None], config: TimingConfig) -> Timing:
    for _ in range(config.warmup):
        block(fn())
    samples: list[float] = []
    spent = 0.0
    while len(samples) < config.max_repeats and (len(samples) < config.min_repeats or spent < config.budget_s):
        start = time.perf_counter()
        block(fn())
        elapsed = time.perf_counter() - start
        samples.append(elapsed * 1e3)
        spent += elapsed
    q1, med, q3 = np.percentile(samples, [25, 50, 75])
    return Timing(float(med), float(q1), float(q3), float(min(samples)), float(max(samples)), len(samples))


def timed_call(fn: Callable[[], Any]) -> tuple[Any, float]:
    """(result, seconds) of one call: used for the first, compiling, call."""
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start
