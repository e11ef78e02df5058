"""The second-order check: a driver's Hessian-vector product (Prepared.hvp) against a float64
oracle along a seeded random direction, with the known-issues registry applied.

The oracle, by the ladder of check/oracles/oracle.py: nested dual numbers (forward over forward,
check/differentiation/dual_eval.py: exact to rounding) at float64, or at 50 digits where the loss's condition
number says float64 may not resolve it; before an H v is called wrong at float64, the 50-digit one
gives what float64 rounding alone does to it. Only where dual numbers meet a point without a
derivative (or are forced off) do the difference oracles of check/differentiation/hvp.py answer: gradient
differences of a hand oracle, else loss differences, each checked at two step sizes.

Statuses: "ok"; "hvp_mismatch" (some (H v)[input] is off, including identically zero where the
oracle is not); "hvp_error" (the framework raised); "ill_conditioned" (the oracle cannot resolve
this draw: a difference oracle disagrees with itself between step sizes, or the difference is
within what float64 rounding does); "unsupported" (the driver has no second-order path); and,
through the registry, known_issue:<id> / known_issue_fixed:<id>.
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from rnnbench.check.compare import InputError, compare_grads, describe, loss_condition
from rnnbench.check.differentiation.dual_eval import evaluate
from rnnbench.check.differentiation.finite_diff import input_value
from rnnbench.check.differentiation.hvp import GRADIENT_STEP, LOSS_STEP, finite_difference_hvp, gradient_difference_hvp
from rnnbench.check.differentiation.low_precision import ROUNDING_SAFETY
from rnnbench.check.oracles.kink_range import hvp_at_kinks
from rnnbench.check.oracles.oracle import MP_MAX_ENTRIES, MP_TRIGGER, once
from rnnbench.check.tolerance import UNIT_ROUNDOFF, hvp_tolerance
from rnnbench.check.verdicts.judge import registered
from rnnbench.drivers.base import Prepared
from rnnbench.model import Case, Model, reference_loss
from rnnbench.status import InputStatus, OracleKind, Status

COARSE = 2.0  # the self-consistency step is this many times the oracle's step
KINKED_HVP = (
    "half the spread of the kinks' corners' H v (nested dual numbers with each tie's side forced; 0 where "
    "they agree, or where v decides every tie, its sides equal along v to first order and not to second: "
    "exact); none (NaN) where an entry's gradient jumps across a kink (check/oracles/kink_range.py)"
)


@dataclass
class HvpOracle:
    """direction v and want = H v, keyed like the gradients; kind names the tolerance; reason is
    None or why this draw is ill-conditioned. error: per-entry bounds (dual_mp_hvp: what float64
    rounding does), bound_name what they are; refine: None or the 50-digit oracle, asked before a
    float64 H v is called wrong; poles: the entries at a pole, where v is held at 0 (hvp_oracle)."""

    v: dict[str, np.ndarray]
    want: dict[str, np.ndarray]
    kind: str
    reason: str | None
    error: dict[str, np.ndarray] | None = None
    bound_name: str = ""
    refine: Callable[[], HvpOracle] | None = field(default=None, repr=False)
    # per input, the entries with no finite derivative (a pole), where v is held at 0; None: none
    poles: dict[str, np.ndarray] | None = None


@dataclass
class SecondOrder:
    status: str
    report: str = ""
    raw_status: str = ""
    errors: list[InputError] = field(default_factory=list)
    oracle_kind: str = ""  # the H v oracle that judged it (after any refinement)


def direction(model: Model, case: Case, seed: int) -> dict[str, np.ndarray]:
    """A seeded direction with entries uniform in [-1, 1], one array per compared input."""
    rng = np.random.default_rng([seed, 0x4856])
    return {n: rng.uniform(-1.0, 1.0, np.shape(input_value(model, case, n))) for n in case.wrt_names(model.carry_names)}


def hvp_oracle(model: Model, case: Case, seed: int = 0, choice: str | None = None) -> HvpOracle:
    """The ladder (module docstring). choice: None / "auto"; "dual" / "dual_mp" force that rung,
    "finite_differences" the difference oracles."""
    v = direction(model, case, seed)
    names = case.wrt_names(model.carry_names)
    if choice == OracleKind.FINITE_DIFFERENCES:
        return difference_hvp_oracle(model, case, v)
    result = evaluate(model, case, names, direction=v)
    if all(np.all(np.isfinite(result.grads[n])) for n in names):
        return _ladder(model, case, names, v=v, result=result, choice=choice)
    # The dual numbers' inf * 0 makes every column through a pole NaN, and v's tangent marks every
    # entry it moves kinked: a first-order pass says which entries are the pole's own.
    plain = evaluate(model, case, names)
    poles = {n: np.asarray(plain.kinked[n], dtype=bool) & ~np.isfinite(plain.grads[n]) for n in names}
    if not any(np.any(p) for p in poles.values()):
        return _ladder(model, case, names, v=v, result=result, choice=choice)
    # An entry with no finite derivative (sqrt(w x) at w = 0) is a pole: a direction that moves it
    # leaves the domain, and every difference along v is NaN. v is held at 0 there, so the other
    # entries' H v (defined: the pole does not move) is computed and judged (_judged: a framework's
    # non-finite entry there is undecided, POLE_NAN).
    v = {n: np.where(poles[n], 0.0, v[n]) for n in names}
    result = evaluate(model, case, names, direction=v)
    return dataclasses.replace(_ladder(model, case, names, v=v, result=result, choice=choice), poles=poles)


def _ladder(model: Model, case: Case, names: list, *, v: dict, result, choice: str | None) -> HvpOracle:
    """hvp_oracle's rungs given the dual pass along v (`result`)."""
    finite = all(np.all(np.isfinite(result.hvp[n])) for n in names)
    if finite and not any(np.any(result.kinked[n]) for n in names):
        return _dual_hvp(model, case, names, v=v, hv=result.hvp, grads=result.grads, loss=result.loss, choice=choice)
    at_kinks = hvp_at_kinks(model, case, names, v=v, agree=hvp_tolerance(OracleKind.DUAL_HVP, 1.0).max_rel_error)
    if not isinstance(at_kinks, str):
        return HvpOracle(
            v, want=at_kinks[0], kind=OracleKind.DUAL_HVP, reason=None, error=at_kinks[1], bound_name=KINKED_HVP
        )
    return _off_kinks(difference_hvp_oracle(model, case, v), result.kinked, at_kinks)


def _off_kinks(oracle: HvpOracle, kinked: Mapping[str, np.ndarray], why: str) -> HvpOracle:
    """The difference oracle where the kinks' corners could not be enumerated (why): differences give
    the loss's own H v, but at an entry whose gradient passes a kink a framework's tie convention may
    give another (max(p^2, 0) at p = 0: both frameworks split the tie, half the loss's H v). So there
    the bound is unbounded: a driver that gives the loss's H v is ok, one that differs cannot be
    decided (a convention or a bug), never a mismatch; the other entries are judged as before."""
    if oracle.reason is not None:
        return oracle
    error = {
        n: np.where(np.asarray(kinked[n], dtype=bool), np.inf, (oracle.error or {}).get(n, 0.0)) for n in oracle.want
    }
    note = f"unbounded where an entry's gradient passes a kink whose conventions were not enumerated ({why})"
    return dataclasses.replace(oracle, error=error, bound_name="; ".join(filter(None, [oracle.bound_name, note])))


def _dual_hvp(
    model: Model, case: Case, names: list, *, v: dict, hv: dict, grads: dict, loss: float, choice: str | None
) -> HvpOracle:
    @once
    def extended() -> HvpOracle:
        mp = evaluate(model, case, names, extended=True, direction=v).hvp
        bounds = {n: ROUNDING_SAFETY * np.abs(hv[n] - mp[n]) for n in names}
        return HvpOracle(
            v,
            want=mp,
            kind=OracleKind.DUAL_MP_HVP,
            reason=None,
            error=bounds,
            bound_name=f"what float64 rounding alone does to H v ({ROUNDING_SAFETY:g}x the float64 dual H v's "
            "distance from the same at 50 digits)",
        )

    small = sum(np.size(g) for g in grads.values()) <= MP_MAX_ENTRIES
    condition = loss_condition({n: input_value(model, case, n) for n in names}, grads, {}, loss)
    if choice == OracleKind.DUAL_MP or (
        choice != OracleKind.DUAL and small and condition * UNIT_ROUNDOFF["float64"] > MP_TRIGGER
    ):
        return extended()
    refine = extended if small and choice != OracleKind.DUAL else None
    return HvpOracle(v, hv, OracleKind.DUAL_HVP, None, refine=refine)


def difference_hvp_oracle(model: Model, case: Case, v: dict) -> HvpOracle:
    """Gradient differences of the analytic oracle where the model has one, else loss differences;
    each at two step sizes (their disagreement makes the draw ill-conditioned)."""
    if model.oracle is not None and model.oracle_kind != OracleKind.FINITE_DIFFERENCES:
        kind, fine = OracleKind.GRADIENT_DIFFERENCES_HVP, gradient_difference_hvp(model, case, v)
        coarse = gradient_difference_hvp(model, case, v, step=COARSE * GRADIENT_STEP)
    else:
        kind, fine = OracleKind.FINITE_DIFFERENCES_HVP, finite_difference_hvp(model, case, v)
        coarse = finite_difference_hvp(model, case, v, step=COARSE * LOSS_STEP)
    names = case.wrt_names(model.carry_names)
    tol = hvp_tolerance(kind, reference_loss(model, case))
    bad = [e.name for e in compare_grads(coarse, fine, names, tol=tol) if e.status != InputStatus.OK]
    if not bad:
        return HvpOracle(v, fine, kind, None)
    # Entry by entry: where the two steps disagree (a kink crossed, a NaN) the entry has no value and
    # cannot be decided; the entries that agree are judged. None agreeing: the draw is ill-conditioned.
    G = max((float(np.max(np.abs(fine[n][np.isfinite(fine[n])]), initial=0.0)) for n in names), default=0.0)
    want = {}
    for n in names:
        r = np.asarray(fine[n], dtype=np.float64)
        scale = max(float(np.max(np.abs(r[np.isfinite(r)]), initial=0.0)), tol.scale_floor * G, tol.absolute_scale)
        want[n] = np.where(np.abs(np.asarray(coarse[n]) - r) <= tol.max_rel_error * (scale or 1.0), r, np.nan)
    reason = f"the {kind} oracle disagrees with itself between step sizes for {bad}"
    if not any(np.any(np.isfinite(w)) for w in want.values()):
        return HvpOracle(v, fine, kind, reason)
    return HvpOracle(v, want, kind, None, bound_name=f"{reason}: no value (NaN) at those entries")


def check_second_order(
    model: Model,
    driver_name: str,
    case: Case,
    *,
    prepared: Prepared,
    oracle: HvpOracle | None = None,
    seed: int = 0,
    choice: str | None = None,
) -> SecondOrder:
    """Compare prepared.hvp(v) with the oracle's H v at float64 (second order is checked at float64
    only: the oracle's own error, ~1e-10, would otherwise be invisible under float32 roundoff)."""
    if prepared.hvp is None:
        return SecondOrder(Status.UNSUPPORTED, f"{driver_name} has no second-order path")
    oracle = oracle or hvp_oracle(model, case, seed, choice)
    if oracle.reason is not None:
        return SecondOrder(Status.ILL_CONDITIONED, oracle.reason)
    tol = hvp_tolerance(oracle.kind, reference_loss(model, case))
    names = case.wrt_names(model.carry_names)
    try:
        got: Mapping = prepared.hvp(oracle.v)
    except Exception as exc:  # a framework that refuses double backward: a result, not a crash
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-4:])
        result = SecondOrder(Status.HVP_ERROR, f"{type(exc).__name__}: {str(exc).strip()[:300]}\n{tb}")
    else:
        result = _judged(got, oracle, names, tol)
        if result.status == Status.HVP_MISMATCH and oracle.refine is not None:
            # before calling it wrong: what float64 rounding does to H v (adopted where it changes the verdict)
            finer = dataclasses.replace(oracle.refine(), poles=oracle.poles)
            refined = _judged(got, finer, names, hvp_tolerance(finer.kind, reference_loss(model, case)))
            if refined.status != Status.HVP_MISMATCH:
                result, oracle = refined, finer
        result.oracle_kind = str(oracle.kind)
    return registered(result, driver_name, model, case=case, dtype="float64", order=2)


def _judged(got: Mapping, oracle: HvpOracle, names: list, tol) -> SecondOrder:
    want, beside = _beside_poles(got, oracle, names)
    errors = compare_grads(
        got,
        want,
        names,
        tol=tol,
        error=oracle.error,
        **({"bound_name": oracle.bound_name} if oracle.bound_name else {}),
    )
    if oracle.bound_name == KINKED_HVP:
        errors = [_within_conventions(e, oracle.error, tol) for e in errors]
    errors = [_named_beside_poles(e, beside.get(e.name)) for e in errors]
    statuses = {e.status for e in errors}
    report = "Hessian-vector product:\n" + describe(errors, 0.0, tol) + f"\noracle: {oracle.kind}"
    if oracle.bound_name == KINKED_HVP:  # entries it has no value for, or a range of conventions
        report += f" ({oracle.bound_name})"
    if statuses & {InputStatus.MISMATCH, InputStatus.MISSING}:
        return SecondOrder(Status.HVP_MISMATCH, report, errors=errors)
    if InputStatus.UNDECIDED in statuses:  # within what float64 rounding alone does: cannot decide
        return SecondOrder(Status.ILL_CONDITIONED, report, errors=errors)
    return SecondOrder(Status.OK, report, errors=errors)


def _within_conventions(e: InputError, half_widths: Mapping | None, tol) -> InputError:
    """An input that agrees with the midpoint of its kinks' corners' H v, where those corners spread
    beyond the tolerance, agrees with one convention among others, not with the H v: the loss's own
    H v may be any of them (max(p^2, 0) at p = 0: the corners give 2 and 0, the frameworks split the
    tie and give 1, the loss's is 2). Never ok there: cannot decide."""
    spread = np.asarray((half_widths or {}).get(e.name, 0.0), dtype=np.float64)
    if e.status != InputStatus.OK or not np.any(spread > tol.max_rel_error * e.scale):
        return e
    return dataclasses.replace(
        e,
        status=InputStatus.UNDECIDED,
        detail=(e.detail + " " if e.detail else "")
        + "within its kinks' corners' H v, which spread beyond the tolerance: one convention among others",
    )


POLE_NAN = (
    "not finite beside a pole (an entry with no finite derivative, where v is held at 0): the framework's "
    "infinite gradient there times v = 0 is NaN, which spreads to the entries upstream of it; cannot decide them"
)


def _beside_poles(got: Mapping, oracle: HvpOracle, names: list) -> tuple[dict, dict[str, np.ndarray]]:
    """The oracle's H v with no value (NaN) where the driver's is not finite beside a pole, and those
    entries per input. A framework's gradient at a pole is infinite, and its H v multiplies it by
    v = 0 there: NaN, spread to every entry upstream of the pole's cotangent. That says nothing of
    the H v those entries have, so they are undecided; the driver's finite entries are judged."""
    if not oracle.poles or not any(np.any(p) for p in oracle.poles.values()):
        return dict(oracle.want), {}
    want, beside = dict(oracle.want), {}
    for n in names:
        g = got.get(n)
        if g is None or np.shape(g) != np.shape(oracle.want[n]):
            continue
        bad = ~np.isfinite(np.asarray(g, dtype=np.float64))
        if np.any(bad):
            want[n] = np.where(bad, np.nan, np.asarray(oracle.want[n], dtype=np.float64))
            beside[n] = bad
    return want, beside


def _named_beside_poles(e: InputError, bad: np.ndarray | None) -> InputError:
    """e's line says which entries were left undecided beside a pole (POLE_NAN), and why."""
    if bad is None or not np.any(bad):
        return e
    entries = [list(int(i) for i in idx) for idx in np.argwhere(bad)]
    shown = ", ".join(str(x) for x in entries[:4]) + (f" and {len(entries) - 4} more" if len(entries) > 4 else "")
    note = f"{POLE_NAN} at {shown}"
    if e.status == InputStatus.UNDECIDED and e.detail.startswith("no value to compare with"):
        return dataclasses.replace(e, detail=note + "; the other entries agree" if len(entries) < bad.size else note)
    return dataclasses.replace(e, detail="; ".join(filter(None, [e.detail, note])))
