"""The timing methodology, used alike by the CLI (`run`, `sweep`), asv and pytest-benchmark.

Compile apart from steady state (`first_call`, then `measure`: warm-ups, then steady state only),
blocking on every timed call, median and quartiles rather than mean and deviation, RSS high-water
mark: what each means and why, with cold caches, threads and the roofline beside them, is
docs/measuring.md#methodology.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from rnnbench import record


@dataclass(frozen=True)
class TimingConfig:
    warmup: int = 2  # untimed calls after the first (compiling) call
    min_repeats: int = 5
    max_repeats: int = 200
    budget_s: float = 1.0  # stop repeating once this much time was spent (after min_repeats)


@dataclass(frozen=True)
class Timing:
    """The statistics of timed calls (module docstring), in ms: what a record keeps of a quantity."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    min_ms: float
    max_ms: float
    repeats: int
    samples: tuple[float, ...] = ()  # record.kept_samples of the timed calls, ms, in the order they ran

    @classmethod
    def of(cls, samples_ms: Sequence[float]) -> Timing:
        """The statistics of `samples_ms`, the times of the timed calls in the order they ran."""
        q1, med, q3 = np.percentile(samples_ms, [25, 50, 75])
        low, high = float(min(samples_ms)), float(max(samples_ms))
        return cls(float(med), float(q1), float(q3), low, high, len(samples_ms), record.kept_samples(samples_ms))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "samples": list(self.samples)}


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
    return Timing.of(samples)


def timed_call(fn: Callable[[], Any]) -> tuple[Any, float]:
    """(result, seconds) of one call: used for the first, compiling, call."""
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def first_call(fn: Callable[[], Any], block: Callable[[Any], None]) -> float:
    """Seconds of one blocked call: the first call of a compiled callable (trace + compile + run)."""
    start = time.perf_counter()
    block(fn())
    return time.perf_counter() - start


def peak_rss_mb() -> float:
    """This process's resident-set high-water mark in MiB (ru_maxrss is KiB on Linux)."""
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib / 1024.0 if sys.platform != "darwin" else kib / 2**20
