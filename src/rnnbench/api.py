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
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from rnnbench.errors import InputError
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


DTYPES = ("float64", "float32", "bfloat16")  # the dtypes check_recurrence runs at (as `rnnbench run --dtypes`)


class _Checked(NamedTuple):
    """What _validate_inputs derived from valid input."""

    carry0: Any  # the carry as the step receives it: a bare array wrapped as (carry0,), a list as a tuple
    length: int  # T
    carry0_flags: tuple  # one requires-grad flag per carry leaf, in leaf order
    drivers: list  # driver names, in the order given, each once
    forms: list  # loss forms (rnnbench.losses), or ["model"] for a custom loss
    example_y: Any  # the step's output at t = 0 (the shape of y_t)


def _leaf_name(root: str, path: tuple) -> str:
    """A leaf as the user indexes it: params['layer']['W'], carry0[0], xs."""
    return root + "".join(f"[{p!r}]" for p in path)


def _real_array(value: Any, where: str, floats: bool = False) -> np.ndarray:
    """value as a numpy array; TypeError unless its dtype is real numeric (float with `floats`)."""
    try:
        a = np.asarray(value)
    except Exception:  # e.g. a tensor that requires grad
        raise TypeError(f"{where} is a {type(value).__name__} that numpy cannot read; expected a numpy array") from None
    if a.dtype.kind not in ("f" if floats else "fiu"):
        what = ("None" if value is None else f"a {type(value).__name__}") if a.dtype.kind == "O" else \
            f"an array of dtype {a.dtype}"
        raise TypeError(f"{where} is {what}; expected " + (
            "a float array (it is differentiated), e.g. np.asarray(value, dtype=float)" if floats
            else "a real numeric array"))
    return a


def _finite(a: np.ndarray, where: str, np_dtype: Any = None, why: str = "every input must be finite") -> np.ndarray:
    """InputError if `a` has zero size or a non-finite entry, also once rounded to np_dtype (when
    given); the message names the first bad index."""
    if a.size == 0:
        raise InputError(f"{where} has zero size (shape {a.shape}); every array needs at least one entry")
    checks = [(a, "")]
    if np_dtype is not None and np.dtype(np_dtype) != np.float64:
        with np.errstate(over="ignore"):
            checks.append((a.astype(np_dtype).astype(np.float64), f" once rounded to {np.dtype(np_dtype).name}"))
    for values, note in checks:
        bad = ~np.isfinite(values)
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            at = f" at index {index}" if index else ""
            count = f" ({int(bad.sum())} non-finite entries in all)" if bad.sum() > 1 else ""
            raise InputError(f"{where} is not finite{note}: {values[index]}{at}{count}; {why}")
    return a


def _carry_flags(flags: Any, carry: Any, path: tuple = ()) -> list[bool]:
    """One flag per leaf of carry (in _flatten order) from a bool or a tree shaped like carry, where
    a bool at any node applies to every leaf below it."""
    where, there = _leaf_name("carry0_requires_grad", path), _leaf_name("carry0", path)
    if isinstance(flags, (bool, np.bool_)):
        return [bool(flags)] * len(_flatten(carry))
    if isinstance(flags, dict):
        if not isinstance(carry, dict):
            raise InputError(f"{where} is a dict where {there} is a {type(carry).__name__}; give a bool or a tree "
                             "shaped like carry0")
        unknown, missing = sorted(set(flags) - set(carry), key=repr), sorted(set(carry) - set(flags), key=repr)
        if unknown or missing:
            raise InputError(f"{where} does not match the keys of {there}, {sorted(carry, key=repr)}: "
                             + "; ".join(part for part in (f"not in carry0: {unknown}" if unknown else "",
                                                           f"missing: {missing}" if missing else "") if part)
                             + " (a bool may stand for a whole subtree)")
        return [f for k in sorted(carry) for f in _carry_flags(flags[k], carry[k], (*path, k))]
    if isinstance(flags, (tuple, list)):
        if not isinstance(carry, (tuple, list)) or len(flags) != len(carry):
            has = f"has {len(carry)}" if isinstance(carry, (tuple, list)) else f"is a {type(carry).__name__}"
            raise InputError(f"{where} has {len(flags)} entries but {there} {has}; give a bool or a tree "
                             "shaped like carry0")
        return [f for i, (fl, c) in enumerate(zip(flags, carry)) for f in _carry_flags(fl, c, (*path, i))]
    raise TypeError(f"{where} is {flags!r} ({type(flags).__name__}); expected a bool (or a tree of bools "
                    "shaped like carry0)")


def _names_once(names: Sequence[str], argument: str) -> None:
    """InputError when two leaves of one tree get the same report name ("a.b" from two paths)."""
    seen = set()
    for name in names:
        if name in seen:
            raise InputError(f"{argument}: two leaves are both named {name!r} (keys joined with '.'); rename one")
        seen.add(name)


def _validate_inputs(step, params, carry0, xs, length, loss, consts, carry0_requires_grad, xs_requires_grad,
                     dtype, drivers, losses, order) -> _Checked:
    """Reject bad input to check_recurrence before any driver runs: TypeError for a wrong type,
    InputError (a ValueError) for a bad value, each naming the argument (a leaf as params['W']) and
    what is expected. Checks every argument, every leaf of params, carry0, xs and consts (real
    numeric, params float; not empty; finite, also once rounded to dtype), the trip count and
    carry0_requires_grad against carry0; then runs the step over the whole sequence in numpy (the
    float64 reference ops): the carry keeps carry0's structure and shapes, y_t keeps step 0's, both
    stay finite, and a custom loss returns a finite scalar."""
    from rnnbench import losses as loss_forms
    from rnnbench import registry
    from rnnbench.model import numpy_dtype
    from rnnbench.ops import numpy_ops

    # -- the plain arguments
    if not callable(step):
        raise TypeError(f"step is {type(step).__name__}; expected a function step(ops, params, carry, x) -> (carry, y)")
    if loss is not None and not callable(loss):
        raise TypeError(f"loss is {type(loss).__name__}; expected a function loss(ops, consts, ys, carry) -> scalar")
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise InputError(f"dtype: unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
    if isinstance(order, bool) or order not in (1, 2):
        raise InputError(f"order must be 1 (gradients) or 2 (also Hessian-vector products), got {order!r}")
    if not isinstance(xs_requires_grad, (bool, np.bool_)):
        raise TypeError(f"xs_requires_grad is {xs_requires_grad!r}; expected a bool")
    if xs_requires_grad and xs is None:
        raise InputError("xs_requires_grad=True but xs is None: there is no input to differentiate")

    def names_of(value, argument: str, known: str) -> list:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            raise TypeError(f"{argument} is {value!r}; expected a list of names, e.g. [{known}]")
        if not value:
            raise InputError(f"{argument}=[] selects nothing; leave it None for the default")
        if not all(isinstance(n, str) for n in value):
            raise TypeError(f"{argument}: every name must be a str, got {list(value)!r}")
        return list(dict.fromkeys(value))  # duplicates once, in the order given

    if drivers is None:
        driver_names = list(registry.drivers())
    else:
        driver_names = names_of(drivers, "drivers", "'torch_loop'")
        for name in driver_names:
            try:
                registry.get_driver(name)
            except registry.UnknownName as exc:
                raise registry.UnknownName(f"drivers: {exc}") from None
    if loss is not None:
        if losses is not None:
            raise InputError("give either a loss function (`loss`) or loss forms (`losses`), not both")
        forms = [loss_forms.MODEL_LOSS]
    elif losses is None:
        forms = list(loss_forms.CHECKED)
    else:
        forms = names_of(losses, "losses", "'weighted'")
        for name in forms:
            if name == loss_forms.MODEL_LOSS:
                raise InputError("losses: loss form 'model' needs a loss function (`loss`)")
            try:
                loss_forms.form_named(name)
            except ValueError as exc:
                raise InputError(f"losses: {exc}") from None

    # -- the arrays: params, carry0, xs, consts
    np_dtype = numpy_dtype(dtype)
    param_items = _flatten(params)
    if not param_items:
        raise InputError(f"params is {params!r}: nothing to differentiate; give at least one float array, "
                         "e.g. {'w': np.array([0.5])}")
    for path, leaf in param_items:
        where = _leaf_name("params", path)
        _finite(_real_array(leaf, where, floats=True), where, np_dtype)
    _names_once(_Tree(params).names(), "params")

    bare = not isinstance(carry0, (tuple, list, dict))
    carry = (carry0,) if bare else tuple(carry0) if isinstance(carry0, list) else carry0  # as the step gets it
    carry_items = _flatten(carry)
    if not carry_items:
        raise InputError(f"carry0 is {carry0!r}: a recurrence needs a carry; give an array or a tree of arrays, "
                         "e.g. (np.zeros(H),)")
    for path, leaf in carry_items:
        where = "carry0" if bare else _leaf_name("carry0", path)
        _finite(_real_array(leaf, where), where, np_dtype)
    if not (isinstance(carry, tuple) and all(not isinstance(c, (tuple, list, dict)) for c in carry)):
        _names_once(_Tree(carry).names(), "carry0")

    x_items = [] if xs is None else _flatten(xs)
    if xs is not None:
        if not x_items:
            raise InputError(f"xs is {xs!r}, a tree with no arrays; for a recurrence without inputs give xs=None "
                             "and length=T")
        steps, arrays = {}, []
        for path, leaf in x_items:
            where = _leaf_name("xs", path)
            a = _real_array(leaf, where)
            arrays.append((where, a))
            if a.ndim == 0:
                hint = " (a list or tuple is a tree of leaves, not a sequence: give np.asarray(...))" if path else ""
                raise InputError(f"{where} is a scalar; every xs leaf needs a leading time dimension, (T, ...){hint}")
            steps[where] = a.shape[0]
        if len(set(steps.values())) > 1:
            raise InputError("xs leaves have different leading (time) dimensions: "
                             + ", ".join(f"{w} {n}" for w, n in steps.items())
                             + "; every xs leaf is (T, ...) with one T")
        T = next(iter(steps.values()))
        if T == 0:
            raise InputError("xs has zero steps (leading dimension 0); give at least one step")
        for where, a in arrays:
            _finite(a, where, np_dtype)
    if length is not None:
        if isinstance(length, (bool, np.bool_)) or not isinstance(length, (int, np.integer)):
            raise TypeError(f"length is {length!r}; expected an int, the number of steps T")
        if length <= 0:
            raise InputError(f"length must be a positive number of steps, got {length}")
        if xs is not None and length != T:
            raise InputError(f"length={length} contradicts xs, whose leaves have {T} steps (leading dimension); "
                             "give one of them, or make them agree")
        T = int(length)
    elif xs is None:
        raise InputError("give xs (each leaf (T, ...)) or a trip count `length` = T")

    flags = tuple(_carry_flags(carry0_requires_grad, carry))
    if consts is not None:
        if loss is None:
            raise InputError("consts is only read by a custom `loss`; the loss forms (`losses`) use their own "
                             "weights: give loss=... or drop consts")
        if not isinstance(consts, Mapping):
            raise TypeError(f"consts is {type(consts).__name__}; expected a dict of name -> array")
        for name, value in consts.items():
            where = _leaf_name("consts", (name,))
            _finite(_real_array(value, where), where, np_dtype)

    # -- one numpy forward in the user's trees, at the values the drivers will see
    def rounded(leaf):
        return np.asarray(leaf).astype(np_dtype).astype(np.float64)

    hint = " (a bare-array carry0 reaches the step as the 1-tuple (h,))" if bare else ""
    carry_paths = [path for path, _ in carry_items]
    carry_shapes = [np.shape(leaf) for _, leaf in carry_items]
    ops = numpy_ops()
    p = _rebuild(params, iter([rounded(leaf) for _, leaf in param_items]))
    c = _rebuild(carry, iter([rounded(leaf) for _, leaf in carry_items]))
    x_leaves = [rounded(leaf) for _, leaf in x_items]
    y_paths, y_shapes, ys = None, None, []
    for t in range(T):
        out = step(ops, p, c, None if xs is None else _rebuild(xs, iter([leaf[t] for leaf in x_leaves])))
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"step must return (carry, y_t); at step {t} it returned {type(out).__name__} {out!r:.80}")
        new, y = out
        new_items = _flatten(new)
        paths = [path for path, _ in new_items]
        if paths != carry_paths and not (len(carry_paths) == 1 and paths == [()]):  # one leaf may come back bare
            raise InputError(f"step {t} returned a carry with leaves {[_leaf_name('carry', q) for q in paths]} but "
                             f"carry0 has {[_leaf_name('carry', q) for q in carry_paths]}; the step must return "
                             f"the carry in carry0's structure{hint}")
        new_leaves = []
        for (path, leaf), want, p0 in zip(new_items, carry_shapes, carry_paths):
            where = f"step {t}'s new carry {_leaf_name('carry', p0)}"
            a = _real_array(leaf, where)
            if a.shape != want:
                raise InputError(f"{where} has shape {a.shape} but carry0's is {want}; the step must keep every "
                                 f"carry leaf's shape{hint}")
            new_leaves.append(_finite(a, where, why="the carry must stay finite (the inputs are)"))
        c = _rebuild(carry, iter(new_leaves))
        out_items = _flatten(y)
        if y_paths is None:
            y_paths, y_shapes, example_y = [q for q, _ in out_items], [np.shape(leaf) for _, leaf in out_items], y
        elif [q for q, _ in out_items] != y_paths or [np.shape(leaf) for _, leaf in out_items] != y_shapes:
            got = {_leaf_name("y", q): np.shape(leaf) for q, leaf in out_items}
            want = {_leaf_name("y", q): shape for q, shape in zip(y_paths, y_shapes)}
            raise InputError(f"step {t}'s output y_t has leaves and shapes {got} but step 0's has {want}; y_t must "
                             "keep one structure and shape over the steps")
        wheres = [f"step {t}'s output {_leaf_name('y', q)}" for q, _ in out_items]
        ys.append([_finite(_real_array(leaf, where), where, why="the outputs must stay finite (the inputs are)")
                   for where, (_, leaf) in zip(wheres, out_items)])
    if loss is not None:
        stacked = _rebuild(example_y, iter([np.stack(leaves) for leaves in zip(*ys)]))
        value = loss(ops, {k: rounded(v) for k, v in (consts or {}).items()}, stacked, c)
        if np.shape(value) != ():
            raise InputError(f"loss must return a scalar (shape ()); it returned shape {np.shape(value)}: reduce it, "
                             "e.g. with ops.sum")
        _finite(_real_array(value, "the loss's value"), "the loss", why="the loss must be finite at the given inputs")
    return _Checked(carry, T, flags, driver_names, forms, example_y)


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
    oracle: Optional[str] = None,
) -> RecurrenceReport:
    """Run `step(ops, params, carry, x_t) -> (carry, y_t)` on every available driver and compare
    its gradients (and Hessian-vector products) with float64 finite differences of the numpy forward.

    params, carry0, xs and the step's output y_t may be pytrees: nested dicts (keys in sorted
    order), tuples and lists of arrays. params: name -> array, or any tree (gradients are named by
    the path, "layer.W"). carry0: a tuple of arrays or any tree (leaves named c0, c1, ... for a
    tuple, else by path); a bare array is a one-leaf carry, the same as (carry0,): the step receives
    the 1-tuple (h,) and may return (h,) or h. xs: per-step inputs, each leaf (T, ...), or None with
    `length` = T (given with xs, length must equal T). carry0_requires_grad: a bool or a tree of
    bools shaped like carry0 (a bool at a node covers every leaf below it). Every driver runs the step
    on flat arrays: x_t and y_t are packed into one vector per step (the leaves flattened and
    concatenated) and unpacked around the user's step. loss(ops, consts, ys, carry_T) -> scalar,
    where ys is the output tree with a leading T on every leaf and carry_T the carry tree. Without
    `loss`, every driver is judged under each loss form of `losses` (names from
    rnnbench.losses; default rnnbench.losses.CHECKED: random weights, an unweighted sum of the final
    carry, the mean of the outputs, the last output only): a driver bug can hide behind one
    cotangent pattern. dtype: one of DTYPES (inputs are rounded to it; the oracle uses the rounded
    values). drivers: names (duplicates run once), None for all. order: 2 also checks H v along a
    seeded direction where the driver has a second-order path (float64 only;
    rnnbench.check.second_order); 1 skips it. oracle: None (the ladder of rnnbench.check.oracle:
    exact dual numbers, 50 digits where float64 may not resolve the gradient, finite differences
    only where no derivative exists) or one rung forced: "dual", "dual_mp", "finite_differences".

    Bad input raises before any driver runs (_validate_inputs; docs/api.md, "Input validation"):
    TypeError for a wrong type, rnnbench.errors.InputError (a ValueError) for a bad value.
    """
    from rnnbench import losses as loss_forms

    from rnnbench.check.oracle import AUTO, CHOICES

    if oracle is not None and oracle not in CHOICES:
        raise InputError(f"oracle must be one of {', '.join(CHOICES)}; got {oracle!r}")
    checked = _validate_inputs(step, params, carry0, xs, length, loss, consts, carry0_requires_grad, xs_requires_grad,
                               dtype, drivers, losses, order)
    T = checked.length
    params_tree, carry_tree = _Tree(params), _Tree(checked.carry0)
    xs_tree = None if xs is None else _Tree(xs, per_step=True)
    flat = isinstance(checked.carry0, tuple) and all(not isinstance(c, (tuple, list, dict)) for c in checked.carry0)
    # a tuple of arrays keeps its names c0, c1, ...; any other tree is named by its paths
    carry_names = tuple(f"c{i}" for i in range(len(carry_tree.leaves))) if flat else tuple(carry_tree.names())
    y_tree = _Tree(checked.example_y)  # the shape of one step's output

    user_step, user_loss = step, loss  # the user's functions on trees; step and loss below are flat

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

    case = Case(
        model="user",
        sizes={"T": T},
        seed=seed,
        params={n: np.asarray(v, dtype=np.float64) for n, v in zip(params_tree.names(), params_tree.leaves)},
        carry0=tuple(np.asarray(c, dtype=np.float64) for c in carry_tree.leaves),
        xs=None if xs_tree is None else xs_tree.pack_sequence(),
        length=T,
        consts=dict(consts or {}),
        carry0_requires_grad=checked.carry0_flags,
        xs_requires_grad=bool(xs_requires_grad),
    ).rounded_to(dtype)
    base = Model(name="user", summary="user-defined recurrence", carry_names=carry_names, default_sizes={"T": T},
                  make_case=lambda s, seed: case, step=step, loss=loss or loss_forms.weighted)
    # The loss form's weights come from the float64 forward; a float32 check rounds them too.
    judged = {form: loss_forms.with_loss(base, case, form) for form in checked.forms}
    judged = {form: (model, form_case.rounded_to(dtype)) for form, (model, form_case) in judged.items()}
    results, oracle_kind = _run_drivers(base, judged, checked.drivers, dtype, device, seed, order,
                                        None if oracle == AUTO else oracle)
    return RecurrenceReport(dtype, oracle_kind, results)


def _run_drivers(base: Model, judged: dict, names: list, dtype: str, device: str, seed: int,
                 order: int, oracle: Optional[str] = None) -> tuple[list[DriverResult], str]:
    """Every driver of `names` under every loss form of `judged` ({form: (model, case)}), checked
    against one oracle per form (`oracle`: a forced rung, None for the ladder): (results, the least
    exact oracle kind used). The only place drivers run."""
    from rnnbench import registry
    from rnnbench.check.oracle import oracle_grads, weakest
    from rnnbench.run.environments import current
    from rnnbench.run.row import (Job, check_gradients, hvp_decides, localization, second_order_record,
                                  unavailable_reason)

    oracles = {}  # per form, computed once for all drivers
    results = []
    kinds = []
    for name in names:
        driver = registry.get_driver(name)
        reason = unavailable_reason(base, driver, Job("user", name, dtype, device, environment=current()))
        if reason is not None:
            results.append(DriverResult(name, Status.UNAVAILABLE, None, reason, loss="-"))
            continue
        for form, (model, form_case) in judged.items():
            if form not in oracles:
                oracles[form] = oracle_grads(model, form_case, oracle)
            chk, prepared = check_gradients(model, driver, form_case, dtype, device, oracle=oracles[form])
            kinds.append(chk.oracle_kind)
            localization(chk, model, driver, form_case, dtype, device)
            status, report, hvp_status = chk.status, chk.report, "-"
            if order == 2:
                job = Job("user", name, dtype, device, seed=seed, environment=current(), loss_form=form, order=2)
                hvp = second_order_record(model, driver, form_case, job, prepared if chk.status == Status.OK else None,
                                          oracle)
                hvp_status = str(hvp["status"])
                if hvp_decides(chk.status, hvp["status"]):
                    status, report = hvp["status"], hvp["report"]
            results.append(DriverResult(name, status, chk.max_rel_error if chk.errors else None, report, chk.errors,
                                        form, hvp_status))
    return results, weakest(kinds) if kinds else str(oracle or OracleKind.DUAL)
