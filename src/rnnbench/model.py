"""What a model is: canonical data, a step written once, a loss, and an independent oracle.

Shapes use T = trip count (sequence length or iteration count), B = batch, I = input width,
H = hidden width, n = vector/matrix size of the series and iteration models.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rnnbench.ops import Ops, forward_pass, numpy_ops

Array = Any  # a numpy, torch or jax array, depending on the ops namespace in use
Carry = tuple  # tuple of arrays, one per name in Model.carry_names
Params = Mapping[str, Array]

DTYPES = ("float32", "float64", "bfloat16")  # every dtype a row runs at, in the order a run lists them
BY_PRECISION = ("float64", *(d for d in DTYPES if d != "float64"))  # the oracle's precision first
_BITS = {"bfloat16": 16, "float16": 16, "float32": 32, "float64": 64}


def promoted(dtype: str, computed: str | None) -> str:
    """`computed` where a row at `dtype` computed in a wider float dtype (a step that promotes: a
    float64 constant, a numpy float64 scalar under jax's x64), else ""."""
    return computed if computed and _BITS.get(computed, 0) > _BITS.get(dtype, 64) else ""


def promotion_note(dtype: str, computed: str) -> str:
    """The line a promoted row's report carries (docs/checking.md, "Dtype promotion")."""
    return (
        f"computed in {computed}, not {dtype}: the step promotes (a {computed} constant or numpy {computed} scalar "
        f"in it); its gradients are judged with the {dtype} tolerance, and its times are not {dtype} times"
    )


@dataclass(frozen=True)
class Case:
    """One concrete problem, as canonical float64 numpy arrays.

    params: name -> array (trainable). carry0: one array per carry leaf. xs: (T, ...) per-step inputs
    or None when the recurrence has only a trip count. consts: non-trainable arrays the loss uses.
    The gradients compared are d loss / d params, plus d loss / d carry0 leaves flagged in
    `carry0_requires_grad` (named "carry0.<leaf>"), plus d loss / d xs when `xs_requires_grad`.
    xs and carry0 leaves may be integer arrays (token ids, counters): kept integer by every driver
    and oracle, never rounded, never differentiated (their flags are False).
    """

    model: str
    sizes: Mapping[str, int]
    seed: int
    params: Mapping[str, np.ndarray]
    carry0: tuple[np.ndarray, ...]
    xs: np.ndarray | None
    length: int
    consts: Mapping[str, np.ndarray] = field(default_factory=dict)
    carry0_requires_grad: tuple[bool, ...] = ()
    xs_requires_grad: bool = False
    loss: str = "model"  # the loss form (rnnbench.losses) that consts and Model.loss implement

    def wrt_names(self, carry_names: Sequence[str]) -> list[str]:
        """Names of every input whose gradient is compared, in a fixed order."""
        names = list(self.params)
        names += [f"carry0.{n}" for n, g in zip(carry_names, self.carry0_requires_grad) if g]
        if self.xs_requires_grad:
            names.append("xs")
        return names

    def rounded_to(self, dtype: str) -> Case:
        """The same case with every array rounded to `dtype` and stored back as float64.

        A driver running at `dtype` then sees exactly these values, and the float64 oracle is
        evaluated on the same inputs: the comparison measures the driver's arithmetic, not the
        rounding of its inputs.
        """
        np_dtype = numpy_dtype(dtype)

        def r(a: np.ndarray) -> np.ndarray:
            return a if is_integer(a) else np.asarray(a).astype(np_dtype).astype(np.float64)

        return dataclasses.replace(
            self,
            params={k: r(v) for k, v in self.params.items()},
            carry0=tuple(r(c) for c in self.carry0),
            xs=None if self.xs is None else r(self.xs),
            consts={k: r(v) for k, v in self.consts.items()},
        )


def is_integer(a: Any) -> bool:
    """Whether `a` is an integer numpy array (or number): an index or a count, never differentiated
    and never rounded to a float dtype."""
    return isinstance(a, (np.ndarray, np.integer)) and a.dtype.kind in "iu"


def numpy_dtype(dtype: str) -> Any:
    """numpy dtype for a dtype name; bfloat16 comes from ml_dtypes (a jax dependency)."""
    if dtype == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return {"float64": np.float64, "float32": np.float32, "float16": np.float16}[dtype]


def _each_counts_once(size: int) -> float:
    return 1.0


@dataclass(frozen=True)
class BatchAxes:
    """Where the examples of a batched case sit (Model.batch_axes): the axis of the batch in each
    batched input, by canonical name ("xs" (T, B, ...): 1; "carry0.<leaf>" (B, ...): 0; the final
    carry leaf has its initial leaf's axis), in ys (T, B, ...), and in each const of the loss. An
    input or const not named has no batch axis: every example shares it (the parameters).
    weight(B): the loss is weight(B) times the sum over examples of the same loss on each example's
    slice alone (1 for a sum; rnnbench.batch checks it on every case before a per_example row
    runs). A loss form (rnnbench.losses.with_loss) puts its own consts' axes and weight here."""

    inputs: Mapping[str, int]
    ys: int
    consts: Mapping[str, int] = field(default_factory=dict)
    weight: Callable[[int], float] = _each_counts_once


@dataclass(frozen=True)
class Layout:
    """Where the examples of one case sit (batch_layout): size B; inputs: {canonical input name:
    its batch axis}, the batched inputs present; consts: {const name: its batch axis}, the batched
    consts present; ys: the batch axis of ys; weight: the loss is weight * Σ_b loss(example b)."""

    size: int
    inputs: Mapping[str, int]
    consts: Mapping[str, int]
    ys: int
    weight: float


NO_BATCH = "the model has no batch axis (Model.batch_axes)"


def batch_layout(model: Model, case: Case) -> Layout | str:
    """Where the examples of `case` sit (Model.batch_axes on this case's arrays), or why it has none."""
    axes = model.batch_axes
    if axes is None:
        return NO_BATCH
    present = {"xs": case.xs, **{f"carry0.{n}": c for n, c in zip(model.carry_names, case.carry0)}}
    inputs = {n: a for n, a in axes.inputs.items() if present.get(n) is not None}
    sizes = {n: np.shape(present[n])[a] for n, a in inputs.items()}
    if not sizes:
        return "no input of this case has a batch axis"
    if len(set(sizes.values())) > 1:
        return f"the batch axes disagree on the number of examples: {sizes}"
    size = next(iter(sizes.values()))
    consts = {n: a for n, a in axes.consts.items() if n in case.consts}
    return Layout(size, inputs=inputs, consts=consts, ys=axes.ys, weight=axes.weight(size))


def time_major_batch(
    carry_names: Sequence[str], *, step_consts: Sequence[str], leaf_consts: Sequence[str]
) -> BatchAxes:
    """The batch of a sequence model laid out time-major: xs and ys (T, B, ...), every carry leaf
    (B, ...), its loss's per-step consts (T, B, ...) and per-leaf consts (B, ...)."""
    return BatchAxes(
        inputs={"xs": 1, **{f"carry0.{n}": 0 for n in carry_names}},
        ys=1,
        consts={**{c: 1 for c in step_consts}, **{c: 0 for c in leaf_consts}},
    )


Step = Callable[[Ops, Params, Carry, Array | None], tuple[Carry, Array]]
Loss = Callable[[Ops, Mapping[str, Array], Array, Carry], Array]
Prologue = Callable[[Ops, Params, Array], Array]
# recur(step, params, carry0, xs, length) -> (ys (T, ...), carry_T): one recurrence, run by a
# driver's mechanism (a Python loop, torch scan, lax.scan, nn.scan, ...). xs (T, ...) or None.
Recur = Callable[[Step, Params, Carry, Array | None, int], tuple[Array, Carry]]
# forward(ops, params, carry0, xs, length, recur) -> (ys, carry_T): a model made of several
# recurrences (stacked layers, two directions), each run through `recur`.
Forward = Callable[[Ops, Params, Carry, Array | None, int, Recur], tuple[Array, Carry]]
Flops = Callable[[Mapping[str, int]], dict[str, float]]
# linear_recurrence(ops, params, x) -> (a, b): the coefficients of h_t = a_t * h_{t-1} + b_t.
LinearRecurrence = Callable[[Ops, Params, Array], tuple[Array, Array]]


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
        (hand-derived BPTT, closed forms). None: the oracle ladder's exact dual numbers over the
        numpy step (rnnbench.check.oracles.oracle).
    kind: the computation family that vendor layers (anchor drivers) recognise, e.g. "elman_tanh".
    flops(sizes) -> {"fwd": ..., "fwd_bwd": ...}: floating-point operations of one forward and one
        forward+backward pass, counted analytically (models/_flops.py states the convention), for
        the roofline. None: not counted, rows of this model get no GFLOP/s.
    forward(ops, params, carry0, xs, length, recur) -> (ys, carry_T): for a model made of several
        recurrences in one graph (layer 2 scans layer 1's outputs; a backward direction scans the
        flipped sequence), how they compose; each runs through `recur`, the driver's mechanism,
        so every driver chains its own scans. None: one recurrence of `step` after `prologue`.
        carry_names then names the carry leaves of all recurrences together.
    cotangent_consts(dys, dcarry) -> consts: for a loss linear in ys and the final carry, the consts
        under which `loss` has exactly these cotangents (dys (T, ...), one array per carry leaf), so
        the hand oracle gives the gradient under any loss form of rnnbench.losses; None where the
        loss has no weight for a nonzero cotangent. Absent: under other loss forms the oracle ladder
        answers.
    linear_recurrence(ops, params, x) -> (a, b): declared for a model whose step is the elementwise
        linear recurrence h_t = a_t * h_{t-1} + b_t on its one carry leaf h, with y_t = h_t and no
        Model.forward. x is the prologue's output: one step's slice x_t (B, ...) gives a_t, b_t of
        h's shape (B, H); the whole (T, B, ...) gives a, b (T, B, H). The step computes its update
        through it, so the declaration and the step cannot disagree; associative-scan drivers
        compose (a, b) pairs in parallel and run only models that declare it. None: not linear.
    suite: "core" (the benchmark comparison: `rnnbench run` by default, tested at every dtype) or
        "bugs" (bug-class cases from docs/bugs.md: `rnnbench run --suite bugs`, tested at float64, since
        the classes they target do not depend on the dtype).
    integer_inputs: the inputs that are integer arrays, by canonical name ("xs", "carry0.<leaf>"): token
        ids, counters; kept integer by every driver, never differentiated. A mechanism that cannot
        run them says so (Driver.supports). Empty: every input is float.
    island_grads: compared inputs whose gradient flows only through `ops.fp32_island()` regions of
        the step; under bf16 autocast their semantics are float32, so they are checked at the float32
        tolerance while the rest get the bfloat16 one (docs/bugs.md §3). Empty: no island.
    reverse: the recurrence runs from the last step to the first (a backward direction on its own):
        step t reads xs[t] and the carry step t+1 left, ys[t] is its output, and carry_T is the carry
        after step 0. run_forward runs it through a driver's native reverse recurrence where it has
        one (lax.scan's reverse=True), else through its forward one on the flipped sequence. One
        recurrence only (no Model.forward).
    batch_axes: where each example of its batch sits (BatchAxes), for the per_example mode
        (rnnbench.modes): each example's gradient on its own. None: the model has no batch axis
        (a trip-count iteration on one vector, a scalar recurrence), and that mode is unavailable.
    """

    name: str
    summary: str
    carry_names: tuple[str, ...]
    default_sizes: Mapping[str, int]
    make_case: Callable[[Mapping[str, int], int], Case]
    step: Step
    loss: Loss
    prologue: Prologue | None = None
    oracle: Callable[[Case], dict[str, np.ndarray]] | None = None
    oracle_kind: str = "finite_differences"
    kind: str = "generic"
    flops: Flops | None = None
    island_grads: tuple[str, ...] = ()
    forward: Forward | None = None
    cotangent_consts: Callable[[np.ndarray, tuple], dict[str, np.ndarray] | None] | None = None
    linear_recurrence: LinearRecurrence | None = None
    integer_inputs: tuple[str, ...] = ()
    suite: str = "core"
    reverse: bool = False
    batch_axes: BatchAxes | None = None

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


def run_forward(
    ops: Ops,
    model: Model,
    params: Params,
    *,
    carry0: Carry,
    xs: Array | None,
    length: int,
    recur: Recur,
    reverse_recur: Recur | None = None,
) -> tuple[Array, Carry]:
    """The model's forward with every recurrence run by `recur`: (ys (T, ...), carry_T).
    reverse_recur: the driver's native recurrence from the last slice to the first, which a
    Model.reverse model runs on; None: such a model runs `recur` on the flipped sequence."""
    if model.forward is not None:
        return model.forward(ops, params, tuple(carry0), xs, length, recur)
    if xs is not None and model.prologue is not None:
        xs = model.prologue(ops, params, xs)  # per-sequence work hoisted out of the loop
    if model.reverse:
        recur = reverse_recur if reverse_recur is not None else flipped(ops, recur)
    return recur(model.step, params, tuple(carry0), xs, length)


def flipped(ops: Ops, recur: Recur) -> Recur:
    """`recur` over the flipped sequence, its ys flipped back: a recurrence run in the other order
    (a forward recur becomes a last-to-first one, and a native reverse one becomes first-to-last)."""

    def run(step: Step, params: Params, carry0: Carry, xs: Array | None, length: int):
        ys, carry = recur(step, params, carry0, None if xs is None else ops.flip(xs), length)
        return ops.flip(ys), carry

    return run


def scan_inputs(ops: Ops, xs: Array | None, length: int, like: Array) -> tuple[Array, Callable[[Any], Any]]:
    """For scan primitives that need something to scan over: (xs, or (length, 1) zeros in like's
    dtype and device for a trip-count recurrence; how a slice reaches the step: itself, or None)."""
    if xs is not None:
        return xs, lambda x: x
    return ops.zeros((length, 1), like), lambda x: None


def loop_recur(ops: Ops, collect: Callable[[Any, int, Any], Any] | None = None) -> Recur:
    """The plain Python loop as a `recur`, over the slices of ops.unstack(xs). collect(ys, t, y) -> ys:
    how step t's output joins ys, for loops that write into a preallocated buffer (ys is None before
    the first step); default: a list, stacked at the end."""

    def recur(step: Step, params: Params, carry0: Carry, xs: Array | None, length: int):
        carry = tuple(carry0)
        ys: Any = None if collect is not None else []
        # One unstack, not xs[t] per step: each index's derivative is a zero array of xs's full
        # shape (torch SelectBackward, an XLA pad), so T of them make the backward O(T^2).
        inputs = (None,) * length if xs is None else ops.unstack(xs)
        for t in range(length):
            carry, y = step(ops, params, carry, inputs[t])
            if collect is None:
                ys.append(y)
            else:
                ys = collect(ys, t, y)
        return (ops.stack(ys) if collect is None else ys), carry

    return recur


def rollout(
    ops: Ops,
    model: Model,
    params: Params,
    *,
    carry0: Carry,
    xs: Array | None,
    length: int,
    collect: Callable[[Any, int, Any], Any] | None = None,
):
    """The model's forward as plain Python loops: returns (ys of shape (T, ...), carry_T). Used by
    the numpy reference and by the loop drivers, so every framework runs literally the same
    recurrence (collect: see loop_recur)."""
    return run_forward(ops, model, params, carry0=carry0, xs=xs, length=length, recur=loop_recur(ops, collect))


def reference_loss(model: Model, case: Case, *, params=None, carry0=None, xs=None) -> float:
    """float64 numpy forward loss; finite differences perturb `params`, `carry0` or `xs`. One
    forward pass of rnnbench.ops.frozen_stop_gradients(), which the derivative oracles open."""
    ops = numpy_ops()
    with forward_pass():
        ys, carry = rollout(
            ops,
            model,
            case.params if params is None else params,
            carry0=case.carry0 if carry0 is None else carry0,
            xs=case.xs if xs is None else xs,
            length=case.length,
        )
        return float(model.loss(ops, case.consts, ys, carry))


def linear_recurrence_inputs(
    ops: Ops, model: Model, params: Params, *, carry0: Carry, xs: Array
) -> tuple[Array, Array]:
    """(a, b) of a model declaring Model.linear_recurrence, both (T, B, H), with h0 folded into the
    first step (b_0 <- a_0 h0 + b_0; the last step, b_{T-1}, for a Model.reverse model): the running
    composition of (a, b) by combine_linear then gives h_t as its second part, and its first part
    (the products of the decays) is discarded."""
    xp = model.prologue(ops, params, xs) if model.prologue is not None else xs
    a, b = model.linear_recurrence(ops, params, xp)  # type: ignore[misc]
    if model.reverse:
        return a, ops.concat([b[:-1], (a[-1] * carry0[0] + b[-1])[None]], axis=0)
    return a, ops.concat([(a[0] * carry0[0] + b[0])[None], b[1:]], axis=0)


def linear_recurrence_states(
    ops: Ops, model: Model, params: Params, *, carry0: Carry, xs: Array, scan: Callable[..., Any], reverse: bool
) -> tuple[Array, Carry]:
    """(hs (T, B, H), carry_T) of a declared linear recurrence, composed by an associative scan:
    scan(combine, (a, b), reverse) -> the running compositions, from the first pair (reverse False) or
    from the last (True: the combine's left operand is the later pair). A scan that runs in the
    model's own order composes (a, b) as they are; one that runs in the other order composes them
    flipped, its result flipped back (a forward model on a native reverse scan, and back)."""
    a, b = linear_recurrence_inputs(ops, model, params, carry0=carry0, xs=xs)
    if reverse == model.reverse:
        _, hs = scan(combine_linear, (a, b), reverse)
    else:
        _, hs = scan(combine_linear, (ops.flip(a), ops.flip(b)), reverse)
        hs = ops.flip(hs)
    return hs, (hs[0] if model.reverse else hs[-1],)


def combine_linear(left: tuple[Array, Array], right: tuple[Array, Array]) -> tuple[Array, Array]:
    """The associative operator of h_t = a_t h_{t-1} + b_t: applying (a1, b1), then (a2, b2), is
    (a1 a2, a2 b1 + b2). Elementwise, so it runs on any framework's arrays and any batch of pairs."""
    (a1, b1), (a2, b2) = left, right
    return a1 * a2, a2 * b1 + b2


def supports_linear_recurrence(model: Model) -> str | None:
    """Driver.supports of an associative-scan driver: None, or why `model` cannot run on one."""
    if model.linear_recurrence is None:
        return (
            "the model declares no linear recurrence (Model.linear_recurrence): an associative scan cannot run its step"
        )
    if model.forward is not None or len(model.carry_names) != 1:
        return "an associative scan runs one recurrence with one carry leaf"
    return None
