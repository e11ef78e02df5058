"""Part of the torch layer: the per_example mode (rnnbench.modes), each example's gradient of its own
loss by torch.func.vmap of torch.func.grad_and_value over the batch, and the two other roads to the same
gradients that a row times beside it (rnnbench.modes.ROADS): a loop over the examples, and the
batched-loss trick (per-example copies of the shared inputs, one backward of the summed loss)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rnnbench.drivers.base import Batch, RoadProgram
from rnnbench.drivers.torch._compile import eager_and_compile_like
from rnnbench.model import batch_layout
from rnnbench.modes import PER_EXAMPLE, PER_EXAMPLE_BATCHED_LOSS, PER_EXAMPLE_LOOP


@dataclass(frozen=True)
class _Examples:
    """The per-example view of one call: names (compared inputs first, then the rest), the batched
    consts' keys, each argument's batch axis (None: shared) and the arguments, each batched array with
    a size-1 axis after its batch axis (so one example's slice is its own B = 1 case)."""

    names: list[str]
    consts: list[str]
    axes: list[int | None]
    args: list[Any]
    size: int  # B


def per_example_mode(
    loss_fn: Callable[[dict[str, Any]], Any], inputs: dict[str, Any], wrt: list[str], batch: Batch
) -> tuple[Callable[[], tuple[np.ndarray, dict[str, np.ndarray | None]]], dict[str, RoadProgram]]:
    """(the per_example mode's call, its roads). The mode (rnnbench.modes): torch.func.vmap(
    torch.func.grad_and_value(one)) over the batch, `one` the loss of one example's slice as a pure
    function of every input and of the batched consts. Each batched array enters with a size-1 axis
    after its batch axis, so the slice vmap hands `one` is that example's own case (B = 1), the shape
    every step is written for; the consts are put in the dict loss_fn reads for the call and put back
    after. The call returns (losses (B,), {name: (B, *shape in one example)}). Under a compiled driver
    the transform is compiled, as functional_modes does. The roads: the same program (per_example), a
    loop over the examples (per_example_loop) and the batched-loss trick (per_example_batched_loss)."""
    import torch

    plain, compile_like = eager_and_compile_like(loss_fn)
    made: dict[str, Callable[..., Any]] = {}  # built on first call: a compile belongs to the row that runs it

    def examples() -> _Examples:
        lay = batch_layout(batch.model, batch.case)
        assert not isinstance(lay, str), lay  # rows.pair asks batch.unavailable before it runs this mode
        rest = [n for n in inputs if n not in wrt]
        names, consts = [*wrt, *rest], list(lay.consts)
        axes = [lay.inputs.get(n) for n in names] + [lay.consts[k] for k in consts]
        values = [inputs[n].detach() for n in names] + [batch.consts[k] for k in consts]
        args = [v if a is None else v.unsqueeze(a + 1) for v, a in zip(values, axes)]
        size = next(v.shape[a] for v, a in zip(values, axes) if a is not None)
        return _Examples(names, consts, axes, args, size)

    def one_of(ex: _Examples) -> Callable[..., Any]:
        def one(*given: Any) -> Any:
            kept = {k: batch.consts[k] for k in ex.consts}
            batch.consts.update(zip(ex.consts, given[len(ex.names) :]))
            try:
                return plain(dict(zip(ex.names, given[: len(ex.names)])))
            finally:
                batch.consts.update(kept)

        return one

    def vmapped(ex: _Examples) -> Any:
        if PER_EXAMPLE not in made:
            one = one_of(ex)
            fn = torch.func.vmap(
                torch.func.grad_and_value(lambda *g: (lambda loss: (loss, loss.detach()))(one(*g)),
                                          argnums=tuple(range(len(wrt))), has_aux=True),
                in_dims=tuple(ex.axes),
            )  # fmt: skip
            made[PER_EXAMPLE] = fn if compile_like is None else compile_like(fn)
        grads, (losses, _) = made[PER_EXAMPLE](*ex.args)
        return losses, grads

    def call() -> tuple[np.ndarray, dict[str, np.ndarray | None]]:
        losses, grads = vmapped(examples())
        return _numpy(losses), {n: _numpy(g) for n, g in zip(wrt, grads)}

    def loop() -> Any:
        """Each example's slice (B = 1, its batch axis kept) differentiated in turn by torch.autograd.grad."""
        ex = examples()
        one = one_of(ex)
        out: list[list[Any]] = [[] for _ in wrt]
        for b in range(ex.size):
            given = [v if a is None else v.select(a, b) for v, a in zip(ex.args, ex.axes)]
            leaves = [g.detach().requires_grad_() for g in given[: len(wrt)]]
            grads = torch.autograd.grad(one(*leaves, *given[len(wrt) :]), leaves, allow_unused=True)
            for kept, g, leaf in zip(out, grads, leaves):
                kept.append(torch.zeros_like(leaf) if g is None else g)
        return [torch.stack(g) for g in out]

    def batched_loss() -> Any:
        """Per-example copies of the shared compared inputs (expanded to B), the batched ones as they
        are; the forward vmapped over the examples, their losses summed, one backward."""
        ex = examples()
        one = one_of(ex)
        k = len(wrt)
        leaves = [
            (v.expand(ex.size, *v.shape) if a is None else v).detach().requires_grad_()
            for v, a in zip(ex.args[:k], ex.axes[:k])
        ]
        dims = tuple(0 if a is None else a for a in ex.axes[:k]) + tuple(ex.axes[k:])
        losses = torch.func.vmap(one, in_dims=dims)(*leaves, *ex.args[k:])
        grads = torch.autograd.grad(losses.sum(), leaves, allow_unused=True)
        return [
            torch.zeros_like(leaf) if g is None else g if a is None else g.movedim(a, 0)
            for g, leaf, a in zip(grads, leaves, ex.axes[:k])
        ]

    def read(result: Any) -> dict[str, np.ndarray]:
        return {n: _numpy(g) for n, g in zip(wrt, result)}

    roads = {
        PER_EXAMPLE: RoadProgram(lambda: vmapped(examples())[1], read),
        PER_EXAMPLE_LOOP: RoadProgram(loop, read),
        PER_EXAMPLE_BATCHED_LOSS: RoadProgram(batched_loss, read),
    }
    return call, roads


def _numpy(t) -> np.ndarray:
    return t.detach().to("cpu").double().numpy(force=True)
