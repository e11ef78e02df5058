"""Part of the jax layer: the calls a row's step dispatches, counted (dispatch_count), and the price
of one, measured on a trivial op (dispatch_floors): Framework.dispatch_count and
Framework.dispatch_floors, which rnnbench.machine.binding multiplies into a row's dispatch bound.

What is counted: the equations at the top of the jaxpr of one call (jax.make_jaxpr traces every op
the call binds, on its captured arrays too): each top-level equation is one dispatch when the call
runs, a jit'd program ("jit"/"pjit" equations) under "jax_jit", any other primitive (an op run
eagerly, outside any jit) under "jax_eager". The program's own ops inside a jit are not dispatches:
XLA runs them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

CHAIN = 200  # dependent calls per timed batch: jax dispatches asynchronously, so a batch is waited for once
REPEATS = 7  # timed batches; the fastest is the floor (a disturbed batch is only ever slower)
JIT_PRIMITIVES = frozenset({"jit", "pjit"})


def dispatch_count(fn: Callable[[], Any], block: Callable[[Any], None]) -> dict[str, int]:
    """{floor name: top-level equations of fn's jaxpr of that kind} (module docstring). `block` is
    not called: tracing runs nothing."""
    import jax

    eqns = jax.make_jaxpr(lambda: fn())().eqns
    jit = sum(e.primitive.name in JIT_PRIMITIVES for e in eqns)
    return {"jax_jit": jit, "jax_eager": len(eqns) - jit}


def _fastest(step: Callable[[Any], Any], x0: Any) -> float:
    """µs per call of the fastest of REPEATS batches of CHAIN dependent calls of step, each batch
    waited for at its end, after a warm-up batch."""
    best = float("inf")
    for i in range(REPEATS + 1):
        start = time.perf_counter()
        y = x0
        for _ in range(CHAIN):
            y = step(y)
        y.block_until_ready()
        if i:  # the first batch compiles and warms
            best = min(best, time.perf_counter() - start)
    return best / CHAIN * 1e6


def dispatch_floors(device: str = "cpu") -> dict[str, float]:
    """µs per dispatch on `device`, at one element (the op's arithmetic is nothing), as CHAIN
    dependent calls waited for once (as a row's step chains its ops):
    jax_eager: lax.neg bound outside any jit (one primitive's cached executable per call);
    jax_jit: a jax.jit(lambda x: x * 1.5) program per call."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    dev = jax.devices("gpu" if device.startswith("cuda") else "cpu")[0]
    x = jax.device_put(jnp.ones((1,), dtype=jnp.float32), dev)
    jitted = jax.jit(lambda t: t * 1.5)
    return {"jax_eager": _fastest(lax.neg, x), "jax_jit": _fastest(jitted, x)}
