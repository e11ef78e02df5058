"""Part of the jax layer: forward mode (rnnbench.modes): the jvp mode's gradient column by column
(jax.jacfwd) and the jvp road's one seeded jax.jvp (rnnbench.modes.ROADS), each under jax.jit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rnnbench.drivers.base import RoadProgram, seeded_tangent


def forward_mode(
    loss_fn: Callable[[dict, dict], Any], diff: dict, rest: dict
) -> Callable[[], tuple[float, dict[str, np.ndarray]]]:
    """The jvp mode (rnnbench.modes): the gradient column by column by forward mode, jit of
    jax.jacfwd (jax.jvp vmapped over every compared entry's unit tangent), with the loss as aux."""
    import jax

    jacfwd = jax.jit(jax.jacfwd(lambda d, r: (lambda loss: (loss, loss))(loss_fn(d, r)), has_aux=True))

    def call() -> tuple[float, dict[str, np.ndarray]]:
        grads, loss = jax.block_until_ready(jacfwd(diff, rest))
        return float(loss), {k: np.asarray(v, dtype=np.float64) for k, v in grads.items()}

    return call


def jvp_road(loss_fn: Callable[[dict, dict], Any], diff: dict, rest: dict) -> RoadProgram:
    """The jvp road (rnnbench.modes.ROADS): jit of one jax.jvp of the loss along the seeded tangent of
    every compared input (rnnbench.drivers.base.seeded_tangent) -> (loss, d loss along it)."""
    import jax
    import jax.numpy as jnp

    tangent = seeded_tangent({k: tuple(v.shape) for k, v in diff.items()})
    tangents = {k: jnp.asarray(tangent[k], dtype=v.dtype) for k, v in diff.items()}
    along = jax.jit(lambda d, r, t: jax.jvp(lambda d: loss_fn(d, r), (d,), (t,)))
    return RoadProgram(
        lambda: along(diff, rest, tangents), lambda out: {"jvp": np.atleast_1d(np.asarray(out[1], dtype=np.float64))}
    )
