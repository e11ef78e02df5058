"""The torch framework layer: the Framework object, canonical numpy <-> tensors, the Prepared every
torch mechanism returns, autocast. Its parts: the process-wide settings (drivers/torch/_settings.py)
and torch.compile with the settings rows record (drivers/torch/_compile.py)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
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
from rnnbench.drivers.torch._compile import (
    BACKENDS,
    at_backend,
    compiles_kept,
    eager_and_compile_like,
    remembered,
    reset_dynamo,
)
from rnnbench.drivers.torch._dispatch import dispatch_count, dispatch_floors
from rnnbench.drivers.torch._functional import functional_modes, to_numpy
from rnnbench.drivers.torch._memory import saved_bytes
from rnnbench.drivers.torch._per_example import per_example_mode
from rnnbench.drivers.torch._settings import keep_torch_settings, set_threads, threads_in_use
from rnnbench.model import Case, Model, Recur, is_integer


def device_missing(device: str) -> str | None:
    if device != "cuda":
        return None
    import torch

    return None if torch.cuda.is_available() else "no CUDA device visible to torch"


def cuda_identity(device: str) -> dict[str, Any]:
    """The CUDA device as torch sees it (rnnbench.machine.accelerator merges it into machine.accelerator)."""
    import torch

    index = torch.device(device).index
    index = torch.cuda.current_device() if index is None else index
    props = torch.cuda.get_device_properties(index)
    return {
        "index": index,
        "name": props.name,
        "total_memory_mb": round(props.total_memory / 2**20),
        "compute_capability": f"{props.major}.{props.minor}",
        "uuid": str(getattr(props, "uuid", "")) or None,
        "multiprocessors": props.multi_processor_count,
        "cuda_runtime": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version(),
    }


def reset_cuda_peak(device: str) -> None:
    import torch

    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)


def read_cuda_peak(device: str, prepared: Any) -> dict[str, Any]:
    import torch

    torch.cuda.synchronize(device)
    return {
        "peak_allocated_mb": torch.cuda.max_memory_allocated(device) / 2**20,
        "peak_reserved_mb": torch.cuda.max_memory_reserved(device) / 2**20,
        "allocated_after_mb": torch.cuda.memory_allocated(device) / 2**20,
        "source": "torch.cuda caching allocator statistics",
        "meaning": "peak_allocated_mb: the most tensor memory live at once since the peak was reset before the "
        "timed steps (the row's inputs, parameters and the step's saved activations, workspaces and "
        "gradients); peak_reserved_mb: what the allocator held from the driver for it (cached blocks "
        "included); neither counts the CUDA context or cuDNN/cuBLAS handles",
    }


def cuda_gemm(dtype: str, m: int, k: int, n: int, device: str) -> Callable[[], Any]:
    """One (m, k) @ (k, n) matmul on `device`, waited for: TF32 off (exact_float32, as the rows run),
    bfloat16 on the tensor cores (torch's default for bf16 matmuls)."""
    import torch

    exact_float32()
    gen = torch.Generator(device="cpu").manual_seed(0)
    a, b = (
        torch.randn(shape, generator=gen, dtype=torch.float64).to(device=device, dtype=torch_dtype(dtype))
        for shape in ((m, k), (k, n))
    )

    def call() -> None:
        torch.matmul(a, b)
        torch.cuda.synchronize(device)

    return call


def cuda_stream(nbytes: int, device: str) -> Callable[[], Any]:
    """One copy of an nbytes / 2 byte buffer into another on `device`, waited for (Tensor.copy_: a
    plain device-to-device copy kernel)."""
    import torch

    src = torch.ones(max(nbytes // 8, 1), dtype=torch.float32, device=device)
    dst = torch.empty_like(src)

    def call() -> None:
        dst.copy_(src)
        torch.cuda.synchronize(device)

    return call


def inductor_cold_cache_env(root: str) -> dict[str, str]:
    """inductor's on-disk FX-graph and AOT-autograd caches off; its cache dir (generated code,
    compiled .so files) an empty directory under `root`."""
    return {
        "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
        "TORCHINDUCTOR_AUTOGRAD_CACHE": "0",
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(root, "inductor"),
    }


def gemm(a, b, dtype: str) -> Callable[[], Any]:
    """torch.matmul of a and b at `dtype` (the roofline's peak GEMM; torch CPU ops are synchronous)."""
    import torch

    dt = getattr(torch, dtype)
    ta, tb = torch.tensor(a, dtype=dt), torch.tensor(b, dtype=dt)
    return lambda: torch.matmul(ta, tb)


# The standalone repro script of a fuzzed failure (rnnbench.fuzz.repro): torch and numpy only.
REPRO_HEAD = """import math
import sys
import types

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
ops = types.SimpleNamespace(sin=torch.sin, cos=torch.cos, tanh=torch.tanh, sigmoid=torch.sigmoid,
                            exp=torch.exp, matmul=torch.matmul, sum=torch.sum)
"""

REPRO_EDGE_OPS = """ops.name, ops.where, ops.abs = "torch", torch.where, torch.abs
ops.sqrt, ops.log, ops.stop_gradient = torch.sqrt, torch.log, lambda x: x.detach()
ops.maximum = lambda a, b: torch.maximum(*(torch.as_tensor(v, dtype=torch.float64) for v in (a, b)))
ops.minimum = lambda a, b: torch.minimum(*(torch.as_tensor(v, dtype=torch.float64) for v in (a, b)))
"""

REPRO_RUN = '''

def loss_loop(inputs):
    """The plain loop: the reference formulation in the same framework."""
    params = {k: inputs[k] for k in PARAMS}
    carry = tuple(inputs[f"carry0.{c}"] for c in CARRY_NAMES)
    ys = []
    for t in range(LENGTH):
        carry, y = step(ops, params, carry, inputs["xs"][t] if HAS_XS else None)
        ys.append(y)
    return loss_of(torch.stack(ys), carry)


def loss_scan(inputs):
    from torch._higher_order_ops.scan import scan

    params = {k: inputs[k] for k in PARAMS}
    xs = inputs["xs"] if HAS_XS else torch.zeros(LENGTH, 1)

    def combine(carry, x):
        new, y = step(ops, params, carry, x if HAS_XS else None)
        # scan forbids outputs that alias its inputs (carry leaves, x, closed-over parameters)
        lifted = (*carry, x, *params.values())
        new = tuple(n.clone() if CLONE_CARRY or any(n is i for i in lifted) else n for n in new)
        return new, y.clone()

    carry, ys = scan(combine, tuple(inputs[f"carry0.{c}"] for c in CARRY_NAMES), xs)
    return loss_of(ys, carry)


def loss_of(ys, carry):
    return LOSS(ops, {k: torch.as_tensor(v) for k, v in CONSTS.items()}, ys, carry)


def leaves():
    out = {k: torch.tensor(v) for k, v in {**PARAMS, **{f"carry0.{c}": v for c, v in zip(CARRY_NAMES, CARRY0)}}.items()}
    if HAS_XS:
        out["xs"] = torch.tensor(XS)
    for k in WRT:
        out[k].requires_grad_(True)
    return out


def derivatives(loss_fn, compiled):
    """{name: d loss/d name}, or {name: (H v)[name]} when SECOND_ORDER."""
    if compiled:
        torch._dynamo.config.capture_scalar_outputs = True
        loss_fn = torch.compile(loss_fn, backend="inductor", fullgraph=True)
    inputs = leaves()
    wrt = [inputs[k] for k in WRT]
    grads = torch.autograd.grad(loss_fn(inputs), wrt, create_graph=SECOND_ORDER, allow_unused=True)
    if not SECOND_ORDER:
        return {k: None if g is None else g.detach().numpy() for k, g in zip(WRT, grads)}
    dot = sum((g * torch.as_tensor(V[k])).sum() for k, g in zip(WRT, grads) if g is not None)
    if not torch.is_tensor(dot) or not dot.requires_grad:  # the gradient does not depend on the inputs
        return {k: np.zeros_like(np.asarray(V[k])) for k in WRT}
    hv = torch.autograd.grad(dot, wrt, allow_unused=True)
    return {k: np.zeros_like(np.asarray(V[k])) if h is None else h.numpy() for k, h in zip(WRT, hv)}


got = derivatives(loss_scan if MODE == "scan" else loss_loop, COMPILED)
reference = derivatives(loss_loop, False) if (MODE, COMPILED) != ("loop", False) else None
'''


def op_profile(fn: Callable[[], Any], block: Callable[[Any], None], calls: int) -> dict[str, float]:
    """{aten op: self CPU time in ms per call} over `calls` blocked calls of fn under torch.profiler
    (key_averages: one entry per op name, its time without the ops it called)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            block(fn())
    return {e.key: e.self_cpu_time_total / 1e3 / calls for e in prof.key_averages() if e.self_cpu_time_total > 0}


# torch's own words for a composition it does not offer: an op without a forward-mode formula
# (NotImplementedError), dynamo's refusal to trace (Unsupported), a higher-order op run eagerly under a
# torch.func transform (UncapturedHigherOrderOpError)
REFUSALS = frozenset({"NotImplementedError", "Unsupported", "UncapturedHigherOrderOpError"})


def refuses(exc: BaseException) -> bool:
    """Framework.refuses: some exception in the chain is one of torch's REFUSALS."""
    seen: BaseException | None = exc
    while seen is not None:
        if type(seen).__name__ in REFUSALS:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


TORCH = Framework(
    name="torch",
    module="torch",
    packages=("torch", "numpy"),
    family="torch",
    slow_compile=True,
    set_threads=set_threads,
    threads_in_use=threads_in_use,
    keep_settings=keep_torch_settings,
    device_missing=device_missing,
    cold_cache_env=inductor_cold_cache_env,
    # inductor keeps its FX-graph and AOT-autograd caches on disk by default (under
    # /tmp/torchinductor_<user>), so `run` needs no warm_cache_env for it.
    cache_variables=("TORCHINDUCTOR_FX_GRAPH_CACHE", "TORCHINDUCTOR_AUTOGRAD_CACHE", "TORCHINDUCTOR_CACHE_DIR"),
    compiles_kept=compiles_kept,
    reset_compiles=reset_dynamo,
    refuses=refuses,
    gemm=gemm,
    # eager CPU ops run on the calling thread at --threads 1 (the clock's choice: docs/measuring.md#asv)
    cpu_time_clock=True,
    repro=ReproScript("torch", REPRO_HEAD, REPRO_RUN, REPRO_EDGE_OPS),
    device=DeviceQueries(
        identity=cuda_identity, reset_peak=reset_cuda_peak, read_peak=read_cuda_peak, gemm=cuda_gemm, stream=cuda_stream
    ),
    op_profile=op_profile,
    dispatch_count=dispatch_count,
    dispatch_floors=dispatch_floors,
    layers=BACKENDS,
    at_layer=at_backend,
)


def torch_dtype(dtype: str):
    import torch

    return {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]


def as_tensors(arrays: Mapping[str, np.ndarray], dtype: str, device: str, wrt: list[str]) -> dict[str, Any]:
    """Leaf tensors by canonical name; those named in `wrt` require grad. An integer array (token
    ids, a counter) stays an integer tensor: an index, never differentiated (never in `wrt`)."""
    import torch

    out = {}
    for name, value in arrays.items():
        if is_integer(value):
            out[name] = torch.tensor(np.asarray(value), dtype=torch.int64, device=device)
            continue
        t = torch.tensor(np.asarray(value), dtype=torch_dtype(dtype), device=device)
        out[name] = t.requires_grad_(name in wrt)
    return out


def exact_float32() -> None:
    """No TF32 on CUDA: matmuls and cuDNN (torch.nn.RNN/LSTM) in true float32, as the float32
    tolerance assumes. cuDNN allows TF32 by default, which puts torch.nn.RNN's float32 gradients
    outside that tolerance (measured: docs/gpu.md)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def model_tensors(
    model: Model, case: Case, dtype: str, device: str
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(inputs by canonical name, consts, names whose gradients are compared)."""
    exact_float32()
    wrt = case.wrt_names(model.carry_names)
    return (
        as_tensors(flat_inputs(model, case), dtype, device, wrt),
        as_tensors(case.consts, dtype, device, []),
        wrt,
    )


def block(result: Any) -> None:
    """torch CPU ops are synchronous; CUDA work is queued, so wait for the device."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def prepared_from_loss(
    loss_fn: Callable[[dict[str, Any]], Any],
    inputs: dict[str, Any],
    wrt: list[str],
    *,
    settings: Mapping[str, Any],
    second_order: bool = False,
    pure_loss: Callable[[dict[str, Any]], Any] | None = None,
    batch: Batch | None = None,
) -> Prepared:
    """Prepared for a torch loss function of the inputs dict; gradients are read from `.grad`, where
    None means the input does not reach the loss (the judge reads it as a zero gradient: a true
    zero is an answer, and a wrong zero is missing_grad against the oracle).
    forward is the training step's forward (grad enabled, graph recorded, no backward): a compiled
    loss_fn then reuses the program compiled for forward_backward (under no_grad, torch.compile
    would trace and compile a second, inference program), and fwd_bwd - fwd is the backward's time;
    forward_backward builds the graph and back-propagates.
    second_order: also provide hvp (double backward; eager drivers only). pure_loss: the same loss
    reading every compared input from its argument, for torch.func's modes, where loss_fn reads some
    from elsewhere (a vendor layer's module parameters); None: loss_fn is pure. batch: where the
    examples sit and the consts dict loss_fn reads, for the per_example mode; None: no such mode."""
    import torch

    def forward_backward():
        for name in wrt:
            inputs[name].grad = None
        loss = loss_fn(inputs)
        if loss.requires_grad:  # else no compared input reaches the loss: every gradient is zero
            loss.backward()
        return loss

    computed: list[str] = []  # the last loss's dtype (Prepared.computed_dtype)

    def loss_and_grads():
        loss = forward_backward()
        computed[:] = [str(loss.dtype).removeprefix("torch.")]
        return float(loss.detach()), {name: to_numpy(inputs[name].grad) for name in wrt}

    def forward():
        return loss_fn(inputs)  # the graph it records is freed with the returned loss

    def hvp(v: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | None]:
        """H v by double backward: d/dp <d loss/d p, v>."""
        leaves, loss = [inputs[n] for n in wrt], loss_fn(inputs)
        if not loss.requires_grad:  # no compared input reaches the loss: H is zero
            return {n: np.zeros_like(np.asarray(v[n], dtype=np.float64)) for n in wrt}
        grads = torch.autograd.grad(loss, leaves, create_graph=True, allow_unused=True)
        dot = sum(
            (g * torch.as_tensor(v[n], dtype=g.dtype, device=g.device)).sum()
            for n, g in zip(wrt, grads)
            if g is not None
        )
        if not torch.is_tensor(dot) or not dot.requires_grad:
            return {n: np.zeros_like(np.asarray(v[n], dtype=np.float64)) for n in wrt}
        hv = torch.autograd.grad(dot, leaves, allow_unused=True)
        # None here means the gradient's graph does not read that input: its Hessian row is
        # structurally zero (unlike a None first-order gradient, which the checker reports missing).
        return {
            n: to_numpy(h) if h is not None else np.zeros_like(np.asarray(v[n], dtype=np.float64))
            for n, h in zip(wrt, hv)
        }

    modes, roads = functional_modes(pure_loss or loss_fn, inputs, wrt)
    per_example = per_example_mode(pure_loss or loss_fn, inputs, wrt, batch) if batch else None
    return Prepared(
        loss_and_grads,
        forward=forward,
        forward_backward=forward_backward,
        block=block,
        settings=dict(settings),
        hvp=hvp if second_order else None,
        modes={**modes, **({"per_example": per_example[0]} if per_example else {})},
        roads={**roads, **(per_example[1] if per_example else {})},
        saved_for_backward=lambda: saved_bytes(loss_fn, inputs),
        computed_dtype=lambda: computed[0] if computed else None,
    )


def under_autocast(loss_fn: Callable[[dict], Any], device: str) -> Callable[[dict], Any]:
    """loss_fn run under bf16 autocast, as mixed-precision training does (parameters stay float32);
    the loss is returned in float32. Applied outside a compiled function, as in docs/bugs.md §3."""
    import torch

    def wrapped(inputs):
        with torch.autocast(device, dtype=torch.bfloat16):
            return loss_fn(inputs).float()

    eager, compile_like = eager_and_compile_like(loss_fn)
    if compile_like is None:
        return wrapped
    return remembered(wrapped, eager=under_autocast(eager, device), compile_like=compile_like)


def supports_autocast(model: Model) -> str | None:
    """Only models with an fp32 island (Model.island_grads) run under autocast: for them the check
    can tell float32 island semantics from bf16."""
    return None if model.island_grads else "model has no fp32 island (Model.island_grads is empty)"


def checkpointed(recur: Recur) -> Recur:
    """`recur` with each step under torch.utils.checkpoint (non-reentrant): the step's activations
    are not kept for backward but recomputed there, one step at a time (remat)."""

    def run(step, params, carry0, xs, length):
        from torch.utils.checkpoint import checkpoint

        def remat_step(ops, params, carry, x):
            return checkpoint(step, ops, params, carry, x, use_reentrant=False)

        return recur(remat_step, params, carry0, xs, length)

    return run
