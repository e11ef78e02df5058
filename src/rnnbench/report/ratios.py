"""The one ratio direction of every speed comparison rnnbench shows (table, charts, HTML, compare,
README): a speed-up, `reference time / time`, so above 1 is faster than the reference and below 1
slower ("2.0x" takes half the reference's time; "0.5x" twice it). docs/measuring.md states it."""

from __future__ import annotations

from typing import Any

from rnnbench.status import Status

DIRECTION = "x faster than the reference (reference time / time): above 1 is faster, below 1 slower"


def speedup(time_ms: float, reference_ms: float) -> float:
    """How many times faster `time_ms` is than `reference_ms`: reference_ms / time_ms (>1 faster)."""
    if time_ms <= 0 or reference_ms <= 0:
        raise ValueError(f"times must be above 0 ms, got {time_ms} and {reference_ms}")
    return reference_ms / time_ms


def speedup_label(value: float) -> str:
    """'2.37x' (faster than the reference) or '0.42x' (slower): the one way a speed-up is printed."""
    return f"{value:.3g}x"


def speedup_of_time_ratio(time_ratio: float) -> float:
    """The speed-up that a ratio of times `time / reference time` is (compare's statistics work in
    time ratios, new / base): its inverse, so that compare speaks the one direction too."""
    if time_ratio <= 0:
        raise ValueError(f"a ratio of times must be above 0, got {time_ratio}")
    return 1.0 / time_ratio


def clock_of(records: list[dict[str, Any]]) -> str:
    """ "cpu" when every timed record (both sides) was decided by its CPU time and carries CPU
    samples, else "wall" (records older than the timing field are wall)."""
    timed = [r for r in records if r.get("fwd_bwd") and str(r["status"]) == Status.OK]
    cpu = all((r.get("timing") or {}).get("clock") == "cpu" and r["fwd_bwd"].get("cpu_samples") for r in timed)
    return "cpu" if timed and cpu else "wall"
