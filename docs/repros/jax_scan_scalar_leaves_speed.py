#!/usr/bin/env python
"""jax#40150: jax.grad through lax.scan whose carry is many scalar (0-d) leaves runs far slower on
XLA:CPU's thunk runtime (the default since jaxlib 0.4.32, the only one from jax 0.7.2: its opt-out
flag --xla_cpu_use_thunk_runtime=false is honoured up to 0.6.2) than under the old runtime.

The probe: rnnbench's scalar_leaves recurrence (LEAVES leaves in a ring, s_k' = tanh(w_k s_k +
u_k s_{k-1} + c_k), y_t = s_0') written twice with the same parameters: the carry as LEAVES 0-d
leaves, and the carry stacked into one (LEAVES,) array. Both run the same arithmetic and give the
same gradient (checked); jit(grad) of each is timed in interleaved rounds (the best of CALLS calls
each round, one CPU thread), and the ratio leaves / stacked is taken per round. Where per-leaf
work costs what its arithmetic costs, the two are close; the issue's runtime overhead per op makes
the leaves form many times slower.

Needs jax and numpy. Exits 1 when the leaves form is more than THRESHOLD times slower (every
quartile of the per-round ratio above it), 0 when it is not (every quartile at or below it), 3
when the rounds cannot decide (their quartiles straddle it) or the two gradients disagree.
THRESHOLD is 10, not 5: under the old runtime too the leaves form is a few times slower (32 scalar
chains cost more than one vector chain on any runtime), up to about 5x; under the thunk runtime it
was 14x and more (measured: docs/results/2026-12-07-jax-40150.md).
Run: python docs/repros/jax_scan_scalar_leaves_speed.py
The old runtime, on a jax that honours the flag:
     XLA_FLAGS=--xla_cpu_use_thunk_runtime=false python docs/repros/jax_scan_scalar_leaves_speed.py
"""

import os
import sys
import time
from importlib.metadata import version

# One CPU before jax starts (XLA sizes its thread pool from the affinity): a per-op cost is timed, not a pool.
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

LEAVES, T = 32, 614  # rnnbench's scalar_leaves; the scan length
ROUNDS, CALLS = 15, 5
THRESHOLD = 10.0

rng = np.random.default_rng(0)
w, u, c = (rng.uniform(-bound, bound, LEAVES).astype(np.float32) for bound in (0.9, 0.9, 0.5))
s0 = rng.uniform(-0.5, 0.5, LEAVES).astype(np.float32)
wy = rng.uniform(-1.0, 1.0, T).astype(np.float32)
wc = rng.uniform(-1.0, 1.0, LEAVES).astype(np.float32)
params = (jnp.asarray(w), jnp.asarray(u), jnp.asarray(c))


def loss_leaves(params, carry0):
    w, u, c = params

    def step(carry, _):
        new = tuple(jnp.tanh(w[k] * carry[k] + u[k] * carry[k - 1] + c[k]) for k in range(LEAVES))
        return new, new[0]

    final, ys = jax.lax.scan(step, carry0, None, length=T)
    return jnp.sum(ys * wy) + sum(final[k] * wc[k] for k in range(LEAVES))


def loss_stacked(params, carry0):
    w, u, c = params

    def step(s, _):
        new = jnp.tanh(w * s + u * jnp.roll(s, 1) + c)  # roll(s, 1)[k] = s[k - 1]
        return new, new[0]

    final, ys = jax.lax.scan(step, carry0, None, length=T)
    return jnp.sum(ys * wy) + jnp.sum(final * wc)


def ready(tree):
    return jax.tree_util.tree_map(lambda x: x.block_until_ready(), tree)


forms = {
    "leaves": (jax.jit(jax.grad(loss_leaves)), tuple(jnp.asarray(v) for v in s0)),
    "stacked": (jax.jit(jax.grad(loss_stacked)), jnp.asarray(s0)),
}
grads, compile_s = {}, {}
for name, (fn, carry0) in forms.items():
    start = time.perf_counter()
    grads[name] = np.concatenate([np.asarray(g) for g in ready(fn(params, carry0))])
    compile_s[name] = time.perf_counter() - start
    ready(fn(params, carry0))  # a second warm-up call

best: dict[str, list[float]] = {name: [] for name in forms}
for r in range(ROUNDS):
    for name in sorted(forms, reverse=bool(r % 2)):  # alternate which form goes first
        fn, carry0 = forms[name]
        times = []
        for _ in range(CALLS):
            start = time.perf_counter()
            ready(fn(params, carry0))
            times.append(time.perf_counter() - start)
        best[name].append(min(times))

ratios = np.array(best["leaves"]) / np.array(best["stacked"])
q1, med, q3 = np.percentile(ratios, [25, 50, 75])
err = float(np.max(np.abs(grads["leaves"] - grads["stacked"])) / np.max(np.abs(grads["stacked"])))
print(
    f"jax {jax.__version__}, jaxlib {version('jaxlib')}, numpy {np.__version__}, {jax.default_backend()}, "
    f"XLA_FLAGS={os.environ['XLA_FLAGS']!r}"
)
print(
    f"LEAVES={LEAVES} T={T}: jit(grad) first call (compile) leaves {compile_s['leaves']:.2f} s, "
    f"stacked {compile_s['stacked']:.2f} s; gradients agree to {err:.1e} (relative)"
)
for name in forms:
    print(f"  {name:8s} {1e3 * np.median(best[name]):9.3f} ms (median over {ROUNDS} rounds of the best of {CALLS})")
print(f"  leaves / stacked: {med:.1f}x [{q1:.1f}-{q3:.1f}] (median [quartiles] of the per-round ratio)")
if err > 1e-3:
    print("the two forms' gradients disagree: not the same computation, no verdict")
    sys.exit(3)
if q1 > THRESHOLD:
    print(f"reproduced: the leaves form is more than {THRESHOLD:g}x slower")
    sys.exit(1)
if q3 <= THRESHOLD:
    print(f"not reproduced: the leaves form is within {THRESHOLD:g}x")
    sys.exit(0)
print(f"cannot decide: the rounds' ratio straddles {THRESHOLD:g}x")
sys.exit(3)
