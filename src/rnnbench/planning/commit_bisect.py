"""The first commit between GOOD and BAD where the suite's rows got worse (`rnnbench bisect`, what
`asv find` does for asv).

The candidates are the commits on BAD's first-parent line since GOOD (git rev-list --first-parent
--ancestry-path GOOD..BAD), oldest first, GOOD before them. Each probed commit is checked out apart
and its rows run there as `compare --commits` runs them (rnnbench.planning.commits: its own tree
first on PYTHONPATH, so a commit's models, drivers and RNNBENCH_PLUGINS modules are its own), in
`rounds` runs; GOOD's runs are made once, first. The judgement is `compare`'s
(rnnbench.report.compare.pairs), with its threshold and interval, probe against GOOD:

  BAD is run first; the rows `compare` gates on there (a status regression such as ok ->
  grad_mismatch, or a decided slowdown) are what is bisected. Where BAD has none, there is nothing
  to find: bad input, the user's premise.
  A probe is judged on each of those rows by what it gated on at BAD. A status regression: bad
  where the probe's status regresses from GOOD's likewise, good where it is GOOD's, skipped
  otherwise (whatever the times say). A slowdown: bad where the probe is decidedly slower than
  GOOD, good where it is the same or faster, or where it is noisy against GOOD and BAD is
  decidedly slower than the probe (what BAD shows came after it: a probe as fast as GOOD is
  often `noisy` against it on a busy machine, yet decidedly faster than a BAD slower by more
  than the noise); both comparisons are compare's, at its threshold. The probe is bad where
  any row is, good where every row is, and skipped otherwise, as is a probe whose run failed or
  where a row did not run (as `git bisect skip`; the search probes another).

The search is rnnbench.planning.bisect's: for n commits after GOOD, BAD's run and then at most
ceil(log2(n)) probes, where nothing is skipped.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rnnbench.errors import InputError
from rnnbench.planning import commits
from rnnbench.planning.bisect import Bisection, Step, Verdict, search
from rnnbench.record import RowKey
from rnnbench.report.compare import inputs as compare_inputs
from rnnbench.report.compare.format import speedups
from rnnbench.report.compare.pairs import (
    FASTER,
    NOISY,
    QUANTITY_LABELS,
    REGRESSION,
    SAME,
    SLOWER,
    Comparison,
    Pair,
    compare,
    side_status,
)
from rnnbench.report.ratios import speedup_label

CALLER = "bisect"


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str

    @property
    def short(self) -> str:
        return self.sha[:10]


@dataclass(frozen=True)
class Probe:
    """The evidence of one probed commit: what each tracked row did against GOOD (row name ->
    `describe`), or why the commit could not be judged; the runs' records files."""

    changes: dict[str, str] = field(default_factory=dict)
    why: str = ""
    files: tuple[str, ...] = ()

    def summary(self) -> str:
        return self.why or "; ".join(f"{row}: {what}" for row, what in self.changes.items())


@dataclass(frozen=True)
class Judgement:
    """compare's settings: the threshold (and per-row patterns) and the intervals' alpha."""

    threshold: float
    alpha: float
    patterns: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class CommitBisection:
    result: Bisection[Commit]
    tracked: dict[RowKey, str]  # the rows that gate at BAD -> what they gated on: regression or slower
    out_dir: Path
    elapsed_s: float

    @property
    def first_bad(self) -> Commit:
        return self.result.candidates[self.result.first_bad]

    @property
    def last_good(self) -> Commit:
        return self.result.candidates[self.result.last_good]


def row_name(key: RowKey) -> str:
    """model/driver/dtype, then what else sets the row apart where it is not the default (its mode,
    loss form, environment): how lines and JSON name a row."""
    extras = [key.mode if key.mode != "vjp" else "", key.loss_form if key.loss_form != "model" else ""]
    extras.append(key.environment if key.environment not in ("", "main") else "")
    return "/".join([key.model, key.driver, key.dtype, *filter(None, extras)])


def describe(pair: Pair) -> str:
    """What a row did, new side against GOOD: its verdict, the status change or the speed-ups."""
    if pair.times and not pair.why:
        times = []
        for q, t in pair.times.items():
            value, lo, hi = speedups(t)
            ci = "" if lo is None else f" [{lo:.2f}-{hi:.2f}]"
            times.append(f"{QUANTITY_LABELS[q]} {speedup_label(value)}{ci}")
        return f"{pair.verdict} ({', '.join(times)})"
    base, new = (side_status(s) if s else "-" for s in (pair.base, pair.new))
    change = f"{base} -> {new}" if base != new else base
    return f"{pair.verdict} ({change}{'; ' + pair.why if pair.why else ''})"


def commit_range(repo: Path, good: str, bad: str) -> list[Commit]:
    """GOOD, then the commits on BAD's first-parent line after it, oldest first (BAD last).
    InputError: an unknown commit, GOOD not an ancestor of BAD, or GOOD and BAD one commit."""
    good_sha, bad_sha = (commits.resolve(repo, rev, what=CALLER) for rev in (good, bad))
    if good_sha == bad_sha:
        raise InputError(f"bisect: GOOD {good} and BAD {bad} are one commit ({good_sha[:10]}): nothing between them")
    ancestor = subprocess.run(
        ["git", "-C", str(repo), "merge-base", "--is-ancestor", good_sha, bad_sha], capture_output=True, timeout=300
    )
    if ancestor.returncode != 0:
        raise InputError(f"bisect: GOOD {good} ({good_sha[:10]}) is not an ancestor of BAD {bad} ({bad_sha[:10]})")
    listed = commits.git(
        repo, "rev-list", "--reverse", "--first-parent", "--ancestry-path", "--format=%H %s", f"{good_sha}..{bad_sha}"
    )
    later = [line.split(" ", 1) for line in listed.splitlines() if not line.startswith("commit ")]
    subject = commits.git(repo, "log", "-1", "--format=%s", good_sha)
    out = [Commit(good_sha, subject)] + [Commit(sha, (rest or [""])[0]) for sha, *rest in later]
    if out[-1].sha != bad_sha:  # GOOD is an ancestor off BAD's first-parent line: the line is not linear
        raise InputError(f"bisect: GOOD {good} is not on the first-parent line of BAD {bad}")
    return out


class Runner:
    """Runs the rows at one commit (`rounds` runs in its own checkout) and loads their records."""

    def __init__(
        self, repo: Path, options: Mapping[str, str], *, rounds: int, out_dir: Path, say: Callable[[str], None]
    ) -> None:
        self.repo, self.rounds, self.out_dir, self.say = repo, rounds, out_dir, say
        self.arguments = commits.run_arguments(options)
        self.tag = commits.fresh_tag(out_dir)

    def __call__(self, commit: Commit, side: str) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
        """(the records, their files) of `rounds` runs at `commit`; RunFailed where a run made none."""
        files = []
        with commits.checked_out(self.repo, [commit.sha], [f"{side}-{commit.short}"]) as (tree,):
            for r in range(self.rounds):
                name, t0 = f"{side}-{commit.short}-run{r + 1}{self.tag}", time.perf_counter()
                out = self.out_dir / f"{name}.jsonl"
                code = commits.run_once(tree, self.arguments, out, self.out_dir / f"{name}.log", what=CALLER)
                files.append(out)
                self.say(f"rnnbench bisect: {name}: {time.perf_counter() - t0:.0f} s (exit {code})")
        return compare_inputs.load(files), tuple(str(f) for f in files)


def row_verdict(kind: str, pair: Pair | None, later: Pair | None) -> Verdict:
    """One tracked row's verdict at a probe (module docstring). kind: what it gated on at BAD
    (REGRESSION or SLOWER); pair: the probe against GOOD; later: BAD against the probe."""
    if pair is None:
        return Verdict.SKIP
    if kind == REGRESSION:  # a status regression is bisected by the status alone
        if pair.verdict == REGRESSION:
            return Verdict.BAD
        return Verdict.GOOD if side_status(pair.base) == side_status(pair.new) else Verdict.SKIP
    if pair.verdict == SLOWER:
        return Verdict.BAD
    if pair.verdict in (SAME, FASTER) or (pair.verdict == NOISY and later is not None and later.verdict == SLOWER):
        return Verdict.GOOD
    return Verdict.SKIP


def judged(
    versus_good: Comparison, bad_versus: Comparison, tracked: Mapping[RowKey, str]
) -> tuple[Verdict, dict[str, str]]:
    """A probe's verdict from its comparisons with GOOD (the probe the new side) and with BAD (the
    probe the base) over the tracked rows (row key -> what it gated on at BAD), and what each
    row did."""
    against_good = {p.key: p for p in versus_good.pairs}
    bad_after = {p.key: p for p in bad_versus.pairs}
    changes, verdicts = {}, []
    for key, kind in tracked.items():
        pair, later, name = against_good.get(key), bad_after.get(key), row_name(key)
        verdicts.append(row_verdict(kind, pair, later))
        if pair is None:
            changes[name] = "not run"
        elif kind == SLOWER and pair.verdict == NOISY and later is not None:
            changes[name] = f"{describe(pair)}; BAD against it: {describe(later)}"
        else:
            changes[name] = describe(pair)
    if Verdict.BAD in verdicts:
        return Verdict.BAD, changes
    return (Verdict.GOOD if all(v == Verdict.GOOD for v in verdicts) else Verdict.SKIP), changes


def bisect_commits(
    good: str,
    bad: str,
    options: Mapping[str, str],
    *,
    judgement: Judgement,
    rounds: int,
    out_dir: Path,
    repo: Path | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> CommitBisection:
    """Find the first commit after `good` up to `bad` where the rows got worse (module docstring).
    repo: the git checkout whose commits are bisected (None: rnnbench's own). RunFailed where
    GOOD's or BAD's runs failed (ours to report, exit 1); InputError for bad input."""
    started = time.perf_counter()
    repo = commits.repository(repo, what=CALLER)
    candidates = commit_range(repo, good, bad)
    given, out_dir = Path(out_dir), Path(out_dir).resolve()  # said as given; the runs get it whole
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"bisect: --out-dir {given} is not a folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    run = Runner(repo, options, rounds=rounds, out_dir=out_dir, say=say)
    say(f"rnnbench bisect: {len(candidates) - 1} commits after GOOD {candidates[0].short}; running GOOD and BAD")
    base, good_files = run(candidates[0], "good")

    def versus(older: list[dict[str, Any]], newer: list[dict[str, Any]], sides: tuple[str, str]) -> Comparison:
        return compare(
            older, newer, judgement.threshold, alpha=judgement.alpha, patterns=judgement.patterns, sides=sides
        )

    bad_records, bad_files = run(candidates[-1], "bad")
    at_bad = versus(base, bad_records, ("GOOD", "BAD"))
    tracked = {p.key: p.verdict for p in at_bad.gating}
    if not tracked:
        worst = sorted({p.verdict for p in at_bad.pairs})
        raise InputError(
            f"bisect: BAD {bad} ({candidates[-1].short}) is not worse than GOOD {good} by compare's rule "
            f"(row verdicts: {', '.join(worst)}): nothing to bisect; records in {given}"
        )
    ends = (
        Step(0, candidates[0], Verdict.GOOD, Probe(why="GOOD, given", files=good_files)),
        Step(
            len(candidates) - 1,
            candidates[-1],
            Verdict.BAD,
            Probe({row_name(p.key): describe(p) for p in at_bad.gating}, files=bad_files),
        ),
    )

    def probe(commit: Commit) -> tuple[Verdict, Probe]:
        try:
            records, files = run(commit, "probe")
            verdict, changes = judged(
                versus(base, records, ("GOOD", "probe")), versus(records, bad_records, ("probe", "BAD")), tracked
            )
        except (commits.RunFailed, InputError) as exc:  # the commit could not be measured: skip it
            return Verdict.SKIP, Probe(why=str(exc))
        return verdict, Probe(changes, files=files)

    def progress(step: Step[Commit]) -> None:
        say(f"rnnbench bisect: {step.candidate.short} {step.verdict}: {step.evidence.summary()}")

    result = search(candidates, probe, ends=ends, on_step=progress)
    return CommitBisection(result, tracked, given, time.perf_counter() - started)
