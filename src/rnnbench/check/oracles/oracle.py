"""The oracle ladder: per row, the most exact oracle that can answer, and its kind in the record.

  1. hand / closed form   the model's own oracle (hand_bptt, hand_adjoint, closed_form, ...)
  2. dual                 dual numbers over the numpy step in float64 (check/differentiation/dual.py): exact to
                          rounding, for every step written against `ops`
  3. dual_mp              the same at 50 digits, where float64 may not resolve the gradient: the
                          loss's condition number times float64's unit roundoff is beyond
                          MP_TRIGGER, or (asked by the judge) a float64 row would fail against the
                          float64 dual. ROUNDING_SAFETY x |dual - dual_mp| is then the bound: what
                          float64 rounding alone does to this gradient
  4. finite_differences   only for the entries whose derivative passes through a point without one
                          (abs at 0, a tie in maximum / minimum, `where` on its boundary), or that
                          dual numbers cannot evaluate (a non-finite tangent); with their error bars
  5. cannot_decide        what the judge says where the bound of the rung used covers the difference

The ladder is the default everywhere (rnnbench run, the fuzzer, check_recurrence); `choice` forces
one rung ("dual", "dual_mp", "finite_differences") for comparisons and for users who want one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from rnnbench.check.compare import loss_condition
from rnnbench.check.differentiation.dual_eval import DualResult, evaluate
from rnnbench.check.differentiation.finite_diff import finite_differences, input_value
from rnnbench.check.differentiation.low_precision import ROUNDING_SAFETY
from rnnbench.check.oracles import oracle_cache
from rnnbench.check.tolerance import UNIT_ROUNDOFF, tolerance
from rnnbench.model import Case, Model
from rnnbench.status import OracleKind

AUTO = "auto"
CHOICES = (AUTO, OracleKind.DUAL.value, OracleKind.DUAL_MP.value, OracleKind.FINITE_DIFFERENCES.value)
# Extended precision where rounding alone may move the loss by 1/1000 of the float64 tolerance: the
# gradient is conditioned like the loss times the recurrence's growth, which this margin covers.
MP_TRIGGER = 1e-3 * tolerance("float64", OracleKind.DUAL).max_rel_error
# Arithmetic on object arrays of 50-digit numbers costs orders of magnitude more than float64, and a
# pass grows with the entries compared: beyond this many there is no dual_mp rung (the cost measured
# is in docs/checking.md, "The oracle ladder").
MP_MAX_ENTRIES = 256
MP_BOUND_NAME = (
    f"what float64 rounding alone does to this gradient ({ROUNDING_SAFETY:g}x the float64 dual oracle's distance "
    "from the same at 50 digits)"
)
_WEAKEST_LAST = (OracleKind.DUAL, OracleKind.DUAL_MP, OracleKind.FINITE_DIFFERENCES)


@dataclass(frozen=True)
class Oracle:
    """Wanted gradients keyed by compared input, their kind, and per-entry absolute error bounds
    (zero arrays for the exact kinds; check/differentiation/finite_diff.py's estimate for finite differences; what
    float64 rounding does for dual_mp). bound_name: what the bound is, as the judge's report says
    it. reason: why the ladder took this rung. refine: None, or the next rung up (extended
    precision), which the judge asks for before calling a float64 row wrong. source: where the
    values came from, as the record's oracle_source says it: "computed" here, or the hand-oracle
    cache's "cache:<key>" / "recomputed:<key>" (check/oracles/oracle_cache.py)."""

    grads: Mapping[str, np.ndarray]
    kind: str
    error: Mapping[str, np.ndarray] = field(default_factory=dict)
    bound_name: str = "the finite-difference oracle's error bound"
    reason: str = ""
    refine: Callable[[], Oracle] | None = field(default=None, compare=False, repr=False)
    source: str = oracle_cache.COMPUTED
    # per input, the entries where no finite derivative exists (the dual numbers' own value was not finite: a
    # pole defined on both sides, sqrt(abs(u)) at 0): the judge holds no NaN / inf gradient against them
    no_derivative: Mapping[str, np.ndarray] = field(default_factory=dict)

    def error_of(self, name: str) -> np.ndarray:
        return np.asarray(self.error.get(name, np.zeros(np.shape(self.grads[name]))), dtype=np.float64)


def finite_difference_oracle(model: Model, case: Case, names: Sequence[str] | None = None) -> Oracle:
    """Rung 4 alone: check/differentiation/finite_diff.py's values with their error bounds, for `names` (default:
    every compared input)."""
    grads, error = finite_differences(model, case, names)
    return Oracle(grads, OracleKind.FINITE_DIFFERENCES, error)


def oracle_grads(model: Model, case: Case, choice: str | None = None) -> Oracle:
    """The oracle of every compared input (module docstring). choice: None / "auto" for the ladder."""
    names = case.wrt_names(model.carry_names)
    choice = choice or AUTO
    if choice not in CHOICES:
        raise ValueError(f"unknown oracle {choice!r}; known: {', '.join(CHOICES)}")
    if choice == OracleKind.FINITE_DIFFERENCES:
        return _with_reason(finite_difference_oracle(model, case, names), "forced")
    exact = model.oracle is not None and model.oracle_kind != OracleKind.FINITE_DIFFERENCES
    kept = oracle_cache.cached(model, case, lambda: model.oracle(case)) if choice == AUTO and exact else None
    hand, source = (kept.grads, kept.source) if kept is not None else ({}, oracle_cache.COMPUTED)
    missing = [n for n in names if n not in hand]
    if not missing:
        return Oracle(hand, model.oracle_kind, reason="the model's own oracle", source=source)
    fill = dual_oracle(
        model, case, missing, extended=choice == OracleKind.DUAL_MP, allow_extended=choice != OracleKind.DUAL
    )
    if not hand:
        return fill
    zeros = {n: np.zeros(np.shape(g)) for n, g in hand.items()}
    return Oracle(
        {**hand, **fill.grads},
        kind=fill.kind,
        error={**zeros, **fill.error},
        bound_name=fill.bound_name,
        reason=f"the model's own oracle for {sorted(hand)}, {fill.kind} for {missing}",
        source=source,
    )


def dual_oracle(
    model: Model, case: Case, names: Sequence[str], *, extended: bool = False, allow_extended: bool = True
) -> Oracle:
    """Rungs 2-4 for `names`: float64 dual numbers, 50 digits where float64 may not resolve them (or
    `extended`), finite differences for the entries dual numbers cannot differentiate."""
    names = list(names)
    result = evaluate(model, case, names)
    fd_names = [n for n in names if np.any(result.kinked[n]) or not np.all(np.isfinite(result.grads[n]))]
    if fd_names:
        return _with_finite_differences(model, case, names, result=result, fd_names=fd_names)
    small = sum(np.size(g) for g in result.grads.values()) <= MP_MAX_ENTRIES
    condition = loss_condition({n: input_value(model, case, n) for n in names}, result.grads, {}, result.loss)
    if extended or (allow_extended and small and condition * UNIT_ROUNDOFF["float64"] > MP_TRIGGER):
        why = (
            "forced"
            if extended
            else (f"the loss's condition number {condition:.3g} times float64's unit roundoff exceeds {MP_TRIGGER:g}")
        )
        return extended_oracle(model, case, names, result=result, why=why)
    refine = (
        once(
            lambda: extended_oracle(
                model, case, names, result=result, why="a float64 row would fail against the float64 dual oracle"
            )
        )
        if allow_extended and small
        else None
    )
    return Oracle(
        result.grads,
        OracleKind.DUAL,
        bound_name="no bound (exact to rounding)",
        reason="dual numbers over the numpy step",
        refine=refine,
    )


def extended_oracle(model: Model, case: Case, names: Sequence[str], *, result: DualResult, why: str) -> Oracle:
    """The dual oracle at 50 digits; its bound: ROUNDING_SAFETY x its distance from the float64 one."""
    mp = evaluate(model, case, names, extended=True)
    bounds = {n: ROUNDING_SAFETY * np.abs(result.grads[n] - mp.grads[n]) for n in names}
    return Oracle(mp.grads, kind=OracleKind.DUAL_MP, error=bounds, bound_name=MP_BOUND_NAME, reason=f"50 digits: {why}")


def _with_finite_differences(
    model: Model, case: Case, names: list[str], *, result: DualResult, fd_names: list[str]
) -> Oracle:
    """Finite differences (with their error bars) for the entries of `fd_names` that dual numbers
    could not differentiate; the dual values, with bound 0, everywhere else."""
    fd = finite_difference_oracle(model, case, fd_names)
    grads = {n: np.array(result.grads[n], dtype=np.float64) for n in names}
    error = {n: np.zeros(np.shape(grads[n])) for n in names}
    for n in fd_names:
        use = result.kinked[n] | ~np.isfinite(result.grads[n])
        grads[n][use], error[n][use] = np.asarray(fd.grads[n])[use], np.asarray(fd.error_of(n))[use]
        # Where no derivative exists, every one-sided value is defensible (torch's |x|' at 0 is 0,
        # jax's 1) and the central difference is one of them: shown, never held against a driver.
        error[n][result.kinked[n]] = np.inf
    what = ", ".join(result.kinks) or "a non-finite tangent"
    # A kink in a branch `where` did not take leaves the dual value finite (the derivative exists there); a pole
    # on both sides leaves it infinite or NaN.
    no_derivative = {n: np.asarray(result.kinked[n], dtype=bool) & ~np.isfinite(result.grads[n]) for n in fd_names}
    return Oracle(
        grads,
        OracleKind.FINITE_DIFFERENCES,
        error,
        f"the finite-difference oracle's error bound, unbounded where the step has no derivative ({what})",
        reason=f"no derivative at this point ({what}) for some entries of {fd_names}: finite differences there",
        no_derivative=no_derivative,
    )


def _with_reason(oracle: Oracle, reason: str) -> Oracle:
    return Oracle(
        oracle.grads,
        kind=oracle.kind,
        error=oracle.error,
        bound_name=oracle.bound_name,
        reason=reason,
        source=oracle.source,
    )


def weakest(kinds: Sequence[str]) -> str:
    """The least exact of several oracle kinds (a check that used several rungs is as good as its worst)."""
    ranked = [k for k in _WEAKEST_LAST if k in kinds]
    return ranked[-1] if ranked else (kinds[0] if kinds else OracleKind.DUAL)


def once(fn):
    """fn memoised: the fuzzer shares one oracle among the drivers of a body."""
    done: list = []

    def call():
        if not done:
            done.append(fn())
        return done[0]

    return call
