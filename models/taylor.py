"""Truncated Taylor series as recurrences: the state is multiplied by a parameter-dependent factor
each step (the docs/bugs.md §4 shape). No per-step inputs; the trip count K is the number of terms.
A step counter k rides in the carry (a leaf that never requires grad).

taylor_exp:  term_k = term_{k-1} * a / k,  ys[t] = S_{t+1}(a) = sum_{j<=t+1} a^j / j!        a: (n,)
taylor_sin:  ys[t] = P_{t+1}(a) = sum_{j<=t+1} (-1)^j a^(2j+1) / (2j+1)!                    a: (n,)
taylor_expm: term_k = term_{k-1} @ A / k,  ys[t] = sum_{j<=t+1} A^j / j!                     A: (n, n)
loss = sum(ys * v) + sum(ys[-1] * w).

Oracles are closed forms: the derivative of a truncated exp series is the series one order lower,
of the truncated sine series the truncated cosine series; for the matrix series, the gradient of
<W, S_m(A)> is the upper-right block of S_m([[A^T, W], [0, A^T]]) (the truncated Fréchet derivative).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from rnnbench.model import Case, Model
from rnnbench_models._common import iterates_cotangent_consts, iteration_case, rng_for, uniform, weighted_iterates_loss
from rnnbench_models._flops import count


# ---- exp ---------------------------------------------------------------------------------------
def exp_step(ops, params, carry, _x):
    term, total, k = carry
    k = k + 1.0
    term = term * params["a"] / k
    total = total + term
    return (term, total, k), total


def exp_case(sizes: Mapping[str, int], seed: int) -> Case:
    rng = rng_for("taylor_exp", seed)
    n = sizes["n"]
    return iteration_case(
        "taylor_exp",
        uniform(rng, (n,), 2.0),
        (np.ones(n), np.ones(n), np.zeros(n)),
        (False, False, False),
        rng,
        sizes,
        seed,
    )


def _exp_partial(a: np.ndarray, m: int) -> np.ndarray:
    return sum(a**j / math.factorial(j) for j in range(m + 1))


def exp_oracle(case: Case) -> dict[str, np.ndarray]:
    """d S_m / d a = S_{m-1}: ys[t] = S_{t+1} contributes v[t] * S_t."""
    a, v, w, K = case.params["a"], case.consts["v"], case.consts["w"], case.length
    return {"a": sum(v[t] * _exp_partial(a, t) for t in range(K)) + w * _exp_partial(a, K - 1)}


# ---- sin ---------------------------------------------------------------------------------------
def sin_step(ops, params, carry, _x):
    # term_j = (-1)^j a^(2j) / (2j+1)!, total = sum of terms; the partial sine sum is a * total.
    term, total, k = carry
    a = params["a"]
    term = -term * a * a / ((2.0 * k + 2.0) * (2.0 * k + 3.0))
    total = total + term
    return (term, total, k + 1.0), a * total


def sin_case(sizes: Mapping[str, int], seed: int) -> Case:
    rng = rng_for("taylor_sin", seed)
    n = sizes["n"]
    return iteration_case(
        "taylor_sin",
        uniform(rng, (n,), 3.0),
        (np.ones(n), np.ones(n), np.zeros(n)),
        (False, False, False),
        rng,
        sizes,
        seed,
    )


def _cos_partial(a: np.ndarray, m: int) -> np.ndarray:
    return sum((-1) ** j * a ** (2 * j) / math.factorial(2 * j) for j in range(m + 1))


def sin_oracle(case: Case) -> dict[str, np.ndarray]:
    """d/da P_m(a) = C_m(a), the cosine series truncated at the same j."""
    a, v, w, K = case.params["a"], case.consts["v"], case.consts["w"], case.length
    return {"a": sum(v[t] * _cos_partial(a, t + 1) for t in range(K)) + w * _cos_partial(a, K)}


# ---- expm --------------------------------------------------------------------------------------
def expm_step(ops, params, carry, _x):
    term, total, k = carry
    k = k + 1.0
    term = ops.matmul(term, params["A"]) / k
    total = total + term
    return (term, total, k), total


def expm_case(sizes: Mapping[str, int], seed: int) -> Case:
    rng = rng_for("taylor_expm", seed)
    n = sizes["n"]
    A = rng.standard_normal((n, n)) / np.sqrt(n)  # spectral norm ~2: the series needs all its terms
    return iteration_case(
        "taylor_expm", A, (np.eye(n), np.eye(n), np.zeros(1)), (False, False, False), rng, sizes, seed
    )


def _expm_partial(M: np.ndarray, m: int) -> np.ndarray:
    total, term = np.eye(len(M)), np.eye(len(M))
    for j in range(1, m + 1):
        term = term @ M / j
        total = total + term
    return total


def expm_oracle(case: Case) -> dict[str, np.ndarray]:
    A, v, w, K = case.params["A"], case.consts["v"], case.consts["w"], case.length
    n = len(A)

    def grad_of_inner_product(W: np.ndarray, m: int) -> np.ndarray:
        M = np.block([[A.T, W], [np.zeros((n, n)), A.T]])
        return _expm_partial(M, m)[:n, n:]

    return {"A": sum(grad_of_inner_product(v[t], t + 1) for t in range(K)) + grad_of_inner_product(w, K)}


def _loss_flops(K: int, size: int) -> int:
    return 2 * K * size + 2 * size


def exp_flops(sizes: Mapping[str, int]) -> dict[str, float]:
    """Step: k+1, term*a, /k, total+ (4n)."""
    K, n = sizes["K"], sizes["n"]
    return count(0, 0, 4 * K * n + _loss_flops(K, n))


def sin_flops(sizes: Mapping[str, int]) -> dict[str, float]:
    """Step: the term update (9n: negate, two products by a, the two factors, product, division),
    total+, k+1, a*total (12n in all)."""
    K, n = sizes["K"], sizes["n"]
    return count(0, 0, 12 * K * n + _loss_flops(K, n))


def expm_flops(sizes: Mapping[str, int]) -> dict[str, float]:
    """Step: term @ A (2n^3), /k and total+ (2n^2). Backward: dA every step, d term for all but
    the first (term_0 = I needs no gradient)."""
    K, n = sizes["K"], sizes["n"]
    return count(2 * K * n**3, 2 * K * n**3 + 2 * (K - 1) * n**3, 2 * K * n * n + _loss_flops(K, n * n))


MODELS = (
    Model(
        name="taylor_exp",
        summary="exp(a) by a K-term Taylor recurrence",
        carry_names=("term", "total", "k"),
        default_sizes={"K": 16, "n": 8},
        make_case=exp_case,
        step=exp_step,
        loss=weighted_iterates_loss,
        oracle=exp_oracle,
        flops=exp_flops,
        oracle_kind="closed_form",
        cotangent_consts=iterates_cotangent_consts,
    ),
    Model(
        name="taylor_sin",
        summary="sin(a) by a K-term Taylor recurrence",
        carry_names=("term", "total", "k"),
        default_sizes={"K": 10, "n": 8},
        make_case=sin_case,
        step=sin_step,
        loss=weighted_iterates_loss,
        oracle=sin_oracle,
        flops=sin_flops,
        oracle_kind="closed_form",
        cotangent_consts=iterates_cotangent_consts,
    ),
    Model(
        name="taylor_expm",
        summary="matrix exponential of A by a K-term Taylor recurrence",
        carry_names=("term", "total", "k"),
        default_sizes={"K": 12, "n": 8},
        make_case=expm_case,
        step=expm_step,
        loss=weighted_iterates_loss,
        oracle=expm_oracle,
        flops=expm_flops,
        oracle_kind="closed_form",
        cotangent_consts=iterates_cotangent_consts,
    ),
)
