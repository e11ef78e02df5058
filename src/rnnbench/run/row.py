"""One row, in this process: build the case, prepare the driver, time its first call, ask the judge
(rnnbench.check.judge) for the verdict, then (only if the gradients agree) time forward and
forward+backward. Returns a plain-data record."""

from __future__ import annotations

import dataclasses
import gc
import os
import time
import traceback
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from rnnbench import record
from rnnbench.check.finite_diff import Oracle, oracle_grads
from rnnbench.check.judge import Check, judge
from rnnbench.check.localize import Localization, localize
from rnnbench.drivers.base import Driver, Prepared
from rnnbench.losses import with_loss
from rnnbench.model import Case, Model
from rnnbench.run import environments
from rnnbench.run.accelerator import RowDevice
from rnnbench.run.compile_budget import CompileBudgetExceeded, budget
from rnnbench.run.cpus import allowed_cpus, cpu_clock, cpu_record, load_average
from rnnbench.run.timing import TimingConfig, first_call, measure, peak_rss_mb, timed_call
from rnnbench.status import Status, is_fixed, is_known


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
    loss_form: str = "model"  # the loss the gradients are taken of (rnnbench.losses)
    order: int = 1  # 2: also check the Hessian-vector product (float64 rows; rnnbench.check.second_order)
    compile_budget_s: float | None = None  # a longer first call is a timeout record (rnnbench.run.compile_budget)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Job:
        return cls(**{**d, "timing": TimingConfig(**d.get("timing", {}))})

    def identity(self) -> dict[str, Any]:
        """The identifying fields of this row's record (rnnbench.record.identity)."""
        from rnnbench import registry

        driver = registry.get_driver(self.driver)
        # A row is labelled with its framework's version where this process can read it.
        here = self.environment == environments.current()
        return record.identity(
            model=self.model,
            driver=self.driver,
            framework=driver.framework.name,
            family=driver.framework.family,
            anchor=driver.anchor,
            environment=self.environment,
            env_label=driver.framework.label() if here else self.environment,
            dtype=self.dtype,
            device=self.device,
            seed=self.seed,
            sizes=registry.get_model(self.model).sizes_with_defaults(self.sizes),
            loss_form=self.loss_form,
            settings=self.settings(),
        )

    def settings(self) -> dict[str, Any]:
        """What determines this row's result besides its key (rnnbench.record.fingerprint)."""
        return {
            "threads": self.threads,
            "timing": dataclasses.asdict(self.timing),
            "time": self.time,
            "order": self.order,
            "versions": dict(environments.package_versions(self.environment)),
            **({"compile_budget_s": self.compile_budget_s} if self.compile_budget_s else {}),
        }

    def fingerprint(self) -> str:
        """The fingerprint this row's record will carry (what --resume matches)."""
        return record.fingerprint(
            {**self.identity_key(), "rnnbench_version": record.rnnbench_version(), "settings": self.settings()}
        )

    def identity_key(self) -> dict[str, Any]:
        """The fields of rnnbench.record.row_key, as a record has them."""
        from rnnbench import registry

        return {
            "model": self.model,
            "driver": self.driver,
            "environment_name": self.environment,
            "dtype": self.dtype,
            "device": self.device,
            "sizes": registry.get_model(self.model).sizes_with_defaults(self.sizes),
            "seed": self.seed,
            "loss_form": self.loss_form,
        }

    def key(self) -> tuple:
        """What makes two rows the same row (rnnbench.record.row_key), without the machine and time
        lookups of a full identity (keys are computed for every job to sort and resume)."""
        return record.row_key(self.identity_key())


LOCALIZED = (Status.GRAD_MISMATCH, Status.MISSING_GRAD)  # unexplained wrong gradients get a localization
LOCALIZE_BUDGET_S = 60.0  # a compiled driver recompiles for every suffix: bound the walk


def check_gradients(
    model: Model,
    driver: Driver,
    case: Case,
    dtype: str,
    device: str,
    oracle: Oracle | None = None,
    compile_budget_s: float | None = None,
) -> tuple[Check, Prepared | None]:
    """Prepare the driver, run loss_and_grads once (timing it: the first call compiles) and ask
    the judge (rnnbench.check.judge) for the verdict. Never raises for driver failures: they
    become the status. oracle: the case's oracle, when the caller has it (the fuzzer computes
    each body's once). compile_budget_s: prepare + first call stop with CompileBudgetExceeded
    after this long."""
    oracle = oracle if oracle is not None else oracle_grads(model, case)
    verdict = partial(
        judge,
        model,
        case,
        dtype,
        device,
        driver.name,
        compiled=driver.compiled,
        autocast=driver.autocast is not None,
        oracle=oracle,
    )
    try:
        with budget(compile_budget_s):
            prepared = driver.prepare(model, case, dtype, device)
            produced, first_call_s = timed_call(prepared.loss_and_grads)
    except Exception as exc:  # a driver failure is a result, not a crash of the suite
        failed = verdict(raised=exc)
        if driver.framework.collect_after_failure:  # the failed trace's tensors go with the frames' locals
            _clear_frames_of_chain(exc)
    else:
        result = verdict(produced=produced)
        result.first_call_s = first_call_s
        return result, prepared
    if driver.framework.collect_after_failure:  # `exc` is gone: what only reference cycles held goes too
        prepared = None  # the driver's closures may hold the failed trace's tensors in cycles of their own
        gc.collect()
    return failed, None


def _clear_frames_of_chain(exc: BaseException | None) -> None:
    """Clear the locals of every frame in the tracebacks of `exc` and of the exceptions it was raised
    from or while handling (a backward's error may wrap the one raised inside the traced step)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__cause__ or exc.__context__


def localization(chk: Check, model: Model, driver: Driver, case: Case, dtype: str, device: str) -> Localization | None:
    """For an unexplained wrong gradient (not on a vendor layer, which does not run the model's
    step): at which step and leaf the backward first goes wrong, appended to chk.report."""
    if chk.status not in LOCALIZED or driver.anchor:
        return None
    loc = localize(model, driver, case, dtype, device, budget_s=LOCALIZE_BUDGET_S)
    chk.report = f"{chk.report.rstrip()}\n{loc.format()}"
    return loc


def run_row(job: Job) -> dict[str, Any]:
    """The full row: availability, gradient check, timing. Returns the record."""
    from rnnbench import registry

    load_start = load_average()
    model, driver = registry.get_model(job.model), registry.get_driver(job.driver)
    sizes = model.sizes_with_defaults(job.sizes)
    base = job.identity()
    reason = unavailable_reason(model, driver, job, trying=True)
    if reason is not None:
        return {**base, "status": Status.UNAVAILABLE, "reason": reason}
    model, case = with_loss(model, model.make_case(sizes, job.seed), job.loss_form)
    case = case.rounded_to(job.dtype)
    driver.framework.import_module()  # so the memory baseline includes the framework's own footprint
    rss_before_mb = peak_rss_mb()
    device = RowDevice(driver.framework, job.device) if job.device != "cpu" else None
    try:
        chk, prepared = check_gradients(
            model, driver, case, job.dtype, job.device, compile_budget_s=job.compile_budget_s
        )
    except CompileBudgetExceeded as exc:
        rec = {
            **base,
            "status": Status.TIMEOUT,
            "first_call_s": None,
            "elapsed_s": exc.elapsed_s,
            "report": f"{exc}: stopped (--compile-budget)",
        }
        return device.fill(rec) if device else rec
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
    if job.order == 2:
        rec["hvp"] = second_order_record(model, driver, case, job, prepared if chk.status == Status.OK else None)
        if hvp_decides(chk.status, rec["hvp"]["status"]):
            rec["status"], rec["report"] = rec["hvp"]["status"], rec["hvp"]["report"]
    loc = localization(chk, model, driver, case, job.dtype, job.device)
    if loc is not None:
        rec["localization"] = {"first_step": loc.first_step, "where": loc.where, "complete": loc.complete}
        rec["report"] = chk.report
    spans = []  # (before, after) CPU clock readings around each timed loop
    if rec["status"] == Status.OK and job.time and prepared is not None:
        spans = time_row(rec, prepared, job, device)  # speed numbers only for rows whose gradients agree
    rec["memory"] = {
        "peak_rss_mb": peak_rss_mb(),
        "rss_before_row_mb": rss_before_mb,
        "method": "getrusage ru_maxrss high-water mark of the worker process; rss_before_row_mb is "
        "the mark after importing the framework, before prepare/compile/check/timing",
    }
    if model.flops is not None:
        rec["flops"] = model.flops(sizes)
    # Thread counts as the framework reports them (the requested count is in `threads`).
    rec["environment"]["threads_in_use"] = {
        "os_cpus_available": len(allowed_cpus()),
        **driver.framework.threads_in_use(),
    }
    # Whether its first call could have been served by an on-disk compile cache.
    rec["environment"]["compile_cache"] = {
        k: os.environ.get(k, "(unset: the framework's default)") for k in driver.framework.cache_variables
    }
    # The cores it ran on and what it used of them over the timed loops (rnnbench.run.cpus.cpu_record).
    rec["cpu"] = cpu_record(job.threads, allowed_cpus(), spans, load_start, load_average())
    return device.fill(rec) if device else rec


def time_row(rec: dict[str, Any], prepared: Prepared, job: Job, device: RowDevice | None) -> list:
    """Time forward+backward and forward into `rec`; returns the (before, after) CPU clock readings
    around each timed loop. On a GPU the device memory figure is the timed forward+backward's."""
    before = cpu_clock()
    if device:
        device.start()
    rec["fwd_bwd"] = measure(prepared.forward_backward, prepared.block, job.timing).to_dict()
    spans = [(before, cpu_clock())]
    if device:
        device.finish(prepared)
    # forward() is the training step's forward: torch (eager or compiled) runs the program
    # fwd_bwd ran, jax compiles jit(loss) (the training forward once XLA drops the unused
    # residuals); its first call is timed apart, then its steady state.
    rec["fwd_first_call_s"] = first_call(prepared.forward, prepared.block)
    before = cpu_clock()
    rec["fwd"] = measure(prepared.forward, prepared.block, job.timing).to_dict()
    spans.append((before, cpu_clock()))
    if prepared.settings.get("lazy_tensors"):
        # Lazy tensors: the same calls without blocking time the tracing alone (for the report
        # only; fwd_bwd above is the real, blocked time).
        rec["fwd_bwd_trace_only"] = measure(prepared.forward_backward, lambda result: None, job.timing).to_dict()
        prepared.block(None)
    return spans


def hvp_decides(first_order: str, hvp_status: str) -> bool:
    """Whether a row's H v verdict becomes the row's status (and the row gets no speed number): a
    wrong H v, a framework error in the double backward, or a registered (or fixed) second-order
    bug, once the gradients agree. An H v the oracle cannot resolve (ill_conditioned), a driver
    without a second-order path and an unchecked row keep the first-order verdict."""
    return first_order == Status.OK and (
        hvp_status in (Status.HVP_MISMATCH, Status.HVP_ERROR) or is_known(hvp_status) or is_fixed(hvp_status)
    )


def second_order_record(
    model: Model, driver: Driver, case: Case, job: Job, prepared: Prepared | None, oracle: str | None = None
) -> dict[str, Any]:
    """The row's H v check (rnnbench.check.second_order): "skipped" with why where it is not
    judged (float32 rows: the oracle's ~1e-10 error is invisible under float32 rounding; first
    order already wrong), "unsupported" where the driver has no second-order path. oracle: a rung
    of the oracle ladder to force (check_recurrence's `oracle`), None for the ladder."""
    from rnnbench.check.second_order import check_second_order

    if job.dtype != "float64":
        return {"status": Status.SKIPPED, "report": "second order is checked on float64 rows"}
    if prepared is None:
        return {"status": Status.SKIPPED, "report": "first-order gradients did not agree"}
    if not driver.second_order:
        return {"status": Status.UNSUPPORTED, "report": f"{driver.name} has no second-order path"}
    started = time.perf_counter()
    result = check_second_order(model, driver.name, case, prepared, seed=job.seed, choice=oracle)
    return {
        "status": result.status,
        "raw_status": result.raw_status or result.status,
        "report": result.report,
        "errors": [e.to_dict() for e in result.errors],
        "check_s": time.perf_counter() - started,
        "oracle_kind": result.oracle_kind or None,
    }


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


def unavailable_reason(model: Model, driver: Driver, job: Job, trying: bool = False) -> str | None:
    """None, or why this row cannot run: the one place that decides it. Whether the driver runs in
    the job's environment and that environment exists is decided anywhere; whether its framework
    is installed there, and supports the dtype, device and model, is decided (Driver.why_not) only
    by a process of that environment (the runner's parent for its own environment, else the
    worker). trying: this process may run the driver to decide (Driver.try_dtype): the worker."""
    if not environments.runs(driver, job.environment):
        return f"{driver.name} does not run in environment '{job.environment}'"
    reason = driver.supports(model) or environments.get(job.environment).missing_reason()
    if reason is None and job.environment == environments.current():
        reason = driver.why_not(model, job.dtype, job.device, trying=trying)
    return reason
