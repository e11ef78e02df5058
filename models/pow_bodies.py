"""A step body with a learned power whose exponent is exactly 0 (found by the fuzzer's edge grammar;
docs/upstream/torch-pow-double-backward-drops-exponent-term.md).

- `learned_power`: c' = (1.5 + tanh(p)) ** c, y = c', from c0 = 0 exactly: at step 0 the exponent of a
  power whose base (through p) and exponent (c, differentiated) both carry grad is 0. f = a^b has
  d/db (df/da) = 1 / a there, a term torch's double backward drops (its derivative of a ** b in a is
  a where(b == 0, 0, ...)); first derivatives are right everywhere.

p: (n,) parameter, c0: (n,) zeros with grad, no xs. Loss: fixed random weights on every output and the
final carry. The oracle is the dual numbers (first and second order).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rnnbench.model import Case, Model
from rnnbench_models._common import rng_for, uniform

NAME = "learned_power"


def _step(ops, params, carry, x):
    (c,) = carry
    new = (1.5 + ops.tanh(params["p"])) ** c
    return (new,), new


def _loss(ops, consts, ys, carry):
    return ops.sum(ys * consts["wy"]) + ops.sum(carry[0] * consts["wc"])


def _make_case(sizes: Mapping[str, int], seed: int) -> Case:
    rng = rng_for(NAME, seed)
    n, T = sizes["n"], sizes["T"]
    return Case(
        model=NAME,
        sizes=dict(sizes),
        seed=seed,
        params={"p": uniform(rng, (n,))},
        carry0=(np.zeros(n),),  # the exponent exactly 0 at step 0: the case this model exists for
        xs=None,
        length=T,
        consts={"wy": uniform(rng, (T, n)), "wc": uniform(rng, (n,))},
        carry0_requires_grad=(True,),
    )


MODELS = (
    Model(
        name=NAME,
        summary="c <- (1.5 + tanh p) ** c from c0 = 0: a learned power at exponent 0 (torch's double backward)",
        carry_names=("c",),
        default_sizes={"T": 2, "n": 2},
        make_case=_make_case,
        step=_step,
        loss=_loss,
        suite="bugs",
    ),
)
