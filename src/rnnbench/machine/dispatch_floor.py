"""The per-call dispatch floor of each framework: µs to dispatch one trivial op (eager) or call one
trivial compiled program, measured by the framework layer (Framework.dispatch_floors: torch eager and
torch.compile'd, jax eager and jax.jit'd; each says how) in the ceilings' measuring process
(rnnbench.machine.ceilings). A row's dispatch bound is its counted dispatches (Framework.dispatch_count)
times these floors (rnnbench.machine.binding)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rnnbench import registry

FLOOR_METHOD = (
    "each framework's trivial op at one element, fastest of 7 timed batches: torch_eager µs per counted op "
    "of a forward+backward chain of 64 `y * 1.5` (counted as rows are: torch.profiler's outer aten ops); "
    "torch_compiled µs per call of torch.compile(lambda x: x * 1.5) (inductor, no grad); jax_eager µs per "
    "lax.neg outside jit, jax_jit µs per jax.jit(lambda x: x * 1.5) call, 200 dependent calls waited once"
)


def floor_frameworks(frameworks: Iterable[Any] | None = None) -> list[Any]:
    """The frameworks whose floors are measured: each distinct dispatch_floors once (flax's is jax's)."""
    out, seen = [], set()
    for fw in frameworks if frameworks is not None else registry.frameworks().values():
        if fw.dispatch_floors is not None and id(fw.dispatch_floors) not in seen:
            seen.add(id(fw.dispatch_floors))
            out.append(fw)
    return out


def measure_floors(device: str = "cpu", frameworks: Iterable[Any] | None = None) -> dict[str, Any]:
    """In this process: {"dispatch_us": {floor name: µs}, "errors": {framework: why it has none}}:
    one framework failing (not installed, no such device) leaves the others' floors."""
    floors: dict[str, float] = {}
    errors: dict[str, str] = {}
    for fw in floor_frameworks(frameworks):
        why = fw.available() or fw.device_missing(device)
        if why:
            errors[fw.name] = why
            continue
        try:
            floors.update(fw.dispatch_floors(device))
        except Exception as exc:  # one framework failing leaves the others' floors
            errors[fw.name] = f"{type(exc).__name__}: {exc}"[:300]
    return {"dispatch_us": floors, "errors": errors}
