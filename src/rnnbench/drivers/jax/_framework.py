"""The jax framework layer: the jax and flax Framework objects and the plumbing their mechanisms share.

jax computes float32 unless x64 is enabled, so it is enabled before any array is made; matmul
precision is pinned to "highest" so GPU float32 matmuls do not silently drop to TF32/bf16 passes.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from rnnbench.drivers.base import (
    Batch,
    DeviceQueries,
    Framework,
    Prepared,
    ReproScript,
    flat_inputs,
)
from rnnbench.drivers.jax._dispatch import dispatch_count, dispatch_floors
from rnnbench.drivers.jax._forward import forward_mode, jvp_road
from rnnbench.drivers.jax._per_example import per_example_mode
from rnnbench.model import Case, Model, is_integer, numpy_dtype
from rnnbench.ops import numpy_ops


def xla_thread_env(threads: int) -> dict[str, str]:
    """XLA's CPU client sizes its intra-op (Eigen) pool from the process's CPU affinity, not from
    OMP_NUM_THREADS or XLA_FLAGS: `--threads N` is made N cores by pinning each worker to N CPUs
    before jax is imported (rnnbench.rows.worker.setup). XLA has no flag for the pool's size; at one
    thread --xla_cpu_multi_thread_eigen=false still asks the legacy runtime's dot emitter for no
    Eigen pool (what was measured: docs/measuring.md#threads-n-means-n-cores)."""
    if threads != 1:
        return {}
    flags = os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
    return {"XLA_FLAGS": flags.strip()}


def device_missing(device: str) -> str | None:
    if device != "cuda":
        return None
    import jax

    try:
        jax.devices("gpu")
        return None
    except RuntimeError:
        return "no GPU backend visible to jax"


def gpu_identity(device: str) -> dict[str, Any]:
    """The GPU as jax's backend sees it (rnnbench.machine.accelerator merges it into machine.accelerator)."""
    dev = device_for(device)
    stats = dev.memory_stats() or {}
    return {
        "jax_device_kind": dev.device_kind,
        "jax_platform_version": dev.client.platform_version,
        "compute_capability": getattr(dev, "compute_capability", None),
        "jax_bytes_limit_mb": round(stats["bytes_limit"] / 2**20) if "bytes_limit" in stats else None,
    }


def read_gpu_peak(device: str, prepared: Any) -> dict[str, Any]:
    """The backend's memory statistics (a peak since the process started: XLA's allocator has no
    reset) and, where the Prepared has it, the compiled step's own memory analysis."""
    stats = device_for(device).memory_stats() or {}
    out: dict[str, Any] = {"source": "jax Device.memory_stats and the compiled step's memory_analysis()"}
    if stats:
        out.update(
            peak_allocated_mb=stats.get("peak_bytes_in_use", 0) / 2**20,
            allocated_after_mb=stats.get("bytes_in_use", 0) / 2**20,
        )
    analysis = prepared.memory_analysis() if prepared is not None and prepared.memory_analysis else None
    if analysis:
        out["compiled"] = analysis
    out["meaning"] = (
        "peak_allocated_mb: XLA's allocator peak since the worker started (not resettable: earlier rows "
        "of this worker count too, an upper bound for this row; absent where the backend keeps no "
        "statistics); compiled: the fwd+bwd program's argument, output and temporary bytes as XLA "
        "planned them (this row's own figure)"
    )
    return out


def gpu_gemm(dtype: str, m: int, k: int, n: int, device: str) -> Callable[[], Any]:
    """One jitted (m, k) @ (k, n) matmul on `device`, waited for, at the rows' settings (float32 at
    "highest" precision: no TF32 passes; bfloat16 at its own precision)."""
    import jax
    import jax.numpy as jnp

    configure()
    dev = device_for(device)
    rng = np.random.default_rng(0)
    jdtype = {"float64": jnp.float64, "float32": jnp.float32, "bfloat16": jnp.bfloat16}[dtype]
    a, b = (jax.device_put(jnp.asarray(rng.standard_normal(shape), dtype=jdtype), dev) for shape in ((m, k), (k, n)))
    f = jax.jit(jnp.matmul)
    return lambda: f(a, b).block_until_ready()


def compiled_memory(fn: Any, *args: Any) -> dict[str, int]:
    """XLA's memory analysis of jitted `fn` at `args` (the executable the calls run, from jit's cache)."""
    analysis = fn.lower(*args).compile().memory_analysis()
    names = (
        "argument_size_in_bytes",
        "output_size_in_bytes",
        "temp_size_in_bytes",
        "alias_size_in_bytes",
        "generated_code_size_in_bytes",
    )
    return {name: int(getattr(analysis, name)) for name in names if hasattr(analysis, name)}


def compiled_cost(fn: Any, *args: Any) -> dict[str, float]:
    """XLA's HLO cost analysis of jitted `fn` at `args`: its whole-program figures (flops, bytes
    accessed, transcendentals, ...; the per-operand breakdowns, keyed with braces, left out)."""
    analysis = fn.lower(*args).compile().cost_analysis()
    if isinstance(analysis, list):  # older jax: one dict per computation
        analysis = analysis[0] if analysis else {}
    return {
        str(k): float(v)
        for k, v in (analysis or {}).items()
        if "{" not in str(k) and isinstance(v, (int, float)) and np.isfinite(v)
    }


def jax_cold_cache_env(root: str) -> dict[str, str]:
    """jax's persistent compilation cache off."""
    return {"JAX_ENABLE_COMPILATION_CACHE": "false", "JAX_COMPILATION_CACHE_DIR": os.path.join(root, "jax")}


def jax_warm_cache_env(root: str) -> dict[str, str]:
    """jax's persistent compilation cache on, under `root`, for every program (the default keeps
    only compiles over 1 s: most of a run's are shorter, and XLA compiles them again every run)."""
    return {
        "JAX_ENABLE_COMPILATION_CACHE": "true",
        "JAX_COMPILATION_CACHE_DIR": os.path.join(root, "jax"),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    }


# jax settings keep_jax_compiles changes for a check, and puts back after it.
JAX_CACHE_SETTINGS = (
    "jax_compilation_cache_dir",
    "jax_persistent_cache_min_compile_time_secs",
    "jax_enable_compilation_cache",
)


@contextmanager
def keep_jax_compiles(root: str) -> Iterator[str | None]:
    """jax's persistent compilation cache on, under `root`/jax, for every program (as
    jax_warm_cache_env gives `rnnbench run`'s workers), while the calling process runs a check;
    yields the directory, or None where it is left alone: the process set its own cache directory
    (a JAX_COMPILATION_CACHE_DIR included), or jax is not installed. jax decides once per process
    whether the cache is used, so its reset_cache starts and ends the scope and the settings changed
    are put back: after it the process is as before (its later compiles are not kept by this).
    Entries are keyed by the program, the backend and the compile options: the same programs run."""
    try:
        import jax
        from jax.experimental.compilation_cache import compilation_cache
    except ImportError:
        yield None
        return
    if jax.config.jax_compilation_cache_dir is not None:
        yield None
        return
    before = {name: getattr(jax.config, name) for name in JAX_CACHE_SETTINGS}
    directory = os.path.join(root, "jax")
    compilation_cache.reset_cache()
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_enable_compilation_cache", True)
    try:
        yield directory
    finally:
        for name, value in before.items():
            jax.config.update(name, value)
        compilation_cache.reset_cache()


@contextmanager
def keep_jax_settings() -> Iterator[None]:
    """jax's settings that rnnbench changes (SETTINGS, JAX_CACHE_SETTINGS) put back on every exit of
    the block: as they were on entry, or, where jax was first loaded inside the block, as they were
    before configure() first changed them (jax's own defaults)."""
    names = (*SETTINGS, *JAX_CACHE_SETTINGS)
    before = None
    if "jax" in sys.modules:
        import jax

        before = {name: getattr(jax.config, name) for name in names}
    try:
        yield
    finally:
        if "jax" in sys.modules:
            import jax

            for name, value in {**_UNTOUCHED, **(before or {})}.items():
                if getattr(jax.config, name) != value:
                    jax.config.update(name, value)


JAX_CACHE_VARIABLES = (
    "JAX_ENABLE_COMPILATION_CACHE",
    "JAX_COMPILATION_CACHE_DIR",
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
)
_CACHES = dict(
    cold_cache_env=jax_cold_cache_env,
    warm_cache_env=jax_warm_cache_env,
    cache_variables=JAX_CACHE_VARIABLES,
    keep_compiles=keep_jax_compiles,
    device=DeviceQueries(identity=gpu_identity, read_peak=read_gpu_peak, gemm=gpu_gemm),
)


def gemm(a, b, dtype: str) -> Callable[[], Any]:
    """jax.jit(jnp.matmul) of a and b at `dtype`, under the rows' settings (x64 on, matmul precision
    "highest"), blocked until ready (the roofline's peak GEMM)."""
    configure()
    import jax
    import jax.numpy as jnp

    dt = getattr(jnp, dtype)
    ja, jb = jnp.asarray(a, dtype=dt), jnp.asarray(b, dtype=dt)
    f = jax.jit(jnp.matmul)
    return lambda: f(ja, jb).block_until_ready()


# The standalone repro script of a fuzzed failure (rnnbench.fuzz.repro): jax and numpy only.
REPRO_HEAD = """import math
import sys
import types

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp

ops = types.SimpleNamespace(sin=jnp.sin, cos=jnp.cos, tanh=jnp.tanh, sigmoid=jax.nn.sigmoid,
                            exp=jnp.exp, matmul=jnp.matmul, sum=jnp.sum)
"""

REPRO_EDGE_OPS = """ops.name, ops.where, ops.abs, ops.sqrt, ops.log = "jax", jnp.where, jnp.abs, jnp.sqrt, jnp.log
ops.stop_gradient, ops.maximum, ops.minimum = jax.lax.stop_gradient, jnp.maximum, jnp.minimum
"""

REPRO_RUN = """

def loss_fn(diff, rest):
    inputs = {**rest, **diff}
    params = {k: inputs[k] for k in PARAMS}
    carry = tuple(inputs[f"carry0.{c}"] for c in CARRY_NAMES)
    if MODE == "scan":
        xs = inputs["xs"] if HAS_XS else jnp.zeros((LENGTH, 1))
        carry, ys = jax.lax.scan(lambda c, x: step(ops, params, c, x if HAS_XS else None), carry, xs)
    else:
        out = []
        for t in range(LENGTH):
            carry, y = step(ops, params, carry, inputs["xs"][t] if HAS_XS else None)
            out.append(y)
        ys = jnp.stack(out)
    return LOSS(ops, {k: jnp.asarray(v) for k, v in CONSTS.items()}, ys, carry)


values = {**PARAMS, **{f"carry0.{c}": v for c, v in zip(CARRY_NAMES, CARRY0)}, **({"xs": XS} if HAS_XS else {})}
diff = {k: jnp.asarray(v) for k, v in values.items() if k in WRT}
rest = {k: jnp.asarray(v) for k, v in values.items() if k not in WRT}
if SECOND_ORDER:
    out = jax.jvp(lambda d: jax.grad(loss_fn)(d, rest), (diff,), ({k: jnp.asarray(V[k]) for k in WRT},))[1]
else:
    out = jax.grad(loss_fn)(diff, rest)
got = {k: np.asarray(v) for k, v in out.items()}
reference = None
"""


# Where a jax program's gradient can go wrong: traced and run op by op (jax.disable_jit), or
# compiled by XLA (what every jax row runs): Framework.layers.
JIT_LAYERS = ("no_jit", "jit")


@contextmanager
def at_jit_layer(name: str) -> Iterator[None]:
    """Within it, jax runs jitted functions as JIT_LAYERS' `name` says (no_jit: op by op)."""
    if name not in JIT_LAYERS:
        raise ValueError(f"jax layer {name!r} is not one of {', '.join(JIT_LAYERS)}")
    if name == "jit":
        yield
        return
    import jax

    with jax.disable_jit():
        yield


JAX = Framework(
    name="jax",
    module="jax",
    packages=("jax", "jaxlib", "numpy"),
    family="jax",
    thread_env=xla_thread_env,
    device_missing=device_missing,
    gemm=gemm,
    repro=ReproScript("jax", REPRO_HEAD, REPRO_RUN, REPRO_EDGE_OPS),
    keep_settings=keep_jax_settings,
    # func is torch.func: jax's transforms are its one API, which the vjp and jvp rows already check
    modes_missing={"func": "func is torch's functional API (torch.func); jax has no other API to compare"},
    layers=JIT_LAYERS,
    at_layer=at_jit_layer,
    dispatch_count=dispatch_count,
    dispatch_floors=dispatch_floors,
    **_CACHES,
)
# flax runs on jax's runtime (its threads, devices and compile caches); the GEMM peak and the
# repro scripts are jax's alone.
FLAX = dataclasses.replace(JAX, name="flax", module="flax", packages=("flax", "jax", "jaxlib"), gemm=None, repro=None)
# The Driver fields of every jax-family row: jax.jit compiles on the first call, and jax
# differentiates any program it runs twice (forward over reverse: the Hessian-vector product).
ROW_FIELDS = {"compiled": True, "second_order": True}

SETTINGS = {"jax_enable_x64": True, "jax_default_matmul_precision": "highest"}


# Where the jax scan mechanisms (jax_lax_scan, flax_scan; jax_loop always hoists, see its module) run
# a model's prologue, e.g. the LSTM's input projection xs @ W_ih.T + b. The math is the same either
# way; on XLA:CPU hoisting it into one (T*B, I) matmul before the loop (as the model is written) is
# faster while its (T, B, 4H) result is small, and running it inside the step (on x_t, as flax's
# cells do) is faster once that array and its cotangent, written and read through memory step by
# step, leave the cache. The threshold is measured (docs/measuring.md#the-idiomatic-comparison,
# "The input projection"); rows record settings["input_projection"] and the size it was decided on.
PROJECTION_PER_STEP_BYTES = 2 * 2**20


def input_projection(model: Model, case: Case, dtype: str) -> tuple[Model, dict[str, Any]]:
    """(the model to run, the settings to record): the model itself ("hoisted"), or the model with
    its prologue applied inside the step to each x_t as a sequence of length 1 ("per step") where
    the hoisted result would take PROJECTION_PER_STEP_BYTES or more. Always hoisted where the model
    has no prologue or composes several recurrences itself (Model.forward), and where the prologue
    mixes time steps (checked on the case's first two steps in numpy: a convolution over T could
    not run per step)."""
    if model.prologue is None or model.forward is not None or case.xs is None:
        return model, {}
    ops, prologue, step = numpy_ops(), model.prologue, model.step
    xs = np.asarray(case.xs[:2])
    whole = prologue(ops, case.params, xs)
    apart = np.concatenate([prologue(ops, case.params, xs[t : t + 1]) for t in range(len(xs))])
    size = case.length * int(np.prod(np.shape(whole)[1:])) * np.dtype(numpy_dtype(dtype)).itemsize
    settings: dict[str, Any] = {
        "input_projection": "hoisted",
        "input_projection_bytes": size,
        "input_projection_rule": f"per step from {PROJECTION_PER_STEP_BYTES} bytes",
    }
    if np.shape(whole) != np.shape(apart) or not np.allclose(whole, apart, rtol=1e-12, atol=1e-12):
        return model, {**settings, "input_projection": "hoisted (the prologue mixes time steps)"}
    if size < PROJECTION_PER_STEP_BYTES:
        return model, settings

    def step_with_prologue(ops, params, carry, x):
        return step(ops, params, carry, prologue(ops, params, x[None])[0])

    return dataclasses.replace(model, prologue=None, step=step_with_prologue), {
        **settings,
        "input_projection": "per step",
    }


_UNTOUCHED: dict[str, Any] = {}  # each of SETTINGS as it was before configure() first changed it here


def configure() -> None:
    import jax

    for key, value in SETTINGS.items():
        _UNTOUCHED.setdefault(key, getattr(jax.config, key))
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
        # an integer array (token ids, a counter) stays integer: an index, never differentiated
        return {
            k: jax.device_put(jnp.asarray(v, dtype=jnp.int64 if is_integer(v) else jdtype), dev)
            for k, v in arrays.items()
        }

    flat = flat_inputs(model, case)
    diff = put({k: v for k, v in flat.items() if k in wrt})
    rest = put({k: v for k, v in flat.items() if k not in wrt})
    return diff, rest, put(case.consts)


def prepared_from_loss(
    loss_fn: Callable[[dict, dict], Any],
    diff: dict,
    rest: dict,
    settings: Mapping[str, Any],
    *,
    batch: Batch | None = None,
) -> Prepared:
    """Prepared for loss_fn(diff, rest) -> scalar: jit of the loss (forward) and of
    value_and_grad w.r.t. `diff` (forward+backward). The first call traces and compiles.
    batch: where the examples sit and the consts dict loss_fn reads, for the per_example mode;
    None: no such mode."""
    import jax

    forward_jit = jax.jit(loss_fn)
    value_and_grad = jax.jit(jax.value_and_grad(loss_fn))

    computed: list[str] = []  # the last loss's dtype (Prepared.computed_dtype)

    def loss_and_grads():
        loss, grads = jax.block_until_ready(value_and_grad(diff, rest))
        computed[:] = [str(loss.dtype)]
        return float(loss), {k: np.asarray(v, dtype=np.float64) for k, v in grads.items()}

    @jax.jit
    def hvp_jit(diff, rest, v):
        return jax.jvp(lambda d: jax.grad(loss_fn)(d, rest), (diff,), (v,))[1]

    def hvp(v: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """H v as forward-over-reverse (jvp of grad)."""
        direction = {k: jax.numpy.asarray(v[k], dtype=diff[k].dtype) for k in diff}
        out = jax.block_until_ready(hvp_jit(diff, rest, direction))
        return {k: np.asarray(h, dtype=np.float64) for k, h in out.items()}

    per_example = per_example_mode(loss_fn, diff, rest, batch) if batch else None
    return Prepared(
        loss_and_grads,
        forward=lambda: forward_jit(diff, rest),
        forward_backward=lambda: value_and_grad(diff, rest),
        block=jax.block_until_ready,
        settings={**SETTINGS, **settings},
        hvp=hvp,
        modes={"jvp": forward_mode(loss_fn, diff, rest), **({"per_example": per_example[0]} if per_example else {})},
        roads={"jvp": jvp_road(loss_fn, diff, rest), **(per_example[1] if per_example else {})},
        memory_analysis=lambda: compiled_memory(value_and_grad, diff, rest),
        cost_analysis=lambda: compiled_cost(value_and_grad, diff, rest),
        saved_for_backward=lambda: residual_bytes(loss_fn, diff, rest),
        computed_dtype=lambda: computed[0] if computed else None,
    )


def residual_bytes(loss_fn: Callable[[dict, dict], Any], diff: dict, rest: dict) -> int:
    """Bytes of the distinct arrays, other than the inputs, that jax.vjp's forward keeps for the
    backward (the residuals: the leaves of the vjp function it returns), before XLA's own
    scheduling of the compiled fwd+bwd program (its temp bytes: memory_analysis).
    Counted on the traced program, not by running it: the residuals are the outputs of the jaxpr of
    jax.vjp's forward, one variable once, less the inputs (its arguments, and the closed-over input
    arrays among its constants). Running jax.vjp op by op gives the same bytes (one array object per
    variable; tests/test_step_memory.py compares the two) but executes the forward eagerly, every op
    dispatched (and a scan compiled) for a count that tracing alone gives."""
    import jax

    closed = jax.make_jaxpr(lambda d: jax.vjp(lambda d: loss_fn(d, rest), d)[1])(diff)
    own = {id(x) for x in jax.tree_util.tree_leaves((diff, rest))}
    jaxpr = closed.jaxpr
    inputs = {id(v) for v in jaxpr.invars}
    inputs |= {id(v) for v, value in zip(jaxpr.constvars, closed.consts) if id(value) in own}
    kept = {id(v): v.aval for v in jaxpr.outvars if id(v) not in inputs}
    return int(sum(np.dtype(aval.dtype).itemsize * int(np.prod(aval.shape)) for aval in kept.values()))
