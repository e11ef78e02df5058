"""Public API: check a recurrence you wrote, on every available driver, against finite differences.

    import numpy as np
    import rnnbench

    def step(ops, params, carry, x):          # written once; ops is numpy, torch or jax
        (h,) = carry
        h = ops.tanh(params["w"] * h + x)
        return (h,), h

    report = rnnbench.check_recurrence(
        step, params={"w": np.array([0.5, -0.3])}, carry0=(np.zeros(2),), xs=np.ones((6, 2)))
    print(report)            # one row per (driver, loss form): status, max relative error, the
    assert report.ok         # oracle's own error bound, and the Hessian-vector product's verdict
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from rnnbench.model import Case, Model
from rnnbench.status import OracleKind, Status, is_known


@dataclass(frozen=True)
class DriverResult:
    """One driver under one loss form. status: the row's verdict (rnnbench.status: ok, grad_mismatch,
    hvp_mismatch, ..., known_issue:<id>), first order, then second order where first order agrees;
    hvp_status: the H v check's own status ("-" where not asked for or not judged)."""

    driver: str
    status: str
    max_rel_error: Optional[float]
    report: str
    grad_errors: list = field(default_factory=list)
    loss: str = "model"
    hvp_status: str = "-"


@dataclass(frozen=True)
class RecurrenceReport:
    dtype: str
    oracle_kind: str
    results: list[DriverResult]

    @property
    def ok(self) -> bool:
        """True when every driver that could run agrees with the oracle under every loss form, or
        fails only as a registered upstream issue says it does (and at least one ran)."""
        ran = [r for r in self.results if r.status != Status.UNAVAILABLE]
        return bool(ran) and all(r.status == Status.OK or is_known(r.status) for r in ran)

    def __str__(self) -> str:
        w = max([len("driver")] + [len(r.driver) for r in self.results])
        lw = max([len("loss")] + [len(r.loss) for r in self.results])
        sw = max([len("status")] + [len(r.status) for r in self.results])
        lines = [f"{'driver':<{w}} {'loss':<{lw}} {'status':<{sw}} max rel err  oracle error  H v  "
                 f"({self.dtype}, oracle: {self.oracle_kind})"]
        for r in self.results:
            err = "-" if r.max_rel_error is None else f"{r.max_rel_error:.2e}"
            bound = max((e.oracle_error for e in r.grad_errors), default=None)
            lines.append(f"{r.driver:<{w}} {r.loss:<{lw}} {r.status:<{sw}} {err:<12} "
                         f"{'-' if bound is None else f'{bound:.1e}':<13} {r.hvp_status}".rstrip())
        for r in self.results:
            if r.status not in (Status.OK, Status.UNAVAILABLE):
                lines.append(f"\n== {r.driver} under loss {r.loss}: {r.status}\n{r.report}")
        return "\n".join(lines)


def _flatten(tree: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    """[(path, leaf)] of nested dicts (keys sorted), tuples and lists; anything else is a leaf."""
    if isinstance(tree, dict):
        return [item for k in sorted(tree) for item in _flatten(tree[k], (*path, k))]
    if isinstance(tree, (tuple, list)):
        return [item for i, v in enumerate(tree) for item in _flatten(v, (*path, i))]
    return [(path, tree)]


def _rebuild(template: Any, leaves: Any) -> Any:
    """The template's structure with its leaves taken in order from the iterator `leaves`. Plain
    Python containers only: it runs inside traced steps (dynamo, jax), which trace through it."""
    if isinstance(template, dict):
        return {k: _rebuild(template[k], leaves) for k in sorted(template)}
    if isinstance(template, (tuple, list)):
        return type(template)(_rebuild(v, leaves) for v in template)
    return next(leaves)


class _Tree:
    """A user's pytree (nested dicts, tuples, lists of arrays) as the flat arrays the suite runs:
    leaf names joined from the path ("layer.W"), and packing of per-step trees into one vector per
    step (xs, ys) so every driver's loop or scan sees single arrays. Shapes: a packed sequence is
    (T, total), total = the sum of the leaves' per-step sizes."""

    def __init__(self, tree: Any, per_step: bool = False) -> None:
        items = _flatten(tree)
        self.template = tree
        self.paths = [path for path, _ in items]
        self.leaves = [leaf for _, leaf in items]
        self.single = not isinstance(tree, (dict, tuple, list))  # a bare array: nothing to pack
        self.shapes = [np.shape(leaf)[1:] if per_step else np.shape(leaf) for leaf in self.leaves]
        self.sizes = [int(np.prod(s)) for s in self.shapes]

    def names(self, prefix: str = "") -> list[str]:
        return [prefix + ".".join(str(p) for p in path) for path in self.paths]

    def unflatten(self, leaves) -> Any:
        return _rebuild(self.template, iter(leaves))

    def pack_sequence(self) -> np.ndarray:
        """(T, ...) leaves -> (T, total) float64."""
        if self.single:
            return np.asarray(self.leaves[0], dtype=np.float64)
        T = len(self.leaves[0])
        return np.concatenate([np.asarray(leaf, np.float64).reshape(T, -1) for leaf in self.leaves], axis=1)

    def unpack(self, ops, packed, leading: tuple = ()) -> Any:
        """One packed vector (leading = ()) or a packed sequence (leading = (T,)) -> the tree."""
        if self.single:
            return packed
        out, start = [], 0
        for shape, size in zip(self.shapes, self.sizes):
            out.append(ops.reshape(packed[..., start:start + size], (*leading, *shape)))
            start += size
        return self.unflatten(out)


def check_recurrence(
    step: Callable,
    params: Mapping[str, np.ndarray],
    carry0: Sequence[np.ndarray],
    xs: Optional[np.ndarray] = None,
    length: Optional[int] = None,
    loss: Optional[Callable] = None,
    consts: Optional[Mapping[str, np.ndarray]] = None,
    carry0_requires_grad: Any = False,
    xs_requires_grad: bool = False,
    dtype: str = "float64",
    drivers: Optional[Sequence[str]] = None,
    device: str = "cpu",
    seed: int = 0,
    losses: Optional[Sequence[str]] = None,
    order: int = 2,
) -> RecurrenceReport:
    """Run `step(ops, params, carry, x_t) -> (carry, y_t)` on every available driver and compare
    its gradients (and Hessian-vector products) with float64 finite differences of the numpy forward.

    params, carry0, xs and the step's output y_t may be pytrees: nested dicts (keys in sorted
    order), tuples and lists of arrays. params: name -> array, or any tree (gradients are named by
    the path, "layer.W"). carry0: a tuple of arrays or any tree (leaves named c0, c1, ... for a
    tuple, else by path). xs: per-step inputs, each leaf (T, ...), or None with `length` = T.
    carry0_requires_grad: a bool or a tree of bools shaped like carry0. Every driver runs the step
    on flat arrays: x_t and y_t are packed into one vector per step (the leaves flattened and
    concatenated) and unpacked around the user's step. loss(ops, consts, ys, carry_T) -> scalar,
    where ys is the output tree with a leading T on every leaf and carry_T the carry tree. Without
    `loss`, every driver is judged under each loss form of `losses` (names from
    rnnbench.losses; default rnnbench.losses.CHECKED: random weights, an unweighted sum of the final
    carry, the mean of the outputs, the last output only): a driver bug can hide behind one
    cotangent pattern. dtype: "float64" or "float32" (inputs are rounded to it; the oracle uses the
    rounded values). order: 2 also checks H v along a seeded direction where the driver has a
    second-order path (float64 only; rnnbench.check.second_order); 1 skips it.
    """
    from rnnbench import losses as loss_forms
    from rnnbench import registry
    from rnnbench.run.row import Job, check_gradients, hvp_decides, localization, second_order_record, unavailable_reason

    if xs is None and not length:
        raise ValueError("give xs (T, ...) or a trip count `length`")
    if not isinstance(carry0, (tuple, list, dict)):  # one bare array: a one-leaf carry
        carry0 = (carry0,)
    params_tree, carry_tree = _Tree(params), _Tree(tuple(carry0) if isinstance(carry0, list) else carry0)
    xs_tree = None if xs is None else _Tree(xs, per_step=True)
    T = len(xs_tree.leaves[0]) if xs_tree is not None else int(length)
    flat = isinstance(carry0, (tuple, list)) and all(not isinstance(c, (tuple, list, dict)) for c in carry0)
    # a tuple of arrays keeps its names c0, c1, ...; any other tree is named by its paths
    carry_names = tuple(f"c{i}" for i in range(len(carry_tree.leaves))) if flat else tuple(carry_tree.names())
    carry0 = tuple(np.asarray(c, dtype=np.float64) for c in carry_tree.leaves)
    if isinstance(carry0_requires_grad, bool):
        carry0_requires_grad = (carry0_requires_grad,) * len(carry0)
    # a flag per leaf: a tree shaped like carry0 (or, for a tuple carry, a tuple of flags)
    carry0_requires_grad = tuple(bool(flag) for _, flag in _flatten(carry0_requires_grad))
    if len(carry0_requires_grad) != len(carry0):
        raise ValueError(f"carry0_requires_grad has {len(carry0_requires_grad)} flags for {len(carry0)} carry leaves; "
                         "give a bool or a tree shaped like carry0")
    from rnnbench.ops import numpy_ops

    user_step, user_loss = step, loss  # the user's functions on trees; step and loss below are flat
    first_x = None if xs_tree is None else xs_tree.unflatten([np.asarray(leaf, np.float64)[0] for leaf in xs_tree.leaves])
    _, example_y = user_step(numpy_ops(), params_tree.unflatten([np.asarray(p, np.float64) for p in params_tree.leaves]),
                             carry_tree.unflatten(list(carry0)), first_x)
    y_tree = _Tree(example_y)  # the shape of one step's output

    def step(ops, flat_params, carry, x):
        """The user's step on trees, run on the suite's flat params, carry leaves and packed x."""
        tree_params = params_tree.unflatten([flat_params[n] for n in params_tree.names()])
        new, y = user_step(ops, tree_params, carry_tree.unflatten(carry), None if x is None else xs_tree.unpack(ops, x))
        packed = y if y_tree.single else ops.concat([ops.reshape(leaf, (-1,)) for _, leaf in _flatten(y)], axis=0)
        return tuple(leaf for _, leaf in _flatten(new)), packed

    if user_loss is not None:
        def loss(ops, consts, ys, carry):
            """The user's loss on the trees: ys (T, total) unpacked to (T, ...) per output leaf."""
            return user_loss(ops, consts, y_tree.unpack(ops, ys, leading=(ys.shape[0],)), carry_tree.unflatten(carry))

    if order not in (1, 2):
        raise ValueError(f"order must be 1 or 2, got {order!r}")
    if loss is not None and losses:
        raise ValueError("give either a loss function or loss forms (`losses`), not both")
    forms = [loss_forms.MODEL_LOSS] if loss is not None else loss_forms.parse(",".join(losses or ()), loss_forms.CHECKED)
    if loss is None and loss_forms.MODEL_LOSS in forms:
        raise ValueError("loss form 'model' needs a loss function (`loss`)")
    case = Case(
        model="user",
        sizes={"T": T},
        seed=seed,
        params={n: np.asarray(v, dtype=np.float64) for n, v in zip(params_tree.names(), params_tree.leaves)},
        carry0=carry0,
        xs=None if xs_tree is None else xs_tree.pack_sequence(),
        length=T,
        consts=dict(consts or {}),
        carry0_requires_grad=tuple(carry0_requires_grad),
        xs_requires_grad=xs_requires_grad,
    ).rounded_to(dtype)
    base = Model(name="user", summary="user-defined recurrence", carry_names=carry_names, default_sizes={"T": T},
                  make_case=lambda s, seed: case, step=step, loss=loss or loss_forms.weighted)
    from rnnbench.check.finite_diff import oracle_grads
    from rnnbench.run.environments import current

    # The loss form's weights come from the float64 forward; a float32 check rounds them too.
    judged = {form: loss_forms.with_loss(base, case, form) for form in forms}
    judged = {form: (model, form_case.rounded_to(dtype)) for form, (model, form_case) in judged.items()}
    oracles = {}  # per form, computed once for all drivers
    results = []
    oracle_kind = OracleKind.FINITE_DIFFERENCES
    for name in drivers or list(registry.drivers()):
        driver = registry.get_driver(name)
        reason = unavailable_reason(base, driver, Job("user", name, dtype, device, environment=current()))
        if reason is not None:
            results.append(DriverResult(name, Status.UNAVAILABLE, None, reason, loss="-"))
            continue
        for form, (model, form_case) in judged.items():
            oracle = oracles.setdefault(form, oracle_grads(model, form_case))
            chk, prepared = check_gradients(model, driver, form_case, dtype, device, oracle=oracle)
            oracle_kind = chk.oracle_kind
            localization(chk, model, driver, form_case, dtype, device)
            status, report, hvp_status = chk.status, chk.report, "-"
            if order == 2:
                job = Job("user", name, dtype, device, seed=seed, environment=current(), loss_form=form, order=2)
                hvp = second_order_record(model, driver, form_case, job, prepared if chk.status == Status.OK else None)
                hvp_status = str(hvp["status"])
                if hvp_decides(chk.status, hvp["status"]):
                    status, report = hvp["status"], hvp["report"]
            results.append(DriverResult(name, status, chk.max_rel_error if chk.errors else None, report, chk.errors,
                                        form, hvp_status))
    return RecurrenceReport(dtype, oracle_kind, results)
