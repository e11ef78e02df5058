"""Size sweeps: sequence length (trip count) and hidden size, each row in a fresh, cold process,
with a time budget per (model, driver) so that a slow compile cannot stall the sweep.

Rows of one (model, driver) run in order of growing size. Each gets at most the budget that is
left; a row that runs past it is killed and recorded as status "skipped" with reason "budget: ...".
A row is not started when the previous size of the same axis already took longer than what is
left (compile time of unrolled loops grows with T), and is recorded as skipped too, with the
reason: nothing is silently dropped. Every record carries the GEMM peak (rnnbench.run.timing.peak_for:
the best GEMM of the frameworks present at the sweep's dtype and threads, the sweep's own shapes
included, cached per machine) and, where the model counts its FLOPs, achieved GFLOP/s and the
fraction of that peak (timing.with_roofline, shared with `run`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from rnnbench import record, registry
from rnnbench.run import environments
from rnnbench.run.row import Job, unavailable_reason
from rnnbench.run.runner import Runner
from rnnbench.run.timing import TimingConfig, cold_cache_env, peak_for, with_roofline  # noqa: F401 (with_roofline: re-exported)
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


def size_key(model_name: str, keys: tuple[str, ...]) -> Optional[str]:
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


def run_sweep(plan: SweepPlan, out: record.ResultsFile, on_record: Callable[[dict], None]) -> list[dict]:
    """Run the sweep; records are appended to the open results file `out` as they complete and returned."""
    results: list[dict] = []
    peak = peak_for(plan.dtype, plan.threads, [sizes for m in plan.models for _, sizes in rows_for(plan, m)])

    def emit(rec: dict, axis: str) -> None:
        rec["sweep"] = {"axis": axis, "driver_budget_s": plan.driver_budget_s, "fresh_process_per_row": True,
                        "cold_caches": True}
        with_roofline(rec, peak)
        out.append(rec)
        results.append(rec)
        on_record(rec)

    for model_name in plan.models:
        model = registry.get_model(model_name)
        for driver_name in plan.drivers:
            driver = registry.get_driver(driver_name)
            env = environments.get(driver.environments[0])  # a sweep times each driver in its first environment
            rows = rows_for(plan, model_name)
            spent = 0.0
            last_wall: dict[str, float] = {}  # axis -> wall seconds of its previous row
            for axis, sizes in rows:
                job = Job(model_name, driver_name, plan.dtype, "cpu", sizes, 0, plan.threads, plan.timing, True, env.name)
                reason = unavailable_reason(model, driver, job)
                if reason is not None:
                    emit({**job.identity(), "status": Status.UNAVAILABLE, "reason": reason}, axis)
                    continue
                left = plan.driver_budget_s - spent
                skip = None
                if left <= 0:
                    skip = f"budget: the {plan.driver_budget_s:g} s budget of {driver_name} on {model_name} was spent on smaller sizes"
                elif last_wall.get(axis, 0.0) > left:
                    skip = (f"budget: the previous size took {last_wall[axis]:.0f} s, more than the "
                            f"{left:.0f} s left of the {plan.driver_budget_s:g} s budget")
                if skip is not None:
                    emit({**job.identity(), "status": Status.SKIPPED, "reason": skip}, axis)
                    continue
                timeout = min(plan.row_timeout_s, left)
                got: list[dict] = []
                start = time.perf_counter()
                Runner(None, timeout, on_record=got.append, extra_env=cold_cache_env()).run_group(env, [job])
                wall = time.perf_counter() - start
                spent += wall
                last_wall[axis] = wall
                for rec in got:
                    if rec["status"] == Status.TIMEOUT:
                        rec["status"] = Status.SKIPPED
                        rec["reason"] = f"budget: no result within {timeout:.0f} s (what was left of the budget); worker killed"
                    rec["row_wall_s"] = wall
                    emit(rec, axis)
    return results
