"""The bisection search (rnnbench.planning.bisect), on its own: for any monotone predicate it names
the edge in ceil(log2(n - 1)) probes of n candidates, and with skipped candidates it names a range
that holds the edge and whose every inner candidate was skipped."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rnnbench.planning.bisect import Step, Verdict, search


def _monotone(first_bad: int, skips: frozenset[int] = frozenset()):
    probed: list[int] = []

    def probe(candidate: int) -> tuple[Verdict, str]:
        probed.append(candidate)
        if candidate in skips:
            return Verdict.SKIP, "could not measure"
        return (Verdict.BAD if candidate >= first_bad else Verdict.GOOD), f"measured {candidate}"

    return probe, probed


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_monotone_predicate_finds_the_edge_in_log2_steps(data) -> None:
    n = data.draw(st.integers(2, 2000), label="candidates")
    edge = data.draw(st.integers(1, n - 1), label="first bad")
    probe, probed = _monotone(edge)
    result = search(range(n), probe)
    assert result.exact and result.first_bad == edge and result.last_good == edge - 1
    assert result.suspects == (edge,) and result.skipped == ()
    assert len(probed) == len(set(probed)) <= max(0, math.ceil(math.log2(n - 1)))
    assert 0 not in probed and n - 1 not in probed  # the ends are the caller's
    assert [s.candidate for s in result.steps] == probed
    assert all(s.evidence == f"measured {s.candidate}" for s in result.steps)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_skips_leave_a_range_that_holds_the_edge(data) -> None:
    n = data.draw(st.integers(2, 300), label="candidates")
    edge = data.draw(st.integers(1, n - 1), label="first bad")
    skips = frozenset(data.draw(st.sets(st.integers(1, max(1, n - 2)), max_size=n), label="skipped"))
    skips = frozenset(s for s in skips if 0 < s < n - 1)
    probe, probed = _monotone(edge, skips)
    result = search(range(n), probe)
    assert result.last_good < edge <= result.first_bad
    assert edge in result.suspects
    inner = set(range(result.last_good + 1, result.first_bad))
    assert inner <= skips and set(result.skipped) == inner  # nothing between them was measurable
    assert result.exact == (not inner)
    assert len(probed) == len(set(probed)) <= n - 2  # no candidate is probed twice
    if not skips:
        assert result.first_bad == edge


def test_the_ends_are_kept_at_the_head_of_the_steps_and_candidates_are_opaque() -> None:
    releases = ["2.9.0", "2.10.0", "2.11.0", "2.12.0", "2.13.0"]
    ends = (Step(0, "2.9.0", Verdict.GOOD, "given"), Step(4, "2.13.0", Verdict.BAD, "bug reproduces"))
    result = search(releases, lambda v: (Verdict.BAD if v >= "2.11.0" else Verdict.GOOD, None), ends=ends)
    assert result.suspects == ("2.11.0",) and result.candidates[result.last_good] == "2.10.0"
    assert result.steps[:2] == ends and result.step_of(4) == ends[1]


def test_two_candidates_need_no_probe_and_one_is_refused() -> None:
    result = search(["good", "bad"], lambda c: pytest.fail("probed"))
    assert result.exact and result.suspects == ("bad",) and result.steps == ()
    with pytest.raises(ValueError):
        search(["only"], lambda c: (Verdict.GOOD, None))
