"""The timing methodology, in one module used by the CLI (`run`, `sweep`), asv and pytest-benchmark.

- Compile apart from steady state: the first call of each timed callable is timed on its own
  (`first_call`), it traces and compiles; `measure` then warms up and times steady state only.
- Cold compile: a compile is only "cold" in a fresh process whose on-disk compilation caches are
  off or empty. `cold_cache_env` disables inductor's FX-graph and AOT-autograd caches and points
  its cache dir (generated C++/kernels) at a fresh temp dir, and turns jax's persistent cache off;
  the sweep runs every row in a fresh process with it, so first-call seconds there are cold.
- Blocking: every timed call ends with `block(result)`, so asynchronous frameworks (jax
  dispatch, CUDA queues, lazy torch_xla) are timed to completion, not to the end of dispatch.
- Threads: fixed before import by environment variables (runner) and torch.set_num_threads
  (worker); both are recorded with each row.
- Statistics: median, quartiles, min, max and the number of repeats. Means and standard
  deviations are not reported: on a shared machine outliers are one-sided, and the median with
  quartiles resists them.
- Memory: `peak_rss_mb` is the process RSS high-water mark (getrusage ru_maxrss); in a fresh
  process per row it is that row's peak (frameworks' CPU allocators keep no statistics of their own).
- Roofline: `gemm_peak` measures this machine's float32 GEMM rate once per run; `roofline` turns a
  model's analytic FLOP count and a median time into GFLOP/s and a fraction of that peak.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
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


def first_call(fn: Callable[[], Any], block: Callable[[Any], None]) -> float:
    """Seconds of one blocked call: the first call of a compiled callable (trace + compile + run)."""
    start = time.perf_counter()
    block(fn())
    return time.perf_counter() - start


def cold_cache_env(root: str | None = None) -> dict[str, str]:
    """Environment variables for a cold first call: every registered framework's on-disk compile
    caches off (Framework.cold_cache_env), their cache directories under one fresh temp dir. Set
    before the framework is imported (a fresh process). The temp dir is made under `root`, by
    default in this process's run directory (rnnbench.run.isolation.run_tmpdir), which goes when
    the process ends, however it ends (after a SIGKILL: when the next rnnbench process starts a
    worker)."""
    from rnnbench import registry
    from rnnbench.run.isolation import run_tmpdir

    fresh = tempfile.mkdtemp(prefix="rnnbench-cold-", dir=root if root is not None else run_tmpdir())
    env: dict[str, str] = {}
    for framework in registry.frameworks().values():
        env.update(framework.cold_cache_env(fresh))
    return env


def peak_rss_mb() -> float:
    """This process's resident-set high-water mark in MiB (ru_maxrss is KiB on Linux)."""
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib / 1024.0 if sys.platform != "darwin" else kib / 2**20


@dataclass(frozen=True)
class GemmPeak:
    """Best float32 GEMM rate measured here: max over sizes of 2n^3 / (fastest of `repeats`)."""

    gflops: float
    by_size: dict[int, float]
    threads: int
    repeats: int
    method: str = "torch.matmul float32 square (n, n) @ (n, n), best of repeats, max over n"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def gemm_peak(threads: int, sizes: tuple[int, ...] = (256, 512, 1024, 2048), repeats: int = 20) -> GemmPeak:
    """Measure this machine's float32 matmul peak with `threads` torch threads."""
    import torch

    torch.set_num_threads(threads)
    by_size = {}
    for n in sizes:
        a, b = torch.rand(n, n), torch.rand(n, n)
        a @ b  # warm-up: first call pays for thread-pool start and packing buffers
        best = min(first_call(lambda: a @ b, lambda r: None) for _ in range(repeats))
        by_size[n] = 2.0 * n**3 / best / 1e9
    return GemmPeak(max(by_size.values()), by_size, threads, repeats)


def roofline(flops: float, median_ms: float, peak_gflops: float) -> dict[str, float]:
    """Achieved GFLOP/s of `flops` done in `median_ms`, and its fraction of the GEMM peak."""
    gflops = flops / (median_ms * 1e-3) / 1e9
    return {"flops": flops, "gflops": gflops, "fraction_of_peak": gflops / peak_gflops}


if __name__ == "__main__":  # `python -m rnnbench.run.timing THREADS`: the GEMM peak as JSON
    print(json.dumps(gemm_peak(int(sys.argv[1]) if len(sys.argv) > 1 else 1).to_dict()))
