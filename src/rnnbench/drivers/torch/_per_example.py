"""Part of the torch layer: the per_example mode (rnnbench.modes), each example's gradient of its own
loss by torch.func.vmap of torch.func.grad_and_value over the batch, and the two other roads to the same
gradients that a row times beside it (rnnbench.modes.ROADS): a loop over the examples, and the
batched-loss trick (per-example copies of the shared inputs, one backward of the summed loss)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
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
    _: KW_ONLY
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
    each = _PerExample(loss_fn, inputs, wrt, batch)
    roads = {
        PER_EXAMPLE: RoadProgram(lambda: each.vmapped(each.examples())[1], each.read),
        PER_EXAMPLE_LOOP: RoadProgram(each.loop, each.read),
        PER_EXAMPLE_BATCHED_LOSS: RoadProgram(each.batched_loss, each.read),
    }
    return each.call, roads


class _PerExample:
    """The per-example programs of one prepared loss (per_example_mode), built on first call: a compile
    belongs to the row that runs it."""

    def __init__(self, loss_fn: Callable[[dict[str, Any]], Any], inputs: dict, wrt: list[str], batch: Batch):
        self.plain, self.compile_like = eager_and_compile_like(loss_fn)
        self.inputs, self.wrt, self.batch = inputs, wrt, batch
        self.made: dict[str, Callable[..., Any]] = {}

    def examples(self) -> _Examples:
        lay = batch_layout(self.batch.model, self.batch.case)
        assert not isinstance(lay, str), lay  # rows.pair asks batch.unavailable before it runs this mode
        rest = [n for n in self.inputs if n not in self.wrt]
        names, consts = [*self.wrt, *rest], list(lay.consts)
        axes = [lay.inputs.get(n) for n in names] + [lay.consts[k] for k in consts]
        values = [self.inputs[n].detach() for n in names] + [self.batch.consts[k] for k in consts]
        args = [v if a is None else v.unsqueeze(a + 1) for v, a in zip(values, axes)]
        size = next(v.shape[a] for v, a in zip(values, axes) if a is not None)
        return _Examples(names, consts, axes=axes, args=args, size=size)

    def one_of(self, ex: _Examples) -> Callable[..., Any]:
        """The loss of one example's slice, as a function of every argument of `ex` (inputs, then consts)."""

        def one(*given: Any) -> Any:
            kept = {k: self.batch.consts[k] for k in ex.consts}
            self.batch.consts.update(zip(ex.consts, given[len(ex.names) :]))
            try:
                return self.plain(dict(zip(ex.names, given[: len(ex.names)])))
            finally:
                self.batch.consts.update(kept)

        return one

    def vmapped(self, ex: _Examples) -> Any:
        import torch

        if PER_EXAMPLE not in self.made:
            one = self.one_of(ex)
            fn = torch.func.vmap(
                torch.func.grad_and_value(lambda *g: (lambda loss: (loss, loss.detach()))(one(*g)),
                                          argnums=tuple(range(len(self.wrt))), has_aux=True),
                in_dims=tuple(ex.axes),
            )  # fmt: skip
            self.made[PER_EXAMPLE] = fn if self.compile_like is None else self.compile_like(fn)
        grads, (losses, _) = self.made[PER_EXAMPLE](*ex.args)
        return losses, grads

    def call(self) -> tuple[np.ndarray, dict[str, np.ndarray | None]]:
        losses, grads = self.vmapped(self.examples())
        return _numpy(losses), {n: _numpy(g) for n, g in zip(self.wrt, grads)}

    def loop(self) -> Any:
        """Each example's slice (B = 1, its batch axis kept) differentiated in turn by torch.autograd.grad."""
        import torch

        ex = self.examples()
        one, k = self.one_of(ex), len(self.wrt)
        out: list[list[Any]] = [[] for _ in self.wrt]
        for b in range(ex.size):
            given = [v if a is None else v.select(a, b) for v, a in zip(ex.args, ex.axes)]
            leaves = [g.detach().requires_grad_() for g in given[:k]]
            grads = torch.autograd.grad(one(*leaves, *given[k:]), leaves, allow_unused=True)
            for kept, g, leaf in zip(out, grads, leaves):
                kept.append(torch.zeros_like(leaf) if g is None else g)
        return [torch.stack(g) for g in out]

    def batched_loss(self) -> Any:
        """Per-example copies of the shared compared inputs (expanded to B), the batched ones as they
        are; the forward vmapped over the examples, their losses summed, one backward."""
        import torch

        ex = self.examples()
        one, k = self.one_of(ex), len(self.wrt)
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

    def read(self, result: Any) -> dict[str, np.ndarray]:
        return {n: _numpy(g) for n, g in zip(self.wrt, result)}


def _numpy(t) -> np.ndarray:
    return t.detach().to("cpu").double().numpy(force=True)
