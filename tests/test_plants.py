"""The plant catalog (tests/plugins/rnnbench_plants.py): every planted derivative bug is caught, at
float64 and float32 (a second-order plant at float64, where H v is checked), through each path its
class can occur on: `rnnbench run` rows (rnnbench.rows.row.run_row, every loss form the fuzzer and
the API use by default, order auto), the fuzzer (its default loss forms) and check_recurrence
(its defaults). A plant that every path misses is a blind spot."""

from __future__ import annotations

import numpy as np
import pytest
from rnnbench_plants import PLANTS, Plant

from rnnbench import losses, registry
from rnnbench.status import Status, is_failing

RUN_MODELS = ("rnn", "lstm", "rnn2")  # one and two recurrences, one and two carry leaves
FUZZ_BODIES = range(6)
DTYPES = ("float64", "float32")


@pytest.fixture(scope="module", autouse=True)
def plants_registered():
    """The plant drivers in the registry for this module only."""
    mp = pytest.MonkeyPatch()
    mp.setenv("RNNBENCH_PLUGINS", "rnnbench_plants")
    registry.drivers.cache_clear()
    yield
    mp.undo()
    registry.drivers.cache_clear()


def _cases(path: str) -> list:
    return [
        pytest.param(p, dtype, id=f"{p.name}-{dtype}")
        for p in PLANTS
        if path in p.paths
        for dtype in DTYPES
        if p.order == 1 or dtype == "float64"
    ]


def _caught(statuses: list[str]) -> bool:
    return any(is_failing(s) for s in statuses)


@pytest.mark.parametrize(("plant", "dtype"), _cases("run"))
def test_run_rows_catch_the_plant(plant: Plant, dtype: str) -> None:
    from rnnbench.machine.environments import current
    from rnnbench.rows.row import Job, run_row

    statuses = {}
    for model in RUN_MODELS:
        for form in (losses.MODEL_LOSS, *losses.CHECKED):
            order = 2 if dtype == "float64" else 1  # what --order auto gives a core model
            rec = run_row(
                Job(
                    model=model,
                    driver=plant.name,
                    dtype=dtype,
                    time=False,
                    environment=current(),
                    loss_form=form,
                    order=order,
                )
            )
            statuses[(model, form)] = str(rec["status"])
            if _caught([rec["status"]]):
                return  # caught (the rest would only cost CI time)
    pytest.fail(f"{plant.name} missed by every run row: {statuses}")


@pytest.mark.parametrize(("plant", "dtype"), _cases("fuzz"))
def test_fuzzer_catches_the_plant(plant: Plant, dtype: str) -> None:
    from rnnbench.fuzz.cases import build
    from rnnbench.fuzz.grammar import judged_body
    from rnnbench.fuzz.runner import run_driver

    driver, statuses = registry.get_driver(plant.name), []
    for index in range(len(FUZZ_BODIES) * len(losses.CHECKED)):
        fc = build(judged_body(0, index, losses.CHECKED), dtype=dtype)
        if fc.ill_conditioned is None:
            judged = run_driver(fc, driver, dtype, second_order=True)
            statuses += [judged.status, judged.hvp_status or Status.OK]
    assert _caught(statuses), f"{plant.name} missed by the fuzzer: {statuses}"


def _user_step(ops, params, carry, x):
    (h,) = carry
    h = ops.tanh(ops.matmul(h, params["W"]) + x)
    return (h,), ops.sin(params["w"] * h) * h


@pytest.mark.parametrize(("plant", "dtype"), _cases("api"))
def test_check_recurrence_catches_the_plant(plant: Plant, dtype: str) -> None:
    import rnnbench

    rng = np.random.default_rng(0)
    report = rnnbench.check_recurrence(
        _user_step,
        params={"W": 0.5 * rng.uniform(-1, 1, (3, 3)), "w": rng.uniform(-1, 1, 3)},
        carry0=(rng.uniform(-1, 1, 3),),
        xs=rng.uniform(-1, 1, (6, 3)),
        carry0_requires_grad=True,
        dtype=dtype,
        drivers=[plant.name],
    )
    assert not report.ok and _caught([r.status for r in report.results]), str(report)


def test_an_expanded_cotangent_bug_hides_from_weighted_losses() -> None:
    """Why the loss family exists: the lane-0 plant is exact under the model's random-weight loss and
    caught under the unweighted sum of the final carry."""
    from rnnbench.machine.environments import current
    from rnnbench.rows.row import Job, run_row

    name = "plant_lane0_under_expanded_cotangent"
    status = {
        form: run_row(
            Job(model="rnn", driver=name, dtype="float64", time=False, environment=current(), loss_form=form)
        )["status"]
        for form in ("model", "weighted", "sum_carry")
    }
    assert status == {"model": "ok", "weighted": "ok", "sum_carry": "grad_mismatch"}, status
