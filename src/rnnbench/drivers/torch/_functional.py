"""Part of the torch layer: the modes and roads besides backward() (rnnbench.modes): torch.func's jvp
(the gradient column by column, jacfwd) and grad_and_value, and the timed roads of forward mode: one
torch.func.jvp and one pass of torch.autograd.forward_ad's dual tensors along the seeded tangent."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rnnbench.drivers.base import RoadProgram, seeded_tangent
from rnnbench.drivers.torch._compile import eager_and_compile_like
from rnnbench.modes import FUNC, JVP, JVP_DUAL


def to_numpy(t) -> np.ndarray | None:
    # force: a gradient autograd knows is zero comes back as a ZeroTensor (H v through abs or relu), which
    # refuses a plain .numpy()
    return None if t is None else t.detach().to("cpu").double().numpy(force=True)


def functional_modes(
    loss_fn: Callable[[dict[str, Any]], Any], inputs: dict[str, Any], wrt: list[str]
) -> tuple[dict[str, Callable[[], tuple[float, dict[str, np.ndarray | None]]]], dict[str, RoadProgram]]:
    """(the first-order modes besides backward() (rnnbench.modes), each -> (loss, {name: gradient}),
    their timed roads (rnnbench.modes.ROADS)). The modes: jvp, forward mode column by column
    (torch.func.jacfwd: jvp vmapped over every input entry's unit tangent); func,
    torch.func.grad_and_value. The roads: jvp, one torch.func.jvp along the seeded tangent
    (rnnbench.drivers.base.seeded_tangent); jvp_dual, the same by torch.autograd.forward_ad's dual
    tensors through the loss function itself; func, the func mode's program. torch.func's take the loss
    as a pure function of the compared inputs (the others held as detached constants), as torch.func
    requires. Under a compiled driver the transform is compiled (torch.compile(torch.func.grad(f)),
    with the driver's compile settings): a transform of the compiled function is refused by dynamo,
    and compiling the transform is how users compose the two (pytorch#136662's composition)."""
    f = _Functional(loss_fn, inputs, wrt)
    modes = {JVP: lambda: f.derivatives(JVP), FUNC: lambda: f.derivatives(FUNC)}
    along = lambda out: {"jvp": np.atleast_1d(to_numpy(out[1]))}  # noqa: E731
    roads = {
        JVP: RoadProgram(f.jvp, along),
        JVP_DUAL: RoadProgram(f.dual, along),
        FUNC: RoadProgram(f.func, lambda grads: {n: to_numpy(g) for n, g in zip(wrt, grads)}),
    }
    return modes, roads


class _Functional:
    """The programs of functional_modes for one prepared loss, each built on first call: a compile
    belongs to the row that runs it."""

    def __init__(self, loss_fn: Callable[[dict[str, Any]], Any], inputs: dict[str, Any], wrt: list[str]):
        import torch

        self.loss_fn, self.inputs, self.wrt = loss_fn, inputs, wrt
        self.plain, self.compile_like = eager_and_compile_like(loss_fn)
        self.held = {k: v.detach() if torch.is_tensor(v) else v for k, v in inputs.items()}
        self.made: dict[str, Any] = {}

    def pure(self, *values: Any) -> tuple[Any, Any]:
        loss = self.plain({**self.held, **dict(zip(self.wrt, values))})
        return loss, loss.detach()

    def compiled(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        return fn if self.compile_like is None else self.compile_like(fn)

    def primals(self) -> tuple[Any, ...]:
        return tuple(self.inputs[n].detach() for n in self.wrt)

    def tangents(self) -> tuple[Any, ...]:
        import torch

        if "tangents" not in self.made:
            tangent = seeded_tangent({n: tuple(self.inputs[n].shape) for n in self.wrt})
            self.made["tangents"] = tuple(
                torch.as_tensor(tangent[n], dtype=self.inputs[n].dtype, device=self.inputs[n].device) for n in self.wrt
            )
        return self.made["tangents"]

    def transform(self, mode: str) -> Callable[..., Any]:
        import torch

        if mode not in self.made:
            transform = torch.func.jacfwd if mode == JVP else torch.func.grad_and_value
            self.made[mode] = self.compiled(transform(self.pure, argnums=tuple(range(len(self.wrt))), has_aux=True))
        return self.made[mode]

    def derivatives(self, mode: str) -> tuple[float, dict[str, np.ndarray | None]]:
        grads, loss = self.transform(mode)(*self.primals())
        if isinstance(loss, tuple):  # grad_and_value's value is (output, aux)
            loss = loss[1]
        return float(loss), {n: to_numpy(g) for n, g in zip(self.wrt, grads)}

    def jvp(self) -> Any:
        """One torch.func.jvp along the seeded tangent: (loss, d loss along it)."""
        import torch

        if "jvp_road" not in self.made:
            tangents = self.tangents()
            self.made["jvp_road"] = self.compiled(
                lambda *values: torch.func.jvp(lambda *v: self.pure(*v)[0], values, tangents)
            )
        return self.made["jvp_road"](*self.primals())

    def dual(self) -> Any:
        """One forward-mode pass along the seeded tangent by dual tensors through the loss function itself
        (compiled where the driver compiles): (loss, d loss along it)."""
        import torch.autograd.forward_ad as fwad

        tangents = self.tangents()
        with fwad.dual_level():
            duals = {n: fwad.make_dual(p, t) for n, p, t in zip(self.wrt, self.primals(), tangents)}
            return tuple(fwad.unpack_dual(self.loss_fn({**self.held, **duals})))

    def func(self) -> Any:
        """torch.func.grad_and_value's gradients (the func mode's program)."""
        return self.transform(FUNC)(*self.primals())[0]
