"""One row, in this process: build the case, check the pair (rnnbench.rows.pair.check_pair: the
verdict every caller shares), then (only if the gradients agree) time forward and forward+backward.
Returns a plain-data record."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from rnnbench import record, registry
from rnnbench.check.verdicts.judge import Check
from rnnbench.drivers.base import Prepared
from rnnbench.losses import with_loss
from rnnbench.machine import environments, reference
from rnnbench.machine.accelerator import RowDevice
from rnnbench.machine.cpus import allowed_cpus, cpu_clock, cpu_record, load_average
from rnnbench.modes import VJP
from rnnbench.processes.compile_budget import CompileBudgetExceeded
from rnnbench.rows import roads
from rnnbench.rows.counts import counts
from rnnbench.rows.memory import step_memory
from rnnbench.rows.pair import PairPlan, check_pair, unavailable_reason
from rnnbench.rows.profile import profile
from rnnbench.rows.timing import TimingConfig, first_call, judge_timing, measure, measure_interleaved, peak_rss_mb
from rnnbench.status import Status


@dataclass(frozen=True, kw_only=True)
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
    environment: str = "main"  # which of the driver's environments runs it (rnnbench.machine.environments)
    loss_form: str = "model"  # the loss the gradients are taken of (rnnbench.losses)
    order: int = 1  # 2: also check the Hessian-vector product (float64 rows; rnnbench.check.verdicts.second_order)
    mode: str = "vjp"  # the differentiation mode its gradients come by (rnnbench.modes); its road is timed
    roads: bool = False  # also time the other roads to its derivatives beside it (rnnbench.rows.roads)
    compile_budget_s: float | None = None  # a longer first call is a timeout record (rnnbench.processes.compile_budget)
    profile: bool = False  # after timing, where its time went (rnnbench.rows.profile); not a setting of its numbers

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Job:
        return cls(**{**d, "timing": TimingConfig(**d.get("timing", {}))})

    def identity(self) -> dict[str, Any]:
        """The identifying fields of this row's record (rnnbench.record.identity)."""
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
            mode=self.mode,
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
            **({"roads": True} if self.roads else {}),
        }

    def fingerprint(self) -> str:
        """The fingerprint this row's record will carry (what --resume matches)."""
        return self.key().fingerprint(record.rnnbench_version(), self.settings())

    def where(self) -> dict[str, str]:
        """The arguments of rnnbench.rows.pair.unavailable_reason this row gives."""
        return {"dtype": self.dtype, "device": self.device, "environment": self.environment}

    def key(self) -> record.RowKey:
        """The row key its record will have, without the machine and time lookups of a full identity
        (keys are computed for every job to sort and resume)."""
        sizes = registry.get_model(self.model).sizes_with_defaults(self.sizes)
        return record.RowKey.of(
            self.model,
            self.driver,
            environment=self.environment,
            dtype=self.dtype,
            device=self.device,
            sizes=sizes,
            seed=self.seed,
            loss_form=self.loss_form,
            mode=self.mode,
        )


def run_row(job: Job) -> dict[str, Any]:
    """The full row: availability, gradient check, timing. Returns the record."""
    load_start = load_average()
    model, driver = registry.get_model(job.model), registry.get_driver(job.driver)
    sizes = model.sizes_with_defaults(job.sizes)
    base = job.identity()
    reason = unavailable_reason(model, driver, **job.where(), trying=True)
    if reason is not None:
        return {**base, "status": Status.UNAVAILABLE, "reason": reason}
    model, case = with_loss(model, model.make_case(sizes, job.seed), job.loss_form)
    case = case.rounded_to(job.dtype)
    driver.framework.import_module()  # so the memory baseline includes the framework's own footprint
    rss_before_mb = peak_rss_mb()
    device = RowDevice(driver.framework, job.device) if job.device != "cpu" else None
    plan = PairPlan(order=job.order, seed=job.seed, compile_budget_s=job.compile_budget_s, mode=job.mode)
    try:
        pair = check_pair(model, driver, case, dtype=job.dtype, device=job.device, plan=plan)
    except CompileBudgetExceeded as exc:
        rec = {
            **base,
            "status": Status.TIMEOUT,
            "first_call_s": None,
            "elapsed_s": exc.elapsed_s,
            "report": f"{exc}: stopped (--compile-budget)",
        }
        return device.fill(rec) if device else rec
    chk, prepared = pair.check, pair.prepared
    rec = {
        **base,
        "status": pair.status,
        "raw_status": chk.raw_status,
        "oracle_kind": chk.oracle_kind,
        "oracle_source": chk.oracle_source,
        **({"computed_dtype": chk.computed_dtype} if chk.computed_dtype else {}),
        "tolerance": chk.tolerance.max_rel_error,
        "loss": chk.loss,
        "reference_loss": chk.reference_loss,
        "loss_rel_error": chk.loss_error,
        "max_rel_error": chk.max_rel_error if chk.errors else None,
        "grad_errors": [e.to_dict() for e in chk.errors],
        "first_call_s": chk.first_call_s,
        "report": pair.report,
        "environment": record.environment(job.threads, driver.versions(), dict(prepared.settings) if prepared else {}),
    }
    rec |= {key: value for key, value in (("repeatable", pair.repeatable), ("hvp", pair.hvp)) if value is not None}
    if pair.localization is not None:
        loc = pair.localization
        rec["localization"] = {"first_step": loc.first_step, "where": loc.where, "complete": loc.complete}
    if pair.status == Status.UNAVAILABLE:  # the driver cannot run this mode: the reason, as for any pair
        return {**base, "status": Status.UNAVAILABLE, "reason": pair.report}
    spans = []  # (before, after) CPU clock readings around each timed loop
    if rec["status"] == Status.OK and job.time and prepared is not None:
        spans = time_row(rec, prepared, job, device, chk=chk)  # speed numbers only for rows whose gradients agree
        if job.mode == VJP:  # the counts are of the vjp program (forward+backward); a mode's road is another program
            rec["counts"] = counts(prepared, driver.framework, case, job.dtype)  # after timing: counting runs a call
        if job.profile:  # a pass of its own, after every timed sample
            rec["profile"] = profile(prepared, driver.framework)
    rec["memory"] = {
        "peak_rss_mb": peak_rss_mb(),
        "rss_before_row_mb": rss_before_mb,
        "method": "getrusage ru_maxrss high-water mark of the worker process; rss_before_row_mb is "
        "the mark after importing the framework, before prepare/compile/check/timing",
    }
    rec |= {"flops": model.flops(sizes)} if model.flops is not None else {}
    # Thread counts as the framework reports them (the requested count is in `threads`).
    rec["environment"]["threads_in_use"] = {
        "os_cpus_available": len(allowed_cpus()),
        **driver.framework.threads_in_use(),
    }
    # Whether its first call could have been served by an on-disk compile cache.
    rec["environment"]["compile_cache"] = {
        k: os.environ.get(k, "(unset: the framework's default)") for k in driver.framework.cache_variables
    }
    # The cores it ran on and what it used of them over the timed loops (rnnbench.machine.cpus.cpu_record).
    rec["cpu"] = cpu_record(job.threads, allowed_cpus(), spans, load_start=load_start, load_end=load_average())
    if (trust := judge_timing(rec)) is not None:  # which clock decides, and whether its numbers are its own
        rec["timing"] = trust
    return device.fill(rec) if device else rec


def time_row(rec: dict[str, Any], prepared: Prepared, job: Job, device: RowDevice | None, *, chk: Check) -> list:
    """Time the row's derivative call (forward+backward for vjp, its mode's road otherwise:
    rnnbench.rows.roads; with job.roads the other roads beside it, interleaved) and the forward into
    `rec`; returns the (before, after) CPU clock readings around each timed loop. On a GPU the device
    memory figure is the timed derivative call's."""
    # the machine-speed reference beside every CPU row's calls (rnnbench.machine.reference); a device
    # row's time is the device's, which the kernel does not measure
    ref = None if device else reference.kernel()
    own, checked = roads.own_program(prepared, job.mode, chk)
    if own is None:  # no timed program, or one that disagrees with the checked values: said, not timed
        rec["roads"] = {job.mode: checked}
        return []
    others, rec_roads = roads.beside(prepared, job.mode, chk) if job.roads else ({}, {})
    if checked:
        rec_roads = {job.mode: checked, **rec_roads}
    before = cpu_clock()
    if device:
        device.start()
    if others:
        timed = measure_interleaved({job.mode: own, **others}, prepared.block, job.timing, reference=ref)
        for name in others:
            rec_roads[name]["fwd_bwd"] = timed[name].to_dict()
        rec["fwd_bwd"] = timed[job.mode].to_dict()
    else:
        rec["fwd_bwd"] = measure(own, prepared.block, job.timing, reference=ref).to_dict()
    if job.mode != VJP or rec_roads:
        rec["road"] = job.mode
    if rec_roads:
        rec["roads"] = rec_roads
    spans = [(before, cpu_clock())]
    if device:
        device.finish(prepared)
    # forward() is the training step's forward: torch (eager or compiled) runs the program
    # fwd_bwd ran, jax compiles jit(loss) (the training forward once XLA drops the unused
    # residuals); its first call is timed apart, then its steady state.
    rec["fwd_first_call_s"] = first_call(prepared.forward, prepared.block)
    before = cpu_clock()
    rec["fwd"] = measure(prepared.forward, prepared.block, job.timing, reference=ref).to_dict()
    spans.append((before, cpu_clock()))
    if prepared.settings.get("lazy_tensors"):
        # Lazy tensors: the same calls without blocking time the tracing alone (for the report
        # only; fwd_bwd above is the real, blocked time).
        rec["fwd_bwd_trace_only"] = measure(prepared.forward_backward, lambda result: None, job.timing).to_dict()
        prepared.block(None)
    rec["step_memory"] = step_memory(prepared)  # after timing: counting runs one more forward
    return spans
