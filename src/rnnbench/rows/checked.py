"""A prepared driver whose gradients were checked: the entry point that asv benchmarks and
pytest-benchmark tests share with the CLI's rows (same registry, same check, same tolerance)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rnnbench import registry
from rnnbench.check.verdicts.judge import Check, judge
from rnnbench.drivers.base import Prepared
from rnnbench.modes import ROADS, VJP
from rnnbench.rows import roads
from rnnbench.rows.pair import PairPlan, check_pair, unavailable_reason
from rnnbench.status import Status


class NotApplicable(NotImplementedError):
    """The driver cannot run this model / dtype / device here (asv skips NotImplementedError)."""


class GradientDisagreement(AssertionError):
    """The driver ran but its gradients do not agree with the oracle: no speed number for it."""


def prepare_checked(
    model_name: str,
    driver_name: str,
    *,
    sizes: Mapping[str, int] | None = None,
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
    mode: str = VJP,
) -> tuple[Check, Prepared]:
    """Prepare `driver_name` on `model_name` at `sizes` (overrides of the defaults), run the
    staged gradient check once in differentiation mode `mode` (rnnbench.modes; that first call
    compiles; Check.first_call_s times it) and return (check, prepared). Raises NotApplicable (also
    for a mode the driver cannot run, with its reason) or GradientDisagreement (with the full report)."""
    model, driver = registry.get_model(model_name), registry.get_driver(driver_name)
    reason = unavailable_reason(model, driver, dtype=dtype, device=device, trying=True)  # this process may try a dtype
    if reason is not None:
        raise NotApplicable(reason)
    case = model.make_case(model.sizes_with_defaults(dict(sizes or {})), seed).rounded_to(dtype)
    pair = check_pair(model, driver, case, dtype=dtype, device=device, plan=PairPlan(repeat=False, mode=mode))
    if pair.status == Status.UNAVAILABLE:
        raise NotApplicable(pair.report)
    if pair.status != Status.OK or pair.prepared is None:
        raise GradientDisagreement(f"{model_name} / {driver_name}: {pair.status}\n{pair.report}")
    return pair.check, pair.prepared


def prepare_road(
    model_name: str,
    driver_name: str,
    road: str,
    *,
    sizes: Mapping[str, int] | None = None,
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
) -> tuple[Check, Prepared, Callable[[], Any], dict[str, Any]]:
    """A road's timed program (rnnbench.modes.ROADS), checked: the row of the mode that checks it
    (prepare_checked), then the program held to that row's checked values as `rnnbench run --roads`
    holds it (rnnbench.rows.roads). Returns (check, prepared, program, what the record keeps of the
    road); raises NotApplicable where the driver offers no such program (with the reason) and
    GradientDisagreement where its values disagree."""
    mode = ROADS[road].checked_by
    check, prepared = prepare_checked(
        model_name, driver_name, sizes=sizes, dtype=dtype, device=device, seed=seed, mode=mode
    )
    program, kept = (
        roads.own_program(prepared, mode, check)
        if road == mode
        else roads.checked_program(prepared, road, check, mode=mode)
    )
    if program is None and kept.get("status") == roads.DIFFERS:
        raise GradientDisagreement(f"{model_name} / {driver_name} / {road}: {kept['reason']}")
    if program is None:
        raise NotApplicable(kept.get("reason", f"{road}: no timed program"))
    return check, prepared, program, kept


def verify(
    model_name: str,
    loss: float,
    grads: dict,
    *,
    sizes: Mapping[str, int] | None = None,
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
    driver_name: str = "",
) -> Check:
    """Judge a (loss, canonical grads) pair, e.g. the value a benchmark returned, against the
    oracle with the one tolerance policy (and the known-issues registry, for `driver_name`);
    returns the Check (status "ok" when they agree)."""
    model = registry.get_model(model_name)
    case = model.make_case(model.sizes_with_defaults(dict(sizes or {})), seed).rounded_to(dtype)
    return judge(model, case, dtype, device=device, driver_name=driver_name, produced=(loss, grads))
