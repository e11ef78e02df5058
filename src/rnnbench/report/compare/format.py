"""`rnnbench compare`'s output: a text table for the terminal, a markdown one to paste into a pull
request or a CI job summary, and JSON with every number. All three say what the two sides differ
in, the threshold and interval, and end with the verdicts that decide the exit code.

Every ratio shown is a speed-up of the new side over the base (rnnbench.report.ratios: base time /
new time, above 1 faster), the direction of the rest of rnnbench; the statistics underneath
(stats) work in times, new / base, and are inverted here, interval ends swapped."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from rnnbench.report.compare import profile_diff
from rnnbench.report.compare.evidence import RUNS_CAP
from rnnbench.report.compare.pairs import (
    FASTER_OR_SAME,
    FIXED,
    GATING,
    KNOWN_FIXED,
    NOTHING_MEASURED,
    QUANTITIES,
    QUANTITY_LABELS,
    REGRESSION,
    STATUS_CHANGES,
    Comparison,
    Pair,
    Timed,
    not_run,
    side_status,
)
from rnnbench.report.compare.stats import CPU_QUANTILE, NOISY, SLOWER
from rnnbench.report.escape import md_cell, terminal
from rnnbench.report.labels import env_label
from rnnbench.report.ratios import DIRECTION, clock_of, speedup_label, speedup_of_time_ratio

FORMATS = ("text", "markdown", "json", "github")
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


NO_PROFILE = "no profile on a side: run both with `rnnbench run --profile` (or `compare --commits ... --profile`)"


def where_time_went(cmp: Comparison, p: Pair) -> list[profile_diff.Change] | None:
    """The profile difference of a row decided slower (of every row, with --profile) whose sides
    were both profiled; None for a row not shown or without a profile on a side."""
    if not (p.verdict == SLOWER or (cmp.profile_all and p.times)):
        return None
    base, new = profile_diff.profile_of(p.base), profile_diff.profile_of(p.new)
    return profile_diff.changes(base, new) if base is not None and new is not None else None


def _profiled(cmp: Comparison) -> list[tuple[Pair, list[profile_diff.Change] | None]]:
    """(pair, its profile difference or None) of every row whose time went is asked: rows decided
    slower, every timed row with --profile (those without profiles only where they were slower)."""
    out = []
    for p in sorted(cmp.pairs, key=lambda p: p.key):
        found = where_time_went(cmp, p)
        if found is not None or p.verdict == SLOWER:
            out.append((p, found))
    return out


def _time_went_lines(cmp: Comparison) -> list[str]:
    out = []
    for p, found in _profiled(cmp):
        out.append(f"where the time went, {_row_name(p)} (base -> new):")
        out += [f"  {line}" for line in profile_diff.lines(found)] if found else [f"  {NO_PROFILE}"]
    return out


def as_text(cmp: Comparison) -> str:
    headers, rows = table_rows(cmp)
    from tabulate import tabulate  # an extra ([charts]): the environments without it still run every other command

    rows = [[terminal(c) for c in row] for row in rows]  # tabulate would start a line at a cell's break
    head, tail = [terminal(line) for line in header_lines(cmp)], [terminal(line) for line in summary_lines(cmp)]
    went = [terminal(line) for line in _time_went_lines(cmp)]
    return "\n".join([*head, "", tabulate(rows, headers, tablefmt="simple"), "", *tail, *([""] + went if went else [])])


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
            *_time_went_markdown(cmp),
        ]
    )


def _time_went_markdown(cmp: Comparison) -> list[str]:
    """A section per row whose time went is asked (_profiled): the profile difference's table."""
    out = []
    for p, found in _profiled(cmp):
        out += ["", f"**Where the time went: {md_cell(_row_name(p))}** (base -> new, largest changes first)", ""]
        out += profile_diff.markdown_table(found, md_cell) if found else [md_cell(NO_PROFILE)]
    return out


def _pair_json(p: Pair, cmp: Comparison) -> dict[str, Any]:
    key = p.key
    return {
        "model": key.model,
        "driver": key.driver,
        "environment": key.environment or None,
        "env": _env(p),
        "dtype": key.dtype,
        "device": key.device,
        "sizes": dict(key.sizes),
        "seed": key.seed,
        "loss_form": key.loss_form,
        "mode": key.mode,
        "verdict": p.verdict,
        "why": p.why,
        "notes": p.notes,
        "profile_diff": profile_diff.as_json(found) if (found := where_time_went(cmp, p)) is not None else None,
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
            "rows": [_pair_json(p, cmp) for p in cmp.pairs],
        },
        indent=1,
        sort_keys=True,
        allow_nan=False,  # strict JSON: timings are validated on reading, so every ratio is finite
    )


# The first line of a pull-request comment body: a workflow finds its own earlier comment by it and
# edits that one rather than adding another on every push.
GITHUB_MARKER = "<!-- rnnbench compare -->"


def _row_name(p: Pair) -> str:
    extra = [_sizes(p)] if p.key[5] else []
    return "/".join([p.key[0], p.key[1], _env(p), p.key[3], *extra, *([p.key[7]] if p.key[7] != "model" else [])])


def headline(cmp: Comparison) -> str:
    """One line: what decided the exit code, in words."""
    code = cmp.exit_code
    regressions = sum(p.verdict == REGRESSION for p in cmp.pairs)
    slower = sum(p.verdict == SLOWER for p in cmp.pairs)
    if code == 1:
        parts = [f"{regressions} status regression(s)"] * bool(regressions) + [f"{slower} row(s) slower"] * bool(slower)
        return f"FAIL: {', '.join(parts)} (exit 1)"
    if code == NOTHING_MEASURED:
        return f"MEASURED NOTHING: no row could be judged on both sides (exit {NOTHING_MEASURED})"
    return f"OK: nothing wrong or slower in {len(cmp.judged)} row(s) judged (exit 0)"


def as_github(cmp: Comparison) -> str:
    """A pull-request comment body and job summary (GitHub-flavoured markdown): the verdict, status
    changes first (a wrong gradient outranks any time), then speed (slower, then faster; rows the
    same counted), then the noise said (rows not judged, and why), then what is not compared; the
    header lines of the other formats fold away under "How this was compared"."""
    shown = [p for p in sorted(cmp.pairs, key=lambda p: p.key) if not not_run(p)]
    level = f"{100 * (1 - cmp.alpha):g}%"
    out = [GITHUB_MARKER, "### rnnbench compare", "", f"**{md_cell(headline(cmp))}**", ""]
    changes = [p for p in shown if p.verdict in STATUS_CHANGES]
    changes.sort(key=lambda p: STATUS_CHANGES.index(p.verdict))
    if changes:
        out += ["#### Status changes (gradient verdicts)", "", "| row | base -> new | verdict | why |"]
        out.append("| --- | --- | --- | --- |")
        out += [
            f"| {md_cell(_row_name(p))} | {md_cell(_status(p))} | "
            f"{'**REGRESSION**' if p.verdict == REGRESSION else md_cell(p.verdict)} | {md_cell(p.why)} |"
            for p in changes
        ]
        out.append("")
    timed = [p for p in shown if p.verdict in (SLOWER, *FASTER_OR_SAME) and p.times]
    moved = [p for p in timed if p.verdict != "same"]
    moved.sort(key=lambda p: (p.verdict != SLOWER, p.key))
    same = len(timed) - len(moved)
    out += ["#### Speed", ""]
    if moved:
        out += [f"| row | fwd+bwd ms | fwd+bwd speed-up [{level}] | fwd speed-up [{level}] | verdict |"]
        out += ["| --- | --- | --- | --- | --- |"]
        out += [
            f"| {md_cell(_row_name(p))} | {md_cell(_ms(p))} | {md_cell(_interval(p, 'fwd_bwd'))} | "
            f"{md_cell(_interval(p, 'fwd'))} | {'**SLOWER**' if p.verdict == SLOWER else md_cell(p.verdict)} |"
            for p in moved
        ]
        out.append("")
    status_only = sum(p.verdict == "same" and not p.times for p in shown)
    out.append(
        (
            f"{len(moved)} row(s) changed speed beyond the threshold ({100 * cmp.threshold:g} %), {same} the same."
            if timed
            else "No row was timed and decided on both sides."
        )
        + (f" {status_only} row(s) compared by status only (not timed on a side)." if status_only else "")
    )
    out.append("")
    noisy = [p for p in shown if p.verdict == NOISY]
    if noisy:
        out += [f"**Noise:** {len(noisy)} row(s) noisy, not judged (their spread cannot decide at the threshold):", ""]
        out += [f"- {md_cell(_row_name(p))}: {md_cell('; '.join(p.notes) or _interval(p, 'fwd_bwd'))}" for p in noisy]
        out.append("")
    else:
        out += ["**Noise:** no row noisy.", ""]
    one_sided = Counter(p.verdict for p in shown if p.verdict not in (*STATUS_CHANGES, SLOWER, *FASTER_OR_SAME, NOISY))
    hidden = sum(not_run(p) for p in cmp.pairs)
    if one_sided or hidden:
        parts = [f"{n} {v}" for v, n in sorted(one_sided.items())] + [f"{hidden} not run on either side"] * bool(hidden)
        out += [f"Not compared: {', '.join(parts)}.", ""]
    went = _time_went_markdown(cmp)
    if went:
        out += ["#### Where the time went", *went, ""]
    out += ["<details><summary>How this was compared</summary>", ""]
    out += [f"- {md_cell(line)}" for line in header_lines(cmp)]
    out += ["", "</details>", "", f"`{md_cell(summary_lines(cmp)[0])}`"]
    return "\n".join(out)


def nothing_measured(why: str, sides: tuple[str, str], fmt: str) -> str:
    """What `compare` prints for sides that hold no row (pairs.NothingMeasured), per format."""
    if fmt == "json":
        return json.dumps({"base": sides[0], "new": sides[1], "exit_code": NOTHING_MEASURED, "why": why, "rows": []})
    if fmt in ("github", "markdown"):
        head = [GITHUB_MARKER] if fmt == "github" else []
        line = f"**MEASURED NOTHING: {md_cell(why)} (exit {NOTHING_MEASURED})**"
        return "\n".join([*head, "### rnnbench compare", "", line])
    return terminal(f"{why} -> exit {NOTHING_MEASURED}")


def render(cmp: Comparison, fmt: str) -> str:
    return {"text": as_text, "markdown": as_markdown, "json": as_json, "github": as_github}[fmt](cmp)
