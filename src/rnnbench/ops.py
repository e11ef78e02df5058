"""One op namespace per framework, so a model's step is written once and runs on numpy, torch and jax.

Each namespace maps a small vocabulary onto the framework's own (fused where it has one) functions;
the lookup happens once when a driver builds its step, so a step pays nothing per call for the
indirection beyond a Python attribute access that the compilers trace away.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, ContextManager, Sequence

Array = Any  # the namespace's own array type (numpy.ndarray, torch.Tensor, jax.Array)
Unary = Callable[[Array], Array]


@dataclass(frozen=True)
class Ops:
    """The vocabulary a step is written in. Every field is required, so a namespace that lacks an
    op fails when it is built, not when some step first uses it. Shapes: `...` is any leading
    batch shape; arrays are the framework's own.

    elementwise: tanh, sigmoid, exp, sin, cos.
    matmul(a, b): a @ b with broadcasting.  linear(x, w, b=None): x (..., I), w (O, I), b (O,) ->
        x @ w.T + b (..., O), the framework's fused form where it has one (torch: addmm).
    split(x, n): n equal chunks of the last axis.  stack(xs): a new leading axis, (T, ...) from T
        arrays.  concat(xs): along axis 0.  sum(x): all entries, a 0-d array.
    zeros(shape, like): zeros in like's dtype and device.  zeros_like, ones_like: as numpy.
    eye(n, like): (n, n) identity in like's dtype and device.  transpose(x): the last two axes.
    cast_like(x, like): x in like's dtype.
    fp32_island(): a context manager inside which torch autocast is disabled, so a step can keep
        its carry update in full precision under bf16 autocast (docs/bugs.md §3); a no-op elsewhere.
    """

    name: str
    tanh: Unary
    sigmoid: Unary
    exp: Unary
    sin: Unary
    cos: Unary
    matmul: Callable[[Array, Array], Array]
    linear: Callable[..., Array]
    split: Callable[[Array, int], tuple]
    stack: Callable[[Sequence[Array]], Array]
    concat: Callable[[Sequence[Array]], Array]
    sum: Unary
    zeros: Callable[[tuple, Array], Array]
    zeros_like: Unary
    ones_like: Unary
    eye: Callable[[int, Array], Array]
    transpose: Unary
    cast_like: Callable[[Array, Array], Array]
    fp32_island: Callable[[], ContextManager]


@lru_cache(maxsize=None)
def numpy_ops() -> Ops:
    import numpy as np

    def sigmoid(x: Any) -> Any:
        # tanh form: no overflow warning for large |x|, exact to float64 rounding.
        return 0.5 * (1.0 + np.tanh(0.5 * x))

    return Ops(
        name="numpy",
        tanh=np.tanh,
        sigmoid=sigmoid,
        exp=np.exp,
        sin=np.sin,
        cos=np.cos,
        matmul=np.matmul,
        linear=lambda x, w, b=None: x @ w.T if b is None else x @ w.T + b,
        split=lambda x, n: tuple(np.split(x, n, axis=-1)),
        stack=lambda xs: np.stack(xs, axis=0),
        sum=np.sum,
        zeros=lambda shape, like: np.zeros(shape, dtype=like.dtype),
        zeros_like=np.zeros_like,
        ones_like=np.ones_like,
        eye=lambda n, like: np.eye(n, dtype=like.dtype),
        transpose=lambda x: np.swapaxes(x, -1, -2),
        concat=lambda xs: np.concatenate(xs, axis=0),
        cast_like=lambda x, like: np.asarray(x).astype(like.dtype),
        fp32_island=contextlib.nullcontext,
    )


@lru_cache(maxsize=None)
def torch_ops() -> Ops:
    import torch
    import torch.nn.functional as F

    return Ops(
        name="torch",
        tanh=torch.tanh,
        sigmoid=torch.sigmoid,
        exp=torch.exp,
        sin=torch.sin,
        cos=torch.cos,
        matmul=torch.matmul,
        linear=F.linear,  # fused x @ w.T + b (addmm)
        split=lambda x, n: torch.chunk(x, n, dim=-1),
        stack=lambda xs: torch.stack(xs, dim=0),
        sum=torch.sum,
        zeros=lambda shape, like: torch.zeros(shape, dtype=like.dtype, device=like.device),
        zeros_like=torch.zeros_like,
        ones_like=torch.ones_like,
        eye=lambda n, like: torch.eye(n, dtype=like.dtype, device=like.device),
        transpose=lambda x: x.transpose(-1, -2),
        concat=lambda xs: torch.cat(xs, dim=0),
        cast_like=lambda x, like: x.to(like.dtype),
        # The docs/bugs.md §3 shape. CPU autocast only: the autocast drivers run on CPU.
        fp32_island=lambda: torch.autocast("cpu", enabled=False),
    )


@lru_cache(maxsize=None)
def jax_ops() -> Ops:
    import jax
    import jax.numpy as jnp

    return Ops(
        name="jax",
        tanh=jnp.tanh,
        sigmoid=jax.nn.sigmoid,
        exp=jnp.exp,
        sin=jnp.sin,
        cos=jnp.cos,
        matmul=jnp.matmul,
        linear=lambda x, w, b=None: x @ w.T if b is None else x @ w.T + b,
        split=lambda x, n: tuple(jnp.split(x, n, axis=-1)),
        stack=lambda xs: jnp.stack(xs, axis=0),
        sum=jnp.sum,
        zeros=lambda shape, like: jnp.zeros(shape, dtype=like.dtype),
        zeros_like=jnp.zeros_like,
        ones_like=jnp.ones_like,
        eye=lambda n, like: jnp.eye(n, dtype=like.dtype),
        transpose=lambda x: jnp.swapaxes(x, -1, -2),
        concat=lambda xs: jnp.concatenate(xs, axis=0),
        cast_like=lambda x, like: x.astype(like.dtype),
        fp32_island=contextlib.nullcontext,
    )

