"""The evidence of one row's times in `rnnbench compare` (rnnbench.report.compare.pairs): each
side's timed runs read from its records as a stats.Side, on which clock, relative to the
machine's reference or raw, and what that evidence cannot support.

Which clock: CPU time where every record of the row on both sides was decided by it (its
`timing.clock`, one-thread rows), else wall time (`clock_of`). What the evidence cannot support is
`noisy`, never slower, faster or same (`unsupported`): a wall-time row timed under contention (its
`cpu.notes`) or marked unstable (`timing.unstable`), and any row whose statistic disagrees with
itself by more than the threshold: between the runs of one side, or, with one run, between the
first and second half of its samples (the machine changed while it ran).
Relative to the machine's speed: where every timed record of a quantity on both sides carries
reference samples of one kernel (rnnbench.machine.reference, timed after each call on the same
clocks), each run's times are divided by its own reference statistic (the same quantile, the
same clock) before the ratio is taken: a ratio of ratios, so a process that got a slower machine
moves neither; the raw ratio is kept beside it (pairs.Timed.raw_ratio). A side's halves are then
compared relative to their own halves' reference, and a run whose reference moved by more than
REF_MOVED within it is `noisy`. Records without a reference (older ones, GPU rows) are judged on
their raw times, as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rnnbench.report.compare.stats import CPU_QUANTILE, Side
from rnnbench.report.marks import contention
from rnnbench.stats import quartiles
from rnnbench.status import Status

# A run whose reference moved more than this within it: the machine changed more than its reference
# is trusted to track (rnnbench.machine.reference), so the row is noisy rather than judged relative to it.
REF_MOVED = 1.5
RUNS_CAP = 20  # runs of a row per side the statistics pool (the last): as many rounds as --commits runs


def timed_runs(records: list[dict[str, Any]], quantity: str) -> list[dict[str, Any]]:
    """The records of one side that timed `quantity` (ok rows), the last RUNS_CAP."""
    return [r for r in records if r.get(quantity) and str(r["status"]) == Status.OK][-RUNS_CAP:]


def side_of(records: list[dict[str, Any]], quantity: str, clock: str = "wall") -> Side | None:
    timed = [r[quantity] for r in timed_runs(records, quantity)]
    if not timed:
        return None
    if clock == "cpu" and all(t.get("cpu_samples") for t in timed):
        cpu = tuple(tuple(float(x) for x in t["cpu_samples"]) for t in timed)
        medians = tuple(float(t.get("cpu_median_ms") or np.median(c)) for t, c in zip(timed, cpu, strict=True))
        per_run = [quartiles(c) for c in cpu]
        q1, q3 = tuple(q[0] for q in per_run), tuple(q[2] for q in per_run)
        return Side(
            medians, q1=q1, q3=q3, samples=cpu, quantile=CPU_QUANTILE, clock="cpu", refs=_refs(timed, "ref_cpu_samples")
        )
    return Side(
        tuple(float(t["median_ms"]) for t in timed),
        tuple(float(t["q1_ms"]) for t in timed),
        tuple(float(t["q3_ms"]) for t in timed),
        tuple(tuple(t.get("samples") or ()) for t in timed),
        refs=_refs(timed, "ref_samples"),
    )


def _refs(timed: list[dict[str, Any]], field: str) -> tuple[tuple[float, ...], ...]:
    """Each run's reference samples on one clock (`field`), paired with its samples by index;
    empty unless every run has them, as many as its samples."""
    refs = tuple(tuple(float(x) for x in t.get(field) or ()) for t in timed)
    sizes = [len(t.get("cpu_samples" if field == "ref_cpu_samples" else "samples") or ()) for t in timed]
    return refs if all(r and len(r) == n for r, n in zip(refs, sizes, strict=True)) else ()


def reference_kernel(records: list[dict[str, Any]], quantity: str) -> str | None:
    """The one reference kernel (rnnbench.machine.reference.KERNEL) every timed record of `quantity`
    ran beside, or None where some record has none (older records, GPU rows) or two differ: a
    row is then judged on its raw times."""
    kernels = {(r[quantity].get("ref_kernel") or None) for r in timed_runs(records, quantity)}
    return next(iter(kernels)) if len(kernels) == 1 else None


def is_relative(records: list[dict[str, Any]], quantity: str, sides: tuple[Side, Side]) -> bool:
    """Whether a quantity is judged relative to its runs' references (module docstring)."""
    return reference_kernel(records, quantity) is not None and all(s.has_refs for s in sides)


def _halves(values: tuple[float, ...]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    half = len(values) // 2
    return values[:half], values[half:]


def _self_disagreement(side: Side, relative: bool = False) -> float:
    """How far a side's statistic disagrees with itself (max / min, 1 = not at all): between its
    runs, or, with one run, between the first and second half of its samples; `relative`: each
    statistic divided by its own stretch's reference statistic. 1 without samples."""
    values = (side.relative() if relative else side).per_run()
    if len(values) == 1:
        if len(side.samples[0]) // 2 < 3:
            return 1.0
        halves = _halves(side.samples[0])
        values = [float(np.quantile(h, side.quantile)) for h in halves]
        if relative:
            values = [v / float(np.quantile(r, side.quantile)) for v, r in zip(values, _halves(side.refs[0]))]
    return max(values) / min(values) if values and min(values) > 0 else 1.0


def _reference_moved(side: Side) -> float:
    """How far a side's reference statistic moved within one of its runs (max / min of the two
    halves' statistics, the largest over its runs; 1 where a run is too short to halve)."""
    moved = [1.0]
    for ref in side.refs:
        if len(ref) // 2 >= 3:
            first, second = (float(np.quantile(h, side.quantile)) for h in _halves(ref))
            moved.append(max(first, second) / min(first, second) if min(first, second) > 0 else float("inf"))
    return max(moved)


def unsupported(
    records: list[dict[str, Any]], sides: tuple[Side, Side], threshold: float, relative: bool = False
) -> str | None:
    """Why a time verdict of one quantity is not supported (module docstring), or None."""
    if sides[0].clock == "wall":
        if any(contention(r) for r in records):
            return "timed under contention, on wall time"
        if any((r.get("timing") or {}).get("unstable") for r in records):
            return "unstable samples, on wall time"
    moved = max((_reference_moved(s) for s in sides if relative), default=1.0)
    if moved > REF_MOVED:
        return f"the machine's speed (its reference) moved {moved:.2f}x within a run"
    worst = max(_self_disagreement(s, relative) for s in sides)
    if worst > 1.0 + threshold:
        return f"its own runs disagree by {worst:.2f}x" + (" relative to their reference" if relative else "")
    return None
