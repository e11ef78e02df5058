"""Part of the torch layer: the ops a call dispatches, counted (dispatch_count), and the per-op price
of dispatching them, measured on a trivial op (dispatch_floors): Framework.dispatch_count and
Framework.dispatch_floors, which rnnbench.machine.binding multiplies into a row's dispatch bound.

What is counted: the aten ops torch's profiler records over one blocked call whose parent event is
not itself an aten op (an op entered from Python, from the autograd engine or from a compiled
program's wrapper: each one pays the dispatcher's entry once; an op an aten op calls inside it does
not pay it again), under "torch_eager"; and the compiled programs the call runs (inductor's
`## Call CompiledFxGraph` events: a forward and a backward graph per compiled training step) under
"torch_compiled". Both floors are measured the way rows are counted (see dispatch_floors).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

CHAIN = 64  # trivial ops per timed call of the eager floor: long enough that the call's own entry is small
CALLS = 50  # compiled trivial calls per timed batch
REPEATS = 7  # timed batches; the fastest is the floor (a disturbed batch is only ever slower)
COMPILED_GRAPH = "## Call CompiledFxGraph"


def _events(fn: Callable[[], Any], block: Callable[[Any], None]) -> list[Any]:
    """The profiler's events of one blocked call of fn. torch.autograd.profiler's own profile, not
    torch.profiler's wrapper: the same event tree, and its first use imports no compiler stack (the
    wrapper's did: seconds in an eager row's worker)."""
    from torch.autograd.profiler import profile

    with profile(use_cpu=True) as prof:
        block(fn())
    return list(prof.function_events)


def dispatch_count(fn: Callable[[], Any], block: Callable[[Any], None]) -> dict[str, int]:
    """{floor name: how many of its dispatches one blocked call of fn makes} (module docstring):
    {"torch_eager": outer aten ops, "torch_compiled": compiled programs run}. Call it after a warm
    call: a first call would count a compile's ops."""
    eager = compiled = 0
    for event in _events(fn, block):
        if event.name.startswith(COMPILED_GRAPH):
            compiled += 1
        elif event.name.startswith("aten::"):
            parent = event.cpu_parent
            eager += not (parent is not None and parent.name.startswith("aten::"))
    return {"torch_eager": eager, "torch_compiled": compiled}


def _fastest(call: Callable[[], None], per: int) -> float:
    """µs per unit of the fastest of REPEATS timed calls, each doing `per` units, after a warm-up."""
    call()
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best / per * 1e6


def dispatch_floors(device: str = "cpu") -> dict[str, float]:
    """µs per dispatch, on `device`, at one element (so the op's arithmetic is nothing):
    torch_eager: a forward+backward of CHAIN dependent `y * 1.5` ops on a (1,) tensor that requires
        grad, divided by its ops as dispatch_count counts them (forward ops, the autograd engine's
        backward ops, the gradient's accumulation): the price of one counted op;
    torch_compiled: one call of torch.compile(lambda x: x * 1.5) (inductor) on a (1,) tensor without
        grad: the price of entering a compiled program (guards, its wrapper, one kernel)."""
    import torch

    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    x = torch.ones(1, device=device, requires_grad=True)

    def chain() -> torch.Tensor:
        y = x
        for _ in range(CHAIN):
            y = y * 1.5
        y.sum().backward()
        return y

    def eager_call() -> None:
        chain()
        sync()

    eager_call()  # warm: the autograd graph's first build and allocations
    ops = dispatch_count(chain, lambda _: sync())["torch_eager"]
    floors = {"torch_eager": _fastest(eager_call, max(ops, 1))}
    compiled = torch.compile(lambda t: t * 1.5, backend="inductor", fullgraph=True)
    plain = torch.ones(1, device=device)

    def compiled_calls() -> None:
        for _ in range(CALLS):
            compiled(plain)
        sync()

    floors["torch_compiled"] = _fastest(compiled_calls, CALLS)
    return floors
