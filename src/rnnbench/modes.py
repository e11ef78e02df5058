"""The ways a recurrence is differentiated, as data: MODES (every `--modes` value, a Mode each).

A first-order mode is a road to the loss's gradient that a framework offers besides reverse mode
through a whole sequence; each produces the same canonical gradients (rnnbench.drivers.base.Grads),
so the one judge (rnnbench.check.verdicts.judge) decides every mode against the one oracle. `per_example`
produces each example's gradient of its own loss instead (rnnbench.batch lays them out), judged by
the same judge once per example against the oracle of that example's own case
(rnnbench.check.verdicts.per_example). `hvp` is the
second-order check of today (Hessian-vector products), run beside the vjp row (its `hvp` field).
A driver declares the modes its mechanism supports (Driver.mode_missing); a mode it cannot run is an
`unavailable` row with the reason, never left out.

It imports nothing from rnnbench (floor 1, like suites.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mode:
    """name: recorded in every row (`mode`) and scoped in registry entries (`modes`).
    summary: its line in `rnnbench list --modes` and `run --help`.
    order: 1, a row of its own judged like a gradient; 2, checked inside the vjp row (H v)."""

    name: str
    summary: str
    order: int = 1


VJP = "vjp"
JVP = "jvp"
FUNC = "func"
PER_EXAMPLE = "per_example"
HVP = "hvp"

MODES = {m.name: m for m in (
    Mode(VJP, "reverse mode through the whole sequence: loss.backward() / jax.value_and_grad (the default)"),
    Mode(JVP, "forward mode: the framework's jvp along each input entry's unit tangent (jax.jacfwd, "
         "torch.func.jacfwd: vmapped jvp), the gradient column by column, as the dual-number oracle computes it"),
    Mode(FUNC, "torch's functional transforms: torch.func.grad_and_value instead of backward(), eager and compiled"),
    Mode(PER_EXAMPLE, "per-example gradients: each example's gradient of its own loss by vmap of grad over the batch "
         "(jax.vmap(jax.grad), torch.func.vmap(torch.func.grad)), each judged against its own case's oracle"),
    Mode(HVP, "second order: a Hessian-vector product along a seeded direction, checked in the vjp row", order=2),
)}  # fmt: skip
DEFAULT = (VJP,)

JVP_DUAL = "jvp_dual"
PER_EXAMPLE_LOOP = "per_example_loop"
PER_EXAMPLE_BATCHED_LOSS = "per_example_batched_loss"


@dataclass(frozen=True)
class Road:
    """A timed program for derivatives (a row's speed: rnnbench.rows.roads). name: recorded under a
    row's `roads` and as its timed road; summary: what the program is, in each framework's idiom;
    checked: what it is held against before it is timed. mode: the mode whose row checks what it is held
    against (its own where it is a mode's program)."""

    name: str
    summary: str
    checked: str
    mode: str = ""

    @property
    def checked_by(self) -> str:
        return self.mode or self.name


ROADS = {r.name: r for r in (
    Road(VJP, "reverse mode: loss.backward() / jit(jax.value_and_grad): the whole gradient in one backward pass",
         "the row's own verdict (vjp rows), or the same driver's vjp row"),
    Road(JVP, "forward mode along one seeded tangent of every compared input: torch.func.jvp / jit(jax.jvp): "
         "one directional derivative per pass", "the checked gradient's dot product with the tangent", JVP),
    Road(JVP_DUAL, "forward mode along the same tangent by dual tensors: torch.autograd.forward_ad (torch's other "
         "forward-mode API; jax has one, jax.jvp)", "the checked gradient's dot product with the tangent", JVP),
    Road(FUNC, "torch.func.grad_and_value (compiled as the driver compiles)", "the row's own verdict"),
    Road(PER_EXAMPLE, "each example's gradient by vmap of grad over the batch: torch.func.vmap(torch.func.grad) / "
         "jit(jax.vmap(jax.grad))", "the row's own verdict (each example against its own oracle)"),
    Road(PER_EXAMPLE_LOOP, "a loop over the examples: each example's own B = 1 slice differentiated in turn "
         "(torch.autograd.grad / a jit(jax.grad) call per example)", "the per_example row's checked gradients",
         PER_EXAMPLE),
    Road(PER_EXAMPLE_BATCHED_LOSS, "the batched-loss trick: one copy of each shared input per example, the loss "
         "summed over the examples (the forward vmapped over them), one reverse pass: the gradient w.r.t. "
         "each copy is that example's (torch.func.vmap forward + backward(); jit(jax.grad) of the vmapped sum)",
         "the per_example row's checked gradients", PER_EXAMPLE),
)}  # fmt: skip
# the roads a row of each mode times beside its own (interleaved in one loop, `--roads`): the choices a
# user of that mode has for the same derivatives
BESIDE = {
    VJP: (JVP, JVP_DUAL),
    JVP: (VJP, JVP_DUAL),
    FUNC: (VJP,),
    PER_EXAMPLE: (VJP, PER_EXAMPLE_LOOP, PER_EXAMPLE_BATCHED_LOSS),
}
FIRST_ORDER = tuple(name for name, m in MODES.items() if m.order == 1)


def parse(spec: str | tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
    """A `--modes` / `modes=` value as mode names in MODES order: "all", a comma-separated string, or
    a sequence; None: DEFAULT. Raises ValueError naming an unknown mode (callers turn it into their
    own bad-input error)."""
    if spec is None:
        return DEFAULT
    names = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else [str(s) for s in spec]
    if names == ["all"]:
        return tuple(MODES)
    unknown = [n for n in names if n not in MODES]
    if unknown or not names or "" in names:
        raise ValueError(f"unknown mode {', '.join(unknown) or repr(spec)}; known: all, {', '.join(MODES)}")
    return tuple(n for n in MODES if n in names)


def rows_and_hvp(spec: str | tuple[str, ...] | list[str]) -> tuple[tuple[str, ...], bool]:
    """(the first-order modes that get a row each, whether vjp rows check H v) of a selection (parse's
    forms): H v lives in the vjp rows, so hvp alone selects vjp rows too."""
    names = parse(spec)
    rows = tuple(m for m in names if MODES[m].order == 1)
    return (rows if VJP in rows or HVP not in names else (VJP, *rows)), HVP in names
