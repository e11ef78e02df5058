"""Public API: check a recurrence you wrote, on the available drivers (or those named), against
the oracle ladder: exact dual numbers over the numpy step, the same at 50 digits where float64 may
not resolve the gradient, finite differences only where a step has no derivative.

    import numpy as np
    import rnnbench

    def step(ops, params, carry, x):          # written once; ops is numpy, torch or jax
        (h,) = carry
        h = ops.tanh(params["w"] * h + x)
        return (h,), h

    report = rnnbench.check_recurrence(
        step, params={"w": np.array([0.5, -0.3])}, carry0=(np.zeros(2),), xs=np.ones((6, 2)),
        drivers=["torch_loop", "jax_lax_scan"])   # None (default): the core drivers but torch.compile's; "all"
    print(report)            # one row per (driver, loss form): status, max relative error, the
    assert report.ok         # oracle's own error bound, and the Hessian-vector product's verdict

Here: check_recurrence and the one place the drivers run; the report in report.py, the input's
validators in validate.py (their messages in messages.py), the user's pytrees in trees.py, the
caller's process settings put back after the check in process_state.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from typing import Any

import numpy as np

from rnnbench import losses as loss_forms
from rnnbench import registry
from rnnbench.api.process_state import keeps_callers_settings
from rnnbench.api.report import DriverResult, RecurrenceReport
from rnnbench.api.selection import left_out_by_default
from rnnbench.api.trees import Tree, flatten, is_flat, leaf_name
from rnnbench.api.validate import DTYPES, Checked, Inputs, validate
from rnnbench.model import Case, Model, is_integer, time_major_batch
from rnnbench.modes import VJP
from rnnbench.status import OracleKind, Status

__all__ = ["DTYPES", "DriverResult", "RecurrenceReport", "check_recurrence"]


@keeps_callers_settings  # jax's x64, torch's flags, numpy's error state: as the caller had them
def check_recurrence(
    step: Callable,
    params: Mapping[str, np.ndarray],
    carry0: Sequence[np.ndarray],
    *,
    xs: np.ndarray | None = None,
    length: int | None = None,
    loss: Callable | None = None,
    consts: Mapping[str, np.ndarray] | None = None,
    carry0_requires_grad: Any = False,
    xs_requires_grad: bool = False,
    dtype: str = "float64",
    drivers: Sequence[str] | None = None,
    device: str = "cpu",
    seed: int = 0,
    losses: Sequence[str] | None = None,
    order: int = 2,
    oracle: str | None = None,
    linear: Callable | None = None,
    modes: str | Sequence[str] | None = None,
    batched: bool = False,
) -> RecurrenceReport:
    """Run `step` on the drivers and compare its gradients (and Hessian-vector products) with the
    oracle's, computed from the numpy forward (by default the ladder: exact dual numbers).

    params, carry0, xs and y_t may be pytrees: nested dicts (keys in sorted order), tuples and lists of
    arrays. Every driver runs the step on flat arrays, x_t and y_t packed into one vector per step.

    Args:
        step: `step(ops, params, carry, x_t) -> (carry, y_t)`, written once against `ops` (numpy,
            torch or jax); x_t is one step of xs (None without xs), y_t a pytree of arrays. Required.
        params: name -> array, or any pytree of float arrays; gradients are named by the path
            ("layer.W"). Required.
        carry0: the initial carry: a tuple of arrays or any pytree (leaves named c0, c1, ... for a
            tuple, else by path); a bare array is a one-leaf carry, the same as (carry0,): the step
            receives the 1-tuple (h,) and may return (h,) or h. Required.
        xs: per-step inputs, a pytree of arrays with leading axis T (each leaf (T, ...)), or None
            with `length` = T. Default: `None`.
        length: the trip count T: required without xs; given with xs, it must equal T.
            Default: `None`.
        loss: `loss(ops, consts, ys, carry_T) -> scalar`, where ys is the output pytree with a
            leading T on every leaf and carry_T the final carry pytree; None judges every driver
            under each form of `losses` instead. Default: `None`.
        consts: name -> array: the custom loss's constants (no gradient). Default: `None`.
        carry0_requires_grad: a bool, or a pytree of bools shaped like carry0 (a bool at a node
            covers every leaf below it): which carry leaves get a gradient. Default: `False`.
        xs_requires_grad: whether xs gets a gradient (needs xs). Default: `False`.
        dtype: one of DTYPES; inputs are rounded to it and the oracle uses the rounded values.
            Default: `"float64"`.
        drivers: driver names (duplicates run once); None: the core drivers but the torch.compile ones
            (C++ compiles: seconds per loss form); the report names those left out and the bug-class
            configurations (remat, reverse, while loops, buffer writes); "all": every one. Default: `None`.
        device: where the drivers run: "cpu", or "cuda" for the drivers that run there.
            Default: `"cpu"`.
        seed: seeds the loss form's random weights and the H v direction. Default: `0`.
        losses: loss-form names from rnnbench.losses, used without `loss`; None:
            rnnbench.losses.CHECKED (random weights, an unweighted sum of the final carry, the mean
            of the outputs, the last output only): a driver bug can hide behind one cotangent
            pattern. Default: `None`.
        order: 2 also checks H v along a seeded direction where the driver has a second-order path
            (float64 only; rnnbench.check.verdicts.second_order); 1 skips it. Default: `2`.
        oracle: None or "auto" (the ladder of rnnbench.check.oracles.oracle: exact dual numbers, 50 digits
            where float64 may not resolve the gradient, finite differences only where no
            derivative exists) or one rung forced: "dual", "dual_mp", "finite_differences".
            Default: `None`.
        linear: `linear(ops, params, x) -> (a, b)`: the step declared as the elementwise linear
            recurrence h_t = a_t * h_(t-1) + b_t on its one carry leaf h, with y_t = h_t (a minGRU,
            an LRU), so the associative-scan drivers run it; x is one step's x_t (a, b of h's shape)
            or the whole xs (every leaf (T, ...); a, b (T, *h.shape)). Checked against the step on
            the case before any driver runs (InputError at the first disagreement); None: the
            associative drivers call the step unavailable. Default: `None`.
        modes: None (vjp; H v per `order`), "all" or mode names: docs/checking.md#modes. Default: `None`.
        batched: every leaf of carry0, x_t and y_t holds B examples on its first axis (xs, ys: (T, B,
            ...)), so per_example judges each example's gradient of its own loss (a custom loss: the sum
            of its examples', consts shared; checked); False: per_example is unavailable. Default: `False`.

    Bad input raises before any driver runs (rnnbench.api.validate; docs/api.md, "Input validation"):
    TypeError for a wrong type, rnnbench.errors.InputError (a ValueError) for a bad value.
    """
    return _check(Inputs(**locals()))  # every argument, by its name: Inputs has a field for each


def _check(given: Inputs) -> RecurrenceReport:
    """check_recurrence on its arguments: validated, then run on every driver chosen."""
    # lazy: `import rnnbench` (every user, every worker) loads the checking machinery only when a check runs
    from rnnbench.check.oracles.oracle import AUTO

    checked = validate(given)
    base, case = _user_model(given, checked)
    # The loss form's weights come from the float64 forward; a float32 check rounds them too.
    judged = {form: loss_forms.with_loss(base, case, form) for form in checked.forms}
    judged = {form: (model, form_case.rounded_to(given.dtype)) for form, (model, form_case) in judged.items()}
    # the linear forms as one weighted loss at each form's weights, for the drivers that share one program among them
    shared = {
        form: (model, form_case.rounded_to(given.dtype))
        for form, (model, form_case) in loss_forms.at_own_weights(base, case, checked.forms).items()
    }
    results, oracle_kind = _run_drivers(
        base,
        judged,
        checked.drivers,
        shared=shared,
        dtype=given.dtype,
        device=given.device,
        seed=given.seed,
        order=2 if checked.hvp else 1,
        oracle=None if given.oracle == AUTO else given.oracle,
        modes=checked.modes,
    )
    left_out = _would_run(base, left_out_by_default(given.drivers), given.dtype, given.device)
    return RecurrenceReport(given.dtype, oracle_kind, results, left_out, integer=integer_leaves(given, checked))


def _user_model(given: Inputs, checked: Checked) -> tuple[Model, Case]:
    """The user's recurrence as a suite model on flat arrays, and its one case rounded to dtype:
    params and carry leaves by name, x_t and y_t packed into one vector per step (T, total)."""
    T, batched = checked.length, checked.batch is not None
    params_tree, carry_tree = Tree(given.params), Tree(checked.carry0)
    xs_tree = None if given.xs is None else Tree(given.xs, per_step=True, batched=batched)
    # a tuple of arrays keeps its names c0, c1, ...; any other tree is named by its paths
    flat = is_flat(checked.carry0)
    carry_names = tuple(f"c{i}" for i in range(len(carry_tree.leaves))) if flat else tuple(carry_tree.names())
    y_tree = Tree(checked.example_y, batched=batched)  # the shape of one step's output (of one example's)

    def step(ops, flat_params, carry, x):
        """The user's step on trees, run on the suite's flat params, carry leaves and packed x."""
        tree_params = params_tree.unflatten([flat_params[n] for n in params_tree.names()])
        x_t = None if x is None else xs_tree.unpack(ops, x, leading=tuple(x.shape[:-1]))
        new, y = given.step(ops, tree_params, carry_tree.unflatten(carry), x_t)
        return tuple(leaf for _, leaf in flatten(new)), y_tree.pack(ops, [leaf for _, leaf in flatten(y)])

    linear = None
    if given.linear is not None:

        def linear(ops, flat_params, x):
            """The declared coefficients on the suite's flat params and packed xs (T, total)."""
            tree_params = params_tree.unflatten([flat_params[n] for n in params_tree.names()])
            return given.linear(ops, tree_params, xs_tree.unpack(ops, x, leading=tuple(x.shape[:-1])))

    loss = None
    if given.loss is not None:

        def loss(ops, consts, ys, carry):
            """The user's loss on the trees: ys (T, total) unpacked to (T, ...) per output leaf."""
            return given.loss(
                ops, consts, y_tree.unpack(ops, ys, leading=tuple(ys.shape[:-1])), carry_tree.unflatten(carry)
            )

    # an integer leaf (token ids, a counter) stays integer and has no gradient (RecurrenceReport.integer)
    carry0 = tuple(_canonical(c) for c in carry_tree.leaves)
    xs = None if xs_tree is None else xs_tree.pack_sequence()
    case = Case(
        model="user",
        sizes={"T": T, **({"B": checked.batch} if batched else {})},
        seed=given.seed,
        params={n: np.asarray(v, dtype=np.float64) for n, v in zip(params_tree.names(), params_tree.leaves)},
        carry0=carry0,
        xs=xs,
        length=T,
        consts=dict(given.consts or {}),
        carry0_requires_grad=tuple(f and not is_integer(c) for f, c in zip(checked.carry0_flags, carry0)),
        xs_requires_grad=bool(given.xs_requires_grad) and not is_integer(xs),
    ).rounded_to(given.dtype)
    base = Model(
        name="user",
        summary="user-defined recurrence",
        carry_names=carry_names,
        default_sizes={"T": T},
        make_case=lambda s, seed: case,
        step=step,
        loss=loss or loss_forms.weighted,
        linear_recurrence=linear,
        # the batch on its own axis of every carry leaf, of xs and ys after T (Tree keeps it packed apart)
        batch_axes=time_major_batch(carry_names, step_consts=(), leaf_consts=()) if batched else None,
        integer_inputs=tuple(
            name
            for name, a in (("xs", case.xs), *((f"carry0.{n}", c) for n, c in zip(carry_names, case.carry0)))
            if is_integer(a)
        ),
    )
    return base, case


def _canonical(leaf: Any) -> np.ndarray:
    """A user's array as the suite holds it: float64, or int64 for an integer array (an index)."""
    a = np.asarray(leaf)
    return a.astype(np.int64) if is_integer(a) else a.astype(np.float64)


def integer_leaves(given: Inputs, checked: Checked) -> tuple[str, ...]:
    """The integer leaves of carry0 and xs, as the user indexes them: kept integer, never differentiated."""
    bare = not isinstance(given.carry0, (tuple, list, dict))
    carry = [("carry0" if bare else leaf_name("carry0", path), leaf) for path, leaf in flatten(checked.carry0)]
    xs = [] if given.xs is None else [(leaf_name("xs", path), leaf) for path, leaf in flatten(given.xs)]
    return tuple(name for name, leaf in (*carry, *xs) if is_integer(np.asarray(leaf)))


def _result(model: Model, driver: Any, case: Case, *, dtype: str, device: str, plan: Any, form: str) -> DriverResult:
    """One driver's result under one loss form and plan (its mode), checked by check_pair."""
    # lazy: `import rnnbench` (every user, every worker) loads the checking machinery only when a check runs
    from rnnbench.rows.pair import check_pair

    pair = check_pair(model, driver, case, dtype=dtype, device=device, plan=plan)
    if pair.status == Status.UNAVAILABLE:
        return DriverResult(driver.name, Status.UNAVAILABLE, None, pair.report, loss=form, mode=plan.mode)
    chk = pair.check
    return DriverResult(
        driver.name,
        status=pair.status,
        max_rel_error=chk.max_rel_error if chk.errors else None,
        report=pair.report,
        grad_errors=chk.errors,
        loss=form,
        hvp_status="-" if pair.hvp is None else str(pair.hvp["status"]),
        computed_dtype=chk.computed_dtype,
        mode=plan.mode,
        oracle_kind=chk.oracle_kind,
    )


def _would_run(base: Model, names: tuple[str, ...], dtype: str, device: str) -> tuple[str, ...]:
    """Those of `names` that could run this step here: what the report says the default left out."""
    # lazy: `import rnnbench` (every user, every worker) loads the checking machinery only when a check runs
    from rnnbench.rows.pair import unavailable_reason

    runs = [unavailable_reason(base, registry.get_driver(n), dtype=dtype, device=device) is None for n in names]
    return tuple(n for n, ok in zip(names, runs) if ok)


def _run_drivers(
    base: Model,
    judged: dict,
    names: list,
    *,
    dtype: str,
    device: str,
    seed: int,
    order: int,
    oracle: str | None = None,
    modes: tuple[str, ...] = ("vjp",),
    shared: Mapping[str, tuple[Model, Case]] | None = None,
) -> tuple[list[DriverResult], str]:
    """Every driver of `names` under every loss form of `judged` ({form: (model, case)}), each pair
    checked by rnnbench.rows.pair.check_pair against one oracle per form, computed once for all
    drivers (`oracle`: a forced rung, None for the ladder), in each differentiation mode of `modes`
    (H v by `order` in the vjp results): (results, the least exact oracle kind used). shared: {form: (model,
    case)} of the linear forms as one weighted loss at each form's weights (rnnbench.losses.at_own_weights): a
    driver with Driver.shared_loss_program runs its vjp rows of those forms on it with its compiles kept, so the
    first form's compiled program serves the others (the oracle stays the form's own)."""
    # lazy: `import rnnbench` (every user, every worker) loads the checking machinery only when a check runs
    from rnnbench.check.oracles.oracle import once, oracle_grads, weakest
    from rnnbench.check.verdicts.per_example import example_oracles
    from rnnbench.machine.caches import cache_root
    from rnnbench.rows.pair import PairPlan, unavailable_reason

    plans: dict[str, PairPlan] = {}  # per form, with its oracle
    results = []
    kinds = []
    frameworks = {registry.get_driver(name).framework.name: registry.get_driver(name).framework for name in names}
    with ExitStack() as kept:  # compiles kept on disk as `rnnbench run` keeps its workers'
        for framework in frameworks.values():
            kept.enter_context(framework.keep_compiles(str(cache_root() / "compile")))
        for name in names:
            driver = registry.get_driver(name)
            reason = unavailable_reason(base, driver, dtype=dtype, device=device)
            if reason is not None:
                results.append(DriverResult(name, Status.UNAVAILABLE, None, reason, loss="-"))
                continue
            shares = driver.shared_loss_program and bool(shared)
            if shares:  # its first shared form compiles from a clean state, the later ones reuse that program
                driver.framework.reset_compiles()
            for form, (model, form_case) in judged.items():
                if form not in plans:
                    first = oracle_grads(model, form_case, oracle)
                    each = once(lambda m=model, c=form_case: example_oracles(m, c, oracle))  # per_example's, if asked
                    plans[form] = PairPlan(
                        order=order, seed=seed, oracle=first, example_oracles=each, oracle_choice=oracle, repeat=False
                    )
                for mode in modes:
                    plan = dataclasses.replace(plans[form], mode=mode)
                    pair_model, pair_case = model, form_case
                    if shares and mode == VJP and form in shared:
                        pair_model, pair_case = shared[form]
                        plan = dataclasses.replace(plan, fresh_compiles=False)
                    results.append(
                        _result(pair_model, driver, pair_case, dtype=dtype, device=device, plan=plan, form=form)
                    )
                    if results[-1].status != Status.UNAVAILABLE:
                        kinds.append(results[-1].oracle_kind)
    return results, weakest(kinds) if kinds else str(oracle or OracleKind.DUAL)
