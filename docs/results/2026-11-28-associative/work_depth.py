"""Work against depth of the three ways to run mingru's linear recurrence h_t = a_t h_{t-1} + b_t
(B=4, I=H=64, float32, fwd+bwd): the same loss as the drivers compute it.

- jax (lax.scan, unroll=8, lax.associative_scan): XLA's own cost analysis of the lowered fwd+bwd
  program (flops, bytes accessed) and the number of HLO instructions, plus the while loops' trip
  counts (the sequential depth).
- torch eager (Python loop of the step, generic associative_scan): the aten ops one fwd+bwd
  dispatches (torch.profiler), their count and summed self CPU time, and the elementwise work of
  the combine function (elements it is applied to, counted by wrapping it).

Run: python work_depth.py > work_depth.txt (in the repository's main environment).
"""

from __future__ import annotations

import sys

from rnnbench import registry
from rnnbench.drivers.base import unflatten
from rnnbench.model import combine_linear, linear_recurrence_inputs, loop_recur, run_forward
from rnnbench.ops import jax_ops, torch_ops

LENGTHS = (64, 256, 1024, 4096)
model = registry.models()["mingru"]


def jax_costs(T: int) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    case = model.make_case(model.sizes_with_defaults({"T": T, "B": 4, "I": 64, "H": 64}), 0)
    ops = jax_ops()
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

    for name, fn in (("lax.scan", scan_loss(1)), ("lax.scan unroll=8", scan_loss(8)), ("associative", assoc_loss)):
        lowered = jax.jit(jax.value_and_grad(fn)).lower(diff, rest)
        cost = lowered.cost_analysis() or {}
        text = lowered.as_text()
        instructions = sum(1 for line in text.splitlines() if " = " in line and "stablehlo." in line)
        whiles = text.count("stablehlo.while")
        print(
            f"jax   T={T:5d} {name:18s} flops={cost.get('flops', float('nan')):.4g} "
            f"bytes={cost.get('bytes accessed', float('nan')):.4g} stablehlo_ops={instructions} while_loops={whiles}"
        )


def torch_costs(T: int) -> None:
    import torch
    from torch._higher_order_ops.associative_scan import associative_scan

    torch.set_num_threads(1)
    case = model.make_case(model.sizes_with_defaults({"T": T, "B": 4, "I": 64, "H": 64}), 0)
    ops = torch_ops()
    inputs = {k: torch.tensor(v, dtype=torch.float32, requires_grad=True) for k, v in case.params.items()}
    inputs["carry0.h"] = torch.tensor(case.carry0[0], dtype=torch.float32, requires_grad=True)
    inputs["xs"] = torch.tensor(case.xs, dtype=torch.float32)
    consts = {k: torch.tensor(v, dtype=torch.float32) for k, v in case.consts.items()}
    combined = [0]

    def counted(left, right):
        combined[0] += left[0].numel()
        return combine_linear(left, right)

    def loop_loss():
        params, carry0, xs = unflatten(model, case, inputs)
        ys, carry = run_forward(ops, model, params, carry0=carry0, xs=xs, length=T, recur=loop_recur(ops))
        return model.loss(ops, consts, ys, carry)

    def assoc_loss():
        params, carry0, xs = unflatten(model, case, inputs)
        a, b = linear_recurrence_inputs(ops, model, params, carry0=carry0, xs=xs)
        _, hs = associative_scan(counted, (a, b), dim=0, combine_mode="generic")
        return model.loss(ops, consts, hs, (hs[-1],))

    for name, fn in (("loop", loop_loss), ("associative", assoc_loss)):
        fn().backward()  # warm
        combined[0] = 0
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            fn().backward()
        events = [e for e in prof.key_averages() if e.key.startswith("aten::")]
        calls = sum(e.count for e in events)
        self_ms = sum(e.self_cpu_time_total for e in events) / 1e3
        print(
            f"torch T={T:5d} {name:18s} aten_calls={calls} aten_self_cpu_ms={self_ms:.1f} "
            f"combine_elements={combined[0]} (B*H*T={4 * 64 * T})"
        )


if __name__ == "__main__":
    for T in LENGTHS:
        torch_costs(T)
        jax_costs(T)
        sys.stdout.flush()
