"""`rnnbench versions --bisect ID`: the two edges of a registered issue over the releases the package
index holds: the first release where it reproduces and the first where it no longer does.

The registry's measured releases (KnownIssue.versions) are the known bad ones. Each edge is one
run of rnnbench.planning.bisect.search over an ordered list of releases, with a sentinel at its far
end that is never probed (the search probes only between its two ends):

    lower edge  [BEFORE, since, ..., first measured]    good = not reproduced, bad = reproduces
    upper edge  [last measured, ..., newest, AFTER]     good = reproduces, bad = fixed

so a release where the probe reproduces the issue lowers the lower edge, and one where it comes out
right ends the range above. Where every probed release of the lower list reproduces, the issue
reproduces from the oldest probed release on (nothing older was asked: `since`); where every one of
the upper list does, no held release fixes it. A release whose environment cannot be installed, or
whose rows cannot decide (every one failing another way), is a skip. The predicate is taken to be
monotone: the releases inside the measured range are not probed.

Everything here is plain data and a probe callable (tests run it over fake releases); the probe that
creates environments and runs rows is rnnbench.planning.release_probe.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rnnbench.check.bugs import known_issues
from rnnbench.planning import bisect
from rnnbench.planning.bisect import Bisection, Step, Verdict

BEFORE = "(older)"  # the lower list's good end: nothing older than `since` is probed
AFTER = "(newer)"  # the upper list's bad end: no release after the newest held one exists yet


@dataclass(frozen=True)
class Release:
    """A release the index holds and the Python it installs on (None: the running interpreter's)."""

    version: str
    python: str | None = None


def release_key(version: str) -> tuple[int, ...]:
    """(2, 12, 1) of "2.12.1"; a local tag ("+cpu") and anything after the release number dropped."""
    return known_issues._release(version.split("+")[0])


def parse_index_versions(text: str) -> list[str]:
    """The versions of `pip index versions` output ("Available versions: 2.15.0, 2.14.1, ..."),
    oldest first, local builds ("2.13.0+cpu") left out (the plain release is listed too)."""
    m = re.search(r"Available versions:\s*(.*)", text)
    if not m:
        return []
    found = [v.strip() for v in m.group(1).split(",") if v.strip() and "+" not in v]
    return sorted(set(found), key=release_key)


def held_releases(package: str, pythons: Sequence[str]) -> list[Release]:
    """Every release of `package` the configured package index holds as a wheel, oldest first:
    those the running Python installs, then those only a Python of `pythons` ("3.12") installs,
    marked with it (pip asked once per Python; its configured indexes are the ones uv creates from)."""
    found: dict[str, Release] = {}
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    for python in [here, *[p for p in pythons if p != here]]:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "index", "versions", package, "--python-version", python]
            + ["--only-binary=:all:"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        for version in parse_index_versions(proc.stdout):
            found.setdefault(version, Release(version, None if python == here else python))
    return sorted(found.values(), key=lambda r: release_key(r.version))


def measured_releases(issue: known_issues.KnownIssue, package: str, held: Sequence[str]) -> list[str]:
    """The releases the registry measured the issue on (its `versions` spec): the exact `==` pins
    and every held release a range of the spec claims, oldest first."""
    spec = issue.versions.get(package, "")
    pinned = set(re.findall(r"==\s*([0-9][0-9.]*)(?![0-9.*])", spec))
    claimed = {v for v in held if spec and known_issues.version_matches(v, spec)}
    return sorted(pinned | claimed, key=release_key)


@dataclass(frozen=True)
class Edges:
    """The result for one issue. lower / upper: the two searches (None where no release lay beyond
    the measured one in that direction: lower_note / upper_note say why)."""

    issue: str
    package: str
    measured: tuple[str, ...]
    lower: Bisection[str] | None
    upper: Bisection[str] | None
    since: str

    @property
    def probes(self) -> int:
        return sum(len(b.steps) for b in (self.lower, self.upper) if b is not None)


Probe = Callable[[str], tuple[bool | None, Any]]
"""release -> (True: reproduces, False: right, None: cannot decide or install; evidence)."""


def _lower_verdict(reproduces: bool | None) -> Verdict:
    return Verdict.SKIP if reproduces is None else Verdict.BAD if reproduces else Verdict.GOOD


def _upper_verdict(reproduces: bool | None) -> Verdict:
    return Verdict.SKIP if reproduces is None else Verdict.GOOD if reproduces else Verdict.BAD


def edges(
    issue: str,
    *,
    package: str,
    releases: Sequence[str],
    measured: Sequence[str],
    probe: Probe,
    since: str,
    on_step: Callable[[Step[str]], None] = lambda step: None,
) -> Edges:
    """Both edges of `issue` (module docstring): `releases` the held ones, `measured` those the
    registry measured it reproducing on (non-empty), `since` the oldest release the lower search
    may probe."""
    if not measured:
        raise ValueError(f"{issue}: no measured release to start from")
    ordered = sorted(set(releases) | set(measured), key=release_key)
    first, last = min(measured, key=release_key), max(measured, key=release_key)
    below = [v for v in ordered if release_key(since) <= release_key(v) < release_key(first)]
    above = [v for v in ordered if release_key(v) > release_key(last)]
    lower = (
        bisect.search([BEFORE, *below, first], lambda v: _probe(probe, v, _lower_verdict), on_step=on_step)
        if below
        else None
    )
    upper = (
        bisect.search([last, *above, AFTER], lambda v: _probe(probe, v, _upper_verdict), on_step=on_step)
        if above
        else None
    )
    measured_sorted = tuple(sorted(measured, key=release_key))
    return Edges(issue=issue, package=package, measured=measured_sorted, lower=lower, upper=upper, since=since)


def _probe(probe: Probe, version: str, verdict: Callable[[bool | None], Verdict]) -> tuple[Verdict, Any]:
    reproduces, evidence = probe(version)
    return verdict(reproduces), evidence


def _skipped(b: Bisection[str]) -> str:
    return ", ".join(b.skipped)


def describe(result: Edges) -> str:
    """The range in words, e.g. "reproduces from 2.10.0 through 2.14.1; fixed in 2.15.0; 2.9.1 not
    affected" (the costs are the caller's to append)."""
    lower, upper = result.lower, result.upper
    if lower is None:
        first = result.measured[0]
        # --since at or above the measured start asked for nothing older; below it, the index held nothing between
        why = (
            f"the first measured; nothing older probed: --since {result.since}"
            if release_key(result.since) >= release_key(first)
            else f"no held release from {result.since} up to it"
        )
        start, unaffected = f"{first} ({why})", ""
    else:
        first = lower.candidates[lower.first_bad]
        if lower.exact:
            start = first if lower.last_good else f"{first} (the oldest release probed)"
        else:
            start = f"one of {', '.join(lower.suspects)} ({_skipped(lower)} could not decide)"
        unaffected = f"; {lower.candidates[lower.last_good]} not affected" if lower.last_good else ""
    if upper is None:
        end, fixed = result.measured[-1], f"; no newer release held ({result.measured[-1]} is the newest)"
    else:
        end = upper.candidates[upper.last_good]
        fixed_in = [v for v in upper.suspects if v != AFTER]
        if upper.exact:
            fixed = f"; fixed in {fixed_in[0]}" if fixed_in else "; not fixed in any held release"
        else:
            more = "" if len(fixed_in) == len(upper.suspects) else " or not yet"
            fixed = f"; fixed in one of {', '.join(fixed_in)}{more} ({_skipped(upper)} could not decide)"
    return f"{result.issue}: reproduces from {start} through {end}{fixed}{unaffected}"


def format_line(result: Edges, *, seconds: float, peak_bytes: int) -> str:
    """describe() with the cost: "(5 probes, 12 min, 21 GB peak)"."""
    probes = result.probes
    cost = f"{probes} probe{'s' if probes != 1 else ''}, {seconds / 60:.0f} min, {peak_bytes / 1e9:.0f} GB peak"
    return f"{describe(result)} ({cost})"
