"""One row, in this process: build the case, check gradients against the oracle, then (only if
they agree) time forward and forward+backward. Returns a plain-data record."""

from __future__ import annotations

import dataclasses
import os
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Optional

from rnnbench import record
from rnnbench.check import known_issues
from rnnbench.check.compare import InputError, compare_grads, describe, loss_rel_error, verdict
from rnnbench.check.finite_diff import oracle_grads
from rnnbench.check.localize import localize
from rnnbench.check.tolerance import Tolerance, island_tolerance, tolerance
from rnnbench.drivers.base import Driver, Prepared
from rnnbench.model import Case, Model, reference_loss
from rnnbench.run import environments
from rnnbench.run.timing import TimingConfig, first_call, measure, peak_rss_mb, timed_call


@dataclass(frozen=True)
class Job:
    """A row to run, as plain data (it crosses process boundaries as JSON)."""

    model: str
    driver: str
    dtype: str = "float32"
    device: str = "cpu"
    sizes: dict[str, int] = field(default_factory=dict)  # overrides of the model's defaults
    seed: int = 0
    threads: int = 1
    timing: TimingConfig = TimingConfig()
    time: bool = True  # False: check gradients only
    environment: str = "main"  # which of the driver's environments runs it (rnnbench.run.environments)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Job":
        return cls(**{**d, "timing": TimingConfig(**d.get("timing", {}))})


@dataclass
class Check:
    """Outcome of the staged check: forward loss, then presence, then agreement of gradients."""

    status: str  # after the known-issues registry: may be known_issue:<id> / known_issue_fixed:<id>
    oracle_kind: str
    tolerance: Tolerance
    loss: float = float("nan")
    reference_loss: float = float("nan")
    loss_error: float = float("nan")
    errors: list[InputError] = field(default_factory=list)
    grads: dict[str, Any] = field(default_factory=dict)  # the driver's gradients (float64 numpy)
    first_call_s: float = float("nan")
    report: str = ""
    raw_status: str = ""  # the check's own verdict, before the known-issues registry

    @property
    def max_rel_error(self) -> float:
        return max((e.max_rel_error for e in self.errors), default=0.0)


LOCALIZED = ("grad_mismatch", "missing_grad")  # unexplained wrong gradients get a localization
LOCALIZE_BUDGET_S = 60.0  # a compiled driver recompiles for every suffix: bound the walk
COMPILE_ERROR_MODULES = ("torch._dynamo", "torch._inductor", "torch._higher_order_ops", "jax.errors", "jax._src.errors")


def is_compile_error(exc: BaseException) -> bool:
    """Errors raised while tracing/compiling (dynamo, inductor, jax tracing), judged by where the
    exception class lives, anywhere in the cause chain."""
    seen = exc
    while seen is not None:
        if type(seen).__module__.startswith(COMPILE_ERROR_MODULES):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def check_gradients(model: Model, driver: Driver, case: Case, dtype: str, device: str) -> tuple[Check, Optional[Prepared]]:
    """Prepare the driver, run loss_and_grads once (timing it: the first call compiles) and
    compare with the oracle. Never raises for driver failures: they become the status. The
    known-issues registry then turns an expected upstream failure into known_issue:<id>."""
    want, kind = oracle_grads(model, case)
    tol = tolerance(dtype, kind, device)
    result = Check(status="error", oracle_kind=kind, tolerance=tol)
    try:
        prepared = driver.prepare(model, case, dtype, device)
        (loss, grads), result.first_call_s = timed_call(prepared.loss_and_grads)
    except Exception as exc:  # a driver failure is a result, not a crash of the suite
        result.status = "compile_error" if driver.compiled and is_compile_error(exc) else "error"
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        result.report = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}\n" + "".join(tb[-6:])
        return _apply_known_issues(result, model, driver, case, dtype), None
    names = case.wrt_names(model.carry_names)
    result.loss = loss
    result.grads = grads
    result.reference_loss = reference_loss(model, case)
    result.loss_error = loss_rel_error(loss, result.reference_loss)
    per_name = {n: island_tolerance(kind, device) for n in model.island_grads} if driver.autocast else None
    result.errors = compare_grads(grads, want, names, tol, per_name)
    result.status = verdict(result.loss_error, result.errors, tol)
    result.report = describe(result.errors, result.loss_error, tol)
    return _apply_known_issues(result, model, driver, case, dtype), prepared


def _apply_known_issues(result: Check, model: Model, driver: Driver, case: Case, dtype: str) -> Check:
    result.raw_status = result.status
    expected = known_issues.covering(driver.name, model, case, dtype)
    result.status, note = known_issues.classify(result.status, result.report, expected)
    if note:
        result.report = f"{note}\n{result.report}"
    return result


def run_row(job: Job) -> dict[str, Any]:
    """The full row: availability, gradient check, timing. Returns the record."""
    from rnnbench import registry

    model, driver = registry.get_model(job.model), registry.get_driver(job.driver)
    sizes = model.sizes_with_defaults(job.sizes)
    base = {
        "schema": record.SCHEMA,
        "model": job.model,
        "driver": job.driver,
        "framework": driver.framework,
        "environment_name": job.environment,
        "env_label": environments.label(),
        "anchor": driver.anchor,
        "dtype": job.dtype,
        "device": job.device,
        "sizes": sizes,
        "seed": job.seed,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": record.machine(),
    }
    reason = unavailable_reason(model, driver, job)
    if reason is not None:
        return {**base, "status": "unavailable", "reason": reason}
    case = model.make_case(sizes, job.seed).rounded_to(job.dtype)
    _import_framework(driver)  # so the memory baseline includes the framework's own footprint
    rss_before_mb = peak_rss_mb()
    chk, prepared = check_gradients(model, driver, case, job.dtype, job.device)
    rec = {
        **base,
        "status": chk.status,
        "raw_status": chk.raw_status,
        "oracle_kind": chk.oracle_kind,
        "tolerance": chk.tolerance.max_rel_error,
        "loss": chk.loss,
        "reference_loss": chk.reference_loss,
        "loss_rel_error": chk.loss_error,
        "max_rel_error": chk.max_rel_error if chk.errors else None,
        "grad_errors": [e.to_dict() for e in chk.errors],
        "first_call_s": chk.first_call_s,
        "report": chk.report,
        "environment": record.environment(job.threads, driver.versions(), dict(prepared.settings) if prepared else {}),
    }
    if prepared is not None:
        rec["repeatable"] = repeatability(prepared, chk)
    if chk.status in LOCALIZED and not driver.anchor:
        # An unexplained wrong gradient: say at which step and leaf the backward first goes wrong.
        loc = localize(model, driver, case, job.dtype, job.device, budget_s=LOCALIZE_BUDGET_S)
        rec["localization"] = {"first_step": loc.first_step, "where": loc.where, "complete": loc.complete}
        rec["report"] = f"{rec['report'].rstrip()}\n{loc.format()}"
    if chk.status == "ok" and job.time and prepared is not None:
        # Speed numbers exist only for rows whose gradients agree with the oracle.
        rec["fwd_bwd"] = measure(prepared.forward_backward, prepared.block, job.timing).to_dict()
        # forward() is a separate callable (jax: its own jit; torch.compile: a no_grad recompile):
        # its first call is timed apart, then its steady state.
        rec["fwd_first_call_s"] = first_call(prepared.forward, prepared.block)
        rec["fwd"] = measure(prepared.forward, prepared.block, job.timing).to_dict()
        if prepared.settings.get("lazy_tensors"):
            # Lazy tensors: the same calls without blocking time the tracing alone (for the report
            # only; fwd_bwd above is the real, blocked time).
            rec["fwd_bwd_trace_only"] = measure(prepared.forward_backward, lambda result: None, job.timing).to_dict()
            prepared.block(None)
    rec["memory"] = {
        "peak_rss_mb": peak_rss_mb(),
        "rss_before_row_mb": rss_before_mb,
        "method": "getrusage ru_maxrss high-water mark of the worker process; rss_before_row_mb is "
        "the mark after importing the framework, before prepare/compile/check/timing",
    }
    if model.flops is not None:
        rec["flops"] = model.flops(sizes)
    rec["environment"]["threads_in_use"] = _threads_in_use(driver)
    return rec


def repeatability(prepared: Prepared, chk: Check) -> dict[str, Any]:
    """Run loss_and_grads a second time: on CPU the same case should give bit-identical gradients.
    Where it does not (threaded reductions with run-dependent order), the record says by how much."""
    import numpy as np

    try:
        loss2, grads2 = prepared.loss_and_grads()
    except Exception as exc:
        return {"bitwise": False, "why": f"second call raised {type(exc).__name__}"}
    loss1, grads1 = chk.loss, chk.grads
    pairs = [(np.asarray(loss1), np.asarray(loss2))]
    pairs += [(grads1[k], grads2.get(k)) for k in grads1 if grads1[k] is not None and grads2.get(k) is not None]
    same = all(np.array_equal(a, b, equal_nan=True) for a, b in pairs)
    out: dict[str, Any] = {"bitwise": bool(same)}
    if not same:
        out["max_abs_diff"] = max(float(np.nanmax(np.abs(a - b))) if a.size else 0.0 for a, b in pairs)
        out["why"] = "two calls on the same inputs differ (non-deterministic reduction order or kernels)"
    return out


def _import_framework(driver: Driver) -> None:
    import importlib

    module = {"torch": "torch", "jax": "jax", "flax": "flax", "torch_xla": "torch_xla"}.get(driver.framework)
    if module is not None:
        importlib.import_module(module)


def _threads_in_use(driver: Driver) -> dict[str, int]:
    """Thread counts as the frameworks report them (the requested count is in `threads`)."""
    out = {"os_cpus_available": len(os.sched_getaffinity(0))}
    if driver.framework in ("torch", "torch_xla"):
        import torch

        out["torch_intra_op"] = torch.get_num_threads()
        out["torch_inter_op"] = torch.get_num_interop_threads()
    return out


def unavailable_reason(model: Model, driver: Driver, job: Job) -> Optional[str]:
    reason = driver.available()
    if reason is None and job.dtype not in driver.dtypes:
        reason = f"dtype {job.dtype} not supported by {driver.name}"
    if reason is None and job.device not in driver.devices:
        reason = f"device {job.device} not supported by {driver.name}"
    if reason is None:
        reason = driver.supports(model)
    if reason is None and job.device == "cuda":
        reason = cuda_missing(driver)
    return reason


def cuda_missing(driver: Driver) -> Optional[str]:
    if driver.framework == "torch":
        import torch

        return None if torch.cuda.is_available() else "no CUDA device visible to torch"
    if driver.framework in ("jax", "flax"):
        import jax

        try:
            jax.devices("gpu")
            return None
        except RuntimeError:
            return "no GPU backend visible to jax"
    return None
