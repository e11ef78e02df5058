"""Plain-text table of records, and the detailed reports of rows that are not ok.

The console is for reading; the records keep everything. The table lists the rows that ran
(unavailable rows only with all_rows=True) and, below it, one line per distinct unavailability
reason; failure_reports() prints the full report of each real failure (a failing status or
known_issue_fixed:<id>) and one line per registered known issue, never its traceback."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from rnnbench.errors import InputError
from rnnbench.modes import MODES, VJP
from rnnbench.report.escape import csv_cell, md_cell, terminal
from rnnbench.report.fit import abbreviated_issues, fit, terminal_width
from rnnbench.report.labels import (
    dtype_label,
    env_label,
    hvp_label,
    loss_label,
    machine_of,
    saved_mb,
    several_machines,
)
from rnnbench.report.marks import (
    CONTENDED_MARK,
    UNSTABLE_MARK,
    contention,
    contention_legend,
    unstable,
    unstable_legend,
)
from rnnbench.status import Status, is_known


def _ms(t: dict | None) -> str:
    if not t:
        return "-"
    return f"{t['median_ms']:.3g} [{t['q1_ms']:.3g}-{t['q3_ms']:.3g}]"


def number(v: Any, fmt: str) -> str:
    """A number as a cell; "-" where there is none."""
    return "-" if v is None or v != v else format(v, fmt)


def _peak(rec: dict) -> str:
    """The forward+backward rate as a percentage of the GEMM peak (rnnbench.machine.roofline.with_roofline)."""
    roof = (rec.get("roofline") or {}).get("fwd_bwd")
    if not roof or roof.get("fraction_of_peak") is None:
        return "-"
    pct = 100 * roof["fraction_of_peak"]
    return f"{pct:.0f}" if pct >= 10 else f"{pct:.2g}"


def _binding(rec: dict) -> str:
    """The forward+backward's binding ceiling in words (rnnbench.machine.binding): "74 % of L2
    bandwidth", "dispatch bound: 213 ops at 3.1 µs (61 %)"; "-" where the record has none."""
    bound = (rec.get("binding") or {}).get("fwd_bwd") or {}
    return str(bound.get("label") or "-")


def _marked(cell: str, rec: dict) -> str:
    """A time cell with its marks: CONTENDED_MARK (other work beside it), UNSTABLE_MARK (its samples disagree)."""
    marks = (CONTENDED_MARK if contention(rec) else "") + (UNSTABLE_MARK if unstable(rec) else "")
    return f"{cell} {marks}" if marks else cell


def side_by_side(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records ordered by dtype and model (in order of first appearance), driver name, then
    environment, loss form and machine, so one driver's rows from several environments (and
    machines) sit next to each other."""
    records = list(records)
    first: dict[tuple[str, str], int] = {}
    for i, r in enumerate(records):
        for key in ("dtype", "model"):
            first.setdefault((key, r[key]), i)
    return sorted(
        records,
        key=lambda r: (
            first[("dtype", r["dtype"])],
            first[("model", r["model"])],
            r["driver"],
            r.get("environment_name", "main"),
            loss_label(r),
            MODE_ORDER.get(mode_of(r), len(MODE_ORDER)),
            machine_of(r),
        ),
    )


MODE_ORDER = {m: i for i, m in enumerate(MODES)}


def mode_of(r: dict[str, Any]) -> str:
    """The differentiation mode a record's gradients came by (rnnbench.modes); vjp for older records."""
    return str(r.get("mode", VJP))


COLUMNS = (
    "model",
    "driver",
    "env",
    "dtype",
    "status",
    "max rel err",
    "fwd+bwd ms [IQR]",
    "% peak",
    "binding ceiling (fwd+bwd)",
    "fwd ms [IQR]",
    "first call s",
    "saved for bwd MiB",
)


def rows(
    records: Iterable[dict[str, Any]],
    *,
    include_unavailable: bool = False,
    with_machine: bool = False,
    with_loss: bool = False,
    with_hvp: bool = False,
    with_mode: bool = False,
) -> list[tuple[str, ...]]:
    """One tuple of cells per record, each from its own record (machine, loss form, mode and H v
    columns included when asked)."""
    out = []
    for r in side_by_side(records):
        if r["status"] == Status.UNAVAILABLE and not include_unavailable:
            continue
        ok = r["status"] == Status.OK  # speed numbers only for rows whose gradients agree
        cells = (
            r["model"],
            r["driver"],
            env_label(r),
            dtype_label(r),
            str(r["status"]),
            number(r.get("max_rel_error"), ".1e"),
            (_marked(_ms(r.get("fwd_bwd")), r) if r.get("fwd_bwd") else "-") if ok else "-",
            _peak(r) if ok else "-",
            _binding(r) if ok else "-",
            (_ms(r.get("fwd")) + (f" {UNSTABLE_MARK}" if "fwd_over_fwd_bwd" in unstable(r) else "")) if ok else "-",
            number(r.get("first_call_s"), ".3g") if ok else "-",
            number(saved_mb(r), ".3g"),
        )
        if with_hvp:
            cells = (*cells[:5], hvp_label(r), *cells[5:])
        if with_mode:
            cells = (*cells[:2], mode_of(r), *cells[2:])
        if with_loss:
            cells = (cells[0], loss_label(r), *cells[1:])
        out.append((machine_of(r), *cells) if with_machine else cells)
    return out


def format_table(records: list[dict[str, Any]], include_unavailable: bool = False) -> str:
    """One line per row that ran (every row with include_unavailable), then one line per reason
    for the rows that could not run here. Records from several machines (merged results files) get
    a leading machine column, each row's from its own record."""
    columns, body = table_data(records, include_unavailable)
    body = [tuple(terminal(c) for c in row) for row in body]  # a cell is one line, and only shown
    body, legend = abbreviated_issues(columns, body)
    width = terminal_width()
    columns, body, left_out = fit(columns, body, width or 10**6)
    widths = [max(len(c), *(len(row[i]) for row in body)) if body else len(c) for i, c in enumerate(columns)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
    text = [line(columns), line(tuple("-" * w for w in widths))] + [line(r) for r in body]
    if left_out:
        legend.append(f"left out to fit {width} columns: {left_out} (--format csv has all)")
    return "\n".join(text + legend + [terminal(n) for n in notes(records, include_unavailable)])


def notes(records: list[dict[str, Any]], include_unavailable: bool = False) -> list[str]:
    """The lines under the table: the contention legend, and (unless every row is in the table) one
    line per reason rows were unavailable."""
    legends = contention_legend(records) + unstable_legend(records) + _promotion_legend(records)
    return legends + ([] if include_unavailable else unavailable_summary(records))


def _promotion_legend(records: list[dict[str, Any]]) -> list[str]:
    """One line under the table when some row's step promoted its dtype (record field computed_dtype)."""
    promoted = [r for r in records if r.get("computed_dtype")]
    if not promoted:
        return []
    return [
        f"(ran ...) {len(promoted)} row(s) computed in a wider dtype than their own (their step promotes it): "
        "their times are not their dtype's (the records' computed_dtype)"
    ]


FORMATS = ("text", "markdown", "csv", "json")


def format_as(records: list[dict[str, Any]], fmt: str, include_unavailable: bool = False) -> str:
    """The table in `fmt` (FORMATS): text (format_table), markdown (a GitHub table by tabulate, then
    the notes as a list), csv (the header and one line per row; nothing else) and json (a list of
    objects, one per row): csv and json hold numeric_data, numbers in numeric fields and the marks
    in their own."""
    if fmt == "text":
        return format_table(records, include_unavailable)
    columns, body = table_data(records, include_unavailable)
    if fmt == "markdown":
        try:
            from tabulate import tabulate
        except ImportError:
            raise InputError(
                "--format markdown needs tabulate: pip install 'rnnbench[charts]' "
                "(pinned: pip install -r requirements/charts.txt)"
            ) from None

        cells = [[md_cell(c) for c in row] for row in body]
        text = tabulate(cells, headers=[md_cell(c) for c in columns], tablefmt="github", disable_numparse=True)
        below = notes(records, include_unavailable)
        return text + ("\n\n" + "\n".join(f"- {md_cell(n)}" for n in below) if below else "")
    data = numeric_data(records, include_unavailable)
    if fmt == "csv":
        import csv
        import io

        names = list(data[0]) if data else list(NUMERIC_COLUMNS)
        cells = [[csv_cell(_csv(row[n])) for n in names] for row in data]
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([[csv_cell(c) for c in names], *cells])
        return buf.getvalue().rstrip("\n")
    if fmt == "json":
        import json

        return json.dumps(data, indent=1, allow_nan=False)
    raise ValueError(f"unknown table format {fmt!r}")


NUMERIC_COLUMNS = (
    "model",
    "driver",
    "env",
    "dtype",
    "status",
    "max rel err",
    "fwd+bwd ms",
    "fwd+bwd q1 ms",
    "fwd+bwd q3 ms",
    "% peak",
    "binding",
    "% of binding",
    "fwd ms",
    "fwd q1 ms",
    "fwd q3 ms",
    "first call s",
    "saved for bwd MiB",
    "clock",
    "contended",
    "unstable",
    "marks",
)


def _csv(value: Any) -> str:
    """A csv cell of a numeric_data value: "" for none, marks joined by ";", numbers as Python writes them."""
    if value is None:
        return ""
    if isinstance(value, list):
        return ";".join(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def numeric_data(records: list[dict[str, Any]], include_unavailable: bool = False) -> list[dict[str, Any]]:
    """One dict per row (NUMERIC_COLUMNS, machine / loss / H v first where the table has them):
    numbers as numbers (None where there is none), the time marks in their own fields (clock,
    contended, unstable, marks: the record's `timing` field, its cpu notes for older records)."""
    with_machine = several_machines(records)
    with_loss = any(loss_label(r) != "model" for r in records)
    with_hvp = any("hvp" in r for r in records)
    with_mode = any(mode_of(r) != VJP for r in records)
    out = []
    for r in side_by_side(records):
        if r["status"] == Status.UNAVAILABLE and not include_unavailable:
            continue
        ok = r["status"] == Status.OK
        fb, fwd = (r.get("fwd_bwd") or {}) if ok else {}, (r.get("fwd") or {}) if ok else {}
        roof = ((r.get("roofline") or {}).get("fwd_bwd") or {}) if ok else {}
        pct = _number(roof.get("fraction_of_peak"))
        bound = ((r.get("binding") or {}).get("fwd_bwd") or {}) if ok else {}
        marks = [*contention(r), *unstable(r)] if fb else []
        marks += [f"ran_{r['computed_dtype']}"] if r.get("computed_dtype") and fb else []  # times not its dtype's
        row: dict[str, Any] = {"machine": machine_of(r)} if with_machine else {}
        row |= {"model": r["model"], "driver": r["driver"]}
        if with_mode:
            row["mode"] = mode_of(r)
        if with_loss:
            row["loss"] = loss_label(r)
        row |= {"env": env_label(r), "dtype": r["dtype"], "status": str(r["status"])}
        if with_hvp:
            row["H v"] = hvp_label(r)
        row |= {
            "max rel err": _number(r.get("max_rel_error")),
            "fwd+bwd ms": _number(fb.get("median_ms")),
            "fwd+bwd q1 ms": _number(fb.get("q1_ms")),
            "fwd+bwd q3 ms": _number(fb.get("q3_ms")),
            "% peak": None if pct is None else 100 * pct,
            "binding": bound.get("level") or bound.get("ceiling"),
            "% of binding": None if _number(bound.get("fraction")) is None else 100 * bound["fraction"],
            "fwd ms": _number(fwd.get("median_ms")),
            "fwd q1 ms": _number(fwd.get("q1_ms")),
            "fwd q3 ms": _number(fwd.get("q3_ms")),
            "first call s": _number(r.get("first_call_s")) if ok else None,
            "saved for bwd MiB": _number(saved_mb(r)),
            "clock": (r.get("timing") or {}).get("clock", "wall") if fb else None,
            "contended": bool(contention(r)) if fb else None,
            "unstable": bool(unstable(r)) if fb else None,
            "marks": marks,
        }
        out.append(row)
    return out


def table_data(
    records: list[dict[str, Any]], include_unavailable: bool = False
) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The table's column names and its rows of cells (format_table's, whatever the format)."""
    with_machine = several_machines(records)
    with_loss = any(loss_label(r) != "model" for r in records)
    with_hvp = any("hvp" in r for r in records)
    with_mode = any(mode_of(r) != VJP for r in records)
    columns = COLUMNS
    if with_hvp:
        columns = (*columns[:5], "H v", *columns[5:])
    if with_mode:
        columns = (*columns[:2], "mode", *columns[2:])
    if with_loss:
        columns = (columns[0], "loss", *columns[1:])
    if with_machine:
        columns = ("machine", *columns)
    return columns, rows(
        records,
        include_unavailable=include_unavailable,
        with_machine=with_machine,
        with_loss=with_loss,
        with_hvp=with_hvp,
        with_mode=with_mode,
    )


def unavailable_summary(records: list[dict[str, Any]]) -> list[str]:
    """'N rows unavailable: <reason> (drivers: ...)', one line per distinct reason; with records
    from several machines the line also names the machines whose rows have that reason."""
    by_reason: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        if r["status"] == Status.UNAVAILABLE:
            by_reason[r.get("reason", "")].append(r)
    with_machine = several_machines(records)
    out = []
    for reason, recs in sorted(by_reason.items(), key=lambda item: -len(item[1])):
        drivers = sorted({r["driver"] for r in recs})
        shown = ", ".join(drivers[:6]) + (f", ... ({len(drivers)} drivers)" if len(drivers) > 6 else "")
        if with_machine:
            shown += "; machines: " + ", ".join(sorted({machine_of(r) for r in recs}))
        out.append(f"{len(recs)} rows unavailable: {reason} (drivers: {shown})")
    return out


def failure_reports(records: list[dict[str, Any]]) -> str:
    """The full report of every row that failed (a wrong or missing gradient, an error, a crash,
    a registered bug that no longer reproduces), then one line per registered known issue that
    reproduced (its details stay in the records file). With records from several machines each
    report's header and each known-issue row names the machine of its own record
    ("== lstm / torch_scan / torch 2.13.0 / float32 @ host-b: grad_mismatch", "lstm/torch_scan@host-b")."""
    parts = []
    known: dict[str, list[dict]] = defaultdict(list)
    by_machine = several_machines(records)
    for r in side_by_side(records):
        if is_known(r["status"]):
            known[r["status"]].append(r)
        elif r["status"] not in (Status.OK, Status.UNAVAILABLE):
            under = "" if loss_label(r) == "model" else f" / loss {loss_label(r)}"
            on = f" @ {machine_of(r)}" if by_machine else ""
            header = f"== {r['model']} / {r['driver']} / {env_label(r)} / {r['dtype']}{under}{on}: {r['status']}"
            body = terminal((r.get("report") or r.get("reason") or "").rstrip(), lines=True)
            parts.append(f"{terminal(header)}\n{body}")
    for status, recs in known.items():
        title = (recs[0].get("report") or "").splitlines()[0] if recs[0].get("report") else status
        where = ", ".join(
            sorted(
                {
                    f"{r['model']}/{r['driver']}"
                    + ("" if loss_label(r) == "model" else f"/{loss_label(r)}")
                    + (f"@{machine_of(r)}" if by_machine else "")
                    for r in recs
                }
            )
        )
        parts.append(terminal(f"{title} -- {len(recs)} row(s): {where} (details in the records file)"))
    return "\n\n".join(parts)


def summary(records: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = defaultdict(int)
    for r in records:
        counts[str(r["status"])] += 1
    return terminal(", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
