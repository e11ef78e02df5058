"""One op namespace per framework, so a model's step is written once and runs on numpy, torch and jax.

Each namespace maps a small vocabulary onto the framework's own (fused where it has one) functions;
the lookup happens once when a driver builds its step, so a step pays nothing per call for the
indirection beyond a Python attribute access that the compilers trace away.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from typing import Any

Array = Any  # the namespace's own array type (numpy.ndarray, torch.Tensor, jax.Array)
Unary = Callable[[Array], Array]


@dataclass(frozen=True)
class Ops:
    """The vocabulary a step is written in. Every field but unstack is required, so a namespace that
    lacks an op fails when it is built, not when some step first uses it. Shapes: `...` is any leading
    batch shape; arrays are the framework's own.

    elementwise: tanh, sigmoid, exp, sin, cos, tan, log, sqrt, abs (log, sqrt: positive inputs).
    where(cond, a, b): a where the boolean array cond (e.g. `x > 0`) holds, else b; a, b arrays or
        scalars, all three broadcast.  maximum(a, b), minimum(a, b): elementwise, broadcasting; on
        ties the derivative is split half to each side.
    stop_gradient(x): x in value, zero derivative (see frozen_stop_gradients for the numpy one).
    matmul(a, b): a @ b with broadcasting.  linear(x, w, b=None): x (..., I), w (O, I), b (O,) or
        any shape broadcasting against (..., O), e.g. a step's share of a hoisted input projection ->
        x @ w.T + b (..., O), the framework's fused form where it has one (torch: one addmm for a
        2-D x, also with a (B, O) b: one autograd node where `b + linear(x, w)` makes two).
    split(x, n): n equal chunks of the last axis.  stack(xs): a new leading axis, (T, ...) from T
        arrays.  unstack(x): its inverse, the T slices of x (T, ...) along axis 0 as a tuple, made
        by one op whose derivative is one stack (torch: unbind; jax: jnp.unstack); a loop over it
        differentiates in O(T) where indexing x[t] in the loop costs O(T^2) (each index's
        derivative is a zero array of x's full shape with one slice filled: T of them are summed).
        concat(xs, axis=0): along `axis` (negative counts from the end).  sum(x): all entries, a
        0-d array.  mean(x): over the last axis, kept with size 1 (..., 1): one reduction
        (LayerNorm's statistics; a matmul by ones would not reach a compiler's reduction paths).
        reshape(x, shape): as numpy.  flip(x): reversed along axis 0 (the time axis of xs or ys:
        bidirectional recurrences).
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
    tan: Unary
    log: Unary
    sqrt: Unary
    abs: Unary
    where: Callable[[Array, Any, Any], Array]
    maximum: Callable[[Any, Any], Array]
    minimum: Callable[[Any, Any], Array]
    stop_gradient: Unary
    matmul: Callable[[Array, Array], Array]
    linear: Callable[..., Array]
    split: Callable[[Array, int], tuple]
    stack: Callable[[Sequence[Array]], Array]
    concat: Callable[..., Array]
    sum: Unary
    mean: Unary
    reshape: Callable[[Array, tuple], Array]
    flip: Unary
    zeros: Callable[[tuple, Array], Array]
    zeros_like: Unary
    ones_like: Unary
    eye: Callable[[int, Array], Array]
    transpose: Unary
    cast_like: Callable[[Array, Array], Array]
    fp32_island: Callable[[], contextlib.AbstractContextManager]
    # The one op with a default: indexing row by row is correct on any array type, only slow to
    # differentiate (O(T^2)); every framework namespace below gives its one-op form.
    unstack: Callable[[Array], tuple] = lambda x: tuple(x[t] for t in range(x.shape[0]))


# The ops numpy, torch and jax (and the oracle's dual numbers) name alike: a namespace looks these
# up by name in its module and lists only what its framework names or does differently.
NAMED_ALIKE = tuple(
    "tanh exp sin cos tan log sqrt abs where maximum minimum matmul sum zeros_like ones_like reshape".split()
)


def named_ops(module: Any, **ops: Any) -> Ops:
    """The Ops of `ops` (name and fields), every NAMED_ALIKE field not among them `module`'s
    function of that name."""
    return Ops(**{name: getattr(module, name) for name in NAMED_ALIKE if name not in ops}, **ops)


class _Frozen:
    """The stop_gradient outputs of the first numpy forward pass inside frozen_stop_gradients(),
    replayed by call index in every later pass."""

    def __init__(self) -> None:
        self.recorded: list | None = None  # None until the first pass has ended
        self.current: list | None = None  # None between passes; the base pass appends its outputs here
        self.index = 0

    def begin(self) -> None:
        if self.current is not None:
            raise RuntimeError("a numpy forward pass started inside another one under frozen_stop_gradients()")
        self.current, self.index = [], 0

    def end(self) -> None:
        finished, self.current = self.current, None
        if self.recorded is None:
            self.recorded = finished
        elif self.index != len(self.recorded):
            raise RuntimeError(
                f"stop_gradient was called {self.index} times in a perturbed pass but "
                f"{len(self.recorded)} times at the base inputs: the step's control flow "
                "depends on its inputs, so frozen values cannot be matched to calls"
            )

    def __call__(self, x: Any) -> Any:
        import numpy as np

        if self.current is None:
            raise RuntimeError(
                "stop_gradient under frozen_stop_gradients() outside a forward pass: "
                "run the numpy forward inside forward_pass() (reference_loss does)"
            )
        if self.recorded is None:
            self.current.append(np.array(x, copy=True))
            return x
        if self.index >= len(self.recorded):
            raise RuntimeError(
                f"stop_gradient was called more than {len(self.recorded)} times in a perturbed "
                "pass, the count at the base inputs: the step's control flow depends on its inputs"
            )
        value = self.recorded[self.index]
        if np.shape(value) != np.shape(x):
            raise RuntimeError(
                f"stop_gradient call {self.index} has shape {np.shape(x)} in a perturbed pass "
                f"but {np.shape(value)} at the base inputs"
            )
        self.index += 1
        return value.copy()  # a step may update its result in place


# One recording per context, not per Ops object: numpy_ops() is shared (cached), and a context
# nested inside another (an oracle computed while another one runs) must not see its values.
_FROZEN: ContextVar[_Frozen | None] = ContextVar("rnnbench_frozen_stop_gradients", default=None)


@contextlib.contextmanager
def frozen_stop_gradients() -> Iterator[None]:
    """Inside, numpy stop_gradient returns in every forward pass the value it returned in the first
    one. Finite differences differentiate values, so they would see a derivative through
    stop_gradient(x) where autodiff has none; evaluating the base inputs first and then the
    perturbed ones makes the differenced function the one autodiff differentiates (stop_gradient
    outputs constant at their base values). Passes are delimited by forward_pass(); the step's
    calls must come in the same order in every pass (same trip count and control flow), and a
    different number of calls raises. Outside this context numpy stop_gradient is the identity."""
    token = _FROZEN.set(_Frozen())
    try:
        yield
    finally:
        _FROZEN.reset(token)


@contextlib.contextmanager
def forward_pass() -> Iterator[None]:
    """One evaluation of the numpy forward (a no-op outside frozen_stop_gradients())."""
    frozen = _FROZEN.get()
    if frozen is None:
        yield
        return
    frozen.begin()
    try:
        yield
    except BaseException:
        frozen.current = None  # an aborted pass neither records nor is checked
        raise
    frozen.end()


def _numpy_stop_gradient(x: Any) -> Any:
    frozen = _FROZEN.get()
    return x if frozen is None else frozen(x)


@cache
def numpy_ops() -> Ops:
    import numpy as np

    def sigmoid(x: Any) -> Any:
        # exp(x) / (1 + exp(x)) below 0, 1 / (1 + exp(-x)) above: accurate to rounding in both tails
        # (the tanh form 0.5 (1 + tanh(x / 2)) cancels for x below about -20, so log(sigmoid(x)) lost
        # every digit there); exp of -|x| never overflows.
        x = np.asarray(x)
        e = np.exp(-np.abs(x))
        return np.where(x >= 0, 1.0, e) / (1.0 + e)

    return named_ops(
        np,
        name="numpy",
        sigmoid=sigmoid,
        stop_gradient=_numpy_stop_gradient,
        linear=lambda x, w, b=None: x @ w.T if b is None else x @ w.T + b,
        split=lambda x, n: tuple(np.split(x, n, axis=-1)),
        stack=lambda xs: np.stack(xs, axis=0),
        unstack=tuple,  # views of the rows
        zeros=lambda shape, like: np.zeros(shape, dtype=like.dtype),
        eye=lambda n, like: np.eye(n, dtype=like.dtype),
        transpose=lambda x: np.swapaxes(x, -1, -2),
        concat=lambda xs, axis=0: np.concatenate(xs, axis=axis),
        flip=lambda x: np.flip(x, 0),
        mean=lambda x: np.mean(x, axis=-1, keepdims=True),
        cast_like=lambda x, like: np.asarray(x).astype(like.dtype),
        fp32_island=contextlib.nullcontext,
    )


def _tensors(torch: Any, a: Any, b: Any) -> tuple:
    """(a, b) as tensors: torch.maximum / minimum take no Python scalars, unlike numpy and jax."""
    like = a if isinstance(a, torch.Tensor) else b
    return tuple(
        v if isinstance(v, torch.Tensor) else torch.as_tensor(v, dtype=like.dtype, device=like.device) for v in (a, b)
    )


@cache
def torch_ops() -> Ops:
    import torch
    import torch.nn.functional as F

    return named_ops(
        torch,
        name="torch",
        sigmoid=torch.sigmoid,
        maximum=lambda a, b: torch.maximum(*_tensors(torch, a, b)),
        minimum=lambda a, b: torch.minimum(*_tensors(torch, a, b)),
        stop_gradient=lambda x: x.detach(),
        linear=F.linear,  # fused x @ w.T + b (addmm, for a (O,) or a (B, O) b alike)
        split=lambda x, n: torch.chunk(x, n, dim=-1),
        stack=lambda xs: torch.stack(xs, dim=0),
        unstack=lambda x: torch.unbind(x, 0),  # one UnbindBackward (a stack) for all T slices
        zeros=lambda shape, like: torch.zeros(shape, dtype=like.dtype, device=like.device),
        eye=lambda n, like: torch.eye(n, dtype=like.dtype, device=like.device),
        transpose=lambda x: x.transpose(-1, -2),
        concat=lambda xs, axis=0: torch.cat(xs, dim=axis),
        flip=lambda x: torch.flip(x, (0,)),  # no negative-step slicing in torch
        mean=lambda x: torch.mean(x, dim=-1, keepdim=True),
        cast_like=lambda x, like: x.to(like.dtype),
        # The docs/bugs.md §3 shape. CPU autocast only: the autocast drivers run on CPU.
        fp32_island=lambda: torch.autocast("cpu", enabled=False),
    )


@cache
def jax_ops() -> Ops:
    import jax
    import jax.numpy as jnp

    return named_ops(
        jnp,
        name="jax",
        sigmoid=jax.nn.sigmoid,
        stop_gradient=jax.lax.stop_gradient,
        linear=lambda x, w, b=None: x @ w.T if b is None else x @ w.T + b,
        split=lambda x, n: tuple(jnp.split(x, n, axis=-1)),
        stack=lambda xs: jnp.stack(xs, axis=0),
        unstack=jnp.unstack,  # one unstack primitive, transposed to one stack (no pad per slice)
        zeros=lambda shape, like: jnp.zeros(shape, dtype=like.dtype),
        eye=lambda n, like: jnp.eye(n, dtype=like.dtype),
        transpose=lambda x: jnp.swapaxes(x, -1, -2),
        concat=lambda xs, axis=0: jnp.concatenate(xs, axis=axis),
        flip=lambda x: jnp.flip(x, 0),
        mean=lambda x: jnp.mean(x, axis=-1, keepdims=True),
        cast_like=lambda x, like: x.astype(like.dtype),
        fp32_island=contextlib.nullcontext,
    )
