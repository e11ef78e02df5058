"""Say where a wrong gradient goes wrong: the first step (walking back from the last, as the
backward does) and the carry leaf or parameter where the driver and the oracle diverge.

Method: suffix problems. For a step t, the recurrence from t on is its own problem: initial carry
c_t (the float64 numpy carry after t steps, every leaf differentiated), xs[t:], and the same loss
with the outputs of steps < t prepended as constants. Its carry0 gradient is the carry cotangent
dL/dc_t; its parameter gradient minus that of the suffix from t+1 is step t's contribution to
dL/dp. The driver computes both on each suffix with its own autodiff; the oracle is the ladder's
exact rungs on the numpy suffix (check/oracles/oracle.dual_oracle: dual numbers, 50 digits where float64
cannot resolve it, finite differences with their error bars only where a step has no
derivative). Walking t = T-1 .. 0, the first t where either disagrees is where the backward first
goes wrong.

A failure that no suffix shows needs something only the full problem has: the report names what
that is on this case (initial-carry leaves without grad, the docs/bugs.md §1 trigger; a gradient
with respect to xs, which suffixes do not take) rather than pointing at a step or guessing.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np

from rnnbench.check.compare import compare_grads, describe
from rnnbench.check.oracles.oracle import dual_oracle
from rnnbench.check.tolerance import at_loss_scale, tolerance
from rnnbench.drivers.base import Driver, derivatives
from rnnbench.model import Case, Model, reference_loss, rollout
from rnnbench.ops import numpy_ops
from rnnbench.status import InputStatus

PREFIX = "__prefix_ys"
MAX_PARAM_ENTRIES = 512  # per-step parameter contributions need a tangent per parameter entry


def suffix_problem(model: Model, case: Case, t: int) -> tuple[Model, Case]:
    """(model, case) of the recurrence from step t on (see the module docstring)."""
    ops = numpy_ops()
    consts = dict(case.consts)
    carry_t = tuple(case.carry0)
    if t > 0:
        prefix_xs = None if case.xs is None else case.xs[:t]
        ys_prefix, carry_t = rollout(ops, model, case.params, carry0=case.carry0, xs=prefix_xs, length=t)
        consts[PREFIX] = np.asarray(ys_prefix, dtype=np.float64)

    def loss(ops, consts, ys, carry):
        if PREFIX in consts:
            ys = ops.concat([consts[PREFIX], ys])
        return model.loss(ops, consts, ys, carry)

    sub_case = dataclasses.replace(
        case,
        carry0=tuple(np.asarray(c, dtype=np.float64) for c in carry_t),
        xs=None if case.xs is None else case.xs[t:],
        length=case.length - t,
        consts=consts,
        carry0_requires_grad=(True,) * len(case.carry0),
        xs_requires_grad=False,
    )
    sub_model = dataclasses.replace(
        model,
        name=f"{model.name}[t>={t}]",
        loss=loss,
        oracle=None,
        oracle_kind="finite_differences",
        make_case=lambda sizes, seed: sub_case,
    )
    return sub_model, sub_case


def _or_zero(g: np.ndarray | None, like: np.ndarray) -> np.ndarray:
    return np.zeros_like(like) if g is None else np.asarray(g, dtype=np.float64)


def full_problem_only(model: Model, case: Case) -> list[str]:
    """What the full problem has that every suffix problem lacks, on this case."""
    facts = []
    frozen = [
        n for n, g in zip(model.carry_names, case.carry0_requires_grad or (False,) * len(model.carry_names)) if not g
    ]
    if frozen:
        facts.append(f"initial-carry leaves without grad ({', '.join(frozen)}; the docs/bugs.md §1 trigger)")
    if case.xs_requires_grad:
        facts.append("the gradient with respect to xs (suffixes do not differentiate xs)")
    return facts


@dataclass
class Localization:
    """first_step: the first t (from T-1 down) whose suffix diverges, or None; where: the carry leaf
    ("carry0.<leaf>" = cotangent of c_t) or parameter (step t's contribution) that diverges there."""

    first_step: int | None = None
    where: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    stopped: str = ""  # why the walk ended before t = 0 without a divergence
    full_only: list[str] = field(default_factory=list)  # what the full problem has that no suffix has

    @property
    def complete(self) -> bool:
        return not self.stopped

    def format(self) -> str:
        head = "localization (suffix runs from step t, carry c_t differentiated; t walks back from T-1):"
        if self.first_step is not None:
            verdict = f"first divergence at step {self.first_step}: {', '.join(self.where)}"
        elif self.complete:
            verdict = (
                "no suffix diverges: every carry cotangent and per-step contribution agrees, so the failure "
                "needs something only the full problem has"
                + (": " + "; ".join(self.full_only) if self.full_only else " (not identified)")
            )
        else:
            verdict = f"inconclusive: {self.stopped} before any suffix diverged"
        return "\n".join([head, *self.lines, verdict])


def localize(
    model: Model,
    driver: Driver,
    case: Case,
    *,
    dtype: str,
    device: str = "cpu",
    budget_s: float = 60.0,
    mode: str = "vjp",
) -> Localization:
    """Walk the suffixes t = T-1 .. 0 until one diverges or `budget_s` is spent. mode: the
    differentiation mode (rnnbench.modes) the driver computes each suffix's gradients by."""
    n_param = sum(np.size(p) for p in case.params.values())
    with_params = n_param <= MAX_PARAM_ENTRIES
    carry_names = [f"carry0.{n}" for n in model.carry_names]
    if model.forward is not None:  # a suffix of one recurrence is not a suffix of the chain
        return Localization(stopped="not localized: the model chains several recurrences (Model.forward)")
    out = Localization(full_only=full_problem_only(model, case))
    if not with_params:
        out.lines.append(f"  (per-step parameter contributions skipped: {n_param} entries > {MAX_PARAM_ENTRIES})")
    start, later = time.perf_counter(), None  # later: (driver grads, oracle grads) of the suffix from t+1
    for t in range(case.length - 1, -1, -1):
        if time.perf_counter() - start > budget_s:
            out.stopped = f"stopped after the {budget_s:g} s budget at step {t + 1}"
            break
        sub_model, sub_case = suffix_problem(model, case, t)
        sub_case = sub_case.rounded_to(dtype)
        names = carry_names + (list(case.params) if with_params else [])
        oracle = dual_oracle(sub_model, sub_case, names)
        want, bound = dict(oracle.grads), {n: oracle.error_of(n) for n in names}
        try:
            _, got = derivatives(driver.prepare(sub_model, sub_case, dtype, device), mode)()
        except Exception as exc:  # the driver cannot run the suffix: say so and stop
            out.stopped = f"the driver raised on the suffix from step {t}"
            out.lines.append(f"  t={t}: {type(exc).__name__}: {str(exc).strip()[:200]}")
            break
        got_step, want_step, bound_step = dict(got), dict(want), dict(bound)
        if later is not None and with_params:  # step t's own contribution to the parameter gradients
            for p in case.params:  # None: the parameter does not reach this suffix's loss, i.e. zero
                got_step[p] = _or_zero(got[p], want[p]) - _or_zero(later[0].get(p), want[p])
                want_step[p] = want[p] - later[1][p]
                bound_step[p] = bound[p] + later[2][p]
        # the oracle's own error never counts as a divergence (cannot_decide is not evidence)
        step_tol = at_loss_scale(tolerance(dtype, oracle.kind, device), reference_loss(sub_model, sub_case))
        errors = compare_grads(got_step, want_step, names, tol=step_tol, error=bound_step)
        bad = [e for e in errors if e.status in (InputStatus.MISMATCH, InputStatus.MISSING)]
        out.lines.append(f"  t={t}: " + ("agree" if not bad else "DIVERGES"))
        if bad:
            out.first_step = t
            out.where = [
                f"{'cotangent of ' if e.name.startswith('carry0.') else 'step contribution to '}"
                f"{e.name.removeprefix('carry0.')}"
                for e in bad
            ]
            out.lines += ["    " + line for line in describe(bad, 0.0, step_tol).splitlines()[1:]]
            break
        later = (got, want, bound)
    return out
