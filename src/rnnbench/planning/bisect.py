"""A bisection search over an ordered list of candidates: the first bad one and the last good one,
in about log2 steps, with the evidence of every step (what `rnnbench bisect` runs over commits,
and what a search over releases can run over versions).

A candidate is opaque here: a commit hash, a release, anything the caller's probe can measure.
The search only orders them by position and asks the probe for a verdict:

    good  the candidate behaves as the first one (the known good end)
    bad   it behaves as the last one (the known bad end)
    skip  it could not be measured (it does not build, its run failed, its timing was undecided),
          as `git bisect skip`: the search probes another candidate between the two ends instead

The two ends are the caller's: candidates[0] is good and candidates[-1] is bad (a caller that
measured them hands their steps in as `ends`, so the result shows them). The predicate is taken to
be monotone (every candidate after the first bad one is bad); under that, with no skips, the
search probes ceil(log2(n - 1)) candidates of n and names the edge exactly. A skip leaves a range:
the first bad candidate is one of those after the last good one up to the first bad one found,
and the result says which were skipped between them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, TypeVar

C = TypeVar("C")


class Verdict(StrEnum):
    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"


@dataclass(frozen=True)
class Step(Generic[C]):
    """One probe: the candidate's position, the candidate, the probe's verdict and its evidence
    (whatever the probe returned beside the verdict: the comparison, the reason for a skip)."""

    index: int
    candidate: C
    verdict: Verdict
    evidence: Any = None


@dataclass(frozen=True)
class Bisection(Generic[C]):
    """The result. last_good / first_bad: positions in `candidates` (the ends where nothing between
    them was good or bad). steps: the probes in the order they ran, the ends' first where given."""

    candidates: tuple[C, ...]
    last_good: int
    first_bad: int
    steps: tuple[Step[C], ...]

    @property
    def exact(self) -> bool:
        """The first bad candidate is known: it directly follows the last good one."""
        return self.first_bad == self.last_good + 1

    @property
    def suspects(self) -> tuple[C, ...]:
        """The candidates that may be the first bad one: after the last good, up to the first bad."""
        return self.candidates[self.last_good + 1 : self.first_bad + 1]

    @property
    def skipped(self) -> tuple[C, ...]:
        """The candidates between the last good and the first bad that could not be measured."""
        return tuple(s.candidate for s in self.steps if self.last_good < s.index < self.first_bad)

    def step_of(self, index: int) -> Step[C] | None:
        return next((s for s in self.steps if s.index == index), None)


def _next_probe(low: int, high: int, tried: set[int]) -> int | None:
    """The untried position strictly between `low` and `high` nearest to their middle (the lower of
    two equally near), or None where every one has been tried (skipped)."""
    middle = (low + high) // 2
    around = sorted(range(low + 1, high), key=lambda i: (abs(i - middle), i))
    return next((i for i in around if i not in tried), None)


def search(
    candidates: Sequence[C],
    probe: Callable[[C], tuple[Verdict, Any]],
    *,
    ends: tuple[Step[C], ...] = (),
    on_step: Callable[[Step[C]], None] = lambda step: None,
) -> Bisection[C]:
    """Bisect `candidates` (oldest first; candidates[0] good, candidates[-1] bad: module docstring)
    with `probe(candidate) -> (verdict, evidence)`. ends: the caller's steps for the two ends, kept
    at the head of the result's steps. on_step: called after every probe (progress lines)."""
    items = tuple(candidates)
    if len(items) < 2:
        raise ValueError(f"a bisection needs a good and a bad candidate, got {len(items)}")
    low, high = 0, len(items) - 1
    steps: list[Step[C]] = list(ends)
    tried: set[int] = set()
    while (index := _next_probe(low, high, tried)) is not None:
        tried.add(index)
        verdict, evidence = probe(items[index])
        step = Step(index, items[index], Verdict(verdict), evidence)
        steps.append(step)
        on_step(step)
        if step.verdict == Verdict.GOOD:
            low = index
        elif step.verdict == Verdict.BAD:
            high = index
    return Bisection(items, low, high, tuple(steps))
