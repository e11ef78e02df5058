"""A prepared driver whose gradients were checked: the entry point that asv benchmarks and
pytest-benchmark tests share with the CLI's rows (same registry, same check, same tolerance)."""

from __future__ import annotations

from typing import Mapping

from rnnbench import registry
from rnnbench.drivers.base import Prepared
from rnnbench.run.row import Check, Job, check_gradients, unavailable_reason


class NotApplicable(NotImplementedError):
    """The driver cannot run this model / dtype / device here (asv skips NotImplementedError)."""


class GradientDisagreement(AssertionError):
    """The driver ran but its gradients do not agree with the oracle: no speed number for it."""


def prepare_checked(model_name: str, driver_name: str, sizes: Mapping[str, int] | None = None,
                    dtype: str = "float32", device: str = "cpu", seed: int = 0) -> tuple[Check, Prepared]:
    """Prepare `driver_name` on `model_name` at `sizes` (overrides of the defaults), run the
    staged gradient check once (that first call compiles; Check.first_call_s times it) and return
    (check, prepared). Raises NotApplicable or GradientDisagreement (with the full report)."""
    model, driver = registry.get_model(model_name), registry.get_driver(driver_name)
    job = Job(model_name, driver_name, dtype, device, dict(sizes or {}), seed)
    reason = unavailable_reason(model, driver, job)
    if reason is not None:
        raise NotApplicable(reason)
    case = model.make_case(model.sizes_with_defaults(job.sizes), seed).rounded_to(dtype)
    check, prepared = check_gradients(model, driver, case, dtype, device)
    if check.status != "ok" or prepared is None:
        raise GradientDisagreement(f"{model_name} / {driver_name}: {check.status}\n{check.report}")
    return check, prepared


def verify(model_name: str, loss: float, grads: dict, sizes: Mapping[str, int] | None = None,
           dtype: str = "float32", device: str = "cpu", seed: int = 0) -> Check:
    """Judge a (loss, canonical grads) pair, e.g. the value a benchmark returned, against the
    oracle with the one tolerance policy; returns the Check (status "ok" when they agree)."""
    from rnnbench.check.compare import compare_grads, describe, loss_rel_error, verdict
    from rnnbench.check.finite_diff import oracle_grads
    from rnnbench.check.tolerance import tolerance
    from rnnbench.model import reference_loss

    model = registry.get_model(model_name)
    case = model.make_case(model.sizes_with_defaults(dict(sizes or {})), seed).rounded_to(dtype)
    want, kind = oracle_grads(model, case)
    tol = tolerance(dtype, kind, device)
    check = Check(status="error", oracle_kind=kind, tolerance=tol, loss=loss, reference_loss=reference_loss(model, case))
    check.loss_error = loss_rel_error(loss, check.reference_loss)
    check.errors = compare_grads(grads, want, case.wrt_names(model.carry_names), tol)
    check.status = verdict(check.loss_error, check.errors, tol)
    check.report = describe(check.errors, check.loss_error, tol)
    return check
