"""The ops users write that are not smooth everywhere, as the fuzzer's "edge" grammar draws them, the
points their inputs are snapped onto, and the wrong derivatives a planted campaign adds.

Each edge op is written the way a step author writes it with the `ops` vocabulary (docs/api.md):
relu by where and by maximum, clip, abs, minimum / maximum, the "safe sqrt" idiom, powers with a
learned exponent, comparisons (> and ==) gating a value, log-sigmoid and a log-softmax (logsumexp).
The "edge2" grammar adds EDGE2_OPS: a layer of ReLU units dead together, ties of branches equal to
first order, stable forms written with max and abs.
Their kinks, ties and domain boundaries lie at 0, at the clip bounds +-CLIP and where two operands
are equal: rnnbench.fuzz.cases snaps input entries exactly onto SNAP_VALUES at the body's snap rate,
the same value for every input at one entry index, so two snapped operands tie.

A planted body (Body.plant "grad:<framework>", "hvp:<framework>", or "jvp:" / "func:" /
"per_example:<framework>": the grad plant judged in that differentiation mode's rows; per_example's
inside each example's step, so each example's own gradient is wrong) adds, for that framework only,
PLANT_K * sum(L - stop_gradient(L)) (first-order error, value unchanged) or
PLANT_K * sum((L - stop_gradient(L)) ** 2) (H v error only) to every update and the output, L the
first input the check compares: the framework's derivative is off by a known amount, and every such
body must be flagged.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EdgeOp:
    """An op of the edge grammar: `template` renders it from its children's code ({a}, {b}, {c});
    `scalar_ok` lists the children that may be a Python float (the rest must read a leaf)."""

    arity: int
    template: str
    scalar_ok: tuple[int, ...] = ()


CLIP = 0.5
SNAP_VALUES = (0.0, CLIP, -CLIP)  # kinks of relu/abs/sqrt at 0, clip's bounds

EDGE_OPS: dict[str, EdgeOp] = {
    "relu_where": EdgeOp(1, "ops.where({a} > 0.0, {a}, 0.0)"),
    "relu_maximum": EdgeOp(1, "ops.maximum({a}, 0.0)"),
    "clip": EdgeOp(1, f"ops.minimum(ops.maximum({{a}}, {-CLIP!r}), {CLIP!r})"),
    "abs": EdgeOp(1, "ops.abs({a})"),
    "minimum": EdgeOp(2, "ops.minimum({a}, {b})"),
    "maximum": EdgeOp(2, "ops.maximum({a}, {b})"),
    # the double where keeps sqrt's derivative finite off its domain (the single where gives NaN)
    "sqrt": EdgeOp(1, "ops.where({a} > 0.0, ops.sqrt(ops.where({a} > 0.0, {a}, 1.0)), 0.0)"),
    "pow": EdgeOp(2, "((1.5 + ops.tanh({a})) ** {b})", scalar_ok=(1,)),  # base in (0.5, 2.5), learned exponent
    "pow_base": EdgeOp(1, "(2.0 ** ops.tanh({a}))"),
    "greater": EdgeOp(3, "ops.where({a} > {b}, {c}, 0.5 * {c})"),
    "equal": EdgeOp(2, "ops.where({a} == {b}, {a}, {b})"),
    "log_sigmoid": EdgeOp(1, "ops.log(ops.sigmoid({a}))"),
    "logsumexp": EdgeOp(1, "(ops.tanh({a}) - ops.log(ops.sum(ops.exp(ops.tanh({a})))))"),
}

# The "edge2" grammar's ops besides EDGE_OPS (issue 49's classes), drawn from its own stream so the
# "edge" stream's bodies stay as they were: a hidden layer of ReLU units that all sit at 0 where
# their input is snapped to 0 (8 ties per entry: beyond the corners, interval tangents), ties of two
# branches equal to first order at 0 (maximum(a^2, 0), maximum(a^2, b^2)), and the numerically
# stable forms written with max and abs (softplus, logaddexp): smooth functions with kinked ops.
_UNITS = ((1.0, 0.4), (-0.7, 0.3), (0.5, -0.5), (-1.5, 0.2), (2.0, 0.25), (-0.3, -0.6), (1.2, -0.35), (-0.9, 0.45))
EDGE2_OPS: dict[str, EdgeOp] = {
    "relu_layer": EdgeOp(1, "(" + " + ".join(f"{r!r} * ops.maximum({s!r} * {{a}}, 0.0)" for s, r in _UNITS) + ")"),
    "max_square": EdgeOp(1, "ops.maximum({a} * {a}, 0.0)"),
    "max_squares": EdgeOp(2, "ops.maximum({a} * {a}, {b} * {b})"),
    "softplus_stable": EdgeOp(1, "(ops.maximum({a}, 0.0) + ops.log(1.0 + ops.exp(-ops.abs({a}))))"),
    "logaddexp_stable": EdgeOp(
        2, "(ops.maximum({a}, {b}) + ops.log(1.0 + ops.exp(-ops.abs({a} - {b}))))", scalar_ok=(1,)
    ),
}
# Ops a hand-written or shrunk body may use, never drawn: sqrt on its domain's boundary (a pole, NaN
# off its domain, so only data that keeps its argument >= 0 evaluates it).
RENDER_ONLY_OPS: dict[str, EdgeOp] = {"sqrt_raw": EdgeOp(1, "ops.sqrt({a})")}
ALL_EDGE_OPS: dict[str, EdgeOp] = {**EDGE_OPS, **EDGE2_OPS, **RENDER_ONLY_OPS}

EDGE_PROBABILITY = 0.35  # of an inner node of an edge-grammar body
LEAF_OPERANDS = 0.5  # an edge op's operands are plain leaves this often: snapped data lands on its kink
DEFAULT_SNAP_RATE = 0.25

# grad: wrong first derivatives, judged in reverse mode; jvp / func / per_example: the same wrong derivatives,
# judged in that mode's rows (a campaign planted so runs in that mode); hvp: wrong second derivatives only
PLANTS = ("grad", "jvp", "func", "per_example", "hvp")
FIRST_ORDER_PLANTS = ("grad", "jvp", "func", "per_example")
PLANT_K = 0.5


def render_edge(op: str, children: list[str]) -> str:
    return ALL_EDGE_OPS[op].template.format(**dict(zip("abc", children)))


def parse_plant(plant: str) -> tuple[str, str]:
    """("grad" | "hvp", family) of a plant "<kind>:<family>", family a registered driver family
    (the name of the ops namespace its drivers pass a step); ValueError naming the choices."""
    # lazy: registry: the families are the registered drivers', known once the drivers load
    from rnnbench import registry

    families = sorted({d.framework.family for d in registry.drivers().values()})
    kind, _, framework = plant.partition(":")
    if kind not in PLANTS or framework not in families:
        choices = ", ".join(f"{k}:{f}" for k in PLANTS for f in families)
        raise ValueError(f"unknown plant {plant!r}; known: {choices}")
    return kind, framework


def plant_lines(plant: str, leaf: str) -> list[str]:
    """The step's lines that compute the planted term `_plant` (zero in value everywhere; nonzero
    derivative on the planted framework only)."""
    kind, framework = parse_plant(plant)
    diff = f"({leaf} - ops.stop_gradient({leaf}))"
    term = f"ops.sum({diff})" if kind in FIRST_ORDER_PLANTS else f"ops.sum({diff} ** 2)"
    return [f"    _plant = {PLANT_K!r} * {term} if ops.name == {framework!r} else 0.0"]


def leaf_of(name: str) -> str | None:
    """The step's local variable holding a compared input (None for one it only reads by key)."""
    if name.startswith("carry0."):
        return name.split(".", 1)[1]
    return {"xs": "x"}.get(name, name if name in ("p0", "p1", "W", "E") else None)  # E: a token body's embedding
