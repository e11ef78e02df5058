"""`rnnbench compare`'s output: a text table for the terminal, a markdown one to paste into a pull
request or a CI job summary, and JSON with every number. All three say what the two sides differ
in, the threshold and interval, and end with the verdicts that decide the exit code."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from rnnbench.report.compare_pairs import (
    FIXED,
    GATING,
    KNOWN_FIXED,
    NOT_RUN,
    QUANTITIES,
    QUANTITY_LABELS,
    REGRESSION,
    RUNS_CAP,
    Comparison,
    Pair,
    clock_of,
    side_status,
)
from rnnbench.report.compare_stats import CPU_QUANTILE, SLOWER
from rnnbench.report.escape import md_cell
from rnnbench.report.table import env_label

FORMATS = ("text", "markdown", "json")


def _interval(pair: Pair, q: str) -> str:
    t = pair.times.get(q)
    if t is None:
        return "-"
    e = t.estimate
    ci = "-" if e.lo is None else f"{e.lo:.2f}-{e.hi:.2f}"
    return f"{e.ratio:.2f} [{ci}] {t.verdict}"


def _ms(pair: Pair) -> str:
    t = pair.times.get("fwd_bwd")
    return "-" if t is None else f"{t.base_ms:.3g} -> {t.new_ms:.3g}"


def _status(pair: Pair) -> str:
    b = side_status(pair.base) if pair.base else "-"
    n = side_status(pair.new) if pair.new else "-"
    return b if b == n else f"{b} -> {n}"


def _env(pair: Pair) -> str:
    b = {env_label(r) for r in pair.base}
    n = {env_label(r) for r in pair.new}
    if not b or not n or b == n:
        return ", ".join(sorted(b | n))
    return f"{', '.join(sorted(b))} -> {', '.join(sorted(n))}"


def _sizes(pair: Pair) -> str:
    return ",".join(f"{k}={v}" for k, v in pair.key[5])


def not_run(pair: Pair) -> bool:
    """Unavailable or skipped on both sides: not listed in the tables (counted under them)."""
    return bool(pair.base and pair.new) and all(str(r["status"]) in NOT_RUN for r in pair.base + pair.new)


def table_rows(cmp: Comparison) -> tuple[list[str], list[list[str]]]:
    """(headers, rows) of the rows that ran on some side: sizes and loss columns only where the
    rows differ in them."""
    with_sizes = len({(p.key[0], p.key[5]) for p in cmp.pairs}) > len({p.key[0] for p in cmp.pairs})
    with_loss = any(p.key[7] != "model" for p in cmp.pairs)
    level = f"{100 * (1 - cmp.alpha):g}%"
    headers = [
        "model",
        "driver",
        "env",
        "dtype",
        "status",
        "fwd+bwd ms",
        f"fwd+bwd new/base [{level}]",
        f"fwd new/base [{level}]",
        "verdict",
        "notes",
    ]
    rows = []
    for p in sorted(cmp.pairs, key=lambda p: p.key):
        if not_run(p):
            continue
        notes = "; ".join([*p.notes, *([p.why] if p.why else [])])
        row = [
            p.key[0],
            p.key[1],
            _env(p),
            p.key[3],
            _status(p),
            _ms(p),
            _interval(p, "fwd_bwd"),
            _interval(p, "fwd"),
            p.verdict.upper() if p.verdict in GATING else p.verdict,
            notes,
        ]
        if with_loss:
            row.insert(2, p.key[7])
        if with_sizes:
            row.insert(2, _sizes(p))
        rows.append(row)
    if with_loss:
        headers.insert(2, "loss")
    if with_sizes:
        headers.insert(2, "sizes")
    return headers, rows


def header_lines(cmp: Comparison) -> list[str]:
    t = cmp.threshold
    up, down = 1 + t, 1 / (1 + t)
    runs = {e.estimate.runs for p in cmp.pairs for e in p.times.values()}
    differ = "; ".join(cmp.differences) if cmp.differences else "nothing recorded besides their times"
    lines = [
        f"base: {cmp.sides[0]}  ->  new: {cmp.sides[1]}",
        f"differ in: {differ}",
        f"threshold {100 * t:g} %: slower = interval above 1 and ratio above {up:.2f}; faster = interval below 1 "
        f"and ratio below {down:.2f}; same = interval within [{down:.2f}, {up:.2f}]; noisy = too wide to decide",
        f"intervals: {100 * (1 - cmp.alpha):g} % percentile bootstrap of the ratio of medians over each side's "
        f"runs (at most {RUNS_CAP} per row: the last) and samples (seeded)",
    ]
    if cmp.patterns:
        per_row = ", ".join(f"{pattern} {100 * level:g} %" for pattern, level in cmp.patterns)
        lines.append(f"thresholds per row (the largest that matches its driver or model/driver): {per_row}")
    clocks = {clock_of(p.base + p.new) for p in cmp.pairs if p.times}
    if "cpu" in clocks:
        lines.append(
            f"one-thread rows are decided by their CPU time ({100 * CPU_QUANTILE:g}th percentile: other work only "
            "adds to it), other rows by wall time; contended or self-disagreeing rows are noisy"
        )
    capped = sum(len(p.base) > RUNS_CAP or len(p.new) > RUNS_CAP for p in cmp.pairs)
    if capped:
        lines.append(f"{capped} row(s) have more than {RUNS_CAP} runs on a side: the last {RUNS_CAP} are compared")
    if any(cmp.repeated):
        lines.append(f"repeated records counted once (the same run): {cmp.repeated[0]} base, {cmp.repeated[1]} new")
    if runs and all(r == (1, 1) for r in runs):
        lines.append(
            "one run per side: the intervals cover the noise within each run's process, not between processes "
            "(interleaved rounds, --commits, cover both)"
        )
    if cmp.across_machines:
        lines.append(
            f"ACROSS MACHINES: base on {cmp.machines[0]}, new on {cmp.machines[1]}: every ratio compares two machines"
        )
    if cmp.factor != 1.0:
        lines.append(
            f"normalized: every ratio divided by {cmp.factor:.3f}, the median new/base ratio of all timed "
            "rows (the machines' overall speed difference)"
        )
    return lines


def summary_lines(cmp: Comparison) -> list[str]:
    counts = Counter(p.verdict for p in cmp.pairs if not not_run(p))
    hidden = sum(not_run(p) for p in cmp.pairs)
    lines = [
        ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
        + f" -> exit {cmp.exit_code}"
        + (f" ({hidden} rows not run on either side, unavailable or skipped, are not listed)" if hidden else "")
    ]
    for p in sorted(cmp.pairs, key=lambda p: p.key):
        name = f"{p.key[0]}/{p.key[1]}/{_env(p)}/{p.key[3]}"
        if p.verdict == REGRESSION:
            lines.append(f"REGRESSION {name}: {_status(p)}" + (f" ({p.why})" if p.why else ""))
        elif p.verdict == SLOWER:
            slow = [
                f"{QUANTITY_LABELS[q]} {_interval(p, q)}"
                for q in QUANTITIES
                if q in p.times and p.times[q].verdict == SLOWER
            ]
            lines.append(f"SLOWER {name}: {'; '.join(slow)}")
        elif p.verdict in (FIXED, KNOWN_FIXED):
            lines.append(f"{p.verdict} {name}: {_status(p)}" + (f" ({p.why})" if p.why else ""))
    return lines


def as_text(cmp: Comparison) -> str:
    headers, rows = table_rows(cmp)
    from tabulate import tabulate  # an extra ([charts]): the environments without it still run every other command

    return "\n".join([*header_lines(cmp), "", tabulate(rows, headers, tablefmt="simple"), "", *summary_lines(cmp)])


def as_markdown(cmp: Comparison) -> str:
    headers, rows = table_rows(cmp)
    head = [f"- {line}" for line in header_lines(cmp)]
    tail = [f"- {line}" for line in summary_lines(cmp)[1:]]
    from tabulate import tabulate  # an extra ([charts]), imported where it draws

    return "\n".join(
        [
            "### rnnbench compare",
            "",
            *head,
            "",
            tabulate([[md_cell(c) for c in row] for row in rows], [md_cell(h) for h in headers], tablefmt="github"),
            "",
            f"**{summary_lines(cmp)[0]}**",
            *([""] + tail if tail else []),
        ]
    )


def _pair_json(p: Pair) -> dict[str, Any]:
    model, driver, env, dtype, device, sizes, seed, loss = p.key
    return {
        "model": model,
        "driver": driver,
        "environment": env or None,
        "env": _env(p),
        "dtype": dtype,
        "device": device,
        "sizes": dict(sizes),
        "seed": seed,
        "loss_form": loss,
        "verdict": p.verdict,
        "why": p.why,
        "notes": p.notes,
        "status": {"base": side_status(p.base) if p.base else None, "new": side_status(p.new) if p.new else None},
        "times": {
            q: {
                "ratio": t.estimate.ratio,
                "lo": t.estimate.lo,
                "hi": t.estimate.hi,
                "method": t.estimate.method,
                "runs": list(t.estimate.runs),
                "verdict": t.verdict,
                "base_median_ms": t.base_ms,
                "new_median_ms": t.new_ms,
            }
            for q, t in p.times.items()
        },
    }


def as_json(cmp: Comparison) -> str:
    return json.dumps(
        {
            "base": cmp.sides[0],
            "new": cmp.sides[1],
            "differences": cmp.differences,
            "threshold": cmp.threshold,
            "alpha": cmp.alpha,
            "across_machines": cmp.across_machines,
            "machines": list(cmp.machines),
            "normalized_by": cmp.factor,
            "exit_code": cmp.exit_code,
            "header": header_lines(cmp),
            "rows": [_pair_json(p) for p in cmp.pairs],
        },
        indent=1,
        sort_keys=True,
        allow_nan=False,  # strict JSON: timings are validated on reading, so every ratio is finite
    )


def render(cmp: Comparison, fmt: str) -> str:
    return {"text": as_text, "markdown": as_markdown, "json": as_json}[fmt](cmp)
