"""What the fuzzer attaches to a shrunk failure: where it goes wrong (rnnbench.check.verdicts.localize, first
order) and a standalone reproducer (rnnbench.fuzz.repro)."""

from __future__ import annotations

from pathlib import Path

from rnnbench.check.tolerance import at_loss_scale, hvp_tolerance, tolerance
from rnnbench.check.verdicts.localize import localize
from rnnbench.drivers.base import Driver
from rnnbench.fuzz.cases import FuzzCase
from rnnbench.fuzz.outcome import ERRORS, Outcome
from rnnbench.fuzz.repro import export
from rnnbench.model import reference_loss


def explain_failure(
    out: Outcome, fc: FuzzCase, driver: Driver, *, dtype: str, repro_dir: Path | None, seed: int, device: str = "cpu"
) -> None:
    """Fill out.localization and out.repro for the minimal body `fc` of a failing outcome. A batched
    body's (per_example) gets neither: the suffix walk and the repro templates run whole-batch
    reverse mode, where its per-example failure does not show; its report names example and entry."""
    if fc.body.examples:
        out.repro = "no standalone repro for a per_example outcome (the templates run reverse mode)"
        return
    second_order = out.kind not in ERRORS and out.first_order_ok
    if not second_order and out.kind not in ERRORS:
        out.localization = localize(fc.model, driver, fc.case, dtype=dtype, device=device, budget_s=30.0).format()
    if repro_dir is None or out.kind in ERRORS:
        return
    if second_order:
        tol = hvp_tolerance(fc.hvp_oracle().kind, reference_loss(fc.model, fc.case))
    else:
        tol = at_loss_scale(tolerance(dtype, "finite_differences"), reference_loss(fc.model, fc.case))
    name = f"repro_{driver.name}_seed{seed}_body{out.index}_{out.kind.replace(':', '-')}.py"
    path = export(
        repro_dir / name,
        fc,
        driver,
        second_order=second_order,
        status=out.kind,
        tolerance=tol.max_rel_error,
        absolute_scale=tol.absolute_scale,
    )
    out.repro = str(path) if path else f"no standalone template for {driver.name} (templates: torch/jax loop and scan)"
