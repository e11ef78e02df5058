"""A fuzzed body as a Model and a Case the drivers run, and its float64 finite-difference oracles
with the ill-conditioning test."""

from __future__ import annotations

import builtins
import dataclasses
from dataclasses import dataclass
from typing import Optional

import numpy as np

from rnnbench.check.compare import compare_grads
from rnnbench.check.finite_diff import finite_difference_grads
from rnnbench.check.second_order import HvpOracle, hvp_oracle
from rnnbench.check.tolerance import tolerance
from rnnbench.fuzz.grammar import PARAM_VECTORS, Body, body_wrt
from rnnbench.model import Case, Model, reference_loss
from rnnbench.status import InputStatus, OracleKind

NEAR_ZERO_PROBABILITY = 0.15  # parameter entries set to +-1e-3, where wrong rules show (docs/bugs.md §4)
LOSS_LIMIT = 1e6  # a draw whose loss exceeds this has grown too much over the steps to check


def weighted_loss(ops, consts, ys, carry):
    """sum(ys * wy) + sum_i sum(c_i * wc_i): every output and final carry leaf reaches the loss."""
    total = ops.sum(ys * consts["wy"])
    for i, leaf in enumerate(carry):
        total = total + ops.sum(leaf * consts[f"wc{i}"])
    return total


def compile_step(source: str):
    namespace: dict = {"__builtins__": builtins}
    exec(compile(source, "<fuzzed body>", "exec"), namespace)
    return namespace["step"]


def body_case(body: Body, name: str) -> Case:
    """Seeded data: vectors in [-1, 1] with some entries near 0, W scaled to spectral radius < 1."""
    rng = np.random.default_rng(body.data_seed)
    n, T, used, wrt = body.n, body.length, body.leaves_used(), body_wrt(body)

    def vector() -> np.ndarray:
        v = rng.uniform(-1.0, 1.0, n)
        near = rng.random(n) < NEAR_ZERO_PROBABILITY
        return np.where(near, 1e-3 * np.sign(v), v)

    params = {p: vector() for p in PARAM_VECTORS if p in used}
    if "W" in used:
        params["W"] = 0.9 * rng.uniform(-1.0, 1.0, (n, n)) / np.sqrt(n)
    k = len(body.updates)
    return Case(
        model=name,
        sizes={"T": T, "n": n},
        seed=body.data_seed,
        params=params,
        carry0=tuple(vector() for _ in range(k)),
        xs=rng.uniform(-1.0, 1.0, (T, n)) if body.has_xs else None,
        length=T,
        consts={"wy": rng.uniform(-1.0, 1.0, (T, n)), **{f"wc{i}": rng.uniform(-1.0, 1.0, n) for i in range(k)}},
        carry0_requires_grad=tuple(f"carry0.{c}" in wrt for c in body.carry_names),
        xs_requires_grad="xs" in wrt,
    )


@dataclass
class FuzzCase:
    """A body ready to run: model (its oracle returns the cached finite differences), case, and
    `ill_conditioned` (None, or why the finite-difference oracle cannot be trusted on this draw)."""

    body: Body
    model: Model
    case: Case
    ill_conditioned: Optional[str]
    _hvp: Optional[HvpOracle] = None

    def hvp_oracle(self) -> HvpOracle:
        """Loss-difference H v along a direction seeded by the body, computed once."""
        if self._hvp is None:
            self._hvp = hvp_oracle(self.model, self.case, seed=self.body.data_seed)
        return self._hvp


def build(body: Body, name: str = "fuzz") -> FuzzCase:
    case = body_case(body, name)
    model = Model(name=name, summary="fuzzed body", carry_names=body.carry_names,
                  default_sizes={"T": body.length, "n": body.n}, make_case=lambda sizes, seed: case,
                  step=compile_step(body.source()), loss=weighted_loss, oracle_kind=OracleKind.FINITE_DIFFERENCES)
    reason = None
    try:
        with np.errstate(all="raise"):
            loss = reference_loss(model, case)
            fine = finite_difference_grads(model, case)
            coarse = finite_difference_grads(model, case, step=2e-3)
    except FloatingPointError as exc:
        return FuzzCase(body, model, case, f"floating-point exception in the numpy forward: {exc}")
    if not np.isfinite(loss) or abs(loss) > LOSS_LIMIT:
        reason = f"loss {loss:.3g} is not finite or exceeds {LOSS_LIMIT:g}"
    else:
        names = case.wrt_names(model.carry_names)
        bad = [e.name for e in compare_grads(coarse, fine, names, tolerance("float64", "finite_differences"))
               if e.status != InputStatus.OK]
        if bad:
            reason = f"finite differences disagree between step sizes for {bad}"
    oracle = dict(fine)
    model = dataclasses.replace(model, oracle=lambda c: oracle)
    return FuzzCase(body, model, case, reason)
