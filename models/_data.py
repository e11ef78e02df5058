"""Seeded canonical data shared by the model families."""

from __future__ import annotations

import zlib

import numpy as np


def rng_for(model_name: str, seed: int) -> np.random.Generator:
    """A generator that differs per model for the same seed (stable across runs and machines)."""
    return np.random.default_rng([seed, zlib.crc32(model_name.encode())])


def uniform(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
    return rng.uniform(-scale, scale, size=shape).astype(np.float64)
