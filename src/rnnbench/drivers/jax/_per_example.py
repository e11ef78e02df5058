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
    each = _PerExample(loss_fn, diff, rest, batch)
    roads = {
        PER_EXAMPLE: RoadProgram(lambda: each.vmapped()[0], _read),
        PER_EXAMPLE_LOOP: RoadProgram(each.loop, _read),
        PER_EXAMPLE_BATCHED_LOSS: RoadProgram(each.batched_loss, _read),
    }
    return each.call, roads


def _read(grads: Any) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, dtype=np.float64) for k, v in grads.items()}


class _PerExample:
    """The per-example programs of one prepared loss (per_example_mode), traced and compiled on first call,
    as the row's other calls."""

    def __init__(self, loss_fn: Callable[[dict, dict], Any], diff: dict, rest: dict, batch: Batch):
        self.loss_fn, self.diff, self.rest, self.batch = loss_fn, diff, rest, batch
        self.made: dict[str, Callable[..., Any]] = {}

    def axes(self) -> tuple[dict, dict, dict]:
        """Each argument's batch axis (None: shared): the compared inputs, the rest, the batched consts."""
        lay = batch_layout(self.batch.model, self.batch.case)
        assert not isinstance(lay, str), lay  # rows.pair asks batch.unavailable before it runs this mode
        return (
            {n: lay.inputs.get(n) for n in self.diff},
            {n: lay.inputs.get(n) for n in self.rest},
            dict(lay.consts),
        )

    def args(self) -> list[dict]:
        """(diff, rest, consts), each batched array with a size-1 axis after its batch axis."""
        import jax.numpy as jnp

        axes = self.axes()
        consts = {k: self.batch.consts[k] for k in axes[2]}
        return [
            {n: v if at[n] is None else jnp.expand_dims(v, at[n] + 1) for n, v in values.items()}
            for values, at in zip((self.diff, self.rest, consts), axes)
        ]

    def size(self, given: list[dict]) -> int:
        return next(
            v.shape[at[n]] for values, at in zip(given, self.axes()) for n, v in values.items() if at[n] is not None
        )

    def one(self, d: dict, r: dict, k: dict) -> Any:
        """The loss of one example's slice, its consts put in the dict loss_fn reads while it is traced."""
        kept = {name: self.batch.consts[name] for name in k}
        self.batch.consts.update(k)
        try:
            return self.loss_fn(d, r)
        finally:
            self.batch.consts.update(kept)

    def vmapped(self) -> Any:
        import jax

        if PER_EXAMPLE not in self.made:
            with_aux = jax.grad(lambda d, r, k: (lambda loss: (loss, loss))(self.one(d, r, k)), has_aux=True)
            self.made[PER_EXAMPLE] = jax.jit(jax.vmap(with_aux, in_axes=self.axes()))
        return self.made[PER_EXAMPLE](*self.args())

    def call(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        import jax

        grads, losses = jax.block_until_ready(self.vmapped())
        return np.asarray(losses, dtype=np.float64), _read(grads)

    def loop(self) -> Any:
        """One jitted grad, called on each example's slice (B = 1, its batch axis kept) in turn."""
        import jax
        import jax.numpy as jnp

        if PER_EXAMPLE_LOOP not in self.made:
            self.made[PER_EXAMPLE_LOOP] = jax.jit(jax.grad(self.one))
        given, axes = self.args(), self.axes()

        def example(b: int) -> list[dict]:
            return [
                {n: v if at[n] is None else jnp.take(v, b, axis=at[n]) for n, v in values.items()}
                for values, at in zip(given, axes)
            ]

        each = [self.made[PER_EXAMPLE_LOOP](*example(b)) for b in range(self.size(given))]
        return {n: jnp.stack([g[n] for g in each]) for n in self.diff}

    def batched_loss(self) -> Any:
        """jit(jax.grad) of the examples' summed loss w.r.t. per-example copies of the shared compared
        inputs (expanded to B) and the batched ones as they are, the forward vmapped over the examples."""
        import jax
        import jax.numpy as jnp

        given, (d_at, r_at, k_at) = self.args(), self.axes()
        if PER_EXAMPLE_BATCHED_LOSS not in self.made:
            size = self.size(given)
            copies_at = {n: 0 if a is None else a for n, a in d_at.items()}
            summed = jax.grad(lambda d, r, k: jnp.sum(jax.vmap(self.one, in_axes=(copies_at, r_at, k_at))(d, r, k)))

            def program(d: dict, r: dict, k: dict) -> dict:
                copies = {n: jnp.broadcast_to(v, (size, *v.shape)) if d_at[n] is None else v for n, v in d.items()}
                g = summed(copies, r, k)
                return {n: g[n] if d_at[n] is None else jnp.moveaxis(g[n], d_at[n], 0) for n in g}

            self.made[PER_EXAMPLE_BATCHED_LOSS] = jax.jit(program)
        return self.made[PER_EXAMPLE_BATCHED_LOSS](*given)
