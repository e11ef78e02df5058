"""Step bodies of the two shapes torch_xla's experimental scan cannot differentiate (found by the
fuzzer; docs/bugs.md#torch-xla-scan-output-without-grad and #torch-xla-scan-unread-carry-leaf).
Every other driver runs them as plain recurrences, so they also check that the shapes are right
elsewhere.

- `xla_output_without_grad`: h' = a * h + x, y = 2 x with xs not differentiated: the step output
  depends on nothing that requires grad.
- `xla_unread_carry`: carry (h, k), h' = a * h + x, k' = a * x, y = h: the step never reads k, so
  the step's backward has no gradient for it.

a: (n,) parameter, h0 (and k0): (n,) without grad, xs: (T, n) without grad. Loss: fixed random
weights on every output and final carry leaf. The oracle is float64 finite differences.
"""

from __future__ import annotations

from collections.abc import Mapping

from rnnbench.model import Case, Model
from rnnbench_models._common import rng_for, uniform


def _weighted(ops, consts, ys, carry):
    total = ops.sum(ys * consts["wy"])
    for i, leaf in enumerate(carry):
        total = total + ops.sum(leaf * consts[f"wc{i}"])
    return total


def _model(name: str, summary: str, step, carry_names: tuple[str, ...]) -> Model:
    def make_case(sizes: Mapping[str, int], seed: int) -> Case:
        rng = rng_for(name, seed)
        n, T = sizes["n"], sizes["T"]
        carry0 = tuple(uniform(rng, (n,)) for _ in carry_names)
        consts = {"wy": uniform(rng, (T, n)), **{f"wc{i}": uniform(rng, (n,)) for i in range(len(carry_names))}}
        return Case(
            model=name,
            sizes=dict(sizes),
            seed=seed,
            params={"a": uniform(rng, (n,), 0.9)},
            carry0=carry0,
            xs=uniform(rng, (T, n)),
            length=T,
            consts=consts,
            carry0_requires_grad=tuple(False for _ in carry_names),
        )

    return Model(
        name=name,
        summary=summary,
        carry_names=carry_names,
        default_sizes={"T": 4, "n": 3},
        make_case=make_case,
        step=step,
        loss=_weighted,
        suite="bugs",
    )


def _output_without_grad(ops, params, carry, x):
    (h,) = carry
    return (params["a"] * h + x,), x * 2.0


def _unread_carry(ops, params, carry, x):
    h, _k = carry
    return (params["a"] * h + x, params["a"] * x), h


MODELS = (
    _model(
        "xla_output_without_grad",
        "h <- a*h + x, y = 2x: a step output that needs no grad (torch_xla scan)",
        _output_without_grad,
        ("h",),
    ),
    _model("xla_unread_carry", "carry (h, k), k never read by the step (torch_xla scan)", _unread_carry, ("h", "k")),
)
