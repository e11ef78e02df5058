"""Part of the jax layer: the per_example mode (rnnbench.modes), each example's gradient of its own
loss by jax.vmap of jax.grad over the batch, under jax.jit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rnnbench.drivers.base import Batch
from rnnbench.model import batch_layout


def per_example_mode(
    loss_fn: Callable[[dict, dict], Any], diff: dict, rest: dict, batch: Batch
) -> Callable[[], tuple[np.ndarray, dict[str, np.ndarray]]]:
    """The per_example mode (rnnbench.modes): jit of jax.vmap(jax.grad(one)) over the batch, `one` the
    loss of one example's slice as a function of the inputs and of the batched consts. Each batched
    array enters with a size-1 axis after its batch axis, so the slice vmap hands `one` is that
    example's own case (B = 1); the consts are put in the dict loss_fn reads while it is traced, and
    put back after. Returns (losses (B,), {name: (B, *shape in one example)})."""
    import jax
    import jax.numpy as jnp

    made: list[Callable[..., Any]] = []  # traced and compiled on first call, as the row's other calls

    def call() -> tuple[np.ndarray, dict[str, np.ndarray]]:
        lay = batch_layout(batch.model, batch.case)
        assert not isinstance(lay, str), lay  # rows.pair asks batch.unavailable before it runs this mode
        consts = {k: batch.consts[k] for k in lay.consts}
        axes = (
            {n: lay.inputs.get(n) for n in diff},
            {n: lay.inputs.get(n) for n in rest},
            dict(lay.consts),
        )

        def expanded(values: dict, at: dict) -> dict:
            return {n: v if at[n] is None else jnp.expand_dims(v, at[n] + 1) for n, v in values.items()}

        if not made:

            def one(d: dict, r: dict, k: dict) -> tuple[Any, Any]:
                kept = {name: batch.consts[name] for name in k}
                batch.consts.update(k)
                try:
                    loss = loss_fn(d, r)
                finally:
                    batch.consts.update(kept)
                return loss, loss

            made.append(jax.jit(jax.vmap(jax.grad(one, has_aux=True), in_axes=axes)))
        args = [expanded(values, at) for values, at in zip((diff, rest, consts), axes)]
        grads, losses = jax.block_until_ready(made[0](*args))
        return np.asarray(losses, dtype=np.float64), {k: np.asarray(v, dtype=np.float64) for k, v in grads.items()}

    return call
