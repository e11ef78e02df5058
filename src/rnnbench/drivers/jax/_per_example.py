"""Part of the jax layer: the per_example mode (rnnbench.modes), each example's gradient of its own
loss by jax.vmap of jax.grad over the batch, under jax.jit, and the two other roads to the same
gradients that a row times beside it (rnnbench.modes.ROADS): a loop over the examples (a jitted
grad called per example), and the batched-loss trick (per-example copies of the shared inputs, the
jitted grad of the vmapped, summed loss)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rnnbench.drivers.base import Batch, RoadProgram
from rnnbench.model import batch_layout
from rnnbench.modes import PER_EXAMPLE, PER_EXAMPLE_BATCHED_LOSS, PER_EXAMPLE_LOOP


def per_example_mode(
    loss_fn: Callable[[dict, dict], Any], diff: dict, rest: dict, batch: Batch
) -> tuple[Callable[[], tuple[np.ndarray, dict[str, np.ndarray]]], dict[str, RoadProgram]]:
    """(the per_example mode's call, its roads). The mode (rnnbench.modes): jit of jax.vmap(jax.grad(one))
    over the batch, `one` the loss of one example's slice as a function of the inputs and of the batched
    consts. Each batched array enters with a size-1 axis after its batch axis, so the slice vmap hands
    `one` is that example's own case (B = 1); the consts are put in the dict loss_fn reads while it is
    traced, and put back after. The call returns (losses (B,), {name: (B, *shape in one example)}).
    The roads: the same program (per_example), a loop over the examples (per_example_loop: one jitted
    grad, called on each example's slice) and the batched-loss trick (per_example_batched_loss)."""
    import jax
    import jax.numpy as jnp

    made: dict[str, Callable[..., Any]] = {}  # traced and compiled on first call, as the row's other calls

    def layout() -> tuple[dict, tuple[dict, dict, dict]]:
        lay = batch_layout(batch.model, batch.case)
        assert not isinstance(lay, str), lay  # rows.pair asks batch.unavailable before it runs this mode
        consts = {k: batch.consts[k] for k in lay.consts}
        axes = ({n: lay.inputs.get(n) for n in diff}, {n: lay.inputs.get(n) for n in rest}, dict(lay.consts))
        return consts, axes

    def expanded(values: dict, at: dict) -> dict:
        return {n: v if at[n] is None else jnp.expand_dims(v, at[n] + 1) for n, v in values.items()}

    def one(d: dict, r: dict, k: dict) -> Any:
        kept = {name: batch.consts[name] for name in k}
        batch.consts.update(k)
        try:
            return loss_fn(d, r)
        finally:
            batch.consts.update(kept)

    def args() -> list[dict]:
        consts, axes = layout()
        return [expanded(values, at) for values, at in zip((diff, rest, consts), axes)]

    def vmapped() -> Any:
        if PER_EXAMPLE not in made:
            with_aux = jax.grad(lambda d, r, k: (lambda loss: (loss, loss))(one(d, r, k)), has_aux=True)
            made[PER_EXAMPLE] = jax.jit(jax.vmap(with_aux, in_axes=layout()[1]))
        return made[PER_EXAMPLE](*args())

    def call() -> tuple[np.ndarray, dict[str, np.ndarray]]:
        grads, losses = jax.block_until_ready(vmapped())
        return np.asarray(losses, dtype=np.float64), {k: np.asarray(v, dtype=np.float64) for k, v in grads.items()}

    def loop() -> Any:
        """One jitted grad, called on each example's slice (B = 1, its batch axis kept) in turn."""
        if PER_EXAMPLE_LOOP not in made:
            made[PER_EXAMPLE_LOOP] = jax.jit(jax.grad(one))
        given, axes = args(), layout()[1]
        size = next(v.shape[at[n]] for values, at in zip(given, axes) for n, v in values.items() if at[n] is not None)

        def example(b: int) -> list[dict]:
            return [
                {n: v if at[n] is None else jnp.take(v, b, axis=at[n]) for n, v in values.items()}
                for values, at in zip(given, axes)
            ]

        each = [made[PER_EXAMPLE_LOOP](*example(b)) for b in range(size)]
        return {n: jnp.stack([g[n] for g in each]) for n in diff}

    def batched_loss() -> Any:
        """jit(jax.grad) of the examples' summed loss w.r.t. per-example copies of the shared compared
        inputs (expanded to B) and the batched ones as they are, the forward vmapped over the examples."""
        given, (d_at, r_at, k_at) = args(), layout()[1]
        size = next(v.shape[at[n]] for values, at in zip(given, (d_at, r_at, k_at))
                    for n, v in values.items() if at[n] is not None)  # fmt: skip
        if PER_EXAMPLE_BATCHED_LOSS not in made:
            copies_at = {n: 0 if a is None else a for n, a in d_at.items()}
            summed = jax.grad(lambda d, r, k: jnp.sum(jax.vmap(one, in_axes=(copies_at, r_at, k_at))(d, r, k)))

            def program(d: dict, r: dict, k: dict) -> dict:
                copies = {n: jnp.broadcast_to(v, (size, *v.shape)) if d_at[n] is None else v for n, v in d.items()}
                g = summed(copies, r, k)
                return {n: g[n] if d_at[n] is None else jnp.moveaxis(g[n], d_at[n], 0) for n in g}

            made[PER_EXAMPLE_BATCHED_LOSS] = jax.jit(program)
        return made[PER_EXAMPLE_BATCHED_LOSS](*given)

    def read(grads: Any) -> dict[str, np.ndarray]:
        return {k: np.asarray(v, dtype=np.float64) for k, v in grads.items()}

    roads = {
        PER_EXAMPLE: RoadProgram(lambda: vmapped()[0], read),
        PER_EXAMPLE_LOOP: RoadProgram(loop, read),
        PER_EXAMPLE_BATCHED_LOSS: RoadProgram(batched_loss, read),
    }
    return call, roads
