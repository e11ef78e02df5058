"""`rnnbench compare`'s output: a text table for the terminal, a markdown one to paste into a pull
request or a CI job summary, and JSON with every number. All three say what the two sides differ
in, the threshold and interval, and end with the verdicts that decide the exit code.

Every ratio shown is a speed-up of the new side over the base (rnnbench.report.ratios: base time /
new time, above 1 faster), the direction of the rest of rnnbench; the statistics underneath
(compare_stats) work in times, new / base, and are inverted here, interval ends swapped."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from rnnbench.report.compare_evidence import RUNS_CAP, clock_of
from rnnbench.report.compare_pairs import (
    FIXED,
    GATING,
    KNOWN_FIXED,
    NOT_RUN,
    QUANTITIES,
    QUANTITY_LABELS,
    REGRESSION,
    Comparison,
    Pair,
    Timed,
    side_status,
)
from rnnbench.report.compare_stats import CPU_QUANTILE, SLOWER
from rnnbench.report.escape import md_cell, terminal
from rnnbench.report.labels import env_label
from rnnbench.report.ratios import DIRECTION, speedup_label, speedup_of_time_ratio

FORMATS = ("text", "markdown", "json")
RAW_SHOWN = 0.05  # a raw speed-up this far from the relative one is shown beside it


def speedups(t: Timed) -> tuple[float, float | None, float | None]:
    """(speed-up, interval low, interval high) of one quantity, new over base (module docstring)."""
    e = t.estimate
    if e.lo is None or e.hi is None:
        return speedup_of_time_ratio(e.ratio), None, None
    return speedup_of_time_ratio(e.ratio), speedup_of_time_ratio(e.hi), speedup_of_time_ratio(e.lo)


def _interval(pair: Pair, q: str) -> str:
    t = pair.times.get(q)
    if t is None:
        return "-"
    value, lo, hi = speedups(t)
    ci = "-" if lo is None else f"{lo:.2f}-{hi:.2f}"
    return f"{speedup_label(value)} [{ci}] {t.verdict}"


def _raw_notes(pair: Pair) -> list[str]:
    """Where a quantity was judged relative to the machine's speed and its raw times say otherwise
    by more than RAW_SHOWN: both, so the raw times are never hidden."""
    out = []
    for q, t in pair.times.items():
        if t.relative and t.raw_ratio > 0 and abs(t.raw_ratio / t.estimate.ratio - 1) > RAW_SHOWN:
            raw, relative = speedup_of_time_ratio(t.raw_ratio), speedup_of_time_ratio(t.estimate.ratio)
            out.append(
                f"{QUANTITY_LABELS[q]}: {speedup_label(raw)} on raw times, {speedup_label(relative)} relative to "
                "each run's machine-speed reference"
            )
    return out


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
        f"fwd+bwd speed-up [{level}]",
        f"fwd speed-up [{level}]",
        "verdict",
        "notes",
    ]
    rows = []
    for p in sorted(cmp.pairs, key=lambda p: p.key):
        if not_run(p):
            continue
        notes = "; ".join([*p.notes, *_raw_notes(p), *([p.why] if p.why else [])])
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
        f"speed-up of new over base (the base is the reference): {DIRECTION}",
        f"threshold {100 * t:g} %: slower = interval below 1 and speed-up below {down:.2f}; faster = interval "
        f"above 1 and speed-up above {up:.2f}; same = interval within [{down:.2f}, {up:.2f}]; noisy = too wide "
        "to decide",
        f"intervals: {100 * (1 - cmp.alpha):g} % percentile bootstrap of the speed-up over each side's "
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
    relative = sum(t.relative for p in cmp.pairs for t in p.times.values())
    if runs and all(r == (1, 1) for r in runs):
        lines.append(
            "one run per side: the intervals cover the noise within each run's process, not between processes "
            "(interleaved rounds, --commits, cover both)"
            + ("; the machine-speed reference divides out the speed each process got" if relative else "")
        )
    if cmp.across_machines:
        lines.append(
            f"ACROSS MACHINES: base on {cmp.machines[0]}, new on {cmp.machines[1]}: every ratio compares two machines"
        )
    if relative:
        lines.append(
            f"{relative} quantity(ies) judged relative to each run's machine-speed reference (a fixed kernel timed "
            "beside every call): a process that got a slower machine moves neither time; the others on raw times"
        )
    if cmp.factor != 1.0:
        lines.append(
            f"normalized: every speed-up divided by {speedup_of_time_ratio(cmp.factor):.3f}, the median speed-up "
            "of all timed rows (the machines' overall speed difference)"
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

    rows = [[terminal(c) for c in row] for row in rows]  # tabulate would start a line at a cell's break
    head, tail = [terminal(line) for line in header_lines(cmp)], [terminal(line) for line in summary_lines(cmp)]
    return "\n".join([*head, "", tabulate(rows, headers, tablefmt="simple"), "", *tail])


def as_markdown(cmp: Comparison) -> str:
    headers, rows = table_rows(cmp)
    head = [f"- {terminal(line)}" for line in header_lines(cmp)]  # one list item each
    tail = [f"- {terminal(line)}" for line in summary_lines(cmp)[1:]]
    from tabulate import tabulate  # an extra ([charts]), imported where it draws

    return "\n".join(
        [
            "### rnnbench compare",
            "",
            *head,
            "",
            tabulate([[md_cell(c) for c in row] for row in rows], [md_cell(h) for h in headers], tablefmt="github"),
            "",
            f"**{terminal(summary_lines(cmp)[0])}**",
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
                "speedup": speedups(t)[0],
                "lo": speedups(t)[1],
                "hi": speedups(t)[2],
                "relative": t.relative,  # judged relative to each run's machine-speed reference
                "raw_speedup": speedup_of_time_ratio(t.raw_ratio) if t.raw_ratio > 0 else None,
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
            "direction": DIRECTION,
            "normalized_by": speedup_of_time_ratio(cmp.factor),  # the machines' speed-up divided out
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
