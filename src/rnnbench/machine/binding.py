"""A row's binding ceiling: which of the machine's ceilings bounds its time most, and how much of that
bound it reaches.

Three lower bounds on the time of one forward+backward call, each from the row's own counts and one
measured ceiling (rnnbench.machine.ceilings; the GEMM peak: rnnbench.machine.roofline):
  gemm       its analytic FLOPs / the GEMM peak at its dtype
  bandwidth  the bytes it moves (rows.counts: weights and one step's activations, per step) / the
             bandwidth of the level its working set per step fits in (L1, L2, L3, DRAM; HBM on a GPU)
  dispatch   its counted dispatches (Framework.dispatch_count) x each kind's floor (µs)
The binding ceiling is the one with the largest bound (no call can beat any of them, so the largest
is the tightest); the fraction is that bound / the row's median time (1 = at the ceiling). Each is
a floor, not an exact model: the bytes count the least a step must read, the dispatch floor is a
trivial op's, so a row may pass one (a fraction above 1 says that, and is shown as it is).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

QUANTITY = "fwd_bwd"  # the timed quantity bound: the training step, as the table's headline time
KINDS = ("gemm", "bandwidth", "dispatch")


def level_of(working_set: float, levels: Mapping[str, int], measured: Mapping[str, Any]) -> str | None:
    """The first memory level, smallest first, whose size holds `working_set` bytes and whose
    bandwidth was measured; "DRAM" (or "HBM", a device's one level) past the last cache."""
    for level in ("L1", "L2", "L3"):
        if level in levels and level in measured and working_set <= levels[level]:
            return level
    return next((level for level in ("DRAM", "HBM") if level in measured), None)


def bounds(rec: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """{kind: {"ms": the bound, and what it came from}} for each ceiling the record has counts and a
    measurement for (none of them: {})."""
    out: dict[str, dict[str, Any]] = {}
    flops = (rec.get("flops") or {}).get(QUANTITY)
    peak = (rec.get("gemm_peak") or {}).get("gflops")
    if flops and peak:
        out["gemm"] = {"ms": flops / (peak * 1e9) * 1e3, "flops": flops, "gflops": peak}
    ceilings = rec.get("ceilings") or {}
    counts = rec.get("counts") or {}
    moved = counts.get("bytes") or {}
    rates = ceilings.get("bandwidth_gbs") or {}
    level = level_of(moved.get("per_step", 0), ceilings.get("levels") or {}, rates) if moved.get(QUANTITY) else None
    if level is not None:
        gbs = rates[level]
        out["bandwidth"] = {
            "ms": moved[QUANTITY] / (gbs * 1e9) * 1e3,
            "level": level,
            "bytes": moved[QUANTITY],
            "gbs": gbs,
        }
    dispatched = (counts.get("dispatch") or {}).get(QUANTITY) or {}
    floors = ceilings.get("dispatch_us") or {}
    priced = {k: n for k, n in dispatched.items() if n and k in floors}
    if priced:
        us = sum(n * floors[k] for k, n in priced.items())
        out["dispatch"] = {"ms": us / 1e3, "ops": sum(priced.values()), "us_per_op": us / sum(priced.values())}
    return out


def binding(rec: Mapping[str, Any]) -> dict[str, Any] | None:
    """The record's `binding` for an ok row timed with counts: {"ceiling": kind, "fraction": bound /
    median, "bound_ms", "label", "bounds_ms": {kind: ms}, and the binding kind's figures}; None where
    the row was not timed or no bound could be formed."""
    timed = rec.get(QUANTITY) or {}
    if rec.get("status") != "ok" or not timed.get("median_ms"):
        return None
    found = bounds(rec)
    if not found:
        return None
    kind = max(found, key=lambda k: found[k]["ms"])
    top = found[kind]
    fraction = top["ms"] / timed["median_ms"]
    out = {
        "ceiling": kind,
        "fraction": fraction,
        "bound_ms": top["ms"],
        "bounds_ms": {k: v["ms"] for k, v in found.items()},
        **{k: v for k, v in top.items() if k != "ms"},
    }
    out["label"] = label(out)
    return {QUANTITY: out}


def _count(n: float) -> str:
    """31k, 1.2M, 264: a count as a table reads it."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.3g}{suffix}"
    return f"{n:g}"


def _pct(fraction: float) -> str:
    pct = 100 * fraction
    return f"{pct:.2g}" if pct < 10 else f"{pct:.0f}"


def label(bound: Mapping[str, Any]) -> str:
    """The binding ceiling in words: "74 % of L2 bandwidth", "62 % of GEMM peak", "dispatch bound: 31k
    ops at 2.1 µs (48 %)"."""
    kind, fraction = bound["ceiling"], bound["fraction"]
    if kind == "dispatch":
        ops = "op" if bound["ops"] == 1 else "ops"
        return f"dispatch bound: {_count(bound['ops'])} {ops} at {bound['us_per_op']:.2g} µs ({_pct(fraction)} %)"
    if kind == "bandwidth":
        return f"{_pct(fraction)} % of {bound['level']} bandwidth"
    return f"{_pct(fraction)} % of GEMM peak"
