"""Every value the chain rule can give at the step's kinks: the range a framework's subgradient
convention may legitimately land in.

A framework's derivative at a kink is the chain rule with each kink's local derivative somewhere
between its one-sided derivatives (relu at 0: [0, 1]; abs at 0: [-1, 1]; a tie in maximum, minimum
or `where`: the two sides' slopes). The loss's derivative is then a sum over paths of products of
local derivatives, in which each kink appears at most once per path: multilinear in the kinks'
local derivatives, so over the box of their ranges its extremes are at the corners. The corners are
evaluated exactly, by dual numbers with each tied entry's side forced (check/differentiation/branch_points.py):
2^N passes for N tied entries (a tie in maximum or minimum is one), so at most MAX_TIED entries are
enumerated. A pass whose forced sides change the loss's value (a `where` whose branches differ at
the tie: a jump, not a kink) or which branch points the step meets is left out: no framework
evaluates the function there. Beyond MAX_TIED, one pass of interval tangents (check/differentiation/dual_interval.py)
encloses the same range: wider where one kink reaches an entry by several paths, never narrower.

sqrt at 0 and a power at 0 are not kinks between two finite one-sided derivatives (a pole, a
domain edge): where the step meets one, there is no range, and the judge cannot decide.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rnnbench.check.differentiation.branch_points import along, forcing
from rnnbench.check.differentiation.dual_eval import CHUNK, evaluate, evaluate_hull
from rnnbench.check.differentiation.finite_diff import input_value
from rnnbench.model import Case, Model

MAX_TIED = 8  # 2^8 dual passes at most: tied entries beyond this are not enumerated
BRANCH_KINDS = ("abs at 0", "a comparison at equality", "a comparison at equality of stationary values")
_SAME_LOSS = 1e-12  # a forced side at a true tie changes no value: beyond rounding, it is a jump


@dataclass(frozen=True)
class KinkRange:
    """kinked[name]: the entries whose derivative passes through a point without one (the input's
    shape); lo[name], hi[name]: the smallest and largest derivative the corners give per entry
    (NaN where some corner's derivative is not finite); reason: why there is no range ("" when
    there is one: lo and hi are then empty); left_out: how many corners were left out (a jump)."""

    kinked: dict[str, np.ndarray]
    lo: dict[str, np.ndarray]
    hi: dict[str, np.ndarray]
    reason: str = ""
    left_out: int = 0

    def of(self, name: str, idx: tuple) -> tuple[float, float]:
        """(lo, hi) at one entry; NaN where there is no range."""
        return (float(self.lo[name][idx]), float(self.hi[name][idx])) if not self.reason else (np.nan, np.nan)


def _unforced(model: Model, case: Case, names: list[str]) -> tuple[Any, list, int, int]:
    """The step evaluated with no side forced: (its dual result, the tied entries' count at each branch
    point it met, their total, the number of compared entries)."""
    with forcing(None) as met:
        result = evaluate(model, case, names)
    entries = sum(int(np.size(input_value(model, case, n))) for n in names)
    return result, met.sizes, sum(met.sizes), entries


def kink_range(model: Model, case: Case, names: Sequence[str]) -> KinkRange:
    """The range of the chain rule over the kinks' one-sided derivatives for `names` (module docstring)."""
    names = list(names)
    base, sizes, tied, entries = _unforced(model, case, names)
    poles = [k for k in base.kinks if k not in BRANCH_KINDS]
    reason = (
        f"{', '.join(poles)}: a pole or a domain edge, with no one-sided derivatives to bound a convention"
        if poles
        else f"{entries} compared entries: more than one dual pass holds ({CHUNK})"
        if entries > CHUNK
        else ""
    )
    if reason:
        return KinkRange(base.kinked, {}, {}, reason)
    if tied > MAX_TIED:  # beyond the corners' reach: interval tangents enclose the range in one pass
        hulled = evaluate_hull(model, case, names)
        if isinstance(hulled, str):
            why = f"{tied} tied entries at the step's branch points: more than the {MAX_TIED} enumerated, and {hulled}"
            return KinkRange(base.kinked, {}, {}, why)
        return KinkRange(base.kinked, lo=hulled[0], hi=hulled[1])
    lo = {n: np.where(np.isfinite(base.grads[n]), base.grads[n], np.nan) for n in names}
    hi = {n: lo[n].copy() for n in names}
    left_out = 0
    for bits in itertools.product((False, True), repeat=tied):
        with forcing(bits) as plan:
            corner = evaluate(model, case, names)
        jump = abs(corner.loss - base.loss) > _SAME_LOSS * max(abs(base.loss), 1e-300)
        if jump or plan.overrun or plan.sizes != sizes:
            left_out += 1
            continue
        for n in names:
            # NaN (a non-finite corner) spreads into lo and hi: that entry has no range
            lo[n] = np.where(np.isfinite(corner.grads[n]), np.minimum(lo[n], corner.grads[n]), np.nan)
            hi[n] = np.where(np.isfinite(corner.grads[n]), np.maximum(hi[n], corner.grads[n]), np.nan)
    return KinkRange(base.kinked, lo=lo, hi=hi, reason="", left_out=left_out)


def hvp_at_kinks(
    model: Model, case: Case, names: Sequence[str], *, v: Mapping[str, np.ndarray], agree: float
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | str:
    """H v along v by nested dual numbers where the step meets kinks, entry by entry: (want, bound)
    keyed like the gradients. Along v an entry's gradient jumps where it differs between the sides
    of a kink (relu(z) with dz/dx_i != 0; where(q > 0, p, 0) for p): its H v holds a Dirac term and
    has no value (NaN). Where its gradient is the same at every corner (every tie's side forced,
    within `agree` of the largest) it is continuous along v, and the one-sided derivatives of it
    are two of the corners' H v: want is their midpoint and bound their half-width (0 where they
    agree: exact; else every value a convention at the ties gives is within it, as at first order).
    Where v itself decides every tie (its sides agree along v to first order and differ at second,
    so the same branch is taken on both sides of the point: branch_points.along), the gradient along
    v is that branch's on both sides, and its derivative exists: want is that pass's H v, bound 0.
    Returns a str (why) where the corners cannot say: a pole or a domain edge met, a corner that
    changes the loss (a jump: the sides of such a tie are not both evaluated anywhere near), too
    many ties or entries; the caller then takes the difference oracles."""
    names = list(names)
    first, sizes, tied, entries = _unforced(model, case, names)
    blocked = [k for k in first.kinks if k not in BRANCH_KINDS]
    if blocked or entries > CHUNK:
        return f"{', '.join(blocked) or f'{entries} entries'}: the corners of its kinks are not enumerated"
    if tied > MAX_TIED:
        return _decided_beyond_corners(model, case, names, v=v, sizes=sizes, loss=first.loss, agree=agree)
    grads, hvps = {n: [] for n in names}, {n: [] for n in names}
    for bits in itertools.product((False, True), repeat=tied):
        with forcing(bits) as plan:
            corner = evaluate(model, case, names, direction=v)
        if abs(corner.loss - first.loss) > _SAME_LOSS * max(abs(first.loss), 1e-300):
            return "a forced side of a tie changes the loss (a jump)"
        if plan.overrun or plan.sizes != sizes:
            return "a forced side changes which branch points the step meets"
        for n in names:
            grads[n].append(corner.grads[n])
            hvps[n].append(corner.hvp[n])
    g_spread, g_scale = _spread(grads)
    decided = _decided_by_v(model, case, names, v=v, sizes=sizes, loss=first.loss)
    want, bound = {}, {}
    for n in names:
        h = np.stack(hvps[n])
        lo, hi = np.min(h, axis=0), np.max(h, axis=0)  # NaN where a corner is not finite
        continuous = (g_spread[n] <= agree * g_scale) & np.isfinite(lo) & np.isfinite(hi)
        if decided is not None:
            want[n] = np.where(continuous, decided[n], np.nan)
            bound[n] = np.zeros(np.shape(lo))
        else:
            want[n] = np.where(continuous, (lo + hi) / 2, np.nan)
            bound[n] = np.where(continuous, (hi - lo) / 2, 0.0)
    return want, bound


def _decided_beyond_corners(
    model: Model,
    case: Case,
    names: list[str],
    *,
    v: Mapping[str, np.ndarray],
    sizes: list[int],
    loss: float,
    agree: float,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | str:
    """Beyond MAX_TIED ties, where v decides every tie: that pass's H v on the entries whose gradient
    interval tangents pin to one value (the same at every corner, within `agree` of the largest),
    bound 0; NaN elsewhere. A str (why) where v does not decide them or the intervals do not hold."""
    decided = _decided_by_v(model, case, names, v=v, sizes=sizes, loss=loss)
    hulled = evaluate_hull(model, case, names) if decided is not None else "v does not decide every tie"
    if isinstance(hulled, str):
        return f"{sum(sizes)} tied entries: more than the {MAX_TIED} enumerated, and {hulled}"
    lo, hi = hulled
    spread, scale = _spread({n: [lo[n], hi[n]] for n in names})
    want = {n: np.where(spread[n] <= agree * scale, decided[n], np.nan) for n in names}
    return want, {n: np.zeros(np.shape(lo[n])) for n in names}


def _decided_by_v(
    model: Model, case: Case, names: list[str], *, v: Mapping[str, np.ndarray], sizes: list[int], loss: float
) -> dict[str, np.ndarray] | None:
    """H v with every tie on the side v takes on both sides of the point (branch_points.along), or
    None where some tie is not decided so (its sides differ along v at first order, or agree to
    second order too) or the pass meets other branch points or another loss."""
    with along() as plan:
        result = evaluate(model, case, names, direction=v)
    same = abs(result.loss - loss) <= _SAME_LOSS * max(abs(loss), 1e-300)
    if plan.undecided or plan.direction is None or plan.sizes != sizes or not same:
        return None
    return result.hvp


def _spread(values: dict[str, list[np.ndarray]]) -> tuple[dict[str, np.ndarray], float]:
    """(per name, max - min over the corners per entry: NaN where one is not finite; the largest
    finite |value| over every name and corner, at least the smallest normal number)."""
    stacked = {n: np.stack(v) for n, v in values.items()}
    scale = max((float(np.max(np.abs(s[np.isfinite(s)]), initial=0.0)) for s in stacked.values()), default=0.0)
    return {n: np.max(s, axis=0) - np.min(s, axis=0) for n, s in stacked.items()}, max(scale, 1e-300)
