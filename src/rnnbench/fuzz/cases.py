"""A fuzzed body as a Model and a Case the drivers run, and its oracle (the ladder of
check/oracles/oracle.py: dual numbers over the numpy step, 50 digits where float64 may not resolve the
gradient, finite differences with error bounds only where no derivative exists) computed once per
body. A batched body (Body.examples, a per_example campaign's) runs its step on each example's
carry and x, (B, n) each, the parameters shared; example 0 has the unbatched body's data, each other
example data of its own stream (batched_case)."""

from __future__ import annotations

import builtins
import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from rnnbench.check.oracles.oracle import Oracle, oracle_grads
from rnnbench.check.verdicts.per_example import ExampleOracles, example_oracles
from rnnbench.check.verdicts.second_order import HvpOracle, hvp_oracle
from rnnbench.fuzz import linear
from rnnbench.fuzz.edges import SNAP_VALUES
from rnnbench.fuzz.grammar import EMBEDDING, PARAM_VECTORS, Body, body_wrt
from rnnbench.losses import weighted, with_loss
from rnnbench.model import Case, Model, Step, reference_loss, time_major_batch
from rnnbench.status import OracleKind

NEAR_ZERO_PROBABILITY = 0.15  # parameter entries set to +-1e-3, where wrong rules show (docs/bugs.md §4)
STATIONARY_PROBABILITY = 0.1  # entries set where sin/cos/x*x/1/(1+x^2) have zero slope
STATIONARY_VALUES = (0.0, np.pi / 2, -np.pi / 2, np.pi)
LOSS_LIMIT = 1e6  # a draw whose loss exceeds this has grown too much over the steps to check


@functools.lru_cache(maxsize=8)
def compile_step(source: str, name: str = "step"):
    """The body's step function, one object per source: the loss forms of a body, judged one after
    another by a driver's worker, then share it, and the drivers' trace caches (torch scan's dynamo
    frame, keyed on the function it closes over) hit instead of tracing the same step again."""
    namespace: dict = {"__builtins__": builtins}
    exec(compile(source, "<fuzzed body>", "exec"), namespace)
    return namespace[name]


def body_case(body: Body, name: str) -> Case:
    """Seeded data: vectors in [-1, 1] with some entries near 0 (+-1e-3) and some at stationary
    points of the unary ops (0, +-pi/2, pi), W scaled to spectral radius < 1; with a snap rate, the
    vectors' entries (parameters, initial carry, xs) snapped onto kinks and ties (`snap`)."""
    rng = np.random.default_rng(body.data_seed)
    stationary = np.random.default_rng([body.data_seed, 0x5354])  # its own stream: old draws keep their data
    n, T, used, wrt = body.n, body.length, body.leaves_used(), body_wrt(body)

    def vector() -> np.ndarray:
        v = rng.uniform(-1.0, 1.0, n)
        near = rng.random(n) < NEAR_ZERO_PROBABILITY
        v = np.where(near, 1e-3 * np.sign(v), v)
        at = stationary.random(n) < STATIONARY_PROBABILITY
        return np.where(at, stationary.choice(STATIONARY_VALUES, n), v)

    params = {p: vector() for p in PARAM_VECTORS if p in used}
    params.update({p: stationary.uniform(-1.0, 1.0, n) for p in body.unused})
    if "W" in used:
        params["W"] = 0.9 * rng.uniform(-1.0, 1.0, (n, n)) / np.sqrt(n)
    k = len(body.updates)
    carry0 = tuple(vector() for _ in range(k))
    xs = rng.uniform(-1.0, 1.0, (T, n)) if body.has_xs else None
    if body.tokens and xs is not None:  # token ids and their embedding, from their own stream
        tokens = np.random.default_rng([body.data_seed, 0x544F4B])
        xs = tokens.integers(0, body.tokens, (T, n))
        params[EMBEDDING] = tokens.uniform(-1.0, 1.0, body.tokens)
    if body.snap_rate > 0:  # its own stream: the unsnapped draws keep their data
        snap_rng = np.random.default_rng([body.data_seed, 0x534E4150])
        vectors = {p: params[p] for p in (*PARAM_VECTORS, EMBEDDING) if p in params}
        floats = None if body.tokens else xs  # token ids are indices, not points of a kink
        snapped, _ = snap(
            {**vectors, **{f"c{i}": c for i, c in enumerate(carry0)}, "xs": floats}, body.snap_rate, snap_rng
        )
        params.update({p: snapped[p] for p in vectors})
        carry0 = tuple(snapped[f"c{i}"] for i in range(k))
        xs = xs if body.tokens else snapped["xs"]
    return Case(
        model=name,
        sizes={"T": T, "n": n},
        seed=body.data_seed,
        params=params,
        carry0=carry0,
        xs=xs,
        length=T,
        consts={"wy": rng.uniform(-1.0, 1.0, (T, n)), **{f"wc{i}": rng.uniform(-1.0, 1.0, n) for i in range(k)}},
        carry0_requires_grad=tuple(f"carry0.{c}" in wrt for c in body.carry_names),
        xs_requires_grad="xs" in wrt,
        loss="weighted",  # rnnbench.losses.weighted with these weights
    )


def snap(
    arrays: dict[str, np.ndarray | None], rate: float, rng: np.random.Generator
) -> tuple[dict[str, np.ndarray | None], dict[str, np.ndarray]]:
    """Each entry of each array (..., n) set, with probability `rate`, exactly onto the snap value
    of its last-axis index j (one of rnnbench.fuzz.edges.SNAP_VALUES, drawn once per j): snapped
    entries sit on the kinks at 0 and +-CLIP, and two snapped operands at one index tie.
    Returns the arrays (None stays None) and the masks of the entries snapped."""
    present = {k: a for k, a in arrays.items() if a is not None}
    n = max((a.shape[-1] for a in present.values()), default=0)
    values = rng.choice(SNAP_VALUES, n)
    out, masks = dict(arrays), {}
    for key, a in present.items():
        masks[key] = rng.random(a.shape) < rate
        out[key] = np.where(masks[key], values[: a.shape[-1]], a)
    return out, masks


def batched_case(body: Body, name: str) -> Case:
    """The body's case on body.examples examples: example b's carry, xs and loss weights on the batch
    axis (carry (B, n), xs and wy (T, B, n), wc_i (B, n)), drawn as body_case draws an unbatched body's
    (example 0 from the body's data seed, example b from a seed of its own stream); the parameters
    are example 0's, shared by every example."""
    seeds = np.random.default_rng([body.data_seed, 0x42415443]).integers(2**31, size=body.examples)
    each = [
        body_case(dataclasses.replace(body, data_seed=int(s) if b else body.data_seed), name)
        for b, s in enumerate(seeds)
    ]
    first = each[0]
    return dataclasses.replace(
        first,
        sizes={**first.sizes, "B": body.examples},
        carry0=tuple(np.stack([c.carry0[i] for c in each]) for i in range(len(first.carry0))),
        xs=None if first.xs is None else np.stack([c.xs for c in each], axis=1),
        consts={k: np.stack([c.consts[k] for c in each], axis=1 if k == "wy" else 0) for k in first.consts},
    )


def batched_step(step: Step) -> Step:
    """`step` run on each example of a batched carry and x (B, n) apart, its results stacked."""

    def run(ops, params, carry, x):
        leaves = [ops.unstack(leaf) for leaf in carry]
        xs = [None] * len(leaves[0]) if x is None else ops.unstack(x)
        outs = [step(ops, params, tuple(leaf[b] for leaf in leaves), xs[b]) for b in range(len(leaves[0]))]
        new = tuple(ops.stack([out[0][i] for out in outs]) for i in range(len(carry)))
        return new, ops.stack([out[1] for out in outs])

    return run


@dataclass
class FuzzCase:
    """A body ready to run: model, case (rounded to the dtype the drivers run at), its first-order
    oracle (check/oracles/oracle.py; None when ill-conditioned, and for a batched body, whose rows are
    per_example's), and `ill_conditioned` (None, or why the numpy forward itself cannot be checked on
    this draw). example_oracles(): a batched body's per-example oracles, computed once."""

    body: Body
    model: Model
    case: Case
    ill_conditioned: str | None
    oracle: Oracle | None = None
    _hvp: HvpOracle | None = None
    _examples: ExampleOracles | None = None

    def example_oracles(self) -> ExampleOracles:
        """Each example's oracle (check/verdicts/per_example.example_oracles), computed once."""
        if self._examples is None:
            self._examples = example_oracles(self.model, self.case)
        return self._examples

    def hvp_oracle(self) -> HvpOracle:
        """H v along a direction seeded by the body (check/verdicts/second_order.hvp_oracle), computed once."""
        if self._hvp is None:
            self._hvp = hvp_oracle(self.model, self.case, seed=self.body.data_seed)
        return self._hvp


def build(body: Body, name: str = "fuzz", dtype: str = "float64") -> FuzzCase:
    """The body's model and case at `dtype`, and its oracle. Where the oracle cannot pin a gradient
    down, its bounds say so and the judge answers cannot_decide; only a forward that overflows or
    raises a floating-point exception is skipped as ill-conditioned."""
    drawn = batched_case if body.examples else body_case
    case = drawn(body, name).rounded_to(dtype)
    step = compile_step(body.source())
    carry_consts = [f"wc{i}" for i in range(len(body.carry_names))]
    model = Model(
        name=name,
        summary="fuzzed body",
        carry_names=body.carry_names,
        default_sizes={"T": body.length, "n": body.n},
        make_case=lambda sizes, seed: case,
        step=batched_step(step) if body.examples else step,
        loss=weighted,
        oracle_kind=OracleKind.FINITE_DIFFERENCES,
        linear_recurrence=linear.declared(body, compile_step),  # elementwise in x: a batch's x as well
        integer_inputs=("xs",) if body.tokens and body.has_xs else (),
        batch_axes=time_major_batch(body.carry_names, step_consts=("wy",), leaf_consts=carry_consts)
        if body.examples
        else None,
    )
    if body.loss != "weighted":  # "weighted" keeps the body's own weights (the stream before loss forms)
        model, case = with_loss(model, drawn(body, name), body.loss)
        case = case.rounded_to(dtype)
    try:
        with np.errstate(all="raise"):
            loss = reference_loss(model, case)
            if not np.isfinite(loss) or abs(loss) > LOSS_LIMIT:
                return FuzzCase(body, model, case, f"loss {loss:.3g} is not finite or exceeds {LOSS_LIMIT:g}")
    except FloatingPointError as exc:
        return FuzzCase(body, model, case, f"floating-point exception in the numpy forward: {exc}")
    # outside errstate: a tangent that overflows is not an exception but a non-finite entry, which
    # the ladder hands to finite differences
    # a batched body's rows are per_example's: each example's oracle (FuzzCase.example_oracles), asked for there
    oracle = None if body.examples else oracle_grads(model, case)
    return FuzzCase(body, model=model, case=case, ill_conditioned=None, oracle=oracle)
