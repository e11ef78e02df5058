"""The loss family: the same recurrence judged under losses that seed its backward with different
cotangent patterns. A driver bug can hide behind one pattern: the default random-weight loss never
sends the backward an all-ones (expanded) final-carry cotangent, an unweighted sum does; only a
loss on the last output leaves every earlier output's cotangent zero.

Each form is written once against `ops` (so it runs on every driver) and knows its cotangents in
closed form: the hand oracles, which take output cotangents (Model.cotangent_consts), then give the
gradient under any form (elsewhere the oracle ladder's dual numbers do, rnnbench.check.oracles.oracle).
Shapes: ys (T, ...), carry a tuple of leaves.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rnnbench.errors import did_you_mean
from rnnbench.model import BatchAxes, Case, Loss, Model, rollout
from rnnbench.ops import numpy_ops

MODEL_LOSS = "model"  # the model's own loss, as its module defines it

Cotangents = tuple[np.ndarray, tuple[np.ndarray, ...]]  # (d loss / d ys, d loss / d carry leaves)


# example_consts(ys_axis, carry_axes) -> {const: its batch axis}: the axis of the batch in each const a form reads,
# from where the batch sits in ys and in each carry leaf (None: that leaf has none)
ExampleConsts = Callable[[int, Sequence[int | None]], dict[str, int | None]]


@dataclass(frozen=True)
class LossForm:
    """name: stable id (records, the known-issues registry, asv). loss(ops, consts, ys, carry).
    weights(rng, ys, carry) -> the consts it reads (fixed random weights). cotangents(consts, ys,
    carry) -> (dys, dcarry), float64 numpy, exact.

    How it restricts to one example of a batch (the per_example mode, rnnbench.batch): the form
    applied to that example's slice of ys, the final carry and its consts (each const sliced on
    the axis example_consts gives it; a const it gives None is shared). example_weight(B): the
    batch's loss is example_weight(B) times the sum of its examples' losses (1 for a sum of entries;
    1/B for a mean, whose slice divides by the example's own number of entries). with_loss puts
    both in the model's BatchAxes.

    linear: the loss is linear in (ys, carry), so it equals the weighted form at its own cotangents as
    weights (at_own_weights): one compiled program of the weighted loss, its weights graph inputs,
    computes every linear form."""

    name: str
    summary: str
    loss: Loss
    weights: Callable[[np.random.Generator, np.ndarray, tuple], dict[str, np.ndarray]]
    cotangents: Callable[[Mapping[str, np.ndarray], np.ndarray, tuple], Cotangents]
    example_consts: ExampleConsts = lambda ys_axis, carry_axes: {}
    example_weight: Callable[[int], float] = lambda size: 1.0
    linear: bool = True


def _uniform(rng: np.random.Generator, like: np.ndarray) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, np.shape(like))


def _ys_weights(rng, ys, carry) -> dict[str, np.ndarray]:
    return {"wy": _uniform(rng, ys)}


def _carry_weights(rng, ys, carry) -> dict[str, np.ndarray]:
    return {f"wc{i}": _uniform(rng, leaf) for i, leaf in enumerate(carry)}


def _zeros(carry: tuple) -> tuple[np.ndarray, ...]:
    return tuple(np.zeros(np.shape(c)) for c in carry)


def weighted(ops, consts, ys, carry):
    """sum(ys * wy) + sum_i sum(c_i * wc_i): every output and final carry leaf reaches the loss."""
    return ys_only(ops, consts, ys, carry) + carry_only(ops, consts, ys, carry)


def ys_only(ops, consts, ys, carry):
    return ops.sum(ys * consts["wy"])


def carry_only(ops, consts, ys, carry):
    total = ops.sum(carry[0] * consts["wc0"])
    for i, leaf in enumerate(carry[1:], start=1):
        total = total + ops.sum(leaf * consts[f"wc{i}"])
    return total


def sum_carry(ops, consts, ys, carry):
    total = ops.sum(carry[0])
    for leaf in carry[1:]:
        total = total + ops.sum(leaf)
    return total


def mean(ops, consts, ys, carry):
    # math.prod of the static shape: a plain Python number under every tracer (np.prod of a
    # torch.Size is traced by dynamo as a tensor op and breaks compilation)
    return ops.sum(ys) * (1.0 / math.prod(tuple(ys.shape)))


def last_y(ops, consts, ys, carry):
    return ops.sum(ys[-1] * consts["w_last"])


def sum_squares(ops, consts, ys, carry):
    total = 0.5 * ops.sum(ys * ys)
    for leaf in carry:
        total = total + 0.5 * ops.sum(leaf * leaf)
    return total


def _ys_axis(ys_axis: int, carry_axes: Sequence[int | None]) -> dict[str, int | None]:
    return {"wy": ys_axis}


def _carry_axes(ys_axis: int, carry_axes: Sequence[int | None]) -> dict[str, int | None]:
    return {f"wc{i}": axis for i, axis in enumerate(carry_axes)}


def _last_cotangent(consts, ys, carry) -> Cotangents:
    dys = np.zeros(np.shape(ys))
    dys[-1] = consts["w_last"]
    return dys, _zeros(carry)


FORMS: dict[str, LossForm] = {
    f.name: f
    for f in (
        LossForm(
            "weighted",
            summary="sum(ys * wy) + sum_i sum(c_i * wc_i), fixed random weights (the fuzzer's and the API's default)",
            loss=weighted,
            weights=lambda rng, ys, carry: {**_ys_weights(rng, ys, carry), **_carry_weights(rng, ys, carry)},
            cotangents=lambda k, ys, carry: (k["wy"], tuple(k[f"wc{i}"] for i in range(len(carry)))),
            example_consts=lambda ys_axis, carry_axes: {
                **_ys_axis(ys_axis, carry_axes),
                **_carry_axes(ys_axis, carry_axes),
            },
        ),
        LossForm(
            "ys_only",
            summary="sum(ys * wy): the final carry gets a zero cotangent",
            loss=ys_only,
            weights=_ys_weights,
            cotangents=lambda k, ys, carry: (k["wy"], _zeros(carry)),
            example_consts=_ys_axis,
        ),
        LossForm(
            "carry_only",
            summary="sum_i sum(c_i * wc_i): every output gets a zero cotangent",
            loss=carry_only,
            weights=_carry_weights,
            cotangents=lambda k, ys, carry: (np.zeros(np.shape(ys)), tuple(k[f"wc{i}"] for i in range(len(carry)))),
            example_consts=_carry_axes,
        ),
        LossForm(
            "sum_carry",
            summary="sum_i sum(c_i), unweighted: an all-ones (expanded) final-carry cotangent",
            loss=sum_carry,
            weights=lambda rng, ys, carry: {},
            cotangents=lambda k, ys, carry: (np.zeros(np.shape(ys)), tuple(np.ones(np.shape(c)) for c in carry)),
        ),
        LossForm(
            "mean",
            summary="mean(ys): one constant cotangent 1/numel over every output",
            loss=mean,
            weights=lambda rng, ys, carry: {},
            cotangents=lambda k, ys, carry: (np.full(np.shape(ys), 1.0 / np.size(ys)), _zeros(carry)),
            example_weight=lambda size: 1.0 / size,
        ),
        LossForm(
            "last_y",
            summary="sum(ys[T-1] * w): only the last output reaches the loss",
            loss=last_y,
            weights=lambda rng, ys, carry: {"w_last": _uniform(rng, ys[-1])},
            cotangents=_last_cotangent,
            example_consts=lambda ys_axis, carry_axes: {"w_last": ys_axis - 1},  # ys[T-1] has no time axis
        ),
        LossForm(
            "sum_squares",
            summary="0.5 sum(ys^2) + 0.5 sum_i sum(c_i^2): cotangents equal to the outputs",
            loss=sum_squares,
            weights=lambda rng, ys, carry: {},
            cotangents=lambda k, ys, carry: (np.asarray(ys), tuple(np.asarray(c) for c in carry)),
            linear=False,
        ),
    )
}
NAMES: tuple[str, ...] = (MODEL_LOSS, *FORMS)
CHECKED: tuple[str, ...] = ("weighted", "sum_carry", "mean", "last_y")
"""The forms the fuzzer and check_recurrence judge under by default: random weights on everything,
an all-ones final-carry cotangent with zero output cotangents, one constant (expanded) output
cotangent with a zero carry cotangent, and only the last output reaching the loss."""


def describe(name: str) -> str:
    return "the model's own loss" if name == MODEL_LOSS else FORMS[name].summary


def form_named(name: str) -> LossForm:
    """The form called `name`; ValueError naming the known ones otherwise."""
    if name not in FORMS:
        raise ValueError(f"unknown loss {name!r}{did_you_mean(name, NAMES)}; known: {', '.join(NAMES)}")
    return FORMS[name]


def with_loss(model: Model, case: Case, name: str) -> tuple[Model, Case]:
    """(model, case) judged under loss form `name` instead of the model's own loss.

    The form's weights are drawn from the case's seed and the form's name (the same on every
    machine). The oracle: the model's hand oracle fed the form's exact cotangents, where the model
    can take them (Model.cotangent_consts); else None, i.e. the oracle ladder (rnnbench.check.oracles.oracle:
    dual numbers over the numpy step)."""
    if name == MODEL_LOSS:
        return model, case
    form = form_named(name)
    ys, carry = rollout(numpy_ops(), model, case.params, carry0=case.carry0, xs=case.xs, length=case.length)
    rng = np.random.default_rng([case.seed, zlib.crc32(name.encode())])
    consts = form.weights(rng, np.asarray(ys), tuple(np.asarray(c) for c in carry))
    new_case = dataclasses.replace(case, consts=consts, loss=name)
    expressible = (
        model.oracle is not None
        and model.cotangent_consts is not None
        and model.cotangent_consts(*form.cotangents(consts, np.asarray(ys), tuple(np.asarray(c) for c in carry)))
        is not None
    )
    oracle = _through_cotangents(model, form) if expressible else None
    new_model = dataclasses.replace(
        model,
        loss=form.loss,
        oracle=oracle,
        oracle_kind=model.oracle_kind if oracle else "finite_differences",
        batch_axes=_example_axes(model, form),
    )
    return new_model, new_case


def at_own_weights(model: Model, case: Case, names: Sequence[str]) -> dict[str, tuple[Model, Case]]:
    """{name: (model, case)} for each linear form of `names` (LossForm.linear): the weighted form with the form's
    own cotangents as its weights (wy: d loss/d ys, wc_i: d loss/d carry_i), its case named by the form (the
    known-issue registry matches on case.loss). A linear loss is <dys, ys> + sum_i <dc_i, c_i>, so the loss and
    every gradient are the form's own; the forms differ only in the weight tensors, which a compiler takes as
    inputs, and all of them share one Model object, so one compiled program serves them all. The seed the
    backward starts from is not the form's own (an unweighted sum's stride-0 cotangent arrives as dense
    weights), so a driver whose bugs depend on that seed's layout must judge each form's own program."""
    linear = [n for n in names if n != MODEL_LOSS and form_named(n).linear]
    if not linear:
        return {}
    weighted_model, _ = with_loss(model, case, "weighted")  # its oracle reads case.consts as its weights
    ys, carry = rollout(numpy_ops(), model, case.params, carry0=case.carry0, xs=case.xs, length=case.length)
    ys, carry = np.asarray(ys), tuple(np.asarray(c) for c in carry)
    shared: dict[str, tuple[Model, Case]] = {}
    for name in linear:
        _, form_case = with_loss(model, case, name)
        dys, dcarry = FORMS[name].cotangents(form_case.consts, ys, carry)
        weights = {"wy": np.array(dys, dtype=np.float64)}
        weights.update({f"wc{i}": np.array(c, dtype=np.float64) for i, c in enumerate(dcarry)})
        shared[name] = (weighted_model, dataclasses.replace(form_case, consts=weights))
    return shared


def _example_axes(model: Model, form: LossForm) -> BatchAxes | None:
    """The model's batch axes with the form's consts' axes and weight in place of its own loss's."""
    axes = model.batch_axes
    if axes is None:
        return None
    carry_axes = [axes.inputs.get(f"carry0.{n}") for n in model.carry_names]
    consts = {k: a for k, a in form.example_consts(axes.ys, carry_axes).items() if a is not None}
    return dataclasses.replace(axes, consts=consts, weight=form.example_weight)


def _through_cotangents(model: Model, form: LossForm) -> Callable[[Case], dict[str, np.ndarray]]:
    """An oracle for `form`: the model's hand oracle, fed the form's cotangents at this case's forward
    in place of its own loss weights (a loss linear in ys and the carry is its cotangents)."""

    def oracle(case: Case) -> dict[str, np.ndarray]:
        ys, carry = rollout(numpy_ops(), model, case.params, carry0=case.carry0, xs=case.xs, length=case.length)
        dys, dcarry = form.cotangents(case.consts, np.asarray(ys), tuple(np.asarray(c) for c in carry))
        return model.oracle(dataclasses.replace(case, consts=model.cotangent_consts(dys, dcarry)))

    return oracle


def parse(value: str | None, default: Sequence[str]) -> list[str]:
    """Comma-separated loss names -> list, in order, duplicates once; ValueError on an unknown name."""
    if not value:
        return list(default)
    names = list(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    if not names:
        raise ValueError("--losses selects no loss")
    for n in names:
        if n != MODEL_LOSS:
            form_named(n)
    return names
