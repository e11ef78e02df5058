"""Where a Python loop under jax.jit (jax_loop's mechanism) loses to lax.scan on the Elman RNN.

    python docs/profiles/jax_unrolled_loop.py [T]

Standalone (jax only). RNN B=32, I=128, H=256, float32, pinned to one CPU. For the unrolled loop and
lax.scan of the same cell: fwd+bwd and forward medians (interleaved), fwd+bwd without the W_hh
gradient, XLA's temporary memory, and the optimized program's dots (count, shape, which dimension
of W_hh they contract).
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections import Counter

os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

T = int(sys.argv[1]) if len(sys.argv) > 1 else 128
B, I, H = 32, 128, 256
rng = np.random.default_rng(0)
p = {"W_ih": rng.standard_normal((H, I), np.float32) / I**0.5, "W_hh": rng.standard_normal((H, H), np.float32) / H**0.5,
     "b": np.zeros(H, np.float32), "xs": rng.standard_normal((T, B, I), np.float32), "h0": np.zeros((B, H), np.float32)}
wy = rng.standard_normal((T, B, H), np.float32)


def loop(p):
    xp, W_hh_t, h, ys = p["xs"] @ p["W_ih"].T + p["b"], p["W_hh"].T, p["h0"], []
    for x in jnp.unstack(xp):
        h = jnp.tanh(x + h @ W_hh_t)
        ys.append(h)
    return jnp.sum(jnp.stack(ys) * wy)


def lax_scan(p):
    xp, W_hh_t = p["xs"] @ p["W_ih"].T + p["b"], p["W_hh"].T

    def cell(h, x):
        h = jnp.tanh(x + h @ W_hh_t)
        return h, h

    return jnp.sum(jax.lax.scan(cell, p["h0"], xp)[1] * wy)


def without_w_hh_grad(loss):
    def f(q):
        return loss({**q, "W_hh": p["W_hh"]})
    return f


q = {k: v for k, v in p.items() if k != "W_hh"}
programs = {}
for name, loss in (("loop", loop), ("lax.scan", lax_scan)):
    programs[f"{name} fwd+bwd"] = (jax.jit(jax.value_and_grad(loss)), p)
    programs[f"{name} fwd+bwd, no dW_hh"] = (jax.jit(jax.value_and_grad(without_w_hh_grad(loss))), q)
    programs[f"{name} fwd"] = (jax.jit(loss), p)
samples: dict[str, list[float]] = {k: [] for k in programs}
for fn, args in programs.values():
    jax.block_until_ready(fn(args))
for _ in range(15):
    for key, (fn, args) in programs.items():
        start = time.perf_counter()
        jax.block_until_ready(fn(args))
        samples[key].append(time.perf_counter() - start)
print(f"jax {jax.__version__}, RNN T={T} B={B} I={I} H={H}, float32, 1 CPU; medians of 15, interleaved")
for key, (fn, args) in programs.items():
    compiled = fn.lower(args).compile()
    print(f"  {key:28s} {np.median(samples[key]) * 1e3:7.2f} ms   XLA temp {compiled.memory_analysis().temp_size_in_bytes / 2**20:5.1f} MiB")
for name, loss in (("loop", loop), ("lax.scan", lax_scan)):
    text = jax.jit(jax.value_and_grad(loss)).lower(p).compile().as_text()
    dots = Counter(re.findall(r"= (f32\[[0-9,]*\])\{[^}]*\} dot\(", text))
    contract = Counter(re.findall(r"dot\([^)]*\), lhs_contracting_dims=\{\d\}, rhs_contracting_dims=\{(\d)\}", text))
    print(f"  {name}: dots in the optimized fwd+bwd program by result shape {dict(dots)}; rhs contracting dim {dict(contract)}")
