"""The idiomatic comparison: every rnnbench mechanism against its framework's best idiomatic form of
the same math, timed in one process per framework, interleaved, with every candidate's gradients
checked against the oracle first (a baseline that is fast because it computes less is worthless).

    python -m rnnbench.run.idiomatic --out docs/results/<date>-idiomatic [--quick] [--threads 1]

Writes (each overwritten):
  <out>.jsonl          one record per (mechanism, baseline family, point): the mechanism's fwd+bwd
                       timing, the family's best variant's, their ratio (rnnbench record format)
  <out>.md             the ratio table (mechanism / best idiomatic) with the exact command
  <out>-tgrowth.jsonl  one record per (candidate, T) of the T sweep (mechanisms and each family's
                       best variant), rnnbench record format
  <out>-tgrowth.png    fwd+bwd ms vs T, log-log, drawn from <out>-tgrowth.jsonl by
                       `python -m rnnbench.report.charts idiomatic-tgrowth RECORDS PNG`

Baseline families, written plainly, as a user of the framework would (same loss, same inputs):
  torch: torch.nn.LSTM / torch.nn.RNN (the vendor drivers); a fastrnns-style loop over
         xs.unbind(0) with a fused cell (one addmm a step; the input projection hoisted into one
         matmul, or inside the cell); torch.compile(inductor) of that loop (hoisted).
  jax:   flax nn.RNN(OptimizedLSTMCell / SimpleCell) (the vendor drivers; nn.RNN is nn.scan of the
         cell); lax.scan of a fused cell for each unroll in Plan.unrolls, projection hoisted or in the cell.
A family's time is its fastest variant's median; "best idiomatic" is the fastest family.

Method: per point (model, sizes), in the framework's process: prepare every candidate, time its
first call (trace + compile + run) and judge its gradients (rnnbench.check.judge, the oracle
computed once); then the ok candidates are timed in rounds, each round one sample of each candidate
in a rotating order (A, B, C, then B, C, A, ...), each sample `inner` calls (enough for about
Plan.target_sample_ms); medians and quartiles per candidate; os.getloadavg() at the start and end
of each point's timing and at the start of every round, in each record. Threads: the process is pinned to `threads` CPUs (XLA's CPU client
ignores thread variables) and the frameworks' thread settings are applied before import.

Budgets: in the T sweep (run first, by increasing T), a candidate whose one fwd+bwd call took more
than Plan.slow_call_s, or whose next first call is predicted (from its last two, log-log) to
exceed Plan.first_call_budget_s, is not run at larger T; at the other points of the sweep's model,
one whose first call, extrapolated from the sweep, exceeds Plan.point_first_call_budget_s is not
run. Its record says "skipped" and why.

Compiled torch candidates: rnnbench.drivers._torch.compiled resets dynamo before each compile,
which would drop the code of the candidates compiled before it (they would recompile in the
warm-up); the worker resets dynamo once per point instead (_torch.RESET_DYNAMO_BEFORE_COMPILE).
First calls are cold: each worker runs with the frameworks' on-disk compile caches off and empty.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from rnnbench import record, registry
from rnnbench.drivers import _jax, _torch
from rnnbench.drivers.base import Framework, Prepared
from rnnbench.model import Case, Model
from rnnbench.status import Status

DTYPE, DEVICE, SEED = "float32", "cpu", 0
MODELS = ("lstm", "rnn")
# The rnnbench mechanisms compared (the main environment's loop and scan drivers).
MECHANISMS = ("torch_loop", "torch_loop_compiled", "torch_scan", "torch_scan_compiled", "jax_loop", "jax_lax_scan",
              "flax_scan")
# Candidates whose program is the T steps unrolled: their first call grows with T.
UNROLLED = ("torch_loop_compiled", "jax_loop", "unbind_loop_compiled")
# Each mechanism's own idiomatic form: the baseline family written with the same mechanism, so a
# ratio against it is the driver's cost, and its ratio to the best family is the mechanism's.
SAME_MECHANISM = {"torch_loop": "unbind loop", "torch_loop_compiled": "unbind loop compiled",
                  "torch_scan": "scan, hand-written", "torch_scan_compiled": "scan, hand-written, compiled",
                  "jax_loop": "jit loop", "jax_lax_scan": "lax.scan", "flax_scan": "flax nn.RNN cell"}

REVIEW = {"T": 128, "B": 32, "I": 128, "H": 256}  # the size of the performance review
SMALL = {"T": 32, "B": 8, "I": 32, "H": 64}  # per-op overhead dominates; the T sweep's size


@dataclass(frozen=True)
class Plan:
    """What one run measures. points: (model, sizes) of the comparison; sweep: the T values of
    the T-growth sweep, run on sweep_model at sweep_sizes."""

    points: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]
    sweep_model: str
    sweep_sizes: tuple[tuple[str, int], ...]
    sweep: tuple[int, ...]
    unrolls: tuple[int, ...]
    rounds: int
    target_sample_ms: float
    slow_call_s: float
    first_call_budget_s: float  # in the sweep
    point_first_call_budget_s: float  # at the comparison points not in the sweep
    threads: int

    @classmethod
    def from_json(cls, text: str) -> "Plan":
        d = json.loads(text)
        pairs = lambda items: tuple((k, int(v)) for k, v in items)  # noqa: E731
        return cls(**{**d, "points": tuple((m, pairs(s)) for m, s in d["points"]), "sweep_sizes": pairs(d["sweep_sizes"]),
                      "sweep": tuple(d["sweep"]), "unrolls": tuple(d["unrolls"])})

    def all_points(self) -> list[tuple[str, dict[str, int]]]:
        """Every (model, sizes) to measure, in order: the sweep by increasing T first (the budget
        rule extrapolates from smaller T), then the comparison points not already in it."""
        out = [(self.sweep_model, {**dict(self.sweep_sizes), "T": t}) for t in sorted(self.sweep)]
        for model, sizes in self.points:
            if (model, dict(sizes)) not in out:
                out.append((model, dict(sizes)))
        return out


def plan_for(quick: bool, threads: int) -> Plan:
    if quick:
        # A test of the machinery, not a measurement: the smallest sizes that keep every dimension
        # distinct (I != H, B > 1) and two sweep points; the unrolled candidates' compile grows with
        # T (jax_loop's LSTM as T^2), so T = 4, 8 (was 8, 16 at B=4 I=8 H=16: 174 s of CI).
        tiny = {"T": 8, "B": 2, "I": 3, "H": 4}
        return Plan(points=tuple((m, tuple(tiny.items())) for m in MODELS), sweep_model="lstm",
                    sweep_sizes=tuple(tiny.items()), sweep=(4, 8), unrolls=(1, 4), rounds=3, target_sample_ms=2.0,
                    # Every candidate runs (the test wants every status ok): the first compiled
                    # call carries the process's one-time inductor start-up (66 s at T=4 under
                    # load 4.5 on 2 cores), which the T extrapolation doubles past a 120 s budget.
                    slow_call_s=5.0, first_call_budget_s=900.0, point_first_call_budget_s=900.0,
                    threads=threads)
    # The sweep runs at the small size (its T=32 point is the small comparison point): eager calls
    # stay cheap up to T=512, and compile times do not depend on B, I, H.
    return Plan(points=tuple((m, tuple(s.items())) for m in MODELS for s in (SMALL, REVIEW)), sweep_model="lstm",
                sweep_sizes=tuple(SMALL.items()), sweep=(32, 64, 128, 256, 512), unrolls=(1, 2, 4),
                rounds=11, target_sample_ms=20.0, slow_call_s=1.0, first_call_budget_s=45.0,
                point_first_call_budget_s=200.0, threads=threads)


# ---- the idiomatic baselines, written as a user of each framework would ---------------------------

def _torch_unbind_loop(model: Model, case: Case, hoisted: bool, compiled: bool) -> Prepared:
    """fastrnns' shape: a Python loop over xs.unbind(0), the gates of a step in one addmm."""
    import torch
    import torch.nn.functional as F

    inputs, consts, wrt = _torch.model_tensors(model, case, DTYPE, DEVICE)
    wy, wh = consts["wy"], consts["wh"]
    lstm = model.kind == "lstm"

    def loss_fn(inputs):
        W_ih, W_hh, b, xs = inputs["W_ih"], inputs["W_hh"], inputs["b"], inputs["xs"]
        W_hh_t, W_ih_t = W_hh.t(), W_ih.t()
        if hoisted:
            xs = F.linear(xs, W_ih, b)  # (T, B, gates*H): every step's input projection in one matmul
        h = inputs["carry0.h"]
        c = inputs["carry0.c"] if lstm else None
        ys = []
        for x in xs.unbind(0):
            gates = torch.addmm(x if hoisted else torch.addmm(b, x, W_ih_t), h, W_hh_t)
            if lstm:
                i, f, g, o = gates.chunk(4, 1)
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                h = torch.sigmoid(o) * torch.tanh(c)
            else:
                h = torch.tanh(gates)
            ys.append(h)
        loss = (torch.stack(ys) * wy).sum() + (h * wh).sum()
        return loss + (c * consts["wc"]).sum() if lstm else loss

    settings: dict[str, Any] = {"loop": "for x in xs.unbind(0)", "cell": "one addmm a step",
                                "input_projection": "hoisted" if hoisted else "in the cell"}
    if compiled:
        loss_fn, compile_settings = _torch.compiled(loss_fn)
        settings.update(compile_settings)
    return _torch.prepared_from_loss(loss_fn, inputs, wrt, settings)


def _torch_hand_scan(model: Model, case: Case, compiled: bool) -> Prepared:
    """torch._higher_order_ops.scan called directly on a fused cell (one addmm a step, the input
    projection hoisted), as a user of scan writes it; y is cloned (scan forbids an output aliasing
    the carry). Compiled, the new carry is cloned too: torch 2.13.0's inductor refuses the documented
    form on these cells (registry: torch-inductor-scan-aliasing-saved-output-carry), as the
    torch_scan_compiled driver does."""
    import torch
    import torch.nn.functional as F
    from torch._higher_order_ops.scan import scan

    inputs, consts, wrt = _torch.model_tensors(model, case, DTYPE, DEVICE)
    wy, wh = consts["wy"], consts["wh"]
    lstm = model.kind == "lstm"

    def loss_fn(inputs):
        W_ih, W_hh, b = inputs["W_ih"], inputs["W_hh"], inputs["b"]
        xp, W_hh_t = F.linear(inputs["xs"], W_ih, b), W_hh.t()

        def cell(carry, x):
            gates = torch.addmm(x, carry[0], W_hh_t)
            if not lstm:
                h = torch.tanh(gates)
                return ((h.clone(),) if compiled else (h,)), h.clone()
            i, f, g, o = gates.chunk(4, 1)
            c = torch.sigmoid(f) * carry[1] + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            return ((h.clone(), c.clone()) if compiled else (h, c)), h.clone()

        carry0 = (inputs["carry0.h"], inputs["carry0.c"]) if lstm else (inputs["carry0.h"],)
        carry, ys = scan(cell, carry0, xp)
        loss = (ys * wy).sum() + (carry[0] * wh).sum()
        return loss + (carry[1] * consts["wc"]).sum() if lstm else loss

    settings: dict[str, Any] = {"loop": "torch._higher_order_ops.scan(cell, carry0, xp)", "cell": "one addmm a step",
                                "input_projection": "hoisted", "carry_cloned": compiled}
    if compiled:
        loss_fn, compile_settings = _torch.compiled(loss_fn)
        settings.update(compile_settings)
    return _torch.prepared_from_loss(loss_fn, inputs, wrt, settings)


def _jax_jit_loop(model: Model, case: Case, indexed: bool) -> Prepared:
    """A Python loop over the steps inside jax.jit (XLA sees the T steps unrolled), a fused cell,
    the input projection hoisted; the steps read as xp[t] (indexed) or from jnp.unstack(xp)."""
    import jax
    import jax.numpy as jnp

    diff, rest, consts = _jax.model_arrays(model, case, DTYPE, DEVICE)
    lstm = model.kind == "lstm"

    def loss_fn(diff, rest):
        p = {**diff, **rest}
        xp, W_hh_t = p["xs"] @ p["W_ih"].T + p["b"], p["W_hh"].T
        h, c = p["carry0.h"], (p["carry0.c"] if lstm else None)
        ys = []
        for x in ([xp[t] for t in range(xp.shape[0])] if indexed else jnp.unstack(xp)):
            gates = x + h @ W_hh_t
            if lstm:
                i, f, g, o = jnp.split(gates, 4, axis=-1)
                c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
                h = jax.nn.sigmoid(o) * jnp.tanh(c)
            else:
                h = jnp.tanh(gates)
            ys.append(h)
        loss = jnp.sum(jnp.stack(ys) * consts["wy"]) + jnp.sum(h * consts["wh"])
        return loss + jnp.sum(c * consts["wc"]) if lstm else loss

    return _jax.prepared_from_loss(loss_fn, diff, rest, {"loop": "python loop under jax.jit, " + ("xp[t]" if indexed else "jnp.unstack(xp)"),
                                                         "cell": "one matmul a step", "input_projection": "hoisted"})


def _jax_lax_scan(model: Model, case: Case, hoisted: bool, unroll: int) -> Prepared:
    """jax.lax.scan of a fused cell (one matmul for all gates of a step), with `unroll`."""
    import jax
    import jax.numpy as jnp

    diff, rest, consts = _jax.model_arrays(model, case, DTYPE, DEVICE)
    lstm = model.kind == "lstm"

    def loss_fn(diff, rest):
        p = {**diff, **rest}
        W_ih, W_hh, b = p["W_ih"], p["W_hh"], p["b"]

        def cell(carry, x):
            gates = (x if hoisted else x @ W_ih.T + b) + carry[0] @ W_hh.T
            if not lstm:
                h = jnp.tanh(gates)
                return (h,), h
            i, f, g, o = jnp.split(gates, 4, axis=-1)
            c = jax.nn.sigmoid(f) * carry[1] + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        xs = p["xs"] @ W_ih.T + b if hoisted else p["xs"]
        carry0 = (p["carry0.h"], p["carry0.c"]) if lstm else (p["carry0.h"],)
        carry, ys = jax.lax.scan(cell, carry0, xs, unroll=unroll)
        loss = jnp.sum(ys * consts["wy"]) + jnp.sum(carry[0] * consts["wh"])
        return loss + jnp.sum(carry[1] * consts["wc"]) if lstm else loss

    return _jax.prepared_from_loss(loss_fn, diff, rest, {"loop": f"lax.scan(unroll={unroll})", "cell": "one matmul a step",
                                                         "input_projection": "hoisted" if hoisted else "in the cell"})


@dataclass(frozen=True)
class Candidate:
    """One thing timed: an rnnbench mechanism (a registry driver) or a variant of a baseline family.
    family: the baseline family, "" for a mechanism. prepare(model, case) -> Prepared."""

    name: str
    family: str
    framework: Framework
    prepare: Callable[[Model, Case], Prepared]
    kinds: tuple[str, ...] = ("lstm", "elman_tanh")
    driver: str = ""  # the registry driver it is, if any
    unrolled: bool = False

    @property
    def mechanism(self) -> bool:
        return not self.family


def _driver_candidate(name: str, family: str = "") -> Candidate:
    driver = registry.get_driver(name)
    kinds = tuple(k for k in ("lstm", "elman_tanh") if driver.supports(_Kind(k)) is None)
    return Candidate(name, family, driver.framework, lambda model, case: driver.prepare(model, case, DTYPE, DEVICE),
                     kinds, driver=name, unrolled=name in UNROLLED)


@dataclass(frozen=True)
class _Kind:
    """Just enough of a Model for Driver.supports (which reads .kind and .name)."""

    kind: str
    name: str = ""


def candidates(plan: Plan) -> list[Candidate]:
    out = [_driver_candidate(name) for name in MECHANISMS]
    out += [_driver_candidate(name, "torch.nn") for name in ("torch_nn_lstm", "torch_nn_rnn")]
    out += [_driver_candidate(name, "flax nn.RNN cell") for name in ("flax_lstm_cell", "flax_simple_cell")]
    for hoisted, where in ((True, "hoisted"), (False, "in cell")):
        out.append(Candidate(f"unbind_loop[{where}]", "unbind loop", _torch.TORCH,
                             lambda m, c, h=hoisted: _torch_unbind_loop(m, c, h, compiled=False)))
    out.append(Candidate("unbind_loop_compiled[hoisted]", "unbind loop compiled", _torch.TORCH,
                         lambda m, c: _torch_unbind_loop(m, c, True, compiled=True), unrolled=True))
    out.append(Candidate("hand_scan", "scan, hand-written", _torch.TORCH, lambda m, c: _torch_hand_scan(m, c, compiled=False)))
    out.append(Candidate("hand_scan_compiled", "scan, hand-written, compiled", _torch.TORCH,
                         lambda m, c: _torch_hand_scan(m, c, compiled=True)))
    for indexed, how in ((False, "unstack"), (True, "xp[t]")):
        out.append(Candidate(f"jit_loop[{how}]", "jit loop", _jax.JAX, lambda m, c, i=indexed: _jax_jit_loop(m, c, i),
                             unrolled=True))
    for unroll in plan.unrolls:
        for hoisted, where in ((True, "hoisted"), (False, "in cell")):
            out.append(Candidate(f"lax_scan[unroll={unroll}, {where}]", "lax.scan", _jax.JAX,
                                 lambda m, c, h=hoisted, u=unroll: _jax_lax_scan(m, c, h, u)))
    return out


# ---- the worker: one framework family, every point, interleaved timing ----------------------------

def _timing(samples: list[float]) -> dict[str, Any]:
    q1, med, q3 = np.percentile(samples, [25, 50, 75])
    return {"median_ms": float(med), "q1_ms": float(q1), "q3_ms": float(q3), "min_ms": float(min(samples)),
            "max_ms": float(max(samples)), "repeats": len(samples)}


def _skip_reason(history: list[tuple[int, dict]], T: int, plan: Plan, in_sweep: bool) -> Optional[str]:
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
        return (f"first call predicted {predicted:.0f} s at T={T} (> {budget:.0f} s): "
                f"{last['first_call_s']:.1f} s at T={t1} of the sweep, growing as T^{slope:.1f}")
    return None


def _point_key(model: str, sizes: dict[str, int]) -> str:
    return f"{model} " + " ".join(f"{k}={v}" for k, v in sizes.items())


def run_worker(family: str, plan: Plan, log: Callable[[str], None]) -> list[dict[str, Any]]:
    """Every point for the candidates of one framework family, in this process."""
    from rnnbench.check.finite_diff import oracle_grads
    from rnnbench.check.judge import judge

    for framework in registry.frameworks().values():
        if framework.family == family:
            framework.set_threads(plan.threads)
    mine = [c for c in candidates(plan) if c.framework.family == family and c.framework.available() is None]
    compiles_torch = any(c.framework is _torch.TORCH for c in mine)
    if compiles_torch:  # the candidates of a point stay compiled together: dynamo is reset once per point
        _torch.RESET_DYNAMO_BEFORE_COMPILE = False
    history: dict[str, list[tuple[int, dict]]] = {c.name: [] for c in mine}
    results = []
    for model_name, sizes in plan.all_points():
        model = registry.get_model(model_name)
        case = model.make_case(model.sizes_with_defaults(sizes), SEED).rounded_to(DTYPE)
        oracle = oracle_grads(model, case)
        point = _point_key(model_name, sizes)
        if compiles_torch:
            _torch.reset_dynamo()
        in_sweep = model_name == plan.sweep_model and {**dict(plan.sweep_sizes), "T": sizes["T"]} == sizes
        live: list[tuple[Candidate, Prepared, dict]] = []
        rows: list[dict] = []
        for cand in mine:
            if model.kind not in cand.kinds:
                continue
            row: dict[str, Any] = {"candidate": cand.name, "family": cand.family, "driver": cand.driver,
                                   "framework": cand.framework.name, "framework_family": cand.framework.family,
                                   "env_label": cand.framework.label(), "model": model_name, "sizes": dict(sizes),
                                   "unrolled": cand.unrolled, "first_call_s": None, "fwd_bwd": None}
            rows.append(row)
            reason = (_skip_reason(history[cand.name], sizes["T"], plan, in_sweep)
                      if model_name == plan.sweep_model else None)
            if reason is not None:
                row.update(status=Status.SKIPPED, skip_reason=reason)
                log(f"{point}: {cand.name} skipped: {reason}")
                continue
            try:
                started = time.perf_counter()
                prepared = cand.prepare(model, case)
                produced = prepared.loss_and_grads()
                row["first_call_s"] = time.perf_counter() - started
                chk = judge(model, case, DTYPE, DEVICE, cand.driver or cand.name, produced=produced, oracle=oracle)
            except Exception as exc:  # a candidate that fails is a result, not a crash of the comparison
                chk = judge(model, case, DTYPE, DEVICE, cand.driver or cand.name, raised=exc, oracle=oracle)
                prepared = None
            row.update(status=chk.status, max_rel_error=chk.max_rel_error if chk.errors else None,
                       tolerance=chk.tolerance.max_rel_error, settings=dict(prepared.settings) if prepared else {})
            if chk.status != Status.OK:
                row["report"] = chk.report[-2000:]
            log(f"{point}: {cand.name} {chk.status} (max rel err {row['max_rel_error']}, "
                f"first call {row['first_call_s'] or 0:.2f} s)")
            if chk.status == Status.OK and prepared is not None:
                live.append((cand, prepared, row))
        _time_interleaved(live, plan, point, log)
        for row in rows:
            if in_sweep:
                history[row["candidate"]].append((sizes["T"], row))
            row["point"] = point
            results.append(row)
    return results


def _time_interleaved(live: list[tuple[Candidate, Prepared, dict]], plan: Plan, point: str,
                      log: Callable[[str], None]) -> None:
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
    loads = {"start": [round(v, 2) for v in load_start], "end": [round(v, 2) for v in os.getloadavg()],
             "per_round_1min": per_round}
    for (cand, _, row), s, n in zip(live, samples, inner):
        row.update(fwd_bwd=_timing(s), calls_per_sample=n, loadavg=loads)
    best = min(live, key=lambda item: item[2]["fwd_bwd"]["median_ms"])
    log(f"{point}: timed {len(live)} candidates x {plan.rounds} rounds, load {loads['start'][0]} -> {loads['end'][0]}; "
        f"fastest {best[0].name} {best[2]['fwd_bwd']['median_ms']:.3f} ms")


# ---- the parent: one worker per framework family, then records, table and chart -------------------

def _families(plan: Plan) -> list[str]:
    seen: list[str] = []
    for cand in candidates(plan):
        if cand.framework.available() is None and cand.framework.family not in seen:
            seen.append(cand.framework.family)
    return seen


def _pin(threads: int) -> None:
    cpus = sorted(os.sched_getaffinity(0))[:threads]
    os.sched_setaffinity(0, cpus)


def run_family(family: str, plan: Plan) -> list[dict[str, Any]]:
    """One worker process for one framework family, its threads fixed before import."""
    from rnnbench.run.environments import thread_env

    with tempfile.TemporaryDirectory(prefix="rnnbench-idiomatic-") as tmp:
        plan_path, out_path = Path(tmp) / "plan.json", Path(tmp) / "results.json"
        plan_path.write_text(json.dumps(dataclasses.asdict(plan)))
        env = {**os.environ, **thread_env(plan.threads)}
        for framework in registry.frameworks().values():  # cold first calls: on-disk compile caches off, empty
            env.update(framework.cold_cache_env(tmp))
        cmd = [sys.executable, "-m", "rnnbench.run.idiomatic", "--worker", family, "--plan", str(plan_path),
               "--result", str(out_path)]
        proc = subprocess.run(cmd, env=env)
        if proc.returncode != 0 or not out_path.exists():
            raise RuntimeError(f"the {family} worker exited with status {proc.returncode}")
        return json.loads(out_path.read_text())


def _identity(row: dict[str, Any], plan: Plan, settings: dict[str, Any]) -> dict[str, Any]:
    return record.identity(model=row["model"], driver=row["candidate"], framework=row["framework"],
                           family=row["framework_family"], anchor=not row["family"] == "", environment="main",
                           env_label=row["env_label"], dtype=DTYPE, device=DEVICE, sizes=row["sizes"], seed=SEED,
                           settings={"threads": plan.threads, "rounds": plan.rounds, **settings})


def best_by_family(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """{(point, family): the family's fastest ok variant} over the baseline rows."""
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        if row["family"] and row["status"] == Status.OK and row.get("fwd_bwd"):
            key = (row["point"], row["family"])
            if key not in best or row["fwd_bwd"]["median_ms"] < best[key]["fwd_bwd"]["median_ms"]:
                best[key] = row
    return best


def comparison_records(rows: list[dict[str, Any]], plan: Plan) -> list[dict[str, Any]]:
    """One record per (mechanism, baseline family, comparison point)."""
    best = best_by_family(rows)
    wanted = {_point_key(m, dict(s)) for m, s in plan.points}
    out = []
    for mech in (r for r in rows if not r["family"] and r["point"] in wanted):
        families = {fam: b for (pt, fam), b in best.items() if pt == mech["point"] and b["framework_family"] == mech["framework_family"]}
        overall = min(families.values(), key=lambda b: b["fwd_bwd"]["median_ms"]) if families else None
        for fam, base in sorted(families.items()):
            ok = mech["status"] == Status.OK and mech.get("fwd_bwd")
            variants = [{"variant": r["candidate"], "status": r["status"], "max_rel_error": r.get("max_rel_error"),
                         "tolerance": r.get("tolerance"), "first_call_s": r["first_call_s"],
                         "median_ms": (r.get("fwd_bwd") or {}).get("median_ms")}
                        for r in rows if r["point"] == mech["point"] and r["family"] == fam]
            rec = _identity(mech, plan, {"baseline": fam, "mechanism_settings": mech.get("settings", {})})
            rec.update(status=mech["status"], first_call_s=mech["first_call_s"], max_rel_error=mech.get("max_rel_error"),
                       fwd_bwd=mech.get("fwd_bwd"), loadavg=mech.get("loadavg"), baseline=fam,
                       baseline_variant=base["candidate"], baseline_settings=base.get("settings", {}),
                       baseline_fwd_bwd=base["fwd_bwd"], baseline_max_rel_error=base.get("max_rel_error"),
                       baseline_first_call_s=base["first_call_s"], baseline_variants=variants, best_idiomatic=base is overall,
                       ratio=(mech["fwd_bwd"]["median_ms"] / base["fwd_bwd"]["median_ms"]) if ok else None)
            if mech.get("skip_reason") or mech.get("report"):
                rec["reason" if mech.get("skip_reason") else "report"] = mech.get("skip_reason") or mech["report"]
            out.append(rec)
    return out


def sweep_records(rows: list[dict[str, Any]], plan: Plan) -> list[dict[str, Any]]:
    """One record per (candidate, T) of the sweep: mechanisms, and each baseline family by its
    fastest variant at that T (driver "idiomatic: <family>", the variant in settings)."""
    best = best_by_family(rows)
    in_sweep = {_point_key(plan.sweep_model, {**dict(plan.sweep_sizes), "T": t}) for t in plan.sweep}
    out = []
    for row in rows:
        if row["point"] not in in_sweep:
            continue
        if row["family"]:
            chosen = best.get((row["point"], row["family"]))
            first = next(r for r in rows if r["point"] == row["point"] and r["family"] == row["family"])
            if chosen is not row and not (chosen is None and first is row):  # no ok variant: the first says why
                continue
            rec = _identity({**row, "candidate": f"idiomatic: {row['family']}"}, plan, {"variant": row["candidate"]})
        else:
            rec = _identity(row, plan, {})
        rec.update(status=row["status"], first_call_s=row["first_call_s"], max_rel_error=row.get("max_rel_error"),
                   fwd_bwd=row.get("fwd_bwd"), loadavg=row.get("loadavg"), variant_settings=row.get("settings", {}))
        if row.get("skip_reason"):
            rec["reason"] = row["skip_reason"]
        out.append(rec)
    return out


def _fmt_ms(t: Optional[dict]) -> str:
    return "-" if not t else f"{t['median_ms']:.3g} [{t['q1_ms']:.3g}-{t['q3_ms']:.3g}]"


def ratio_table(comparison: list[dict[str, Any]], sweep: list[dict[str, Any]], rows: list[dict[str, Any]],
                command: str, plan: Plan) -> str:
    """The markdown page: the ratio table, every baseline variant's time, the sweep, the command."""
    first = comparison[0] if comparison else (sweep[0] if sweep else {})
    versions = sorted({f"{r['env_label']}" for r in rows})
    lines = [f"# Idiomatic comparison ({time.strftime('%Y-%m-%d')})", "",
             "Each rnnbench mechanism's fwd+bwd time over the fastest idiomatic form of the same math in its framework "
             "(every candidate's gradients checked against the oracle first; method: docs/measuring.md#the-idiomatic-comparison). "
             f"float32, {plan.threads} thread(s), one process per framework, {plan.rounds} interleaved rounds, medians "
             f"[IQR] in ms. Machine: {first.get('machine', {}).get('cpu', '?')}, {first.get('machine', {}).get('cores', '?')} "
             f"cores; {', '.join(versions)}.", "", "```", command, "```", "",
             "## Ratio: mechanism / best idiomatic", "",
             "| model | sizes | mechanism | fwd+bwd ms [IQR] | best idiomatic (variant) | its ms | ratio | "
             "same mechanism, idiomatic (variant): ratio | load 1-min start-end |",
             "|---|---|---|---|---|---|---|---|---|"]
    same = {(r["model"], tuple(r["sizes"].items()), r["driver"]): r for r in comparison
            if r["baseline"] == SAME_MECHANISM.get(r["driver"])}
    for rec in comparison:
        if not rec["best_idiomatic"]:
            continue
        own = same.get((rec["model"], tuple(rec["sizes"].items()), rec["driver"]))
        own_s = "-" if own is None else (f"{own['baseline_variant']}: " + (
            "-" if own["ratio"] is None else (f"**{own['ratio']:.2f}**" if own["ratio"] > 1.1 else f"{own['ratio']:.2f}")))
        sizes = " ".join(f"{k}={v}" for k, v in rec["sizes"].items())
        load = rec.get("loadavg") or {}
        load_s = f"{load['start'][0]:.2f}-{load['end'][0]:.2f}" if load else "-"
        ratio = f"**{rec['ratio']:.2f}**" if rec["ratio"] is not None and rec["ratio"] > 1.1 else (
            f"{rec['ratio']:.2f}" if rec["ratio"] is not None else f"{rec['status']}: {rec.get('reason', '')}")
        lines.append(f"| {rec['model']} | {sizes} | {rec['driver']} | {_fmt_ms(rec['fwd_bwd'])} | {rec['baseline']} "
                     f"({rec['baseline_variant']}) | {_fmt_ms(rec['baseline_fwd_bwd'])} | {ratio} | {own_s} | {load_s} |")
    lines += ["", "Bold: above 1.1. The same-mechanism column divides by the idiomatic form written with the "
              "mechanism's own construct (SAME_MECHANISM): above 1.1 there is the driver's cost; the ratio column "
              "beyond it is the construct's.", "", "## Against each baseline family", "",
              "| model | sizes | mechanism | " + " | ".join(["family", "variant", "ratio"]) + " |", "|---|---|---|---|---|---|"]
    for rec in comparison:
        sizes = " ".join(f"{k}={v}" for k, v in rec["sizes"].items())
        ratio = f"{rec['ratio']:.2f}" if rec["ratio"] is not None else rec["status"]
        lines.append(f"| {rec['model']} | {sizes} | {rec['driver']} | {rec['baseline']} | {rec['baseline_variant']} | {ratio} |")
    lines += ["", "## Every candidate", "", "| point | candidate | family | status | max rel err | first call s | fwd+bwd ms [IQR] |",
              "|---|---|---|---|---|---|---|"]
    for row in rows:
        err = "-" if row.get("max_rel_error") is None else f"{row['max_rel_error']:.1e}"
        first_s = "-" if row["first_call_s"] is None else f"{row['first_call_s']:.2f}"
        status = row["status"] + (f" ({row['skip_reason']})" if row.get("skip_reason") else "")
        lines.append(f"| {row['point']} | {row['candidate']} | {row['family'] or 'mechanism'} | {status} | {err} | "
                     f"{first_s} | {_fmt_ms(row.get('fwd_bwd'))} |")
    lines += ["", f"## T sweep ({plan.sweep_model}, " + " ".join(f"{k}={v}" for k, v in plan.sweep_sizes if k != "T") + ")", "",
              "| candidate | " + " | ".join(f"T={t}" for t in sorted(plan.sweep)) + " |",
              "|---|" + "---|" * len(plan.sweep)]
    by_driver: dict[str, dict[int, dict]] = {}
    for rec in sweep:
        by_driver.setdefault(rec["driver"], {})[rec["sizes"]["T"]] = rec
    for name, per_t in by_driver.items():
        cells = []
        for t in sorted(plan.sweep):
            rec = per_t.get(t)
            cells.append("-" if rec is None else (f"{rec['fwd_bwd']['median_ms']:.3g}" if rec.get("fwd_bwd") else rec["status"]))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "fwd+bwd median ms; `skipped`: over the run's budgets (the records say why). Chart: "
              "the `-tgrowth.png` beside this file; records: the `.jsonl` and `-tgrowth.jsonl` files.", ""]
    return "\n".join(lines)


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(record.dumps(r) for r in records))
    os.replace(tmp, path)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnbench.run.idiomatic", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="output prefix: writes <out>.jsonl, <out>.md, <out>-tgrowth.jsonl, <out>-tgrowth.png")
    parser.add_argument("--quick", action="store_true", help="one tiny size, T in (4, 8), 3 rounds: for a test")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--plan", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        plan = Plan.from_json(Path(args.plan).read_text())
        _pin(plan.threads)
        rows = run_worker(args.worker, plan, lambda line: print(f"[{args.worker}] {line}", file=sys.stderr, flush=True))
        Path(args.result).write_text(json.dumps(rows, default=str))
        return 0
    if not args.out:
        parser.error("--out is required")
    if not 1 <= args.threads <= len(os.sched_getaffinity(0)):
        parser.error(f"--threads must be between 1 and {len(os.sched_getaffinity(0))}")
    plan = plan_for(args.quick, args.threads)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    command = "python -m rnnbench.run.idiomatic " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    rows: list[dict[str, Any]] = []
    for family in _families(plan):  # one after the other: the workers never share the cores
        rows += run_family(family, plan)
    comparison, sweep = comparison_records(rows, plan), sweep_records(rows, plan)
    _write_jsonl(Path(f"{out}.jsonl"), comparison)
    _write_jsonl(Path(f"{out}-tgrowth.jsonl"), sweep)
    Path(f"{out}.md").write_text(ratio_table(comparison, sweep, rows, command, plan))
    # The chart is drawn by the report floor from the records file (run/ does not import report/).
    subprocess.run([sys.executable, "-m", "rnnbench.report.charts", "idiomatic-tgrowth", f"{out}-tgrowth.jsonl",
                    f"{out}-tgrowth.png"], check=True)
    print(f"wrote {out}.jsonl ({len(comparison)} records), {out}.md, {out}-tgrowth.jsonl ({len(sweep)} records), "
          f"{out}-tgrowth.png")
    failed = [r for r in rows if r["status"] not in (Status.OK, Status.SKIPPED)]
    for row in failed:
        print(f"not ok: {row['point']} {row['candidate']}: {row['status']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
