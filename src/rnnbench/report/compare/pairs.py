"""`rnnbench compare`'s decisions: rows paired by key, each pair's verdict, what the two sides
differ in, and the exit code.

A row's key is its record.row_key: model, driver, sizes, dtype, loss form, device, seed and
environment (when the two sides are two environments, `--environments`, the environment is what
they differ in, so it leaves the key). Several records of one key on one side (the rounds of `--commits`) are that
side's runs of the row, pooled by the statistics (rnnbench.report.compare.stats), the last
evidence.RUNS_CAP of them.

What is compared is what the header says: a run is identified by its record's `run_id` (one per
process that wrote it) and row, or, for a record without one (older rnnbench, pytest-benchmark
JSON without a `datetime`), by its whole content, so a record repeated is one run. A run on both
sides (a file compared with itself) and two sides that share no row are refused (InputError).

Verdicts. A status change is a verdict of its own, whatever the time says:
  regression         the new side fails where the base did not (ok -> grad_mismatch, crash, ...),
                     or a registered bug now reproduces (ok -> known_issue:X, known_issue_fixed:X
                     -> known_issue:X)
  fixed              the base failed or had a registered bug and the new side is ok: for
                     known_issue:X -> ok, a framework fix the registry (known_issues.json) must now
                     record (its version bounds)
  known_issue_fixed  known_issue:X -> known_issue_fixed:X: the registry expects the bug here and it
                     no longer reproduces
  changed            any other change of status (grad_mismatch -> crash, ok -> cannot_decide)
  unavailable        the row ran on one side and was unavailable or skipped on the other
  only_base, only_new  the row is in one file only
Rows ok on both sides get a time verdict per quantity (fwd+bwd, fwd): slower, faster, same or
noisy (stats.verdict); the row's is the worst (slower, then noisy, then faster, then
same). Rows with one status on both sides and nothing timed are `same`.
Which clock decides a time verdict, relative to what, and what its evidence cannot support
(`noisy`): rnnbench.report.compare.evidence.
The exit code is 1 on any regression or slower row; else NOTHING_MEASURED (3) when no row was
judged (every row noisy, one-sided or not run on a side: the gate measured nothing, which a CI
must not read as a pass); else 0. A row is judged when it ran on both sides and its status changed,
or its time verdict is slower, faster or same (one status on both sides and nothing timed is a
status compared, so judged too).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

import numpy as np

from rnnbench.errors import InputError
from rnnbench.record import RowKey, row_key
from rnnbench.report.compare.evidence import is_relative, side_of, timed_runs, unsupported
from rnnbench.report.compare.stats import (
    FASTER,
    NOISY,
    SAME,
    SLOWER,
    Estimate,
    estimate,
    verdict,
)
from rnnbench.report.labels import env_label, machine_of
from rnnbench.report.marks import contention
from rnnbench.report.ratios import clock_of
from rnnbench.status import Status, is_failing, is_fixed, is_known

QUANTITIES = ("fwd_bwd", "fwd")
QUANTITY_LABELS = {"fwd_bwd": "fwd+bwd", "fwd": "fwd"}
REGRESSION, FIXED, KNOWN_FIXED, CHANGED = "regression", "fixed", "known_issue_fixed", "changed"
UNAVAILABLE, ONLY_BASE, ONLY_NEW = "unavailable", "only_base", "only_new"
GATING = (REGRESSION, SLOWER)  # verdicts that make the exit code 1
STATUS_CHANGES = (REGRESSION, FIXED, KNOWN_FIXED, CHANGED)
FASTER_OR_SAME = (FASTER, SAME)
JUDGED = (*STATUS_CHANGES, SLOWER, *FASTER_OR_SAME)  # verdicts that say something about both sides
# `compare`'s exit code when nothing was judged: distinct from 0 (a pass), 1 (a regression), 2
# (bad input) and the signals' 128+N, as pytest's 5 (no tests collected) is.
NOTHING_MEASURED = 3
TIME_ORDER = (SLOWER, NOISY, FASTER, SAME)  # a row's time verdict: the first of its quantities' in this order
NOT_RUN = (Status.UNAVAILABLE, Status.SKIPPED)


class NothingMeasured(Exception):
    """A side holds no row at all: nothing to compare, which is not bad input (a run whose every
    row was skipped wrote a valid, empty file) and not a pass: exit NOTHING_MEASURED."""


@dataclass
class Timed:
    """One quantity of one pair: the estimate, its verdict and both sides' medians (ms)."""

    estimate: Estimate
    verdict: str
    base_ms: float
    new_ms: float
    relative: bool = False  # judged relative to each run's machine-speed reference (the estimate's ratio)
    raw_ratio: float = 0.0  # new / base of the raw statistics, without the references


@dataclass
class Pair:
    key: RowKey
    base: list[dict[str, Any]]
    new: list[dict[str, Any]]
    verdict: str = SAME
    why: str = ""  # the status change, or what decided the verdict
    times: dict[str, Timed] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def first(self) -> dict[str, Any]:
        return (self.base or self.new)[0]

    def status(self, side: list[dict[str, Any]]) -> str | None:
        return side_status(side) if side else None


@dataclass
class Comparison:
    pairs: list[Pair]
    differences: list[str]
    threshold: float
    alpha: float
    across_machines: bool
    machines: tuple[str, str]
    factor: float = 1.0  # the machine-speed factor divided out (--normalize), else 1
    sides: tuple[str, str] = ("base", "new")  # what each side is (file names, environments)
    repeated: tuple[int, int] = (0, 0)  # records of each side that repeat a run, counted once
    patterns: tuple[tuple[str, float], ...] = ()  # per-row thresholds (threshold_of)
    profile_all: bool = False  # where the time went: every row profiled on both sides, not only the slower

    @property
    def gating(self) -> list[Pair]:
        return [p for p in self.pairs if p.verdict in GATING]

    @property
    def judged(self) -> list[Pair]:
        """The pairs whose verdict compared both sides (module docstring)."""
        return [p for p in self.pairs if p.verdict in JUDGED and not not_run(p)]

    @property
    def exit_code(self) -> int:
        if self.gating:
            return 1
        return 0 if self.judged else NOTHING_MEASURED


def not_run(pair: Pair) -> bool:
    """Unavailable or skipped on both sides: not listed in the tables (counted under them)."""
    return bool(pair.base and pair.new) and all(str(r["status"]) in NOT_RUN for r in pair.base + pair.new)


def side_status(records: list[dict[str, Any]]) -> str:
    """One side's status of a row over its runs: a failing one if any run failed (a flaky failure
    is a failure), else the last run's."""
    failing = [str(r["status"]) for r in records if is_failing(str(r["status"])) or is_known(str(r["status"]))]
    return failing[0] if failing else str(records[-1]["status"])


def status_verdict(base: str, new: str) -> tuple[str, str] | None:
    """(verdict, what it means where the statuses do not say it) of a change of status, or None
    when the status did not change."""
    if base == new:
        return None
    if base in NOT_RUN or new in NOT_RUN:
        return UNAVAILABLE, "not run on one side"
    if is_known(base) and is_fixed(new):
        return KNOWN_FIXED, "the registered bug no longer reproduces: update the registry"
    if is_known(base) and new == Status.OK:
        return FIXED, "a framework fix: the registry (known_issues.json) must now record it"
    if (is_failing(base) or is_known(base)) and new == Status.OK:
        return FIXED, ""
    new_bad = (is_failing(new) and not is_fixed(new)) or is_known(new)
    base_bad = (is_failing(base) and not is_fixed(base)) or is_known(base)
    if new_bad and not base_bad:
        return REGRESSION, "a registered bug now reproduces" if is_known(new) else ""
    return CHANGED, ""


def pair_rows(base: list[dict[str, Any]], new: list[dict[str, Any]], with_environment: bool = True) -> list[Pair]:
    """Every key of either side, in the base's order then the new side's, with its records."""
    by_key: dict[RowKey, Pair] = {}
    for side, records in (("base", base), ("new", new)):
        for rec in records:
            key = row_key(rec, with_environment)
            pair = by_key.setdefault(key, Pair(key, [], []))
            getattr(pair, side).append(rec)
    return list(by_key.values())


def machine_factor(pairs: list[Pair]) -> float:
    """The median new / base ratio of medians over every timed quantity of rows ok on both sides:
    how much faster or slower the new side's machine is overall (--normalize divides it out)."""
    ratios = []
    for p in pairs:
        for q in QUANTITIES:
            b, n = side_of(p.base, q), side_of(p.new, q)
            if b and n:
                ratios.append(n.median / b.median)
    if not ratios:
        raise InputError("--normalize: no row is timed on both sides, so there is no machine factor to divide out")
    return float(np.median(ratios))


def decide(pair: Pair, threshold: float, alpha: float, factor: float = 1.0) -> Pair:
    """Fill in the pair's verdict (module docstring), times and notes."""
    if not pair.base or not pair.new:
        pair.verdict = ONLY_BASE if pair.base else ONLY_NEW
        pair.why = "in the base only" if pair.base else "in the new side only"
        return pair
    change = status_verdict(side_status(pair.base), side_status(pair.new))
    if change is not None:
        pair.verdict, pair.why = change
        return pair
    clock = clock_of(pair.base + pair.new)
    for q in QUANTITIES:
        b, n = side_of(pair.base, q, clock), side_of(pair.new, q, clock)
        if b and n:
            records = timed_runs(pair.base, q) + timed_runs(pair.new, q)
            relative = is_relative(records, q, (b, n))
            base_side, new_side = (b.relative(), n.relative()) if relative else (b, n)
            est = estimate(base_side, new_side, alpha).scaled(factor)
            decided = verdict(est, threshold, base=base_side, new=new_side, factor=factor)
            why = unsupported(records, (b, n), threshold, relative)
            if why and decided != NOISY:  # nor same: a change hidden in that spread is not bounded
                decided = NOISY
                pair.notes.append(f"{QUANTITY_LABELS[q]}: {why}")
            pair.times[q] = Timed(
                est,
                verdict=decided,
                base_ms=b.median,
                new_ms=n.median,
                relative=relative,
                raw_ratio=n.median / b.median / factor,
            )
    if pair.times:
        pair.verdict = next(v for v in TIME_ORDER if any(t.verdict == v for t in pair.times.values()))
        if any(t.estimate.method == "quartiles" for t in pair.times.values()):
            pair.notes.append("no samples on a side: no interval")
    else:
        pair.why = "not timed"
    if any(contention(r) for r in pair.base + pair.new):
        pair.notes.append("timed under contention")
    return pair


def run_of(rec: dict[str, Any]) -> str:
    """What identifies the run a record is of: its run_id and row, else its whole content."""
    if rec.get("run_id"):
        return f"{rec['run_id']} {row_key(rec)}"
    return hashlib.sha256(json.dumps(rec, sort_keys=True, default=str).encode()).hexdigest()


def runs(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """run_of -> record, one per run in first-seen order (a record repeated is the same run)."""
    return {run_of(rec): rec for rec in records}


def _name(key: RowKey) -> str:
    return f"{key.model}/{key.driver}/{key.dtype}"


def _refuse_what_says_nothing(
    base: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]], pairs: list[Pair], sides: tuple[str, str]
) -> None:
    """InputError when a run is on both sides, or when the sides share no row."""
    shared = [rec for run, rec in base.items() if run in new]
    if shared:
        raise InputError(
            f"{sides[0]} and {sides[1]} hold the same runs ({len(shared)} record(s) on both sides, e.g. "
            f"{_name(row_key(shared[0]))}): a side compared with itself says nothing; compare two runs"
        )
    if not any(p.base and p.new for p in pairs):
        if not base or not new:  # a run that measured nothing (every benchmark skipped, an empty file)
            empty = [name for name, side in zip(sides, (base, new)) if not side]
            raise NothingMeasured(
                f"measured nothing: {' and '.join(empty)} {'have' if len(empty) > 1 else 'has'} no row "
                f"(base {sides[0]} has {len(base)} row(s), new {sides[1]} has {len(new)})"
            )
        counts = [sum(bool(getattr(p, side)) for p in pairs) for side in ("base", "new")]
        examples = [next((f", e.g. {_name(p.key)}" for p in pairs if getattr(p, side)), "") for side in ("base", "new")]
        raise InputError(
            f"no row to compare: base {sides[0]} has {counts[0]} row(s){examples[0]}, new {sides[1]} has "
            f"{counts[1]}{examples[1]}, and none is on both sides"
        )


def machines(records: list[dict[str, Any]]) -> str:
    return ", ".join(sorted({machine_of(r) for r in records})) or "?"


def threshold_of(key: RowKey, threshold: float, patterns: tuple[tuple[str, float], ...] = ()) -> float:
    """The threshold of one row: the largest of the `patterns` (shell patterns, as asv's
    regressions_thresholds) that match its driver or its model/driver, else `threshold`."""
    names = (key.driver, f"{key.model}/{key.driver}")
    hits = [t for pattern, t in patterns if any(fnmatchcase(name, pattern) for name in names)]
    return max(hits) if hits else threshold


def compare(
    base: list[dict[str, Any]],
    new: list[dict[str, Any]],
    threshold: float,
    *,
    alpha: float,
    across_machines: bool = False,
    normalize: bool = False,
    with_environment: bool = True,
    sides: tuple[str, str] = ("base", "new"),
    patterns: tuple[tuple[str, float], ...] = (),
    profile_all: bool = False,
) -> Comparison:
    """Pair, decide and describe. Records of two machines are refused (InputError) unless
    across_machines; normalize divides every ratio by machine_factor. A record repeated is one
    run; a run on both sides, and sides without a common row, are refused. `patterns`: (pattern,
    threshold) per row (threshold_of); `threshold` where none matches."""
    by_run = runs(base), runs(new)
    repeated = len(base) - len(by_run[0]), len(new) - len(by_run[1])
    base, new = list(by_run[0].values()), list(by_run[1].values())
    pairs = pair_rows(base, new, with_environment)
    _refuse_what_says_nothing(*by_run, pairs, sides)
    where = machines(base), machines(new)
    cpus = [{str((r.get("machine") or {}).get("cpu")) for r in side} for side in (base, new)]
    other_machine = where[0] != where[1] or cpus[0] != cpus[1]
    if other_machine and not across_machines:
        raise InputError(
            f"the base ran on {where[0]} and the new side on {where[1]}: times of two machines are not "
            "comparable; pass --across-machines to compare them anyway (every line then says so)"
        )
    factor = machine_factor(pairs) if normalize else 1.0
    pairs = [decide(p, threshold_of(p.key, threshold, patterns), alpha, factor) for p in pairs]
    if other_machine:
        for p in pairs:
            p.notes.insert(0, "across machines")
    return Comparison(
        pairs,
        differences=differences(base, new),
        threshold=threshold,
        alpha=alpha,
        across_machines=other_machine,
        machines=where,
        factor=factor,
        sides=sides,
        repeated=repeated,
        patterns=patterns,
        profile_all=profile_all,
    )


def _versions(records: list[dict[str, Any]]) -> dict[str, dict[str, set]]:
    """environment label -> package -> versions seen (from each record's settings or environment)."""
    out: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    for r in records:
        found = (r.get("settings") or {}).get("versions") or (r.get("environment") or {}).get("versions") or {}
        for package, version in found.items():
            out[r.get("environment_name", "main")][package].add(str(version))
    return out


def _one(values: set) -> str:
    return ", ".join(sorted(str(v) for v in values)) or "?"


def differences(base: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[str]:
    """What the two sides differ in besides their times: commit (rnnbench version), package
    versions, machine, threads and timing settings, the environments they ran in (of the rows that
    ran: a row decided unavailable without starting its environment is labelled by its name)."""
    base, new = ([r for r in side if str(r["status"]) not in NOT_RUN] or side for side in (base, new))
    out = []
    fields = {
        "commit": lambda r: r.get("rnnbench_version", "?"),
        "machine": lambda r: (
            f"{machine_of(r)} ({(r.get('machine') or {}).get('cpu', '?')}, "
            f"{(r.get('machine') or {}).get('cores', '?')} cores)"
        ),
        "threads": lambda r: (r.get("settings") or {}).get("threads"),
        "timing": lambda r: (r.get("settings") or {}).get("timing"),
        "environment": lambda r: env_label(r),
    }
    for name, get in fields.items():
        b, n = {str(get(r)) for r in base}, {str(get(r)) for r in new}
        if b != n:
            out.append(f"{name}: {_one(b)} -> {_one(n)}")
    vb, vn = _versions(base), _versions(new)
    packages: dict[str, tuple[set, set]] = {}
    for env in set(vb) | set(vn):
        for package in set(vb.get(env, {})) | set(vn.get(env, {})):
            pb, pn = packages.setdefault(package, (set(), set()))
            pb |= vb.get(env, {}).get(package, set())
            pn |= vn.get(env, {}).get(package, set())
    out += [f"{package}: {_one(b)} -> {_one(n)}" for package, (b, n) in sorted(packages.items()) if b and n and b != n]
    return out
