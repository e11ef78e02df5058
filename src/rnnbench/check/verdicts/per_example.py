"""The per_example mode's oracle and verdict (rnnbench.modes). Example b's own case (rnnbench.batch:
the case's slice b, B = 1) gets the oracle ladder's gradients (rnnbench.check.oracles.oracle), and the one
judge (rnnbench.check.verdicts.judge, every edge rule: kinks, ties, NaN, the float32 bound) decides what the
driver gave for example b against it. The row's verdict is its examples' in the judge's staged
order (rnnbench.status: a forward mismatch first, then a missing gradient, a wrong one, ...,
cannot_decide, ok); each input's line is its worst example's, its entry indexed (b, *entry) in the
(B, *shape) layout of rnnbench.batch, so a wrong value is localized to its example and entry. The
known-issues registry is applied once, to the row (entries scoped to `per_example`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from rnnbench import batch
from rnnbench.check.compare import describe, loss_rel_error
from rnnbench.check.oracles.oracle import Oracle, oracle_grads, weakest
from rnnbench.check.verdicts.judge import Check, judge, registered
from rnnbench.model import Case, Layout, Model, batch_layout, reference_loss
from rnnbench.modes import PER_EXAMPLE
from rnnbench.status import InputStatus, Status

# the staged check's order (rnnbench.status): the row takes the first of its examples' statuses in it
STAGED = [s for s in Status if s not in (Status.OK, Status.HVP_MISMATCH, Status.HVP_ERROR)] + [Status.OK]
# an input's line shows its worst example: a wrong entry before an undecided one before agreement
LINE_ORDER = {InputStatus.MISSING: 0, InputStatus.MISMATCH: 1, InputStatus.UNDECIDED: 2, InputStatus.OK: 3}


@dataclass(frozen=True)
class ExampleOracles:
    """The oracle of each example's own case: cases[b] (B = 1) and oracles[b] (its gradients w.r.t.
    the compared inputs, shaped as in that case). grads: stacked, {name: (B, *shape in one example)}."""

    layout: Layout
    cases: tuple[Case, ...]
    oracles: tuple[Oracle, ...]

    @property
    def kind(self) -> str:
        return weakest([o.kind for o in self.oracles])

    def grads(self, names: list[str]) -> dict[str, np.ndarray]:
        return batch.stacked([o.grads for o in self.oracles], names)


def example_oracles(model: Model, case: Case, choice: str | None = None) -> ExampleOracles:
    """Each example's oracle (the ladder, or the rung `choice` forces), on a case whose per_example
    row can run (rnnbench.batch.unavailable is None)."""
    lay = batch_layout(model, case)
    if isinstance(lay, str):
        raise ValueError(lay)
    cases = tuple(batch.examples(model, case, lay))
    return ExampleOracles(lay, cases, tuple(oracle_grads(model, c, choice) for c in cases))


def judge_examples(
    model: Model,
    case: Case,
    dtype: str,
    *,
    device: str,
    driver_name: str,
    oracles: ExampleOracles,
    produced: tuple[np.ndarray, Mapping[str, np.ndarray | None]] | None = None,
    raised: BaseException | None = None,
    compiled: bool = False,
    autocast: bool = False,
) -> Check:
    """The verdict on a driver's per-example result on `case` at `dtype` (module docstring).
    produced: (each example's loss (B,), {compared input: (B, *shape in one example) or None}); or
    raised: the exception the driver raised (judged once, as in every mode)."""
    common = {"device": device, "driver_name": driver_name, "compiled": compiled, "autocast": autocast}
    if raised is not None or produced is None:
        return judge(model, case, dtype, **common, raised=raised, oracle=Oracle({}, oracles.kind), mode=PER_EXAMPLE)
    losses, grads = produced
    names, size = case.wrt_names(model.carry_names), len(oracles.cases)
    each = [
        judge(
            model,
            c,
            dtype,
            **common,
            produced=(float(np.ravel(losses)[b]), {n: _of_example(grads.get(n), b, size) for n in names}),
            oracle=oracles.oracles[b],
            mode=PER_EXAMPLE,
        )
        for b, c in enumerate(oracles.cases)
    ]
    return registered(
        _combined(model, case, oracles=oracles, each=each, produced=produced),
        driver_name,
        model,
        case=case,
        dtype=dtype,
        mode=PER_EXAMPLE,
    )


def _combined(
    model: Model,
    case: Case,
    *,
    oracles: ExampleOracles,
    each: list[Check],
    produced: tuple[np.ndarray, Mapping[str, np.ndarray | None]],
) -> Check:
    """One Check of the row from its examples' (their own verdicts, before the registry: raw_status)."""
    statuses = [c.raw_status for c in each]
    status = min(statuses, key=lambda s: STAGED.index(Status(s)))
    decides = statuses.index(status)
    losses, grads = produced
    whole = oracles.layout.weight * float(np.sum(losses))
    reference = reference_loss(model, case)
    names = case.wrt_names(model.carry_names)
    errors = []
    for i in range(len(names)):
        lines = [(b, c.errors[i]) for b, c in enumerate(each)]
        b, err = min(lines, key=lambda line: (LINE_ORDER[InputStatus(line[1].status)], -_rel(line[1])))
        where = f"example {b}" + (f", entry {list(err.index)}" if err.index else "")
        detail = err.detail if err.status == InputStatus.OK else f"{where}: {err.detail}" if err.detail else where
        errors.append(dataclasses.replace(err, index=(b, *err.index), detail=detail))
    chosen = each[decides]
    tol = chosen.tolerance
    notes = chosen.report.splitlines()[1 + len(chosen.errors) :]  # its own lines after describe()'s
    verdicts = ", ".join(f"{b}: {s}" for b, s in enumerate(statuses))
    report = "\n".join(
        [
            describe(errors, loss_rel_error(whole, reference), tol),
            f"per example (each against the oracle of its own case, B = 1): {verdicts}",
            *([f"example {decides}: {line}" for line in notes] if status != Status.OK else []),
        ]
    )
    return Check(
        status=status,
        oracle_kind=oracles.kind,
        tolerance=tol,
        loss=whole,
        reference_loss=reference,
        loss_error=loss_rel_error(whole, reference),
        errors=errors,
        grads={n: grads.get(n) for n in names},
        report=report,
        forward=chosen.forward,
        forward_note=chosen.forward_note,
        kinks_only=all(c.kinks_only or c.raw_status == Status.OK for c in each) and status != Status.OK,
        oracle_source=chosen.oracle_source,
    )


def _of_example(g: np.ndarray | None, b: int, size: int) -> np.ndarray | None:
    """Example b's gradient from a driver's (B, ...) array; an array without that leading axis goes to the
    judge whole, which reports its shape against the oracle's (a driver's wrong layout, not a crash here)."""
    if g is None:
        return None
    g = np.asarray(g)
    return g[b] if g.ndim and g.shape[0] == size else g


def _rel(err) -> float:
    return err.max_rel_error if np.isfinite(err.max_rel_error) else float("inf")
