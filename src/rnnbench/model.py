"""What a model is: canonical data, a step written once, a loss, and an independent oracle.

Shapes use T = trip count (sequence length or iteration count), B = batch, I = input width,
H = hidden width, n = vector/matrix size of the series and iteration models.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from rnnbench.ops import Ops

Array = Any  # a numpy, torch or jax array, depending on the ops namespace in use
Carry = tuple  # tuple of arrays, one per name in Model.carry_names
Params = Mapping[str, Array]


@dataclass(frozen=True)
class Case:
    """One concrete problem, as canonical float64 numpy arrays.

    params: name -> array (trainable). carry0: one array per carry leaf. xs: (T, ...) per-step inputs
    or None when the recurrence has only a trip count. consts: non-trainable arrays the loss uses.
    The gradients compared are d loss / d params, plus d loss / d carry0 leaves flagged in
    `carry0_requires_grad` (named "carry0.<leaf>"), plus d loss / d xs when `xs_requires_grad`.
    """

    model: str
    sizes: Mapping[str, int]
    seed: int
    params: Mapping[str, np.ndarray]
    carry0: tuple[np.ndarray, ...]
    xs: Optional[np.ndarray]
    length: int
    consts: Mapping[str, np.ndarray] = field(default_factory=dict)
    carry0_requires_grad: tuple[bool, ...] = ()
    xs_requires_grad: bool = False

    def wrt_names(self, carry_names: Sequence[str]) -> list[str]:
        """Names of every input whose gradient is compared, in a fixed order."""
        names = list(self.params)
        names += [f"carry0.{n}" for n, g in zip(carry_names, self.carry0_requires_grad) if g]
        if self.xs_requires_grad:
            names.append("xs")
        return names

    def rounded_to(self, dtype: str) -> "Case":
        """The same case with every array rounded to `dtype` and stored back as float64.

        A driver running at `dtype` then sees exactly these values, and the float64 oracle is
        evaluated on the same inputs: the comparison measures the driver's arithmetic, not the
        rounding of its inputs.
        """
        np_dtype = numpy_dtype(dtype)

        def r(a: np.ndarray) -> np.ndarray:
            return np.asarray(a).astype(np_dtype).astype(np.float64)

        return dataclasses.replace(
            self,
            params={k: r(v) for k, v in self.params.items()},
            carry0=tuple(r(c) for c in self.carry0),
            xs=None if self.xs is None else r(self.xs),
            consts={k: r(v) for k, v in self.consts.items()},
        )


def numpy_dtype(dtype: str) -> Any:
    """numpy dtype for a dtype name; bfloat16 comes from ml_dtypes (a jax dependency)."""
    if dtype == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return {"float64": np.float64, "float32": np.float32, "float16": np.float16}[dtype]


Step = Callable[[Ops, Params, Carry, Optional[Array]], tuple[Carry, Array]]
Loss = Callable[[Ops, Mapping[str, Array], Array, Carry], Array]
Prologue = Callable[[Ops, Params, Array], Array]
Flops = Callable[[Mapping[str, int]], dict[str, float]]


@dataclass(frozen=True, kw_only=True)
class Model:
    """A recurrent computation, independent of any framework.

    step(ops, params, carry, x_t) -> (carry, y_t): one iteration, written once against `ops`.
        x_t is None for recurrences with a trip count only. y_t is one array per step; the drivers
        stack them into ys with a leading T axis.
    prologue(ops, params, xs) -> xs': per-sequence work hoisted out of the loop (e.g. the input
        projection of an LSTM, one big matmul over all T steps, as fast implementations do).
    loss(ops, consts, ys, carry_T) -> scalar.
    make_case(sizes, seed) -> Case: seeded canonical data.
    oracle(case) -> {name: float64 gradient}: shares no autodiff engine with any driver
        (hand-derived BPTT, closed forms). None means central finite differences are the oracle.
    kind: the computation family that vendor layers (anchor drivers) recognise, e.g. "elman_tanh".
    flops(sizes) -> {"fwd": ..., "fwd_bwd": ...}: floating-point operations of one forward and one
        forward+backward pass, counted analytically (models/_flops.py states the convention), for
        the roofline. None: not counted, rows of this model get no GFLOP/s.
    suite: "core" (the benchmark comparison: `rnnbench run` by default, tested at every dtype) or
        "bugs" (bug-class cases from docs/bugs.md: `rnnbench run --suite bugs`, tested at float64, since
        the classes they target do not depend on the dtype).
    island_grads: compared inputs whose gradient flows only through `ops.fp32_island()` regions of
        the step; under bf16 autocast their semantics are float32, so they are checked at the float32
        tolerance while the rest get the bfloat16 one (docs/bugs.md §3). Empty: no island.
    """

    name: str
    summary: str
    carry_names: tuple[str, ...]
    default_sizes: Mapping[str, int]
    make_case: Callable[[Mapping[str, int], int], Case]
    step: Step
    loss: Loss
    prologue: Optional[Prologue] = None
    oracle: Optional[Callable[[Case], dict[str, np.ndarray]]] = None
    oracle_kind: str = "finite_differences"
    kind: str = "generic"
    flops: Optional[Flops] = None
    island_grads: tuple[str, ...] = ()
    suite: str = "core"

    def sizes_with_defaults(self, overrides: Mapping[str, int] | None = None) -> dict[str, int]:
        """Default sizes updated with the overrides that this model knows; validated positive."""
        sizes = dict(self.default_sizes)
        for key, value in (overrides or {}).items():
            if key in sizes:
                sizes[key] = int(value)
        for key, value in sizes.items():
            if value <= 0:
                raise ValueError(f"size {key}={value} for model {self.name!r} must be positive")
        return sizes


def step_inputs(ops: Ops, model: Model, params: Params, xs: Optional[Array], length: int,
                dummy_like: Optional[Array] = None) -> tuple[Optional[Array], Callable[[Any], Any]]:
    """What a loop or a scan iterates over, and how each slice reaches the step: (xs', step_x).

    With xs (T, ...): xs' is xs with the model's prologue applied (per-sequence work hoisted out of
    the loop), and step_x(x_t) = x_t. A trip-count recurrence (xs None) gives xs' = None, or, when
    `dummy_like` is an array, (length, 1) zeros of its dtype and device for scan primitives that
    need something to scan over; step_x then hands the step None."""
    if xs is not None:
        if model.prologue is not None:
            xs = model.prologue(ops, params, xs)
        return xs, lambda x: x
    if dummy_like is None:
        return None, lambda x: None
    return ops.zeros((length, 1), dummy_like), lambda x: None


def rollout(ops: Ops, model: Model, params: Params, carry0: Carry, xs: Optional[Array], length: int,
            collect: Optional[Callable[[Any, int, Any], Any]] = None):
    """The plain Python loop: returns (ys of shape (T, ...), carry_T). Used by the numpy reference
    and by the loop drivers, so every framework runs literally the same recurrence.

    collect(ys, t, y) -> ys: how step t's output joins ys, for loops that write into a
    preallocated buffer (ys is None before the first step); default: a list, stacked at the end."""
    xs, step_x = step_inputs(ops, model, params, xs, length)
    carry = tuple(carry0)
    ys: Any = None if collect is not None else []
    for t in range(length):
        carry, y = model.step(ops, params, carry, step_x(None if xs is None else xs[t]))
        if collect is None:
            ys.append(y)
        else:
            ys = collect(ys, t, y)
    return (ops.stack(ys) if collect is None else ys), carry


def reference_loss(model: Model, case: Case, params=None, carry0=None, xs=None) -> float:
    """float64 numpy forward loss; finite differences perturb `params`, `carry0` or `xs`. One
    forward pass of rnnbench.ops.frozen_stop_gradients(), which the derivative oracles open."""
    from rnnbench.ops import forward_pass, numpy_ops

    ops = numpy_ops()
    with forward_pass():
        ys, carry = rollout(
            ops,
            model,
            case.params if params is None else params,
            case.carry0 if carry0 is None else carry0,
            case.xs if xs is None else xs,
            case.length,
        )
        return float(model.loss(ops, case.consts, ys, carry))
