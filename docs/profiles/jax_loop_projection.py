"""jax_loop with the model's input projection hoisted (as the model is written; what jax_loop does
since 2026-11-26) vs run per step inside the unrolled loop (what the scans' 2 MiB rule,
rnnbench.drivers.jax._framework.input_projection, chose before), vs the hand-written jit loop over
jnp.unstack of the idiomatic comparison. Elman RNN, float32, fwd+bwd, this process pinned to one
CPU; each round times 5 calls of each and keeps the fastest; prints medians over the rounds.

    SIZES='{"T": 256, "B": 32, "I": 128, "H": 256}' ROUNDS=11 .venv/bin/python docs/profiles/jax_loop_projection.py
"""
import json
import os
import statistics
import time

os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})

from rnnbench import registry  # noqa: E402
from rnnbench.drivers.jax import _framework as _jax  # noqa: E402
from rnnbench.drivers.jax import loop as jax_loop  # noqa: E402
from rnnbench.run import idiomatic  # noqa: E402

model = registry.get_model(os.environ.get("MODEL", "rnn"))
sizes = json.loads(os.environ.get("SIZES", '{"T": 128, "B": 32, "I": 128, "H": 256}'))
case = model.make_case(model.sizes_with_defaults(sizes), 0).rounded_to("float32")
saved, _jax.PROJECTION_PER_STEP_BYTES = _jax.PROJECTION_PER_STEP_BYTES, 0
per_step_model, settings = _jax.input_projection(model, case, "float32")
_jax.PROJECTION_PER_STEP_BYTES = saved
assert settings["input_projection"] == "per step", settings
prepared = {
    "jax_loop, projection hoisted": jax_loop.prepare("stack", model, case, "float32", "cpu"),
    "jax_loop, projection per step": jax_loop.prepare("stack", per_step_model, case, "float32", "cpu"),
    "jit loop over unstack (idiomatic)": idiomatic._jax_jit_loop(model, case, False),
}
for p in prepared.values():
    for _ in range(3):
        p.block(p.forward_backward())
times: dict[str, list[float]] = {k: [] for k in prepared}
for _ in range(int(os.environ.get("ROUNDS", 11))):
    for name, p in prepared.items():
        calls = []
        for _ in range(5):
            start = time.perf_counter()
            p.block(p.forward_backward())
            calls.append(time.perf_counter() - start)
        times[name].append(min(calls))
base = statistics.median(times["jit loop over unstack (idiomatic)"])
print(f"{model.name} {sizes} float32, one CPU, {len(times[name])} rounds")
for name, values in times.items():
    median = statistics.median(values)
    print(f"{name:36s} {1e3 * median:7.2f} ms  / jit loop {median / base:.3f}  [{1e3 * min(values):.2f}-{1e3 * max(values):.2f}]")
