"""The jax framework layer: the jax and flax Framework objects and the plumbing their mechanisms share.

jax computes float32 unless x64 is enabled, so it is enabled before any array is made; matmul
precision is pinned to "highest" so GPU float32 matmuls do not silently drop to TF32/bf16 passes.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Optional

import numpy as np

from rnnbench.drivers.base import Framework, Prepared, flat_inputs
from rnnbench.model import Case, Model


def xla_thread_env(threads: int) -> dict[str, str]:
    """XLA's CPU client sizes its intra-op (Eigen) pool from the process's CPU affinity, not from
    OMP_NUM_THREADS or XLA_FLAGS: `--threads N` is made N cores by pinning each worker to N CPUs
    before jax is imported (rnnbench.run.worker.setup). Measured with jax 0.10.2 on a 2-core
    machine: unpinned, a jax.lax.scan LSTM's dots ran on two tf_XLAEigen threads even with
    --xla_cpu_multi_thread_eigen=false; pinned to one CPU, one such thread, and the flag changed the
    CPU time per call by nothing measurable. The flag stays at one thread (it asks the legacy
    runtime's dot emitter for no Eigen pool). There is no XLA flag for the pool's size: a bare
    `intra_op_parallelism_threads=1` in XLA_FLAGS is silently ignored, `--intra_op_parallelism_threads`
    is refused as unknown."""
    if threads != 1:
        return {}
    flags = os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
    return {"XLA_FLAGS": flags.strip()}


def device_missing(device: str) -> Optional[str]:
    if device != "cuda":
        return None
    import jax

    try:
        jax.devices("gpu")
        return None
    except RuntimeError:
        return "no GPU backend visible to jax"


def jax_cold_cache_env(root: str) -> dict[str, str]:
    """jax's persistent compilation cache off."""
    return {"JAX_ENABLE_COMPILATION_CACHE": "false", "JAX_COMPILATION_CACHE_DIR": os.path.join(root, "jax")}


JAX = Framework(name="jax", module="jax", packages=("jax", "jaxlib", "numpy"), family="jax",
                thread_env=xla_thread_env, device_missing=device_missing, cold_cache_env=jax_cold_cache_env)
FLAX = Framework(name="flax", module="flax", packages=("flax", "jax", "jaxlib"), family="jax",
                 thread_env=xla_thread_env, device_missing=device_missing, cold_cache_env=jax_cold_cache_env)

SETTINGS = {"jax_enable_x64": True, "jax_default_matmul_precision": "highest"}


def configure() -> None:
    import jax

    for key, value in SETTINGS.items():
        jax.config.update(key, value)


def device_for(device: str):
    import jax

    return jax.devices("gpu" if device == "cuda" else "cpu")[0]


def model_arrays(model: Model, case: Case, dtype: str, device: str):
    """(differentiated inputs, other inputs, consts) as jax arrays by canonical name."""
    import jax
    import jax.numpy as jnp

    configure()
    dev = device_for(device)
    jdtype = {"float64": jnp.float64, "float32": jnp.float32, "bfloat16": jnp.bfloat16}[dtype]
    wrt = case.wrt_names(model.carry_names)

    def put(arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
        return {k: jax.device_put(jnp.asarray(v, dtype=jdtype), dev) for k, v in arrays.items()}

    flat = flat_inputs(model, case)
    diff = put({k: v for k, v in flat.items() if k in wrt})
    rest = put({k: v for k, v in flat.items() if k not in wrt})
    return diff, rest, put(case.consts)


def prepared_from_loss(loss_fn: Callable[[dict, dict], Any], diff: dict, rest: dict, settings: Mapping[str, Any]) -> Prepared:
    """Prepared for loss_fn(diff, rest) -> scalar: jit of the loss (forward) and of
    value_and_grad w.r.t. `diff` (forward+backward). The first call traces and compiles."""
    import jax

    forward_jit = jax.jit(loss_fn)
    value_and_grad = jax.jit(jax.value_and_grad(loss_fn))

    def loss_and_grads():
        loss, grads = jax.block_until_ready(value_and_grad(diff, rest))
        return float(loss), {k: np.asarray(v, dtype=np.float64) for k, v in grads.items()}

    @jax.jit
    def hvp_jit(diff, rest, v):
        return jax.jvp(lambda d: jax.grad(loss_fn)(d, rest), (diff,), (v,))[1]

    def hvp(v: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """H v as forward-over-reverse (jvp of grad)."""
        direction = {k: jax.numpy.asarray(v[k], dtype=diff[k].dtype) for k in diff}
        out = jax.block_until_ready(hvp_jit(diff, rest, direction))
        return {k: np.asarray(h, dtype=np.float64) for k, h in out.items()}

    return Prepared(
        loss_and_grads,
        lambda: forward_jit(diff, rest),
        lambda: value_and_grad(diff, rest),
        jax.block_until_ready,
        {**SETTINGS, **settings},
        hvp,
    )
