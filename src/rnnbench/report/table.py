"""Plain-text table of records, and the detailed reports of rows that are not ok."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable


def _ms(t: dict | None) -> str:
    if not t:
        return "-"
    return f"{t['median_ms']:.3g} [{t['q1_ms']:.3g}-{t['q3_ms']:.3g}]"


def _err(rec: dict) -> str:
    e = rec.get("max_rel_error")
    return "-" if e is None else f"{e:.1e}"


def _first(rec: dict) -> str:
    s = rec.get("first_call_s")
    return "-" if s is None or s != s else f"{s:.3g}"


def env_label(rec: dict) -> str:
    """The environment a row ran in, named by its torch version ("torch 2.13.0", "torch 2.9.0");
    rows decided without starting it (e.g. it does not exist) carry the environment's name."""
    return rec.get("env_label") or rec.get("environment_name", "main")


def side_by_side(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records ordered by dtype and model (in order of first appearance), driver name, then
    environment, so one driver's rows from several environments sit next to each other."""
    records = list(records)
    first: dict[tuple[str, str], int] = {}
    for i, r in enumerate(records):
        for key in ("dtype", "model"):
            first.setdefault((key, r[key]), i)
    return sorted(records, key=lambda r: (first[("dtype", r["dtype"])], first[("model", r["model"])],
                                          r["driver"], r.get("environment_name", "main")))


COLUMNS = ("model", "driver", "env", "dtype", "status", "max rel err", "fwd+bwd ms [IQR]", "fwd ms [IQR]", "first call s")


def rows(records: Iterable[dict[str, Any]]) -> list[tuple[str, ...]]:
    out = []
    for r in side_by_side(records):
        if r["status"] == "unavailable":
            continue
        ok = r["status"] == "ok"  # speed numbers only for rows whose gradients agree
        out.append(
            (
                r["model"],
                r["driver"],
                env_label(r),
                r["dtype"],
                r["status"],
                _err(r),
                _ms(r.get("fwd_bwd")) if ok else "-",
                _ms(r.get("fwd")) if ok else "-",
                _first(r) if ok else "-",
            )
        )
    return out


def format_table(records: list[dict[str, Any]]) -> str:
    """One line per row that ran; unavailable rows summarised below. Records from several
    machines (merged results files) get a leading machine column."""
    body = rows(records)
    columns = COLUMNS
    hosts = [r.get("machine", {}).get("hostname", "?") for r in records if r["status"] != "unavailable"]
    if len(set(hosts)) > 1:
        columns = ("machine", *COLUMNS)
        body = [(h, *row) for h, row in zip(hosts, body)]
    widths = [max(len(c), *(len(row[i]) for row in body)) if body else len(c) for i, c in enumerate(columns)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
    text = [line(columns), line(tuple("-" * w for w in widths))] + [line(r) for r in body]
    unavailable = defaultdict(list)
    for r in records:
        if r["status"] == "unavailable":
            unavailable[(r["driver"], env_label(r), r.get("reason", ""))].append(r["model"])
    for (driver, env, reason), models in sorted(unavailable.items()):
        text.append(f"unavailable: {driver} [{env}] on {len(models)} model(s) ({reason})")
    return "\n".join(text)


def failure_reports(records: list[dict[str, Any]]) -> str:
    """The readable report of every row that is neither ok nor unavailable."""
    parts = []
    for r in side_by_side(records):
        if r["status"] not in ("ok", "unavailable"):
            parts.append(f"== {r['model']} / {r['driver']} / {env_label(r)} / {r['dtype']}: {r['status']}\n"
                         f"{r.get('report', '').rstrip()}")
    return "\n\n".join(parts)


def summary(records: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = defaultdict(int)
    for r in records:
        counts[r["status"]] += 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
