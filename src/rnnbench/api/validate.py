"""check_recurrence's input, checked before any driver runs: one validator per input kind (the
functions, names and options, flags, params, carry0, xs and length, consts, and one numpy forward
of the step and the loss), each raising at the first problem with a message of
rnnbench.api.messages (TypeError for a wrong type, InputError for a bad value)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from rnnbench.api.batched import batch_size
from rnnbench.api.linear import check_declaration
from rnnbench.api.messages import label, problem
from rnnbench.api.selection import driver_selection, loss_forms, mode_selection
from rnnbench.api.trees import Tree, flatten, is_flat, leaf_name, rebuild
from rnnbench.model import (
    DTYPES,  # the dtypes check_recurrence runs at (rnnbench.api.DTYPES: the one list, its order)
    is_integer,
    numpy_dtype,
)
from rnnbench.ops import numpy_ops


@dataclass(frozen=True)
class Inputs:
    """check_recurrence's arguments as the user gave them (what each means: its docstring)."""

    step: Callable
    params: Any
    carry0: Any
    xs: Any = None
    length: Any = None
    loss: Callable | None = None
    consts: Any = None
    carry0_requires_grad: Any = False
    xs_requires_grad: Any = False
    dtype: Any = "float64"
    drivers: Any = None
    device: str = "cpu"
    seed: int = 0
    losses: Any = None
    order: Any = 2
    oracle: Any = None
    linear: Callable | None = None
    modes: Any = None
    batched: Any = False


class Checked(NamedTuple):
    """What validate derived from valid input."""

    carry0: Any  # the carry as the step receives it: a bare array wrapped as (carry0,), a list as a tuple
    length: int  # T
    carry0_flags: tuple  # one requires-grad flag per carry leaf, in leaf order
    drivers: list  # driver names, in the order given, each once
    forms: list  # loss forms (rnnbench.losses), or ["model"] for a custom loss
    example_y: Any  # the step's output at t = 0 (the shape of y_t)
    # the first-order differentiation modes checked (rnnbench.modes), and whether vjp rows check H v
    modes: tuple = ("vjp",)
    hvp: bool = True
    batch: int | None = None  # B, the examples of a batched recurrence (check_recurrence's batched); None: none


def validate(given: Inputs) -> Checked:
    """Reject bad input to check_recurrence before any driver runs: TypeError for a wrong type,
    InputError (a ValueError) for a bad value, each naming the argument (a leaf as params['W']) and
    what is expected. Checks every argument, every leaf of params, carry0, xs and consts (real
    numeric, params float; not empty; finite, also once rounded to dtype; a list or tuple of Python
    numbers refused: it is a tree of scalar leaves, not an array), the trip count and
    carry0_requires_grad against carry0, params (empty only where carry0 or xs requires grad); then
    runs the step over the whole sequence in numpy (the float64 reference ops): the carry keeps
    carry0's structure and shapes, y_t keeps step 0's, both stay finite, every output leaf is an
    array (not a Python number, which the frameworks treat differently) and every y_t leaf a float
    one, the step writes into none of its inputs (params, carry, x_t: in place, as h += x), and a
    custom loss returns a finite scalar. The checks run in this order."""
    functions(given.step, given.loss)
    if given.linear is not None and not callable(given.linear):
        raise problem("linear_type", type=type(given.linear).__name__)
    options(given.dtype, given.order, given.oracle)
    modes, hvp = mode_selection(given.modes, given.order)
    xs_flag(given.xs_requires_grad, given.xs)
    driver_names = driver_selection(given.drivers)
    forms = loss_forms(given.loss, given.losses)
    np_dtype = numpy_dtype(given.dtype)
    carry = carry_values(given.carry0, np_dtype)
    T = steps(given.xs, given.length, np_dtype)
    flags = tuple(carry_flags(given.carry0_requires_grad, carry))
    param_values(given.params, np_dtype, other_grads=any(flags) or bool(given.xs_requires_grad))
    const_values(given.consts, given.loss, np_dtype)
    bare = not isinstance(given.carry0, (tuple, list, dict))
    example_y = forward(
        given.step,
        loss=given.loss,
        params=given.params,
        carry=carry,
        xs=given.xs,
        consts=given.consts,
        T=T,
        np_dtype=np_dtype,
        bare=bare,
    )
    if given.linear is not None:
        check_declaration(
            given.step, given.linear, params=given.params, carry=carry, xs=given.xs, T=T, np_dtype=np_dtype
        )
    size = batch_size(given.batched, carry=carry, xs=given.xs, example_y=example_y)  # after the forward: y_t's shape
    return Checked(carry, T, flags, driver_names, forms=forms, example_y=example_y, modes=modes, hvp=hvp, batch=size)


def functions(step: Any, loss: Any) -> None:
    if not callable(step):
        raise problem("step", type=type(step).__name__)
    if loss is not None and not callable(loss):
        raise problem("loss", type=type(loss).__name__)


def options(dtype: Any, order: Any, oracle: Any = None) -> None:
    # lazy: `import rnnbench` (every user, every worker) loads the checking machinery only when a check runs
    from rnnbench.check.oracles.oracle import CHOICES

    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise problem("dtype", dtype=dtype, known=", ".join(DTYPES))
    if isinstance(order, bool) or order not in (1, 2):
        raise problem("order", order=order)
    if oracle is not None and oracle not in CHOICES:
        raise problem("oracle", oracle=oracle, known=", ".join(CHOICES))


def xs_flag(flag: Any, xs: Any) -> None:
    if not isinstance(flag, (bool, np.bool_)):
        raise problem("xs_flag", flag=flag)
    if flag and xs is None:
        raise problem("xs_flag_no_xs")


def real_array(value: Any, where: str, floats: bool = False) -> np.ndarray:
    """value as a numpy array; TypeError unless its dtype is real numeric (float with `floats`)."""
    try:
        a = np.asarray(value)
    except Exception:  # e.g. a tensor that requires grad
        raise problem("unreadable", where=where, type=type(value).__name__) from None
    if a.dtype.kind not in ("f" if floats else "fiu"):
        what = (
            ("None" if value is None else f"a {type(value).__name__}")
            if a.dtype.kind == "O"
            else f"an array of dtype {a.dtype}"
        )
        raise problem("not_float" if floats else "not_real", where=where, what=what)
    return a


def finite(a: np.ndarray, where: str, np_dtype: Any = None, why: str = label("inputs_finite")) -> np.ndarray:
    """InputError if `a` has zero size or a non-finite entry, also once rounded to np_dtype (when
    given); the message names the first bad index."""
    if a.size == 0:
        raise problem("zero_size", where=where, shape=a.shape)
    checks = [(a, "")]
    if np_dtype is not None and np.dtype(np_dtype) != np.float64:
        with np.errstate(over="ignore"):
            checks.append((a.astype(np_dtype).astype(np.float64), label("rounded", dtype=np.dtype(np_dtype).name)))
    for values, note in checks:
        bad = ~np.isfinite(values)
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            at = f" at index {index}" if index else ""
            count = f" ({int(bad.sum())} non-finite entries in all)" if bad.sum() > 1 else ""
            raise problem("not_finite", where=where, note=note, value=values[index], at=at, count=count, why=why)
    return a


def names_once(leaf_names: list[str], argument: str) -> None:
    """InputError when two leaves of one tree get the same report name ("a.b" from two paths)."""
    seen = set()
    for name in leaf_names:
        if name in seen:
            raise problem("same_name", argument=argument, name=name)
        seen.add(name)


def no_number_lists(tree: Any, root: str, path: tuple = ()) -> None:
    """InputError for a list or tuple of Python numbers anywhere in `tree`: flatten reads it as a tree
    of scalar leaves (params {"w": [0.5, -0.3]} would be two parameters w.0, w.1), not as the array
    the user meant. Refused, not converted: in a pytree a list is a container, as in torch and jax."""
    if isinstance(tree, dict):
        for k in sorted(tree):
            no_number_lists(tree[k], root, (*path, k))
    elif isinstance(tree, (tuple, list)):
        if tree and all(type(v) in (int, float, bool) for v in tree):
            raise problem("number_list", where=leaf_name(root, path), type=type(tree).__name__, value=tree)
        for i, v in enumerate(tree):
            no_number_lists(v, root, (*path, i))


def param_values(params: Any, np_dtype: Any, other_grads: bool = False) -> None:
    """Every leaf of params a finite float array; params may be empty ({}) only where other_grads
    (carry0 or xs requires grad: the gradients are then with respect to them only)."""
    no_number_lists(params, "params")
    items = flatten(params)
    if not items and not (isinstance(params, dict) and other_grads):
        raise problem("no_params", params=params)
    for path, leaf in items:
        where = leaf_name("params", path)
        finite(real_array(leaf, where, floats=True), where, np_dtype)
    names_once(Tree(params).names(), "params")


def carry_values(carry0: Any, np_dtype: Any) -> Any:
    """carry0 as the step receives it (a bare array as (carry0,), a list as a tuple), checked."""
    no_number_lists(carry0, "carry0")
    bare = not isinstance(carry0, (tuple, list, dict))
    carry = (carry0,) if bare else tuple(carry0) if isinstance(carry0, list) else carry0
    items = flatten(carry)
    if not items:
        raise problem("no_carry", carry0=carry0)
    for path, leaf in items:
        where = "carry0" if bare else leaf_name("carry0", path)
        finite(real_array(leaf, where), where, np_dtype)
    if not is_flat(carry):
        names_once(Tree(carry).names(), "carry0")
    return carry


def _xs_steps(xs: Any, np_dtype: Any) -> int:
    """T, the one leading dimension of every xs leaf."""
    no_number_lists(xs, "xs")
    items = flatten(xs)
    if not items:
        raise problem("no_xs", xs=xs)
    counts, arrays = {}, []
    for path, leaf in items:
        where = leaf_name("xs", path)
        a = real_array(leaf, where)
        arrays.append((where, a))
        if a.ndim == 0:
            raise problem("scalar_xs", where=where, hint=label("scalar_xs_hint") if path else "")
        counts[where] = a.shape[0]
    if len(set(counts.values())) > 1:
        raise problem("xs_lengths", steps=", ".join(f"{w} {n}" for w, n in counts.items()))
    T = next(iter(counts.values()))
    if T == 0:
        raise problem("zero_steps")
    ints = [w for w, a in arrays if is_integer(a)]
    if ints and len(ints) < len(arrays):
        floats = [w for w, a in arrays if not is_integer(a)]
        raise problem("xs_mixed", ints=", ".join(ints), floats=", ".join(floats))
    for where, a in arrays:
        finite(a, where, np_dtype)
    return T


def steps(xs: Any, length: Any, np_dtype: Any) -> int:
    """T: xs's leading dimension, or `length` (both given: they agree)."""
    T = None if xs is None else _xs_steps(xs, np_dtype)
    if length is not None:
        if isinstance(length, (bool, np.bool_)) or not isinstance(length, (int, np.integer)):
            raise problem("length_type", length=length)
        if length <= 0:
            raise problem("length_value", length=length)
        if xs is not None and length != T:
            raise problem("length_xs", length=length, steps=T)
        return int(length)
    if xs is None:
        raise problem("no_steps")
    return T


def carry_flags(flags: Any, carry: Any, path: tuple = ()) -> list[bool]:
    """One flag per leaf of carry (in flatten order) from a bool or a tree shaped like carry, where
    a bool at any node applies to every leaf below it."""
    where, there = leaf_name("carry0_requires_grad", path), leaf_name("carry0", path)
    if isinstance(flags, (bool, np.bool_)):
        return [bool(flags)] * len(flatten(carry))
    if isinstance(flags, dict):
        if not isinstance(carry, dict):
            raise problem("carry_flags_dict", where=where, there=there, type=type(carry).__name__)
        unknown, missing = sorted(set(flags) - set(carry), key=repr), sorted(set(carry) - set(flags), key=repr)
        if unknown or missing:
            parts = "; ".join(
                part
                for part in (f"not in carry0: {unknown}" if unknown else "", f"missing: {missing}" if missing else "")
                if part
            )
            raise problem("carry_flags_keys", where=where, there=there, keys=sorted(carry, key=repr), parts=parts)
        return [f for k in sorted(carry) for f in carry_flags(flags[k], carry[k], (*path, k))]
    if isinstance(flags, (tuple, list)):
        if not isinstance(carry, (tuple, list)) or len(flags) != len(carry):
            has = f"has {len(carry)}" if isinstance(carry, (tuple, list)) else f"is a {type(carry).__name__}"
            raise problem("carry_flags_length", where=where, count=len(flags), there=there, has=has)
        return [f for i, (fl, c) in enumerate(zip(flags, carry)) for f in carry_flags(fl, c, (*path, i))]
    raise problem("carry_flags_type", where=where, flags=flags, type=type(flags).__name__)


def const_values(consts: Any, loss: Any, np_dtype: Any) -> None:
    if consts is None:
        return
    if loss is None:
        raise problem("consts_unread")
    if not isinstance(consts, Mapping):
        raise problem("consts_type", type=type(consts).__name__)
    no_number_lists(dict(consts), "consts")
    for name, value in consts.items():
        where = leaf_name("consts", (name,))
        finite(real_array(value, where), where, np_dtype)


def output_array(leaf: Any, where: str, floats: bool) -> np.ndarray:
    """A leaf the step returned (`where` names the step, its time index and the leaf), as an array:
    InputError for a Python number (numpy computes on it, torch's drivers cannot stack it, jax's
    can: refused here so that no driver sees it) and for an output y_t that is not a float array
    (floats: it is differentiated), or not numeric at all."""
    if type(leaf) in (int, float, bool, complex):
        raise problem("output_number", where=where, value=leaf, type=type(leaf).__name__)
    try:
        a = np.asarray(leaf)
    except Exception:
        raise problem("output_unreadable", where=where, type=type(leaf).__name__) from None
    if a.dtype.kind not in ("f" if floats else "fiu"):
        raise problem("output_dtype", where=where, dtype=a.dtype, want="a float" if floats else "a real numeric")
    return a


def _new_carry(t: int, new: Any, carry: Any, hint: str) -> Any:
    """The step's new carry at step t, checked against carry0's structure, shapes and finiteness."""
    want_items = flatten(carry)
    carry_paths = [path for path, _ in want_items]
    new_items = flatten(new)
    paths = [path for path, _ in new_items]
    if paths != carry_paths and not (len(carry_paths) == 1 and paths == [()]):  # one leaf may come back bare
        raise problem(
            "carry_structure",
            t=t,
            got=[leaf_name("carry", q) for q in paths],
            want=[leaf_name("carry", q) for q in carry_paths],
            hint=hint,
        )
    leaves = []
    for (_, leaf), (p0, want_leaf) in zip(new_items, want_items):
        where = label("new_carry", t=t, leaf=leaf_name("carry", p0))
        a = output_array(leaf, where, floats=False)
        if is_integer(a) != is_integer(np.asarray(want_leaf)):
            want = "an integer array" if is_integer(np.asarray(want_leaf)) else "a float array"
            raise problem("carry_kind", where=where, dtype=a.dtype, want=want)
        if a.shape != np.shape(want_leaf):
            raise problem("carry_shape", where=where, shape=a.shape, want=np.shape(want_leaf), hint=hint)
        leaves.append(finite(a, where, why=label("carry_finite")))
    return rebuild(carry, iter(leaves))


def _output(t: int, y: Any, first: list | None) -> list:
    """The step's output at step t, checked against step 0's structure and shapes (first: step 0's
    [(path, leaf)], None at step 0) and finiteness: its leaves as arrays."""
    items = flatten(y)
    if first is not None and (
        [q for q, _ in items] != [q for q, _ in first]
        or [np.shape(leaf) for _, leaf in items] != [np.shape(leaf) for _, leaf in first]
    ):
        got = {leaf_name("y", q): np.shape(leaf) for q, leaf in items}
        want = {leaf_name("y", q): np.shape(leaf) for q, leaf in first}
        raise problem("y_structure", t=t, got=got, want=want)
    wheres = [label("output", t=t, leaf=leaf_name("y", q)) for q, _ in items]
    return [
        finite(output_array(leaf, where, floats=True), where, why=label("outputs_finite"))
        for where, (_, leaf) in zip(wheres, items)
    ]


def _copies(*trees: tuple[str, Any]) -> list[tuple[str, Any, list]]:
    """(root, tree, [(path, a copy of its leaf)]) for each of the step's inputs: what _not_written
    compares them with after the step."""
    return [
        (root, tree, [(path, np.array(leaf, copy=True)) for path, leaf in flatten(tree)])
        for root, tree in trees
        if tree is not None  # no xs: no x_t
    ]


def _not_written(inputs: list[tuple[str, Any, list]], t: int) -> None:
    """InputError where the step changed one of its inputs (a leaf written in place, or one set or
    removed in a dict): jax cannot write in place, so its drivers would compute from other values
    than the numpy oracle and torch do, a mismatch that is the step's and no driver's."""
    for root, tree, before in inputs:
        after = flatten(tree)
        for (path, kept), (path_now, leaf) in zip(before, after):
            if path_now != path or not np.array_equal(np.asarray(leaf), kept, equal_nan=True):
                raise problem("step_writes_input", where=leaf_name(root, path), t=t)
        if len(after) != len(before):
            raise problem("step_writes_input", where=root, t=t)


def forward(step, *, loss, params, carry, xs, consts, T: int, np_dtype: Any, bare: bool) -> Any:
    """One numpy forward in the user's trees, at the values the drivers will see (rounded to
    np_dtype): the step leaves its inputs as they were, the carry keeps carry0's structure and
    shapes, y_t keeps step 0's, both stay finite, and a custom loss returns a finite scalar.
    Returns step 0's output (the shape of y_t)."""

    def rounded(leaf):
        a = np.asarray(leaf)
        return a.astype(np.int64) if is_integer(a) else a.astype(np_dtype).astype(np.float64)

    hint = label("bare_carry_hint") if bare else ""
    ops = numpy_ops()
    p = rebuild(params, iter([rounded(leaf) for _, leaf in flatten(params)]))
    c = rebuild(carry, iter([rounded(leaf) for _, leaf in flatten(carry)]))
    x_leaves = [] if xs is None else [rounded(leaf) for _, leaf in flatten(xs)]
    first, example_y, ys = None, None, []
    for t in range(T):
        x_t = None if xs is None else rebuild(xs, iter([leaf[t] for leaf in x_leaves]))
        inputs = _copies(("params", p), ("carry", c), ("x", x_t))
        out = step(ops, p, c, x_t)
        _not_written(inputs, t)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise problem("step_return", t=t, type=type(out).__name__, out=out)
        new, y = out
        c = _new_carry(t, new, carry, hint)
        ys.append(_output(t, y, first))
        if first is None:
            first, example_y = flatten(y), y
    if loss is not None:
        stacked = rebuild(example_y, iter([np.stack(leaves) for leaves in zip(*ys)]))
        value = loss(ops, {k: rounded(v) for k, v in (consts or {}).items()}, stacked, c)
        if np.shape(value) != ():
            raise problem("loss_shape", shape=np.shape(value))
        finite(real_array(value, label("loss_value")), label("loss"), why=label("loss_finite"))
    return example_y
