"""One HTML page: every chart, where the numbers come from (machine, versions, threads, GEMM peak,
date), and the full table of records. Reads records only."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from rnnbench.report.charts import all_charts, latest_rows

COLUMNS = ("model", "driver", "sizes", "status", "max rel err", "fwd+bwd ms median [IQR] (n)", "fwd ms median",
           "first call s", "fwd first call s", "GFLOP/s fwd+bwd", "% peak", "peak RSS MiB", "note")


def _num(v: Any, fmt: str) -> str:
    return "-" if v is None or v != v else format(v, fmt)


def table_rows(records: list[dict]) -> list[tuple[str, ...]]:
    out = []
    for r in records:
        ok = r["status"] == "ok"
        fb, fw = (r.get("fwd_bwd"), r.get("fwd")) if ok else (None, None)
        roof = (r.get("roofline") or {}).get("fwd_bwd") if ok else None
        out.append((
            r["model"],
            r["driver"],
            ",".join(f"{k}={v}" for k, v in r["sizes"].items()),
            r["status"],
            _num(r.get("max_rel_error"), ".1e"),
            f"{fb['median_ms']:.3g} [{fb['q1_ms']:.3g}-{fb['q3_ms']:.3g}] ({fb['repeats']})" if fb else "-",
            f"{fw['median_ms']:.3g}" if fw else "-",
            _num(r.get("first_call_s"), ".2f") if ok else "-",
            _num(r.get("fwd_first_call_s"), ".2f") if ok else "-",
            _num(roof and roof["gflops"], ".3g"),
            _num(roof and 100 * roof["fraction_of_peak"], ".2g"),
            _num((r.get("memory") or {}).get("peak_rss_mb"), ".0f"),
            r.get("reason", "") if not ok else "",
        ))
    return out




def _family(r: dict) -> str:
    """The vendor layers a row compares with (Framework.family); records written before the field
    existed are grouped by their framework's name."""
    return r.get("framework_family") or r["framework"]



def anchor_ratios(records: list[dict]) -> list[tuple[str, ...]]:
    """(model, sizes, driver, anchor, driver ms / anchor ms) for fwd+bwd, against the vendor
    anchor of the same framework family at the same sizes: how far our own step and loop are
    from the framework's hand-written layer (1.0 = as fast)."""
    ok = [r for r in records if r["status"] == "ok" and r.get("fwd_bwd") and "sweep" in r]
    anchors = {(r["model"], _family(r), tuple(sorted(r["sizes"].items()))): r for r in ok if r.get("anchor")}
    out = []
    for r in sorted(ok, key=lambda r: (r["model"], r["driver"], tuple(sorted(r["sizes"].items())))):
        a = anchors.get((r["model"], _family(r), tuple(sorted(r["sizes"].items()))))
        if a is None or r.get("anchor"):
            continue
        out.append((r["model"], ",".join(f"{k}={v}" for k, v in r["sizes"].items()), r["driver"], a["driver"],
                    f"{r['fwd_bwd']['median_ms'] / a['fwd_bwd']['median_ms']:.2f}"))
    return out


def _html_table(columns: tuple[str, ...], rows: list[tuple[str, ...]], status_col: int | None = None) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "\n".join(
        "<tr class='{}'>".format(html.escape(row[status_col]) if status_col is not None else "")
        + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>"


def provenance(records: list[dict]) -> str:
    timed = [r for r in records if r.get("environment")]
    if not timed:
        return ""
    r = timed[0]
    env, m = r["environment"], r["machine"]
    versions = ", ".join(f"{k} {v}" for rec in {tuple(sorted(x["environment"]["versions"].items())) for x in timed} for k, v in rec)
    dates = sorted(x["timestamp"] for x in records if x.get("timestamp"))
    peak = next((x["gemm_peak"] for x in records if x.get("gemm_peak")), None)
    parts = [
        f"machine: {m['cpu']}, {m['cores']} cores, {m['platform']}",
        f"python {env['python']}; {versions}",
        f"threads per framework: {env['threads']} (in use: {env.get('threads_in_use', '?')})",
        f"dates: {dates[0]} .. {dates[-1]}" if dates else "",
        f"float32 GEMM peak: {peak['gflops']:.1f} GFLOP/s ({peak['method']}; by size {peak['by_size']})" if peak else "",
        f"memory: {timed[0].get('memory', {}).get('method', 'not recorded')}",
    ]
    return "".join(f"<li>{html.escape(p)}</li>" for p in parts if p)


def write_report(records: list[dict], out_dir: Path) -> Path:
    """Write the PNGs and index.html into `out_dir`; return the page's path. A row run more than
    once (e.g. a sweep re-run with a larger budget) is shown with its latest record."""
    records = latest_rows(records)
    charts = all_charts(records, out_dir)
    imgs = "\n".join(f'<figure><img src="{p.name}" alt="{p.stem}"><figcaption>{p.stem}</figcaption></figure>' for p in charts)
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>rnnbench report</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; }}
img {{ max-width: 100%; border: 1px solid #ddd; }}
table {{ border-collapse: collapse; font-size: 12px; }}
td, th {{ border: 1px solid #ccc; padding: 2px 6px; text-align: right; }}
td:nth-child(-n+4) {{ text-align: left; }}
tr.skipped td, tr.unavailable td {{ color: #888; }}
tr.grad_mismatch td, tr.error td, tr.crash td, tr.timeout td, tr.compile_error td, tr.missing_grad td {{ color: #b00; }}
tr.cannot_decide td {{ color: #a60; }}
</style></head><body>
<h1>rnnbench report</h1>
<ul>{provenance(records)}</ul>
<p>Speed numbers exist only for rows whose gradients agree with the float64 oracle. Medians with
interquartile range and the number of repeats; first call = trace + compile + one run in a fresh
process with compilation caches off. Timings on a shared machine are noisy: compare drivers
within one run (ratios), not across runs.</p>
{imgs}
<h2>Our drivers against the vendor layer of the same framework (fwd+bwd time ratio; 1 = as fast)</h2>
{_html_table(("model", "sizes", "driver", "anchor", "driver / anchor"), anchor_ratios(records))}
<h2>All rows ({len(records)})</h2>
{_html_table(COLUMNS, table_rows(records), status_col=3)}
</body></html>
"""
    path = out_dir / "index.html"
    path.write_text(page)
    return path
