"""Size sweeps: sequence length (trip count) and hidden size, each row in a fresh, cold process,
with a time budget per (model, driver) so that a slow compile cannot stall the sweep.

Rows of one (model, driver) run in order of growing size. Each gets at most the budget that is
left; a row that runs past it is killed and recorded as status "skipped" with reason "budget: ...".
A row is not started when the previous size of the same axis already took longer than what is
left (compile time of unrolled loops grows with T), and is recorded as skipped too, with the
reason: nothing is silently dropped. Every record carries the GEMM peak (rnnbench.machine.roofline.peak_for:
the best GEMM of the frameworks present at the sweep's dtype and threads, the sweep's own shapes
included, cached per machine) and, where the model counts its FLOPs, achieved GFLOP/s and the
fraction of that peak (roofline.with_roofline, shared with `run`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rnnbench import registry, results_file
from rnnbench.machine import environments
from rnnbench.machine.caches import cold_cache_env
from rnnbench.machine.device_peak import roofline_for
from rnnbench.machine.roofline import peak_for, with_roofline  # noqa: F401 (with_roofline: re-exported)
from rnnbench.processes.isolation import WORKER_START_GRACE_S
from rnnbench.rows.executors import UNIT_GRACE_S, RayExecutor, Unit
from rnnbench.rows.pair import unavailable_reason
from rnnbench.rows.row import Job
from rnnbench.rows.runner import GroupWork
from rnnbench.rows.timing import TimingConfig
from rnnbench.status import Status

LENGTH_KEYS = ("T", "K")  # the trip-count size of a model: sequence length or number of iterations
HIDDEN_KEYS = ("H", "n")  # its width: hidden size or vector/matrix size


@dataclass(frozen=True)
class SweepPlan:
    models: list[str]
    drivers: list[str]
    lengths: list[int]  # values of the trip-count key (T or K)
    hidden: list[int]  # values of the width key (H or n), at the model's base length
    base_sizes: dict[str, int] = field(default_factory=dict)  # overrides applied to every row
    dtype: str = "float32"
    threads: int = 1
    timing: TimingConfig = TimingConfig()
    driver_budget_s: float = 120.0  # wall seconds per (model, driver) over the whole sweep
    row_timeout_s: float = 600.0  # no single row runs longer than this


def size_key(model_name: str, keys: tuple[str, ...]) -> str | None:
    defaults = registry.get_model(model_name).default_sizes
    return next((k for k in keys if k in defaults), None)


def rows_for(plan: SweepPlan, model_name: str) -> list[tuple[str, dict[str, int]]]:
    """(axis, sizes) in run order: the length axis, then the hidden axis; a size combination that
    both axes contain is run once, under the length axis."""
    model = registry.get_model(model_name)
    base = model.sizes_with_defaults(plan.base_sizes)
    out: list[tuple[str, dict[str, int]]] = []
    seen: set[tuple] = set()
    for axis, key, values in (
        ("length", size_key(model_name, LENGTH_KEYS), plan.lengths),
        ("hidden", size_key(model_name, HIDDEN_KEYS), plan.hidden),
    ):
        if key is None:
            continue
        for v in sorted(set(values)):
            sizes = {**base, key: v}
            ident = tuple(sorted(sizes.items()))
            if ident not in seen:
                seen.add(ident)
                out.append((axis, sizes))
    return out


@dataclass
class SweepPair:
    """One (model, driver) of a sweep: its sizes in order of growth, each row in a fresh cold process
    (GroupWork of one row), under the pair's time budget. The unit of work of a sweep: run here by
    run_sweep, or on a Ray node (rnnbench.rows.executors) as it is."""

    plan: SweepPlan
    model: str
    driver: str
    annotate: Callable[[dict], dict]  # roofline.Roofline: the GEMM peak of the machine the rows ran on

    def rows(self) -> list[tuple[str, Job]]:
        env = environments.get(
            registry.get_driver(self.driver).environments[0]
        )  # a sweep times each driver in its first environment
        p = self.plan
        row = {"model": self.model, "driver": self.driver, "dtype": p.dtype, "threads": p.threads, "timing": p.timing}
        return [(axis, Job(**row, sizes=sizes, environment=env.name)) for axis, sizes in rows_for(p, self.model)]

    def finish(self, rec: dict, axis: str) -> dict:
        rec["sweep"] = {
            "axis": axis,
            "driver_budget_s": self.plan.driver_budget_s,
            "fresh_process_per_row": True,
            "cold_caches": True,
        }
        return self.annotate(rec)

    def __call__(self, emit: Callable[[dict], None]) -> None:
        plan, model, driver = self.plan, registry.get_model(self.model), registry.get_driver(self.driver)
        spent = 0.0
        last_wall: dict[str, float] = {}  # axis -> wall seconds of its previous row
        for axis, job in self.rows():
            reason = unavailable_reason(model, driver, **job.where())
            if reason is not None:
                emit(self.finish({**job.identity(), "status": Status.UNAVAILABLE, "reason": reason}, axis))
                continue
            left = plan.driver_budget_s - spent
            skip = None
            if left <= 0:
                skip = (
                    f"budget: the {plan.driver_budget_s:g} s budget of {self.driver} on {self.model} "
                    "was spent on smaller sizes"
                )
            elif last_wall.get(axis, 0.0) > left:
                skip = (
                    f"budget: the previous size took {last_wall[axis]:.0f} s, more than the "
                    f"{left:.0f} s left of the {plan.driver_budget_s:g} s budget"
                )
            if skip is not None:
                emit(self.finish({**job.identity(), "status": Status.SKIPPED, "reason": skip}, axis))
                continue
            timeout = min(plan.row_timeout_s, left)
            got: list[dict] = []
            start = time.perf_counter()
            GroupWork(job.environment, [job], timeout, extra_env=cold_cache_env)(got.append)
            wall = time.perf_counter() - start
            spent += wall
            last_wall[axis] = wall
            for rec in got:
                if rec["status"] == Status.TIMEOUT:
                    rec["status"] = Status.SKIPPED
                    rec["reason"] = (
                        f"budget: no result within {timeout:.0f} s (what was left of the budget); worker killed"
                    )
                rec["row_wall_s"] = wall
                emit(self.finish(rec, axis))

    def unit(self) -> Unit:
        """This pair as a unit: its threads' CPUs to itself (timed rows), a deadline of its budget
        (or its rows' timeouts, if less) plus a worker start per row."""
        rows = [job for _, job in self.rows()]
        busy = min(self.plan.driver_budget_s, len(rows) * self.plan.row_timeout_s)
        return Unit(
            f"sweep {self.model} on {self.driver} ({len(rows)} sizes)",
            self,
            self.lost,
            cpus=self.plan.threads,
            exclusive=True,
            deadline_s=busy + len(rows) * WORKER_START_GRACE_S + UNIT_GRACE_S,
        )

    def lost(self, status: str, report: str) -> list[dict]:
        return [self.finish({**job.identity(), "status": status, "report": report}, axis) for axis, job in self.rows()]


def run_sweep(
    plan: SweepPlan,
    out: results_file.ResultsFile,
    on_record: Callable[[dict], None],
    executor: RayExecutor | None = None,
) -> list[dict]:
    """Run the sweep; records are appended to the open results file `out` as they complete and
    returned. executor: where the (model, driver) pairs run (None: here, one after another)."""
    results: list[dict] = []
    sizes = {plan.dtype: [sizes for m in plan.models for _, sizes in rows_for(plan, m)]}
    roofline = roofline_for("cpu", plan.threads, sizes)  # a sweep runs on the CPU
    roofline.measure(warn=lambda message: None)  # here, before any row: a failure leaves rows without % of peak

    def write(rec: dict) -> None:
        out.append(rec)
        results.append(rec)
        on_record(rec)

    pairs = [SweepPair(plan, m, d, roofline) for m in plan.models for d in plan.drivers]
    if executor is not None:
        executor.run([pair.unit() for pair in pairs], write)
    else:
        for pair in pairs:
            pair(write)
    return results
