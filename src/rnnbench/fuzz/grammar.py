"""The grammar of fuzzed step bodies, generated reproducibly from a seed, and their shrinking.

A body updates a pytree carry of 1-3 vector leaves c0..c2 (each (n,)) from the carry, an optional
per-step input x (n,), vector parameters p0, p1 (n,) and a matrix parameter W (n, n):
    expr := leaf | const | u(expr) | expr (+ - *) expr | expr / (1 + expr*expr) | expr / (1.5 + tanh(expr))
          | W @ expr
    u    := sin | cos | tanh | sigmoid | exp(tanh(.))         (exp only of a bounded argument)
    body := new c_i = expr_i for each leaf,  y = expr
Trip counts 1-6, or 8/12/16 for ~30% of bodies; ~20% also read a parameter u that never reaches the
loss (its true gradient is zero: an answer the drivers must give, not an error).
Denominators are bounded away from 0 and exp's argument is bounded, so bodies are defined
everywhere; growth over the steps can still make a draw ill-conditioned: one whose numpy forward
overflows or raises a floating-point exception is skipped with a count (rnnbench.fuzz.cases.build).

The "edge" grammar (Campaign.grammar) adds the ops users write that are not smooth everywhere
(rnnbench.fuzz.edges: relu, clip, abs, minimum/maximum, safe sqrt, learned powers, > and ==,
log-sigmoid, logsumexp) from its own stream, and its bodies carry the rate at which their inputs are
snapped onto kinks and ties (rnnbench.fuzz.cases); a planted body adds a known wrong derivative for
one framework (edges.plant_lines).

Expressions are nested tuples: ("leaf", name) | ("const", value) | ("un", op, e) | ("bin", op, a, b)
| ("div", style, a, b) | ("matvec", e) | ("edge", op, *children). `source()` renders them against
the `ops` namespace, so one body runs on numpy, torch and jax, and a failing one prints as code.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from rnnbench.fuzz.edges import (
    ALL_EDGE_OPS,
    EDGE2_OPS,
    EDGE_OPS,
    EDGE_PROBABILITY,
    LEAF_OPERANDS,
    leaf_of,
    plant_lines,
    render_edge,
)

UNARY = ("sin", "cos", "tanh", "sigmoid", "exp")
BINARY = ("+", "-", "*")
CONSTS = (0.5, -0.7, 1.5)
PARAM_VECTORS = ("p0", "p1")
EMBEDDING = "E"  # a token body's embedding table (Body.tokens)
TOKENS = (4, 0.25)  # edge2: the vocabulary of a token body, and the share of bodies with xs that read tokens


@dataclass(frozen=True)
class Body:
    """One fuzzed step body. updates[i] is the new value of carry leaf c_i; output is y_t.

    n: vector width. length: trip count T. has_xs: whether x is a per-step input (T, n).
    carry_grad[i]: whether c_i's initial value requires grad; xs_grad: whether xs does.
    data_seed: seed of the case data (values, near-zero entries, loss weights).
    unused: parameters the step reads but that never reach the loss (their true gradient is 0).
    loss: the loss form it is judged under (rnnbench.losses; "weighted" with the body's own weights).
    snap_rate: the share of input entries snapped onto kinks and ties (rnnbench.fuzz.cases).
    plant: "" or "<grad|hvp>:<framework>", a known wrong derivative for that framework
    (rnnbench.fuzz.edges).
    linear: (decay, drive) expressions a linear body declares (rnnbench.fuzz.linear), else ().
    tokens: 0, or the vocabulary size of integer token ids xs holds (edge2): the step reads x as
    E[x], a learned embedding E (tokens,) compared like a parameter; xs itself has no gradient.
    examples: 0, or the batch of a per_example campaign's body (EXAMPLES): the step runs on each
    example's carry and x, (examples, n) each, the parameters shared (rnnbench.fuzz.cases)."""

    updates: tuple
    output: tuple
    n: int
    length: int
    has_xs: bool
    carry_grad: tuple[bool, ...]
    xs_grad: bool
    data_seed: int
    unused: tuple[str, ...] = ()
    loss: str = "weighted"
    snap_rate: float = 0.0
    plant: str = ""
    linear: tuple = ()
    tokens: int = 0
    examples: int = 0

    @property
    def carry_names(self) -> tuple[str, ...]:
        return tuple(f"c{i}" for i in range(len(self.updates)))

    def leaves_used(self) -> set[str]:
        used: set[str] = set()
        for e in self.updates + (self.output,):
            used |= _leaves(e)
        return used

    def source(self) -> str:
        """The body as a Python step function against `ops`."""
        names = ", ".join(self.carry_names) + ("," if len(self.updates) == 1 else "")
        used = self.leaves_used()
        lines = ["def step(ops, params, carry, x):", f"    {names} = carry"]
        for p in sorted(u for u in used if u in PARAM_VECTORS + ("W",)):
            lines.append(f"    {p} = params[{p!r}]")
        if self.tokens and "x" in used:  # an embedding lookup: the token ids index E
            lines += [f"    {EMBEDDING} = params[{EMBEDDING!r}]", f"    x = {EMBEDDING}[x]"]
        for p in self.unused:  # computed with, then dropped: the graph reads it, the loss does not
            lines.append(f"    _ = ops.sin(params[{p!r}])")
        plant = self.plant and self.planted_leaf()
        if plant:
            lines += plant_lines(self.plant, plant)
        extra = " + _plant" if plant else ""
        new = ", ".join(render(e) + extra for e in self.updates) + ("," if len(self.updates) == 1 else "")
        lines.append(f"    return ({new}), {render(self.output)}{extra}")
        return "\n".join(lines) + "\n"

    def planted_leaf(self) -> str | None:
        """The step variable the plant differentiates: the first compared input it holds."""
        return next((leaf for leaf in map(leaf_of, body_wrt(self)) if leaf), None)

    def op_classes(self) -> set[str]:
        """The edge ops the body uses ("smooth" when none)."""
        ops: set[str] = set()
        for e in self.updates + (self.output,):
            ops |= _edge_ops(e)
        return ops or {"smooth"}


def _edge_ops(e: tuple) -> set[str]:
    own = {e[1]} if e[0] == "edge" else set()
    return own.union(*(_edge_ops(c) for c in _children(e)))


def _leaves(e: tuple) -> set[str]:
    if e[0] == "leaf":
        return {e[1]}
    if e[0] == "const":
        return set()
    own = {"W"} if e[0] == "matvec" else set()
    return own.union(*(_leaves(c) for c in _children(e)))


def is_array(e: tuple) -> bool:
    """Whether e evaluates to an array (not a Python float): it reads at least one leaf."""
    return e[0] == "leaf" or (e[0] != "const" and any(is_array(c) for c in _children(e)))


def valid(e: tuple) -> bool:
    """Every ops function and W @ . gets an array argument, and e itself is an array."""

    def ok(e: tuple) -> bool:
        if e[0] in ("leaf", "const"):
            return True
        if e[0] == "un" and not is_array(e[2]):
            return False
        if e[0] == "div" and e[1] == "tanh" and not is_array(e[3]):
            return False
        if e[0] == "matvec" and not is_array(e[1]):
            return False
        if e[0] == "edge" and any(
            not is_array(c) for i, c in enumerate(e[2:]) if i not in ALL_EDGE_OPS[e[1]].scalar_ok
        ):
            return False
        return all(ok(c) for c in _children(e))

    return is_array(e) and ok(e)


def body_valid(body: Body) -> bool:
    """Well-formed expressions, something to differentiate, and every parameter the step reads
    reaches the loss (parameters are always compared; one that cannot reach it has no gradient)."""
    params_read = body.leaves_used() & set(PARAM_VECTORS + ("W",))
    return (
        all(valid(e) for e in body.updates + (body.output,)) and bool(body_wrt(body)) and params_read <= reaching(body)
    )


def reaching(body: Body) -> set[str]:
    """Leaves (carry names, x, parameters, "W") through which an input can reach the loss over the
    body's T steps. The loss reads every y_t and the final carry; walking back from step T-1, step t
    needs the leaves of y_t and of the updates of the carry leaves step t+1 needs. A carry leaf that
    is overwritten before anything reads it (c0' = c1 at T = 1) does not reach the loss."""
    needed = set(body.carry_names)  # the final carry is in the loss
    reached: set[str] = set()
    for _ in range(body.length):
        step = _leaves(body.output).union(*(_leaves(e) for c, e in zip(body.carry_names, body.updates) if c in needed))
        reached |= step - set(body.carry_names)
        needed = step & set(body.carry_names)
    return reached | {f"carry0.{c}" for c in needed}


def body_wrt(body: Body) -> list[str]:
    """Names of the inputs whose gradients are compared: the parameters, the carry leaves flagged to
    require grad and xs when flagged, of those that reach the loss (`reaching`). The rest are left
    out, except `unused` parameters: those are compared, and their true gradient is zero."""
    used = reaching(body)
    names = [p for p in PARAM_VECTORS + ("W",) if p in used] + list(body.unused)
    names += [EMBEDDING] if body.tokens and body.has_xs and "x" in used else []
    names += [f"carry0.{c}" for c, g in zip(body.carry_names, body.carry_grad) if g and f"carry0.{c}" in used]
    if body.has_xs and body.xs_grad and "x" in used and not body.tokens:
        names.append("xs")
    return names


def _children(e: tuple) -> tuple:
    return {"un": e[2:], "bin": e[2:], "div": e[2:], "matvec": e[1:], "edge": e[2:]}.get(e[0], ())


def render(e: tuple) -> str:
    kind = e[0]
    if kind == "leaf":
        return e[1]
    if kind == "const":
        return repr(e[1])
    if kind == "un":
        if e[1] == "exp":
            return f"ops.exp(ops.tanh({render(e[2])}))"
        return f"ops.{e[1]}({render(e[2])})"
    if kind == "bin":
        return f"({render(e[2])} {e[1]} {render(e[3])})"
    if kind == "div":
        a, b = render(e[2]), render(e[3])
        return f"({a} / (1.0 + {b} * {b}))" if e[1] == "square" else f"({a} / (1.5 + ops.tanh({b})))"
    if kind == "matvec":
        return f"ops.matmul(W, {render(e[1])})"
    if kind == "edge":
        return render_edge(e[1], [render(c) for c in e[2:]])
    raise ValueError(f"unknown node {e!r}")


def _expr(rng: random.Random, leaves: list[str], depth: int, edge: tuple[str, ...] = ()) -> tuple:
    """edge: the edge ops drawn (sorted; none for the smooth grammar)."""
    if depth == 0 or rng.random() < 0.25:
        return ("const", rng.choice(CONSTS)) if rng.random() < 0.1 else ("leaf", rng.choice(leaves))
    if edge and rng.random() < EDGE_PROBABILITY:
        op = rng.choice(edge)
        below = 0 if rng.random() < LEAF_OPERANDS else depth - 1  # leaves: the snapped data meets the kink
        return ("edge", op, *(_expr(rng, leaves, below, edge) for _ in range(ALL_EDGE_OPS[op].arity)))

    def sub() -> tuple:
        return _expr(rng, leaves, depth - 1, edge)

    r = rng.random()
    if r < 0.3:
        return ("un", rng.choice(UNARY), sub())
    if r < 0.8:
        return ("bin", rng.choice(BINARY), sub(), sub())
    if r < 0.9:
        return ("div", rng.choice(("square", "tanh")), sub(), sub())
    return ("matvec", sub())


# a per_example campaign's bodies run on this many examples (each its own data, the parameters shared)
EXAMPLES = 2
GRAMMARS = ("smooth", "edge", "edge2", "linear")  # linear: rnnbench.fuzz.linear's stream
# each snapping grammar's stream name and the edge ops it draws; edge2 has its own stream, so the
# edge stream's bodies are unchanged by its ops
EDGE_STREAMS = {"edge": ("-edge", tuple(sorted(EDGE_OPS))), "edge2": ("-edge2", tuple(sorted(EDGE_OPS | EDGE2_OPS)))}


@dataclass(frozen=True)
class Grammar:
    """Which bodies a stream draws: `name` "smooth" (the original stream), "edge" (its own stream,
    with rnnbench.fuzz.edges' EDGE_OPS) or "edge2" (its own stream, EDGE_OPS and EDGE2_OPS), the snap
    rate its bodies carry (edge grammars only) and a plant."""

    name: str = "smooth"
    snap_rate: float = 0.0
    plant: str = ""


def generate(seed: int, index: int, grammar: Grammar = Grammar()) -> Body:
    """Body number `index` of the stream for `seed` (independent of how many others are drawn)."""
    suffix, edge = EDGE_STREAMS.get(grammar.name, ("", ()))
    stream = f"rnnbench-fuzz{suffix}/{seed}/{index}"
    body = _draw(stream, edge)
    if grammar.name == "edge2" and body.has_xs and random.Random(f"{stream}/tokens").random() < TOKENS[1]:
        body = dataclasses.replace(body, tokens=TOKENS[0])  # its own stream: the other draws are kept
    return dataclasses.replace(body, snap_rate=grammar.snap_rate if edge else 0.0, plant=grammar.plant)


def _draw(stream: str, edge: tuple[str, ...]) -> Body:
    rng = random.Random(stream)
    k = rng.choice((1, 1, 2, 2, 3))
    has_xs = rng.random() < 0.7
    carry = [f"c{i}" for i in range(k)]
    leaves = carry + list(PARAM_VECTORS) + (["x"] if has_xs else [])
    while True:  # rejection sampling keeps the stream reproducible
        body = Body(
            updates=tuple(_valid_expr(rng, leaves, rng.choice((1, 2, 3)), edge) for _ in range(k)),
            output=_valid_expr(rng, leaves, rng.choice((0, 1, 2)), edge),
            n=rng.choice((1, 2, 3)),
            length=rng.choice((1, 2, 3, 4, 5, 6)),
            has_xs=has_xs,
            carry_grad=tuple(rng.random() < 0.5 for _ in range(k)),
            xs_grad=rng.random() < 0.5,
            data_seed=rng.randrange(2**31),
        )
        if body_valid(body):
            return _extend(body, random.Random(f"{stream}/extent"))


def judged_body(seed: int, index: int, losses: Sequence[str], grammar: Grammar = Grammar()) -> Body:
    """Case `index` of a run judging every body under each of `losses`: body index // len(losses)
    under loss losses[index % len(losses)] (so the bodies of a one-loss run are the plain stream)."""
    return dataclasses.replace(generate(seed, index // len(losses), grammar), loss=losses[index % len(losses)])


LONG_TRIPS = (8, 12, 16)
UNUSED_PARAM = "u"


def _extend(body: Body, rng: random.Random) -> Body:
    """Long trip counts and an unused parameter, drawn from their own stream so that the bodies
    drawn before these existed keep their expressions and data."""
    if rng.random() < 0.3:
        body = dataclasses.replace(body, length=rng.choice(LONG_TRIPS))
    if rng.random() < 0.2:
        body = dataclasses.replace(body, unused=(UNUSED_PARAM,))
    return body


def _valid_expr(rng: random.Random, leaves: list[str], depth: int, edge: tuple[str, ...] = ()) -> tuple:
    while True:
        e = _expr(rng, leaves, depth, edge)
        if valid(e):
            return e


# ---- shrinking ---------------------------------------------------------------------------------
def _smaller_exprs(e: tuple) -> Iterator[tuple]:
    """Strictly smaller expressions: each child in place of e, then e with one child shrunk."""
    children = _children(e)
    yield from children
    if e[0] != "leaf" and e[0] != "const":
        yield ("const", 0.5)
    for i, c in enumerate(children):
        offset = len(e) - len(children)
        for smaller in _smaller_exprs(c):
            yield e[: offset + i] + (smaller,) + e[offset + i + 1 :]


def _drop_leaf(body: Body, i: int) -> Body:
    """Body without carry leaf c_i: references to it become a constant, later leaves renumbered."""
    names = body.carry_names

    def sub(e: tuple) -> tuple:
        if e[0] == "leaf" and e[1] in names:
            j = names.index(e[1])
            return ("const", 0.5) if j == i else ("leaf", f"c{j - (j > i)}")
        if e[0] in ("leaf", "const"):
            return e
        off = len(e) - len(_children(e))
        return e[:off] + tuple(sub(c) for c in _children(e))

    keep = [j for j in range(len(names)) if j != i]
    return dataclasses.replace(
        body,
        updates=tuple(sub(body.updates[j]) for j in keep),
        output=sub(body.output),
        carry_grad=tuple(body.carry_grad[j] for j in keep),
    )


def shrink_candidates(body: Body) -> Iterator[Body]:
    """Valid bodies one step simpler than `body`, most reducing first."""
    return (b for b in _candidates(body) if body_valid(b))


def _candidates(body: Body) -> Iterator[Body]:
    for T in range(1, body.length):
        yield dataclasses.replace(body, length=T)
    if body.n > 1:
        yield dataclasses.replace(body, n=1)
    if len(body.updates) > 1:
        for i in range(len(body.updates)):
            yield _drop_leaf(body, i)
    for i, e in enumerate(body.updates):
        for smaller in _smaller_exprs(e):
            yield dataclasses.replace(body, updates=body.updates[:i] + (smaller,) + body.updates[i + 1 :])
    for smaller in _smaller_exprs(body.output):
        yield dataclasses.replace(body, output=smaller)


def size(body: Body) -> int:
    def count(e: tuple) -> int:
        return 1 + sum(count(c) for c in _children(e))

    return body.length + body.n + sum(count(e) for e in body.updates) + count(body.output)
