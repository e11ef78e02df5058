"""A row's roads (rnnbench.rows.roads): each road is checked against the row's checked values before it
is timed (a JVP against the gradient's dot product with the seeded tangent, per-example roads against the
checked per-example gradients), one that differs, raises or is not offered is recorded with its reason
and never timed; the roads beside a row are timed interleaved in one loop (rows.timing.measure_interleaved);
a real row with --roads records its own road and each road beside it."""

from __future__ import annotations

import numpy as np
import pytest

from rnnbench.check.tolerance import tolerance
from rnnbench.check.verdicts.judge import Check
from rnnbench.drivers.base import Prepared, RoadProgram, seeded_tangent
from rnnbench.rows import roads
from rnnbench.rows.row import Job, run_row
from rnnbench.rows.timing import Clocks, TimingConfig, measure_interleaved

GRADS = {"W": np.array([[1.0, -2.0], [0.5, 3.0]]), "b": np.array([0.25, -1.0])}


def _check(grads: dict = GRADS) -> Check:
    return Check(status="ok", oracle_kind="dual", tolerance=tolerance("float32", "dual"), grads=dict(grads))


def _prepared(road_values: dict) -> Prepared:
    """A prepared driver whose vjp gives GRADS and whose roads give `road_values` ({name: values, or an
    exception to raise})."""

    def program(values):
        def run():
            if isinstance(values, Exception):
                raise values
            return values

        return RoadProgram(run, lambda out: out)

    return Prepared(
        lambda: (1.0, dict(GRADS)),
        forward=lambda: None,
        forward_backward=lambda: "vjp",
        block=lambda result: None,
        roads={name: program(values) for name, values in road_values.items()},
    )


def _jvp(grads: dict, scale: float = 1.0) -> dict:
    tangent = seeded_tangent({n: g.shape for n, g in grads.items()})
    return {"jvp": np.array([scale * sum(float(np.sum(g * tangent[n])) for n, g in grads.items())])}


def test_a_jvp_is_held_to_the_checked_gradient_along_the_seeded_tangent() -> None:
    right, wrong = _prepared({"jvp": _jvp(GRADS)}), _prepared({"jvp": _jvp(GRADS, scale=1.01)})
    program, kept = roads.checked_program(right, "jvp", _check(), mode="vjp")
    assert program is not None and kept["max_rel_error"] < 1e-12 and "tangent" in kept["checked"]
    program, kept = roads.checked_program(wrong, "jvp", _check(), mode="vjp")
    assert program is None and kept["status"] == roads.DIFFERS and kept["reason"].startswith("rel error")


def test_the_seeded_tangent_is_the_same_whatever_the_order_of_the_inputs() -> None:
    one = seeded_tangent({"W": (2, 2), "b": (2,)})
    two = seeded_tangent({"b": (2,), "W": (2, 2)})
    assert all(np.array_equal(one[n], two[n]) for n in one)


def test_per_example_roads_against_the_checked_per_example_gradients() -> None:
    each = {"W": np.stack([GRADS["W"], 2 * GRADS["W"]]), "b": np.stack([GRADS["b"], -GRADS["b"]])}
    loop = {n: g.copy() for n, g in each.items()}
    trick = {n: g.copy() for n, g in each.items()}
    trick["b"][1, 0] += 0.1  # example 1's bias gradient wrong in one entry
    prepared = _prepared({"per_example_loop": loop, "per_example_batched_loss": trick})
    timed, kept = roads.beside(prepared, "per_example", _check(each))
    assert set(timed) == {"vjp", "per_example_loop"}
    assert kept["vjp"]["max_rel_error"] is None and kept["vjp"]["checked"] == "the same driver's vjp row"
    assert kept["per_example_loop"]["max_rel_error"] == 0.0
    assert kept["per_example_batched_loss"]["status"] == roads.DIFFERS


def test_a_road_that_raises_or_is_not_offered_says_why_and_is_not_timed() -> None:
    prepared = _prepared({"jvp": NotImplementedError("no forward-mode formula for op X")})
    timed, kept = roads.beside(prepared, "vjp", _check())
    assert timed == {}
    assert kept["jvp"] == {
        "status": "unavailable",
        "reason": "jvp raised NotImplementedError: no forward-mode formula for op X",
    }
    assert kept["jvp_dual"]["status"] == "unavailable" and "not offered" in kept["jvp_dual"]["reason"]


def test_interleaved_timing_alternates_the_calls_until_each_has_its_samples() -> None:
    order: list[str] = []
    now = [0.0]

    def tick() -> float:
        now[0] += 1e-3
        return now[0]

    fns = {name: (lambda name=name: order.append(name)) for name in ("a", "b", "c")}
    config = TimingConfig(warmup=1, min_repeats=4, max_repeats=4, budget_s=0.0)
    timed = measure_interleaved(fns, lambda result: None, config, clocks=Clocks(wall=tick, cpu=tick))
    assert order[:3] == ["a", "b", "c"]  # the warm-ups
    assert order[3:] == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]  # each round rotated
    assert {n: t.repeats for n, t in timed.items()} == {"a": 4, "b": 4, "c": 4}


@pytest.mark.parametrize("mode", ["vjp", "per_example"])
def test_a_row_with_roads_records_its_own_road_and_each_road_beside_it(mode: str) -> None:
    pytest.importorskip("torch")
    timing = TimingConfig(warmup=1, min_repeats=3, max_repeats=3, budget_s=0.0)
    rec = run_row(Job(model="rnn", driver="torch_loop", mode=mode, roads=True, timing=timing, sizes={"T": 4}))
    assert rec["status"] == "ok" and rec["road"] == mode and rec["fwd_bwd"]["repeats"] == 3
    assert rec["settings"]["roads"] is True
    for name in {"vjp": ("jvp", "jvp_dual"), "per_example": ("vjp", "per_example_loop", "per_example_batched_loss")}[
        mode
    ]:
        assert rec["roads"][name]["fwd_bwd"]["repeats"] == 3, (name, rec["roads"][name])
