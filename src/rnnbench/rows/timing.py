"""The timing methodology, used alike by the CLI (`run`, `sweep`), asv and pytest-benchmark.

Compile apart from steady state (`first_call`, then `measure`: warm-ups, then steady state only),
blocking on every timed call, median and quartiles rather than mean and deviation, RSS high-water
mark: what each means and why, with cold caches, threads and the roofline beside them, is
docs/measuring.md#methodology. Every timed call is read on two clocks, wall and this process's CPU
time, and `judge_timing` says which decides and whether the row's numbers are its own
(docs/measuring.md#busy-machines-which-clock-decides). A CPU row's calls are each followed by the
machine-speed reference kernel (rnnbench.machine.reference), timed alike, which `compare` divides by.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from rnnbench import record
from rnnbench.machine import reference
from rnnbench.stats import quartiles


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
    cpu_samples: tuple[float, ...] = ()  # the same calls' process CPU time, ms (kept alike)
    cpu_median_ms: float | None = None  # the median of every call's CPU time
    # the machine-speed reference (rnnbench.machine.reference) timed after each call, wall and CPU ms,
    # kept alike (the same calls' indices): empty where no reference ran (GPU rows, older records)
    ref_samples: tuple[float, ...] = ()
    ref_cpu_samples: tuple[float, ...] = ()

    @classmethod
    def of(
        cls,
        samples_ms: Sequence[float],
        cpu_ms: Sequence[float] = (),
        ref_ms: Sequence[float] = (),
        ref_cpu_ms: Sequence[float] = (),
    ) -> Timing:
        """The statistics of `samples_ms`, the times of the timed calls in the order they ran, and
        of `cpu_ms`, the same calls' process CPU time (none where it was not read); `ref_ms` and
        `ref_cpu_ms`: the reference kernel's time after each call (none where it did not run)."""
        q1, med, q3 = quartiles(samples_ms)
        low, high = float(min(samples_ms)), float(max(samples_ms))
        cpu_median = float(np.median(cpu_ms)) if len(cpu_ms) else None
        return cls(
            median_ms=float(med),
            q1_ms=float(q1),
            q3_ms=float(q3),
            min_ms=low,
            max_ms=high,
            repeats=len(samples_ms),
            samples=record.kept_samples(samples_ms),
            cpu_samples=record.kept_samples(cpu_ms),
            cpu_median_ms=cpu_median,
            ref_samples=record.kept_samples(ref_ms),
            ref_cpu_samples=record.kept_samples(ref_cpu_ms),
        )

    def to_dict(self) -> dict[str, Any]:
        out = {**asdict(self)}
        for name in ("samples", "cpu_samples", "ref_samples", "ref_cpu_samples"):
            out[name] = list(getattr(self, name))
        if self.cpu_median_ms is None:  # a record's cpu fields are numbers where present, else absent
            del out["cpu_median_ms"], out["cpu_samples"]
        if not self.ref_samples:  # likewise the reference's
            del out["ref_samples"], out["ref_cpu_samples"]
        else:
            out["ref_kernel"] = reference.KERNEL
        return out


@dataclass(frozen=True)
class Clocks:
    """The two clocks every timed call is read on, in seconds (tests pass a fake pair)."""

    wall: Callable[[], float] = time.perf_counter
    cpu: Callable[[], float] = time.process_time  # every thread of this process, nanosecond resolution


def _timed_on_both(fn: Callable[[], Any], block: Callable[[Any], None], clocks: Clocks) -> tuple[float, float]:
    """(wall s, CPU s) of one blocked call. The CPU clock is read outside the wall window: its
    system call is not part of the wall sample."""
    cpu_start = clocks.cpu()
    start = clocks.wall()
    block(fn())
    elapsed = clocks.wall() - start
    return elapsed, clocks.cpu() - cpu_start


def measure(
    fn: Callable[[], Any],
    block: Callable[[Any], None],
    config: TimingConfig,
    *,
    clocks: Clocks = Clocks(),
    reference: Callable[[], Any] | None = None,
) -> Timing:
    """Warm-ups, then timed calls of `fn` until the budget (TimingConfig), each read on both clocks;
    with a `reference` (rnnbench.machine.reference.kernel), that kernel is timed after each call alike
    (its time is not spent from the budget)."""
    for _ in range(config.warmup):
        block(fn())
        if reference is not None:
            reference()
    samples: list[float] = []
    cpu: list[float] = []
    ref: list[tuple[float, float]] = []
    spent = 0.0
    while len(samples) < config.max_repeats and (len(samples) < config.min_repeats or spent < config.budget_s):
        elapsed, cpu_s = _timed_on_both(fn, block, clocks)
        cpu.append(cpu_s * 1e3)
        samples.append(elapsed * 1e3)
        spent += elapsed
        if reference is not None:
            ref.append(_timed_on_both(reference, _no_block, clocks))
    return Timing.of(samples, cpu, [w * 1e3 for w, _ in ref], [c * 1e3 for _, c in ref])


def measure_interleaved(
    fns: Mapping[str, Callable[[], Any]],
    block: Callable[[Any], None],
    config: TimingConfig,
    *,
    clocks: Clocks = Clocks(),
    reference: Callable[[], Any] | None = None,
) -> dict[str, Timing]:
    """measure() of several callables in one loop: their warm-ups, then rounds that call each once in
    turn (the order rotated each round, so none always runs after the same one), each call read on both
    clocks and followed by the reference kernel where given, until every one has min_repeats samples
    and the rounds spent config.budget_s per callable (or max_repeats rounds). What the machine does
    over the loop falls on all of them alike: their ratios are the run's most trustworthy comparison."""
    names = list(fns)
    for _ in range(config.warmup):
        for name in names:
            block(fns[name]())
            if reference is not None:
                reference()
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    ref: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    spent, rounds = 0.0, 0
    while rounds < config.max_repeats and (rounds < config.min_repeats or spent < config.budget_s * len(names)):
        for name in names[rounds % len(names) :] + names[: rounds % len(names)]:
            elapsed, cpu_s = _timed_on_both(fns[name], block, clocks)
            wall[name].append(elapsed * 1e3)
            cpu[name].append(cpu_s * 1e3)
            spent += elapsed
            if reference is not None:
                ref[name].append(_timed_on_both(reference, _no_block, clocks))
        rounds += 1
    return {n: Timing.of(wall[n], cpu[n], [w * 1e3 for w, _ in ref[n]], [c * 1e3 for _, c in ref[n]]) for n in names}


def _no_block(result: Any) -> None:
    """The reference kernel computes on this thread: its result is ready when it returns."""


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


SPREAD = 1.5  # a quantity whose samples' q3 / q1 exceeds this is unstable: its median is one draw of many
DRIFT = 1.25  # nor whose second half's median differs from its first half's by more than this factor
MIN_HALF = 3  # samples in each half before a drift is judged
QUANTITIES = ("fwd_bwd", "fwd")
# A CPU row whose process got less than this share of one core over its timed loops (CPU time /
# wall) waited for a core: calls that compute and block on nothing else use at least one.
STARVED = 0.8


def _deciding(quantity: Mapping[str, Any], clock: str) -> list[float]:
    """The kept samples of `quantity` on `clock` ("cpu": its CPU samples, else its wall samples)."""
    return [float(x) for x in (quantity.get("cpu_samples" if clock == "cpu" else "samples") or ())]


def instability(samples: Sequence[float]) -> list[str]:
    """Why samples of one quantity (in the order they ran) do not agree: 'spread' when q3 / q1 >
    SPREAD, 'drift' when the median of the second half differs from the first half's by more than
    DRIFT either way (the machine changed while it ran); empty when they agree or are too few."""
    if len(samples) < 2 * MIN_HALF or min(samples) <= 0:
        return []
    marks = []
    q1, _, q3 = quartiles(samples)
    if q3 / q1 > SPREAD:
        marks.append("spread")
    half = len(samples) // 2
    first, second = float(np.median(samples[:half])), float(np.median(samples[half:]))
    if max(first, second) / min(first, second) > DRIFT:
        marks.append("drift")
    return marks


def judge_timing(rec: Mapping[str, Any]) -> dict[str, Any] | None:
    """A timed record's `timing` field (docs/measuring.md#busy-machines-which-clock-decides), or
    None for a row that was not timed. clock: "cpu" for a row on one thread whose calls carry CPU
    samples (other work cannot move its own CPU time), else "wall"; contended: its `cpu.notes`
    (other work beside it, or more cores than given), or "starved": a CPU row whose CPU time /
    wall over its timed loops is below STARVED (it waited for a core; seen where the loops were too
    short for cpu.notes to measure, as XLA rows often are); unstable: a quantity's samples on the deciding
    clock disagree (instability), or its forward's median exceeds its forward+backward's on either
    clock (a forward is part of the training step: the reverse is noise, never a result)."""
    fwd_bwd, fwd = rec.get("fwd_bwd"), rec.get("fwd")
    if not isinstance(fwd_bwd, Mapping):
        return None
    cpu = rec.get("cpu") or {}
    threads = cpu.get("threads") or (rec.get("settings") or {}).get("threads")
    clock = "cpu" if threads == 1 and fwd_bwd.get("cpu_samples") else "wall"
    notes = [str(n) for n in cpu.get("notes") or ()]
    ratio = cpu.get("cpu_ratio")
    if rec.get("device", "cpu") == "cpu" and ratio is not None and ratio < STARVED:
        notes.append("starved")  # timed loops too short for /proc/stat's ticks still show the wait
    marks = list(notes)
    for quantity in (fwd_bwd, fwd):
        if isinstance(quantity, Mapping):
            marks += [m for m in instability(_deciding(quantity, clock)) if m not in marks]
    if isinstance(fwd, Mapping):
        medians = [("median_ms", "median_ms"), ("cpu_median_ms", "cpu_median_ms")]
        if any((fwd.get(a) or 0) > (fwd_bwd.get(b) or float("inf")) for a, b in medians):
            marks.append("fwd_over_fwd_bwd")
    return {"clock": clock, "contended": bool(notes), "unstable": len(marks) > len(notes), "marks": marks}
