"""Part of the torch layer: the per_example mode (rnnbench.modes), each example's gradient of its own
loss by torch.func.vmap of torch.func.grad_and_value over the batch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rnnbench.drivers.base import Batch
from rnnbench.drivers.torch._compile import eager_and_compile_like
from rnnbench.model import batch_layout


def per_example_mode(
    loss_fn: Callable[[dict[str, Any]], Any], inputs: dict[str, Any], wrt: list[str], batch: Batch
) -> Callable[[], tuple[np.ndarray, dict[str, np.ndarray | None]]]:
    """The per_example mode (rnnbench.modes): torch.func.vmap(torch.func.grad_and_value(one)) over the
    batch, `one` the loss of one example's slice as a pure function of every input and of the batched
    consts. Each batched array enters with a size-1 axis after its batch axis, so the slice vmap hands
    `one` is that example's own case (B = 1), the shape every step is written for; the consts are put
    in the dict loss_fn reads for the call and put back after. Returns (losses (B,), {name: (B, *shape in
    one example)}). Under a compiled driver the transform is compiled, as functional_modes does."""
    import torch

    plain, compile_like = eager_and_compile_like(loss_fn)
    made: list[Callable[..., Any]] = []  # built on first call: a compile belongs to the mode's row

    def call() -> tuple[np.ndarray, dict[str, np.ndarray | None]]:
        lay = batch_layout(batch.model, batch.case)
        assert not isinstance(lay, str), lay  # rows.pair asks batch.unavailable before it runs this mode
        rest = [n for n in inputs if n not in wrt]
        names, consts = [*wrt, *rest], list(lay.consts)
        axes = [lay.inputs.get(n) for n in names] + [lay.consts[k] for k in consts]
        values = [inputs[n].detach() for n in names] + [batch.consts[k] for k in consts]
        args = [v if a is None else v.unsqueeze(a + 1) for v, a in zip(values, axes)]
        if not made:

            def one(*given: Any) -> tuple[Any, Any]:
                kept = {k: batch.consts[k] for k in consts}
                batch.consts.update(zip(consts, given[len(names) :]))
                try:
                    loss = plain(dict(zip(names, given[: len(names)])))
                finally:
                    batch.consts.update(kept)
                return loss, loss.detach()

            fn = torch.func.vmap(
                torch.func.grad_and_value(one, argnums=tuple(range(len(wrt))), has_aux=True), in_dims=tuple(axes)
            )
            if compile_like is not None:
                fn = compile_like(fn)
            made.append(fn)
        grads, (losses, _) = made[0](*args)
        return _numpy(losses), {n: _numpy(g) for n, g in zip(wrt, grads)}

    return call


def _numpy(t) -> np.ndarray:
    return t.detach().to("cpu").double().numpy(force=True)
