"""Where the time went between two sides of a row: their profiles (rnnbench.rows.profile, the
record's `profile`) lined up, and the entries that changed most.

For each view (ops: the framework's op table; hlo: the compiled program's cost; python: each
function's own time) every name on either side is paired (absent on a side: 0), and the TOP names
whose value moved most, by absolute change, are kept, largest first: a slowdown planted as extra
matrix products tops the ops view with aten::mm. Times are ms per call; hlo figures are the
compiler's own units (flops, bytes accessed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

VIEWS = ("ops", "hlo", "python")  # the order shown: the framework's own account first
VIEW_LABELS = {
    "ops": "op (self ms per call)",
    "hlo": "compiled program cost",
    "python": "Python function (own ms per call)",
}
TOP = 5  # entries shown per view


@dataclass(frozen=True)
class Change:
    """One entry of one view on both sides."""

    view: str
    name: str
    base: float
    new: float

    @property
    def delta(self) -> float:
        return self.new - self.base

    @property
    def ratio(self) -> float | None:
        """new / base, or None where the base has none of it."""
        return self.new / self.base if self.base else None


def profile_of(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The last run's profile among one side's records of a row, or None where none was profiled."""
    found = [r["profile"] for r in records if isinstance(r.get("profile"), dict)]
    return found[-1] if found else None


def changes(base: dict[str, Any], new: dict[str, Any], top: int = TOP) -> list[Change]:
    """The `top` entries of each view both profiles have whose value changed most, by view (VIEWS)
    then by absolute change, largest first; unchanged entries are left out."""
    out: list[Change] = []
    for view in VIEWS:
        b, n = base.get(view), new.get(view)
        if not isinstance(b, dict) or not isinstance(n, dict):
            continue
        pairs = [Change(view, name, float(b.get(name, 0.0)), float(n.get(name, 0.0))) for name in set(b) | set(n)]
        pairs = [c for c in pairs if c.delta]
        pairs.sort(key=lambda c: (-abs(c.delta), c.name))
        out += pairs[:top]
    return out


def _number(value: float) -> str:
    return f"{value:.3g}"


def _change(c: Change) -> str:
    ratio = f" ({c.ratio:.2f}x)" if c.ratio is not None else " (new)" if c.new else ""
    return f"{'+' if c.delta > 0 else ''}{c.delta:.3g}{ratio}"


def lines(found: list[Change]) -> list[str]:
    """One line per change, view first: `ops aten::mm: 0.2 -> 1.9 (+1.7, 9.50x)`."""
    return [f"{c.view} {c.name}: {_number(c.base)} -> {_number(c.new)} ({_change(c)})" for c in found]


def markdown_table(found: list[Change], cell: Any) -> list[str]:
    """A markdown table of the changes; `cell` escapes a cell (rnnbench.report.escape.md_cell)."""
    rows = ["| view | name | base | new | change |", "| --- | --- | --- | --- | --- |"]
    rows += [
        f"| {cell(VIEW_LABELS[c.view])} | {cell(c.name)} | {_number(c.base)} | {_number(c.new)} | {cell(_change(c))} |"
        for c in found
    ]
    return rows


def as_json(found: list[Change]) -> list[dict[str, Any]]:
    return [{"view": c.view, "name": c.name, "base": c.base, "new": c.new, "delta": c.delta} for c in found]
