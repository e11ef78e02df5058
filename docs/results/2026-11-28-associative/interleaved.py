"""The ratio of sequential to associative fwd+bwd time on a loaded machine: each length's
mechanisms timed in one process, round by round in turn (A, B, C, A, B, C, ...), so that the load
of the moment falls on all of them alike; the median of the rounds. mingru, B=4, I=H=64, float32,
one thread. jax's associative program is not compiled at T=4096 (its compile alone outlasted the
sweep's budget at that length).

Run: python interleaved.py > interleaved.txt (in the repository's main environment).
"""

from __future__ import annotations

import statistics
import sys
import time

from rnnbench import registry
from rnnbench.drivers.base import unflatten
from rnnbench.model import combine_linear, linear_recurrence_inputs, loop_recur, run_forward
from rnnbench.ops import jax_ops, torch_ops

LENGTHS = (64, 256, 1024, 4096)
ROUNDS = 9
model = registry.models()["mingru"]


def case_at(T: int):
    return model.make_case(model.sizes_with_defaults({"T": T, "B": 4, "I": 64, "H": 64}), 0)


def torch_fns(T: int) -> dict:
    import torch
    from torch._higher_order_ops.associative_scan import associative_scan

    torch.set_num_threads(1)
    case, ops = case_at(T), torch_ops()
    inputs = {k: torch.tensor(v, dtype=torch.float32, requires_grad=True) for k, v in case.params.items()}
    inputs["carry0.h"] = torch.tensor(case.carry0[0], dtype=torch.float32, requires_grad=True)
    inputs["xs"] = torch.tensor(case.xs, dtype=torch.float32)
    consts = {k: torch.tensor(v, dtype=torch.float32) for k, v in case.consts.items()}

    def loop():
        params, carry0, xs = unflatten(model, case, inputs)
        ys, carry = run_forward(ops, model, params, carry0=carry0, xs=xs, length=T, recur=loop_recur(ops))
        model.loss(ops, consts, ys, carry).backward()

    def assoc():
        params, carry0, xs = unflatten(model, case, inputs)
        a, b = linear_recurrence_inputs(ops, model, params, carry0=carry0, xs=xs)
        _, hs = associative_scan(combine_linear, (a, b), dim=0, combine_mode="generic")
        model.loss(ops, consts, hs, (hs[-1],)).backward()

    return {"torch loop": loop, "torch associative": assoc}


def jax_fns(T: int) -> dict:
    import jax
    import jax.numpy as jnp

    case, ops = case_at(T), jax_ops()
    diff = {k: jnp.asarray(v, jnp.float32) for k, v in case.params.items()}
    diff["carry0.h"] = jnp.asarray(case.carry0[0], jnp.float32)
    rest = {"xs": jnp.asarray(case.xs, jnp.float32)}
    consts = {k: jnp.asarray(v, jnp.float32) for k, v in case.consts.items()}

    def scan_loss(unroll):
        def loss(diff, rest):
            params, carry0, xs = unflatten(model, case, {**diff, **rest})

            def recur(step, params, carry0, xs, length):
                c, ys = jax.lax.scan(lambda c, x: step(ops, params, c, x), tuple(carry0), xs, unroll=unroll)
                return ys, c

            ys, carry = run_forward(ops, model, params, carry0=carry0, xs=xs, length=T, recur=recur)
            return model.loss(ops, consts, ys, carry)

        return loss

    def assoc_loss(diff, rest):
        params, carry0, xs = unflatten(model, case, {**diff, **rest})
        a, b = linear_recurrence_inputs(ops, model, params, carry0=carry0, xs=xs)
        _, hs = jax.lax.associative_scan(combine_linear, (a, b), axis=0)
        return model.loss(ops, consts, hs, (hs[-1],))

    losses = {"jax lax.scan": scan_loss(1), "jax lax.scan unroll=8": scan_loss(8)}
    if T < 4096:
        losses["jax associative"] = assoc_loss
    out = {}
    for name, loss in losses.items():
        fn = jax.jit(jax.value_and_grad(loss))
        jax.block_until_ready(fn(diff, rest))  # compile outside the rounds
        out[name] = lambda fn=fn: jax.block_until_ready(fn(diff, rest))
    return out


if __name__ == "__main__":
    import jax

    jax.config.update("jax_enable_x64", True)
    for T in LENGTHS:
        fns = {**torch_fns(T), **jax_fns(T)}
        for fn in fns.values():
            fn()  # warm
        samples: dict[str, list[float]] = {name: [] for name in fns}
        for _ in range(ROUNDS):
            for name, fn in fns.items():
                start = time.perf_counter()
                fn()
                samples[name].append(time.perf_counter() - start)
        for name, s in samples.items():
            print(f"T={T:5d} {name:22s} median_ms={1e3 * statistics.median(s):10.3f} min_ms={1e3 * min(s):10.3f}")
        sys.stdout.flush()
