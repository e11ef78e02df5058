"""One HTML page: every chart, where the numbers come from (machine, versions, threads, GEMM peak,
date), our drivers against the vendor layers, the bug x version table where the records hold
several versions of a framework, and the full table of records. Reads records only; needs no
network (images beside it, no scripts).

Every row is labelled from its own record: its env label ("torch 2.13.0", "jax 0.10.2") and, when
the records come from several machines, its machine (a leading column; provenance per machine)."""

from __future__ import annotations

from pathlib import Path

from rnnbench.report import bug_table, escape
from rnnbench.report.charts.overview import all_charts
from rnnbench.report.charts.style import latest_rows
from rnnbench.report.labels import env_label, loss_label, machine_of, saved_mb, several_machines
from rnnbench.report.marks import contention, unstable
from rnnbench.report.ratios import speedup
from rnnbench.report.table import number

COLUMNS = (
    "model",
    "driver",
    "env",
    "sizes",
    "status",
    "max rel err",
    "fwd+bwd ms median [IQR] (n)",
    "fwd ms median",
    "first call s",
    "fwd first call s",
    "GFLOP/s fwd+bwd",
    "% peak",
    "binding ceiling (fwd+bwd)",
    "worker peak RSS MiB (high-water mark, imports included)",
    "saved for bwd MiB",
    "note",
)


def columns(with_machine: bool = False, with_loss: bool = False) -> tuple[str, ...]:
    """The all-rows table's columns: a leading machine column for records from several machines,
    a loss column after the driver's env where any row ran under another loss form."""
    cols = COLUMNS
    if with_loss:
        cols = (*cols[:3], "loss", *cols[3:])
    return ("machine", *cols) if with_machine else cols


def _time_note(r: dict) -> str:
    """A timed row's marks, as the text table's * and ! say them: 'contended (load, contended)',
    'unstable (spread, fwd_over_fwd_bwd)'; empty for a row whose numbers are its own."""
    if not r.get("fwd_bwd"):
        return ""
    marked = (("contended", contention(r)), ("unstable", unstable(r)))
    return "; ".join(f"{word} ({', '.join(marks)})" for word, marks in marked if marks)


def table_rows(records: list[dict], with_machine: bool = False, with_loss: bool = False) -> list[tuple[str, ...]]:
    """One tuple of cells per record (columns(with_machine, with_loss)), each from its own record."""
    out = []
    for r in records:
        ok = r["status"] == "ok"
        fb, fw = (r.get("fwd_bwd"), r.get("fwd")) if ok else (None, None)
        roof = (r.get("roofline") or {}).get("fwd_bwd") if ok else None
        cells = (
            r["model"],
            r["driver"],
            env_label(r),
            ",".join(f"{k}={v}" for k, v in (r.get("sizes") or {}).items()),
            r["status"],
            number(r.get("max_rel_error"), ".1e"),
            f"{fb['median_ms']:.3g} [{fb['q1_ms']:.3g}-{fb['q3_ms']:.3g}] ({fb['repeats']})" if fb else "-",
            f"{fw['median_ms']:.3g}" if fw else "-",
            number(r.get("first_call_s"), ".2f") if ok else "-",
            number(r.get("fwd_first_call_s"), ".2f") if ok else "-",
            number(roof and roof["gflops"], ".3g"),
            number(roof and 100 * roof["fraction_of_peak"], ".2g"),
            ((r.get("binding") or {}).get("fwd_bwd") or {}).get("label", "-") if ok else "-",
            number((r.get("memory") or {}).get("peak_rss_mb"), ".0f"),
            number(saved_mb(r), ".3g"),
            r.get("reason", "") if not ok else _time_note(r),
        )
        if with_loss:
            cells = (*cells[:3], loss_label(r), *cells[3:])
        out.append((machine_of(r), *cells) if with_machine else cells)
    return out


def _family(r: dict) -> str:
    """The vendor layers a row compares with (Framework.family); records written before the field
    existed are grouped by their framework's name."""
    return r.get("framework_family") or r["framework"]


ANCHOR_COLUMNS = ("model", "sizes", "driver", "env", "anchor", "x faster than anchor")


def _sizes(r: dict) -> tuple:
    return tuple(sorted((r.get("sizes") or {}).items()))


def anchor_ratios(records: list[dict]) -> list[tuple[str, ...]]:
    """(model, sizes, driver, env, anchor (its env), the driver's speed-up over the anchor:
    ratios.speedup, anchor ms / driver ms, above 1 faster) for fwd+bwd, against the vendor anchor of
    the same framework family at the same sizes, dtype, device and loss form on the same machine
    (sweep rows against sweep rows, run rows against run rows): how far our own step and loop are
    from the framework's hand-written layer (1.0 = as fast). With records from
    several machines each tuple starts with the machine (ANCHOR_COLUMNS after it)."""
    with_machine = several_machines(records)
    ok = [r for r in records if r["status"] == "ok" and r.get("fwd_bwd")]
    where = lambda r: (
        machine_of(r),
        r["model"],
        _family(r),
        _sizes(r),
        r["dtype"],
        r.get("device"),
        r.get("loss_form", "model"),
        "sweep" in r,
    )
    anchors = {where(r): r for r in ok if r.get("anchor")}
    out = []
    for r in sorted(ok, key=lambda r: (r["model"], r["driver"], env_label(r), _sizes(r), machine_of(r))):
        a = anchors.get(where(r))
        if a is None or r.get("anchor"):
            continue
        row = (
            r["model"],
            ",".join(f"{k}={v}" for k, v in r["sizes"].items()),
            r["driver"],
            env_label(r),
            f"{a['driver']} ({env_label(a)})",
            f"{speedup(r['fwd_bwd']['median_ms'], a['fwd_bwd']['median_ms']):.2f}",
        )
        out.append((machine_of(r), *row) if with_machine else row)
    return out


def _html_table(
    columns: tuple[str, ...],
    rows: list[tuple[str, ...]],
    *,
    status_col: int | None = None,
    left: int = 0,
    table_id: str = "",
) -> str:
    """A table; the first `left` columns (names, not numbers) are left-aligned."""
    head = "".join(f"<th>{escape.text(c)}</th>" for c in columns)
    body = "\n".join(
        "<tr class='{}'>".format(escape.text(row[status_col]) if status_col is not None else "")
        + "".join(
            f"<td class='l'>{escape.text(c)}</td>" if i < left else f"<td>{escape.text(c)}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    ident = f" id='{escape.text(table_id)}'" if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>"


def provenance(records: list[dict]) -> str:
    """Where the numbers come from: per machine (each named when there are several) its CPU,
    cores and platform, Python and package versions, threads and GEMM peak, from that machine's
    own records; then the dates and how memory was measured."""
    timed = [r for r in records if isinstance(r.get("environment"), dict)]  # a str: an environment's name only
    if not timed:
        return ""
    by_machine = several_machines(records)
    hosts: dict[str, list[dict]] = {}
    for r in timed:
        hosts.setdefault(machine_of(r), []).append(r)
    parts = []
    for host, recs in sorted(hosts.items()):
        on = f"{host}: " if by_machine else ""
        env, m = recs[0]["environment"], recs[0].get("machine") or {}
        pythons = ", ".join(sorted({str(x["environment"].get("python", "?")) for x in recs}))
        versions = ", ".join(
            f"{k} {v}" for k, v in sorted({kv for x in recs for kv in (x["environment"].get("versions") or {}).items()})
        )
        labels = ", ".join(sorted({env_label(x) for x in recs}))
        peak = next((x["gemm_peak"] for x in recs if x.get("gemm_peak")), None)
        desc = f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('platform', '?')}"
        parts += [
            f"machine: {host} ({desc})" if by_machine else f"machine: {desc}",
            f"{on}python {pythons}; rows on {labels}; {versions}",
            f"{on}threads per framework: {env.get('threads', '?')} (in use: {env.get('threads_in_use', '?')})",
            f"{on}float32 GEMM peak: {peak['gflops']:.1f} GFLOP/s ({peak['method']}; by size {peak['by_size']})"
            if peak
            else "",
            _ceilings_line(on, next((x["ceilings"] for x in recs if x.get("ceilings")), None)),
        ]
    dates = sorted(x["timestamp"] for x in records if x.get("timestamp"))
    parts += [
        f"dates: {dates[0]} .. {dates[-1]}" if dates else "",
        f"memory: {(timed[0].get('memory') or {}).get('method', 'not recorded')}",
    ]
    return "".join(f"<li>{escape.text(p)}</li>" for p in parts if p)


def _ceilings_line(on: str, ceilings: dict | None) -> str:
    """The machine's memory and dispatch ceilings as the rows were held against them, in one line."""
    if not ceilings:
        return ""
    levels = ", ".join(f"{lvl} {gbs:.3g}" for lvl, gbs in ceilings.get("bandwidth_gbs", {}).items())
    floors = ", ".join(f"{name} {us:.3g}" for name, us in ceilings.get("dispatch_us", {}).items())
    others = ceilings.get("others_on_cpus")
    load = f"; measured {ceilings.get('measured')} with {others:.2g} CPUs of other work" if others is not None else ""
    return (
        f"{on}ceilings: read bandwidth GB/s ({ceilings.get('threads')} thread(s)) {levels}; dispatch µs {floors}{load}"
    )


SECTIONS = (  # chart file prefix -> the heading of its section, in page order
    ("bars_", "Speed by model and size (fwd+bwd, by driver)"),
    ("tgrowth_", "Growth with the sequence length T"),
    ("length_", "Sweeps: time vs trip count"),
    ("speedup_", "Sweeps: speed-up over the torch Python loop"),
    ("hidden_", "Sweeps: time vs hidden size"),
    ("remat_price", "The price of remat (speed-up over the plain driver)"),
    ("mode_speed", "Speed by road: forward vs reverse mode, per-example gradients"),
    ("roofline", "Fraction of the GEMM peak"),
    ("ceilings", "Every row against every ceiling (GEMM, memory bandwidth, dispatch)"),
    ("grad_error_heatmap", "Gradient error"),
)
OTHER_CHARTS = ("", "Other charts")  # a chart kind SECTIONS does not name is still shown, never dropped


def chart_sections(charts: list[Path]) -> str:
    """The charts under one heading per kind (SECTIONS, then OTHER_CHARTS), a contents line first."""
    parts, contents, shown = [], [], set()
    for prefix, heading in (*SECTIONS, OTHER_CHARTS):
        mine = [p for p in charts if p.name.startswith(prefix) and p not in shown]
        if not mine:
            continue
        shown.update(mine)
        ident = prefix.strip("_") or "other"
        contents.append(f'<a href="#{ident}">{escape.text(heading)}</a>')
        parts.append(f'<h2 id="{ident}">{escape.text(heading)}</h2>')
        parts += [
            f'<figure><img src="{escape.href(p.name)}" alt="{escape.text(p.stem)}">'
            f"<figcaption>{escape.text(p.stem)}</figcaption></figure>"
            for p in mine
        ]
    contents += ['<a href="#vendor">Against the vendor layers</a>', '<a href="#rows">All rows</a>']
    return '<p class="toc">' + " · ".join(contents) + "</p>\n" + "\n".join(parts)


def version_table(records: list[dict]) -> str:
    """The bug x version table (rnnbench versions) as HTML, when the records hold some framework
    at more than one version and some registered probe among them; else ""."""
    versions: dict[str, set[str]] = {}
    for r in records:
        label = env_label(r).split(" ")
        if len(label) == 2:
            versions.setdefault(label[0], set()).add(label[1])
    if not any(len(v) > 1 for v in versions.values()) or not bug_table.outcomes(records):
        return ""
    table = escape.markdown(bug_table.format_table(records), links=False)
    return (
        '<h2 id="versions">Which bug reproduces on which version (rnnbench versions)</h2>\n'
        "<p>Per registered bug, the verdicts of its probe rows on each version in these records.</p>\n"
        + table.replace("<table>", '<table id="versions-table">')
    )


def write_report(records: list[dict], out_dir: Path) -> Path:
    """Write the PNGs and index.html into `out_dir`; return the page's path. A row run more than
    once on one machine (e.g. a sweep re-run with a larger budget) is shown with its latest record;
    the same row from several machines is shown once per machine, each labelled by its own."""
    records = latest_rows(records)
    with_machine = several_machines(records)
    with_loss = any(loss_label(r) != "model" for r in records)
    cols = columns(with_machine, with_loss)
    charts = all_charts(records, out_dir)
    imgs = chart_sections(charts)
    versions = version_table(records)
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>rnnbench report</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; }}
img {{ max-width: 100%; border: 1px solid #ddd; }}
table {{ border-collapse: collapse; font-size: 12px; }}
td, th {{ border: 1px solid #ccc; padding: 2px 6px; text-align: right; }}
td.l {{ text-align: left; }}
tr.skipped td, tr.unavailable td {{ color: #888; }}
tr.grad_mismatch td, tr.error td, tr.crash td, tr.timeout td, tr.compile_error td, tr.missing_grad td {{ color: #b00; }}
tr.cannot_decide td, tr.subgradient_differs td {{ color: #a60; }}
</style></head><body>
<h1>rnnbench report</h1>
<ul>{provenance(records)}</ul>
<p>Speed numbers exist only for rows whose gradients agree with the float64 oracle. Medians with
interquartile range and the number of repeats; first call = trace + compile + one run in a fresh
process with compilation caches off. Timings on a shared machine are noisy: compare drivers
within one run (ratios), not across runs.</p>
{imgs}
<h2 id="vendor">Our drivers against the vendor layer of the same framework (speed-up:
anchor time / driver time; above 1 faster, 1 = as fast)</h2>
{
        _html_table(
            ("machine", *ANCHOR_COLUMNS) if with_machine else ANCHOR_COLUMNS,
            anchor_ratios(records),
            left=len(ANCHOR_COLUMNS) - 1 + with_machine,
            table_id="anchors",
        )
    }
{versions}
<h2 id="rows">All rows ({len(records)})</h2>
{
        _html_table(
            cols,
            table_rows(records, with_machine, with_loss),
            status_col=cols.index("status"),
            left=cols.index("status") + 1,
            table_id="rows",
        )
    }
</body></html>
"""
    path = out_dir / "index.html"
    path.write_text(page)
    return path
