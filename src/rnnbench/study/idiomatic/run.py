"""The idiomatic comparison's processes: a worker per framework family times every point's
candidates interleaved (run_worker); the parent starts one worker after the other (run_family)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rnnbench import registry
from rnnbench.check.oracles.oracle import oracle_grads
from rnnbench.drivers.base import Prepared
from rnnbench.machine.environments import thread_env
from rnnbench.rows.pair import PairPlan, check_pair
from rnnbench.rows.timing import Timing
from rnnbench.status import Status
from rnnbench.study.idiomatic.candidates import Candidate, candidates
from rnnbench.study.idiomatic.plan import DEVICE, DTYPE, SEED, Plan

# ---- the worker: one framework family, every point, interleaved timing ----------------------------


def _skip_reason(history: list[tuple[int, dict]], T: int, plan: Plan, in_sweep: bool) -> str | None:
    """Why a candidate is not run at T, from its sweep results (T ascending). In the sweep: its last
    T was skipped, or its call there was over slow_call_s, or its first call at T is predicted over
    first_call_budget_s (from its last two, log-log). At another point of the sweep's model (other
    B, I, H: first calls barely depend on them): its first call at the sweep's nearest T not above T,
    so extrapolated, is over point_first_call_budget_s."""
    done = [(t, r) for t, r in history if (t < T if in_sweep else t <= T) and r.get("first_call_s") is not None]
    if in_sweep and history and history[-1][1].get("skip_reason"):
        reason = history[-1][1]["skip_reason"]
        return reason if reason.startswith("not run from") else f"not run from T={history[-1][0]}: {reason}"
    if not done:
        return None
    t1, last = done[-1]
    if in_sweep and last.get("fwd_bwd") and last["fwd_bwd"]["median_ms"] / 1e3 > plan.slow_call_s:
        return f"one fwd+bwd call took {last['fwd_bwd']['median_ms'] / 1e3:.1f} s at T={t1} (> {plan.slow_call_s} s)"
    slope = 1.0
    if len(done) >= 2:
        t0, before = done[-2]
        slope = max(1.0, math.log(last["first_call_s"] / before["first_call_s"]) / math.log(t1 / t0))
    predicted = last["first_call_s"] * (T / t1) ** slope
    budget = plan.first_call_budget_s if in_sweep else plan.point_first_call_budget_s
    if predicted > budget:
        return (
            f"first call predicted {predicted:.0f} s at T={T} (> {budget:.0f} s): "
            f"{last['first_call_s']:.1f} s at T={t1} of the sweep, growing as T^{slope:.1f}"
        )
    return None


def point_key(model: str, sizes: dict[str, int]) -> str:
    return f"{model} " + " ".join(f"{k}={v}" for k, v in sizes.items())


def run_worker(family: str, plan: Plan, log: Callable[[str], None]) -> list[dict[str, Any]]:
    """Every point for the candidates of one framework family, in this process."""
    for framework in registry.frameworks().values():
        if framework.family == family:
            framework.set_threads(plan.threads)
    mine = [c for c in candidates(plan) if c.framework.family == family and c.framework.available() is None]
    # the candidates of a point stay compiled together (PairPlan.fresh_compiles False): each
    # framework's compile state is reset once per point instead
    frameworks = list({id(c.framework): c.framework for c in mine}.values())
    history: dict[str, list[tuple[int, dict]]] = {c.name: [] for c in mine}
    results = []
    for model_name, sizes in plan.all_points():
        model = registry.get_model(model_name)
        case = model.make_case(model.sizes_with_defaults(sizes), SEED).rounded_to(DTYPE)
        pair_plan = PairPlan(oracle=oracle_grads(model, case), repeat=False, localize=False, fresh_compiles=False)
        point = point_key(model_name, sizes)
        for framework in frameworks:
            framework.reset_compiles()
        in_sweep = model_name == plan.sweep_model and {**dict(plan.sweep_sizes), "T": sizes["T"]} == sizes
        live: list[tuple[Candidate, Prepared, dict]] = []
        rows: list[dict] = []
        for cand in mine:
            if model.kind not in cand.kinds:
                continue
            row: dict[str, Any] = {
                "candidate": cand.name,
                "family": cand.family,
                "driver": cand.driver,
                "framework": cand.framework.name,
                "framework_family": cand.framework.family,
                "env_label": cand.framework.label(),
                "model": model_name,
                "sizes": dict(sizes),
                "unrolled": cand.unrolled,
                "first_call_s": None,
                "fwd_bwd": None,
            }
            rows.append(row)
            reason = (
                _skip_reason(history[cand.name], sizes["T"], plan, in_sweep) if model_name == plan.sweep_model else None
            )
            if reason is not None:
                row.update(status=Status.SKIPPED, skip_reason=reason)
                log(f"{point}: {cand.name} skipped: {reason}")
                continue
            # a candidate that fails is a result (its status), not a crash of the comparison
            pair = check_pair(model, cand.as_driver(), case, dtype=DTYPE, device=DEVICE, plan=pair_plan)
            chk, prepared = pair.check, pair.prepared
            if prepared is not None:  # prepare and the first call: the compile, wherever it happens
                row["first_call_s"] = chk.prepare_s + chk.first_call_s
            row.update(
                status=pair.status,
                max_rel_error=chk.max_rel_error if chk.errors else None,
                tolerance=chk.tolerance.max_rel_error,
                settings=dict(prepared.settings) if prepared else {},
            )
            if pair.status != Status.OK:
                row["report"] = pair.report[-2000:]
            log(
                f"{point}: {cand.name} {pair.status} (max rel err {row['max_rel_error']}, "
                f"first call {row['first_call_s'] or 0:.2f} s)"
            )
            if pair.status == Status.OK and prepared is not None:
                live.append((cand, prepared, row))
        _time_interleaved(live, plan, point, log)
        for row in rows:
            if in_sweep:
                history[row["candidate"]].append((sizes["T"], row))
            row["point"] = point
            results.append(row)
    return results


def _time_interleaved(
    live: list[tuple[Candidate, Prepared, dict]], plan: Plan, point: str, log: Callable[[str], None]
) -> None:
    """Time the ok candidates of one point in rounds, rotating the order; results into each row."""
    if not live:
        return
    inner = []
    for _, prepared, _ in live:
        call = prepared.forward_backward
        for _ in range(2):  # warm-up after the (compiling) first call
            prepared.block(call())
        started = time.perf_counter()
        prepared.block(call())
        one_ms = (time.perf_counter() - started) * 1e3
        inner.append(max(1, min(50, int(round(plan.target_sample_ms / max(one_ms, 1e-3))))))
    samples: list[list[float]] = [[] for _ in live]
    load_start, per_round = os.getloadavg(), []
    for r in range(plan.rounds):
        per_round.append(round(os.getloadavg()[0], 2))
        for k in range(len(live)):
            i = (k + r) % len(live)
            _, prepared, _ = live[i]
            call, block = prepared.forward_backward, prepared.block
            started = time.perf_counter()
            for _ in range(inner[i]):
                block(call())
            samples[i].append((time.perf_counter() - started) * 1e3 / inner[i])
    loads = {
        "start": [round(v, 2) for v in load_start],
        "end": [round(v, 2) for v in os.getloadavg()],
        "per_round_1min": per_round,
    }
    for (_, _, row), s, n in zip(live, samples, inner):
        row.update(fwd_bwd=Timing.of(s).to_dict(), calls_per_sample=n, loadavg=loads)
    best = min(live, key=lambda item: item[2]["fwd_bwd"]["median_ms"])
    log(
        f"{point}: timed {len(live)} candidates x {plan.rounds} rounds, load {loads['start'][0]} -> {loads['end'][0]}; "
        f"fastest {best[0].name} {best[2]['fwd_bwd']['median_ms']:.3f} ms"
    )


# ---- the parent: one worker per framework family, then records, table and chart -------------------


def families(plan: Plan) -> list[str]:
    seen: list[str] = []
    for cand in candidates(plan):
        if cand.framework.available() is None and cand.framework.family not in seen:
            seen.append(cand.framework.family)
    return seen


def pin_cpus(threads: int) -> None:
    cpus = sorted(os.sched_getaffinity(0))[:threads]
    os.sched_setaffinity(0, cpus)


def run_family(family: str, plan: Plan) -> list[dict[str, Any]]:
    """One worker process for one framework family, its threads fixed before import."""
    with tempfile.TemporaryDirectory(prefix="rnnbench-idiomatic-") as tmp:
        plan_path, out_path = Path(tmp) / "plan.json", Path(tmp) / "results.json"
        plan_path.write_text(json.dumps(dataclasses.asdict(plan)))
        env = {**os.environ, **thread_env(plan.threads)}
        for framework in registry.frameworks().values():  # cold first calls: on-disk compile caches off, empty
            env.update(framework.cold_cache_env(tmp))
        cmd = [
            sys.executable,
            "-m",
            "rnnbench.study.idiomatic",
            "--worker",
            family,
            "--plan",
            str(plan_path),
            "--result",
            str(out_path),
        ]
        proc = subprocess.run(cmd, env=env)
        if proc.returncode != 0 or not out_path.exists():
            raise RuntimeError(f"the {family} worker exited with status {proc.returncode}")
        return json.loads(out_path.read_text())
