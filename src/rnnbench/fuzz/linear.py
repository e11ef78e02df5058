"""Linear step bodies, for the associative-scan drivers: c0' = sigmoid(A) * c0 + B, y = c0', where
A and B are expressions of the grammar (rnnbench.fuzz.grammar) over the parameters p0, p1 and the
per-step input x, never over the carry, and without W @ . (the declared coefficients are evaluated
on all T steps at once, (T, n), where a matrix-vector product per step is not the same
expression). The decay is mostly sigmoid(A), in (0, 1); a share of the bodies draws an edge decay
instead (DECAYS): exactly 0 (the carry forgotten: d h_t / d h_(t-1) = 0), exactly 1 (a running sum:
nothing decays, the products of the decays stay 1 over every step), or a negative one, -sigmoid(A)
or tanh(A) (the sign alternates over the steps). No draw has |decay| > 1, so none grows over the
steps; a decay of exactly 1 sums the bounded drives, T of them at most.

A linear body declares its coefficients (Body.linear = (decay, drive)); rnnbench.fuzz.cases gives
its model Model.linear_recurrence from them, and only while its update and output are still exactly
that form: a shrunk candidate that is no longer linear declares nothing, and the associative
drivers then call it unavailable rather than run it.

Every associative driver scans two outputs, the running decay products and h, and discards the
products (h0 is folded into the first step): pytorch#172568's class, gradients wrong when one of
several scan outputs is discarded, is in every linear body.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence

from rnnbench.fuzz import grammar as grammars
from rnnbench.fuzz.grammar import LONG_TRIPS, PARAM_VECTORS, Body, Grammar, _leaves, _valid_expr, body_valid, render

STREAM = "rnnbench-fuzz-linear"


def update_of(decay: tuple, drive: tuple) -> tuple:
    """The carry update (and output) expression of a linear body with these coefficients."""
    return ("bin", "+", ("bin", "*", decay, ("leaf", "c0")), drive)


def _coefficient(rng: random.Random, leaves: list[str]) -> tuple:
    while True:  # rejection sampling keeps the stream reproducible
        e = _valid_expr(rng, leaves, rng.choice((0, 1, 2)))
        if "W" not in _leaves(e):
            return e


# The decay's forms beside sigmoid(A): (name, the decay as an expression of A). Drawn from their own
# stream, so the bodies that keep sigmoid(A) keep every expression and datum they had before these existed.
DECAYS: tuple[tuple[str, Callable[[tuple], tuple]], ...] = (
    ("zero", lambda a: ("const", 0.0)),
    ("one", lambda a: ("const", 1.0)),
    ("negative", lambda a: ("bin", "-", ("const", 0.0), ("un", "sigmoid", a))),
    ("signed", lambda a: ("un", "tanh", a)),
)
EDGE_DECAY_SHARE = 0.4  # of the bodies: each edge form above on a tenth of the stream


def decay_form(seed: int, index: int) -> str:
    """Which decay body `index` of the stream for `seed` draws: "sigmoid" or a name of DECAYS."""
    rng = random.Random(f"{STREAM}/decay/{seed}/{index}")
    if rng.random() >= EDGE_DECAY_SHARE:
        return "sigmoid"
    return rng.choice(DECAYS)[0]


def _decay(form: str, a: tuple) -> tuple:
    return ("un", "sigmoid", a) if form == "sigmoid" else dict(DECAYS)[form](a)


def generate(seed: int, index: int) -> Body:
    """Linear body number `index` of the stream for `seed`."""
    rng = random.Random(f"{STREAM}/{seed}/{index}")
    leaves = [*PARAM_VECTORS, "x"]
    form = decay_form(seed, index)
    while True:
        decay = _decay(form, _coefficient(rng, leaves))
        drive = _coefficient(rng, leaves)
        update = update_of(decay, drive)
        body = Body(
            updates=(update,),
            output=update,
            n=rng.choice((1, 2, 3)),
            length=rng.choice((1, 2, 3, 4, 5, 6, *LONG_TRIPS)),
            has_xs=True,
            carry_grad=(rng.random() < 0.5,),
            xs_grad=rng.random() < 0.5,
            data_seed=rng.randrange(2**31),
            linear=(decay, drive),
        )
        if body_valid(body):
            return body


def judged_body(seed: int, index: int, losses: Sequence[str]) -> Body:
    """As rnnbench.fuzz.grammar.judged_body, from the linear stream."""
    return dataclasses.replace(generate(seed, index // len(losses)), loss=losses[index % len(losses)])


def body_for(seed: int, index: int, losses: Sequence[str], grammar: Grammar) -> Body:
    """Case `index` of a run under `grammar`: the linear stream's for "linear", the grammar's otherwise."""
    if grammar.name == "linear":
        return judged_body(seed, index, losses)
    return grammars.judged_body(seed, index, losses, grammar)


def source(body: Body) -> str:
    """The declared coefficients as a function linear(ops, params, x) -> (a, b), each of x's shape:
    x_t (n,) gives one step's, xs (T, n) every step's."""
    decay, drive = body.linear
    used = (_leaves(decay) | _leaves(drive)) & set(PARAM_VECTORS)
    lines = ["def linear(ops, params, x):"]
    lines += [f"    {p} = params[{p!r}]" for p in sorted(used)]
    lines.append(f"    return {render(decay)} + ops.zeros_like(x), {render(drive)} + ops.zeros_like(x)")
    return "\n".join(lines) + "\n"


def declared(body: Body, compile_source: Callable[[str, str], Callable]) -> Callable | None:
    """Model.linear_recurrence of `body`: its declared coefficients while the body is still exactly
    c0' = decay * c0 + drive, y = c0' with a per-step input; None otherwise."""
    if not body.linear or not body.has_xs or body.unused or body.plant:
        return None
    update = update_of(*body.linear)
    if body.updates != (update,) or body.output != update:
        return None
    return compile_source(source(body), "linear")
