"""The marks on a row's time: why its times may not be its own (contention: other work beside it,
CONTENDED_MARK) or do not agree with themselves (unstable: UNSTABLE_MARK), read from its record alone,
and the legend lines that explain them under a table."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from rnnbench.status import Status

CONTENDED_MARK = "*"


def contention(rec: dict) -> list[str]:
    """Why a row's times may not be its own: the notes of its `cpu` record (over_share, load,
    contended; rnnbench.machine.cpus.contention_notes) and its timing's "starved"; empty for rows without them."""
    starved = "starved" in ((rec.get("timing") or {}).get("marks") or ())
    return list((rec.get("cpu") or {}).get("notes") or []) + ["starved"] * starved


UNSTABLE_MARK = "!"
UNSTABLE_WHY = {
    "spread": "its samples' q3 / q1 above the bound",
    "drift": "its samples' second half away from its first",
    "fwd_over_fwd_bwd": "its forward took longer than its forward+backward",
}


def unstable(rec: dict) -> list[str]:
    """Why a timed row's samples do not agree with themselves (UNSTABLE_WHY): the marks of its
    `timing` field (rnnbench.rows.timing.judge_timing) besides its contention notes; a record older than
    that field is marked when its forward's median exceeds its forward+backward's."""
    fwd_bwd, fwd = rec.get("fwd_bwd"), rec.get("fwd")
    if not fwd_bwd:
        return []
    if "timing" not in rec:
        return ["fwd_over_fwd_bwd"] if fwd and fwd["median_ms"] > fwd_bwd["median_ms"] else []
    notes = set(contention(rec))
    return [m for m in (rec.get("timing") or {}).get("marks") or () if m not in notes]


def unstable_legend(records: Iterable[dict[str, Any]]) -> list[str]:
    """One line under the table when some timed row's samples disagree: how many, and why."""
    counts: dict[str, int] = defaultdict(int)
    marked = 0
    for r in records:
        marks = unstable(r) if r["status"] == Status.OK else []
        marked += bool(marks)
        for mark in marks:
            counts[mark] += 1
    if not marked:
        return []
    parts = ", ".join(f"{n} {mark} ({UNSTABLE_WHY.get(mark, mark)})" for mark, n in sorted(counts.items()))
    return [f"{UNSTABLE_MARK} {marked} row(s) unstable, their medians are one draw of many: {parts}"]


def contention_legend(records: Iterable[dict[str, Any]]) -> list[str]:
    """One line under the table when some timed row is marked: how many, and for which reasons."""
    counts: dict[str, int] = defaultdict(int)
    marked = 0
    for r in records:
        notes = contention(r) if r["status"] == Status.OK and r.get("fwd_bwd") else []
        marked += bool(notes)
        for note in notes:
            counts[note] += 1
    if not marked:
        return []
    why = {
        "over_share": "used more cores than its threads",
        "load": "other work on the machine exceeded the cores it left free",
        "contended": "other work ran on its CPUs meanwhile",
        "starved": "it got under 0.8 of a core while timed",
    }
    parts = ", ".join(f"{n} {note} ({why.get(note, note)})" for note, n in sorted(counts.items()))
    return [
        f"{CONTENDED_MARK} {marked} row(s) timed under contention, compare them with care: {parts} "
        "(the records' cpu field)"
    ]
