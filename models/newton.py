"""Newton iterations with a fixed trip count K; gradients flow through the unrolled iterations.

newton_sqrt:       y' = (y + a / y) / 2            -> sqrt(a);  a: (n,) in [0.5, 4]
newton_reciprocal: y' = y * (2 - a * y)            -> 1 / a;    a: (n,) in [0.5, 1.5]
newton_schulz:     X' = X @ (2 I - A @ X)          -> A^-1;     A = I + 0.2 R / sqrt(n): (n, n)
loss = sum(ys * v) + sum(ys[-1] * w).

The initial iterate requires grad for the scalar iterations: after convergence its true gradient is
~0, where a wrong carry-cotangent rule tends to give O(1) (docs/bugs.md §4). The oracle is the
hand-derived adjoint of the truncated iteration (exact for any K); the tests also check it against
the converged closed forms d sqrt(a)/da = 1/(2 sqrt a), d(1/a)/da = -1/a^2, dA^-1 = -A^-T W A^-T.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rnnbench.model import Case, Model
from rnnbench_models._common import iterates_cotangent_consts, iteration_case, rng_for, weighted_iterates_loss
from rnnbench_models._flops import count


def _iterates(case: Case, update) -> list[np.ndarray]:
    ys = [case.carry0[0]]
    for _ in range(case.length):
        ys.append(update(ys[-1]))
    return ys


def _adjoint(case: Case, ys, backward) -> tuple[np.ndarray, np.ndarray]:
    """Run g_t = dL/dy_t backwards; `backward(y_t, g_{t+1})` returns (d param, g_t)."""
    v, w = case.consts["v"], case.consts["w"]
    g = w.copy()
    grad = 0.0
    for t in range(case.length - 1, -1, -1):
        g = g + v[t]
        dparam, g = backward(ys[t], g)
        grad = grad + dparam
    return grad, g


# ---- sqrt --------------------------------------------------------------------------------------
def sqrt_step(ops, params, carry, _x):
    (y,) = carry
    y = 0.5 * (y + params["a"] / y)
    return (y,), y


def sqrt_case(sizes: Mapping[str, int], seed: int) -> Case:
    rng = rng_for("newton_sqrt", seed)
    n = sizes["n"]
    return iteration_case("newton_sqrt", rng.uniform(0.5, 4.0, size=n), (np.ones(n),), (True,), rng, sizes, seed)


def sqrt_oracle(case: Case) -> dict[str, np.ndarray]:
    a = case.params["a"]
    ys = _iterates(case, lambda y: 0.5 * (y + a / y))
    da, dy0 = _adjoint(case, ys, lambda y, g: (g * 0.5 / y, g * 0.5 * (1.0 - a / y**2)))
    return {"a": da, "carry0.y": dy0}


# ---- reciprocal --------------------------------------------------------------------------------
def reciprocal_step(ops, params, carry, _x):
    (y,) = carry
    y = y * (2.0 - params["a"] * y)
    return (y,), y


def reciprocal_case(sizes: Mapping[str, int], seed: int) -> Case:
    rng = rng_for("newton_reciprocal", seed)
    n = sizes["n"]
    return iteration_case("newton_reciprocal", rng.uniform(0.5, 1.5, size=n), (np.ones(n),), (True,), rng, sizes, seed)


def reciprocal_oracle(case: Case) -> dict[str, np.ndarray]:
    a = case.params["a"]
    ys = _iterates(case, lambda y: y * (2.0 - a * y))
    da, dy0 = _adjoint(case, ys, lambda y, g: (-g * y * y, g * (2.0 - 2.0 * a * y)))
    return {"a": da, "carry0.y": dy0}


# ---- Newton-Schulz matrix inverse --------------------------------------------------------------
def schulz_step(ops, params, carry, _x):
    (X,) = carry
    X = 2.0 * X - ops.matmul(ops.matmul(X, params["A"]), X)
    return (X,), X


def schulz_case(sizes: Mapping[str, int], seed: int) -> Case:
    rng = rng_for("newton_schulz", seed)
    n = sizes["n"]
    A = np.eye(n) + 0.2 * rng.standard_normal((n, n)) / np.sqrt(n)
    return iteration_case("newton_schulz", A, (np.eye(n),), (False,), rng, sizes, seed)


def schulz_oracle(case: Case) -> dict[str, np.ndarray]:
    """X' = 2X - X A X:  dA += -X^T G X^T,  G_prev = 2G - G (A X)^T - (X A)^T G."""
    A = case.params["A"]
    Xs = _iterates(case, lambda X: 2.0 * X - X @ A @ X)
    dA, _ = _adjoint(case, Xs, lambda X, G: (-X.T @ G @ X.T, 2.0 * G - G @ (A @ X).T - (X @ A).T @ G))
    return {"A": dA}


def _loss_flops(K: int, size: int) -> int:
    return 2 * K * size + 2 * size


def scalar_flops(sizes: Mapping[str, int]) -> dict[str, float]:
    """Both scalar iterations cost 3n per step (sqrt: a/y, +, *0.5; reciprocal: a*y, 2-, y*)."""
    K, n = sizes["K"], sizes["n"]
    return count(0, 0, 3 * K * n + _loss_flops(K, n))


def schulz_flops(sizes: Mapping[str, int]) -> dict[str, float]:
    """Step: X @ A and (XA) @ X (4n^3), 2X and the difference (2n^2). Backward: d(XA) and dA
    every step (4n^3), dX from both matmuls for all but the first step (X_0 = I needs no gradient)."""
    K, n = sizes["K"], sizes["n"]
    return count(4 * K * n**3, 4 * K * n**3 + 4 * (K - 1) * n**3, 2 * K * n * n + _loss_flops(K, n * n))


MODELS = (
    Model(
        name="newton_sqrt",
        summary="sqrt(a) by K Newton steps; y0 requires grad (true grad ~0)",
        carry_names=("y",),
        default_sizes={"K": 8, "n": 8},
        make_case=sqrt_case,
        step=sqrt_step,
        loss=weighted_iterates_loss,
        oracle=sqrt_oracle,
        oracle_kind="hand_adjoint",
        cotangent_consts=iterates_cotangent_consts,
        flops=scalar_flops,
    ),
    Model(
        name="newton_reciprocal",
        summary="1/a by K Newton steps; y0 requires grad",
        carry_names=("y",),
        default_sizes={"K": 8, "n": 8},
        make_case=reciprocal_case,
        step=reciprocal_step,
        loss=weighted_iterates_loss,
        oracle=reciprocal_oracle,
        oracle_kind="hand_adjoint",
        cotangent_consts=iterates_cotangent_consts,
        flops=scalar_flops,
    ),
    Model(
        name="newton_schulz",
        summary="A^-1 by K Newton-Schulz steps",
        carry_names=("X",),
        default_sizes={"K": 8, "n": 8},
        make_case=schulz_case,
        step=schulz_step,
        loss=weighted_iterates_loss,
        oracle=schulz_oracle,
        oracle_kind="hand_adjoint",
        cotangent_consts=iterates_cotangent_consts,
        flops=schulz_flops,
    ),
)
