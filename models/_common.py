"""Seeded canonical data shared by the model families."""

from __future__ import annotations

import zlib

import numpy as np


def rng_for(model_name: str, seed: int) -> np.random.Generator:
    """A generator that differs per model for the same seed (stable across runs and machines)."""
    return np.random.default_rng([seed, zlib.crc32(model_name.encode())])


def uniform(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
    return rng.uniform(-scale, scale, size=shape).astype(np.float64)


def weighted_iterates_loss(ops, consts, ys, carry):
    """loss = sum(ys * v) + sum(ys[-1] * w): every iterate and, with more weight, the last."""
    return ops.sum(ys * consts["v"]) + ops.sum(ys[-1] * consts["w"])


def iteration_case(
    name: str,
    param: np.ndarray,
    carry0: tuple[np.ndarray, ...],
    carry0_requires_grad: tuple[bool, ...],
    rng: np.random.Generator,
    sizes,
    seed: int,
):
    """Case for a trip-count recurrence (no xs) with one parameter: "a" (vector) or "A" (matrix),
    and random loss weights v (K, ...) and w (...)."""
    from rnnbench.model import Case

    K = sizes["K"]
    return Case(
        model=name,
        sizes=dict(sizes),
        seed=seed,
        params={"a" if param.ndim == 1 else "A": param},
        carry0=carry0,
        xs=None,
        length=K,
        consts={"v": uniform(rng, (K,) + param.shape), "w": uniform(rng, param.shape)},
        carry0_requires_grad=carry0_requires_grad,
    )


def carry_free(dcarry: tuple) -> bool:
    """No final-carry cotangent: a loss on the outputs alone can express it."""
    return all(not np.any(d) for d in dcarry)


def iterates_cotangent_consts(dys: np.ndarray, dcarry: tuple):
    """cotangent_consts for weighted_iterates_loss: v = dys, w = 0 (it has no carry term)."""
    return {"v": dys, "w": np.zeros(dys.shape[1:])} if carry_free(dcarry) else None
