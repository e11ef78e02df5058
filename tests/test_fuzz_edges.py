"""The fuzzer's edge grammar: every op users write that is not smooth is drawn, inputs are snapped
onto kinks and ties at the set rate, the stream is reproducible (and the smooth one unchanged), a
record rebuilds an edge body, repro scripts render the new ops in torch and jax, and planted wrong
derivatives are flagged on the planted framework only."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from rnnbench import registry
from rnnbench.cli import main
from rnnbench.fuzz.campaign import Campaign, body_fields, body_from_fields
from rnnbench.fuzz.cases import body_case, build, snap
from rnnbench.fuzz.edges import EDGE2_OPS, EDGE_OPS, SNAP_VALUES
from rnnbench.fuzz.grammar import Body, Grammar, body_valid, generate
from rnnbench.fuzz.runner import fuzz

EDGE = Grammar("edge", 0.25)


def test_every_edge_op_is_drawn_within_a_few_dozen_bodies() -> None:
    seen: set[str] = set()
    for i in range(60):
        seen |= generate(3, i, EDGE).op_classes()
    assert set(EDGE_OPS) <= seen, sorted(set(EDGE_OPS) - seen)


def test_edge_bodies_are_reproducible_valid_and_round_trip_through_records() -> None:
    for i in range(20):
        body = generate(5, i, Grammar("edge", 0.3, "grad:jax"))
        assert body == generate(5, i, Grammar("edge", 0.3, "grad:jax")) and body_valid(body)
        assert body.snap_rate == 0.3 and body.plant == "grad:jax"
        compile(body.source(), "<body>", "exec")
        assert body_from_fields(body_fields(body)) == body
    # the smooth stream is its own: an edge campaign does not change the bodies of earlier seeds
    assert generate(5, 0) == dataclasses.replace(generate(5, 0, Grammar()), snap_rate=0.0, plant="")
    assert generate(5, 0).snap_rate == 0.0 and generate(5, 0).op_classes() == {"smooth"}


def test_snapping_happens_at_the_set_rate_onto_kinks_and_ties() -> None:
    rng = np.random.default_rng(0)
    arrays = {"a": rng.uniform(-1, 1, (400, 5)), "b": rng.uniform(-1, 1, (400, 5)), "none": None}
    for rate in (0.0, 0.1, 0.4):
        out, masks = snap(arrays, rate, np.random.default_rng(1))
        assert out["none"] is None
        for key in ("a", "b"):
            share = masks[key].mean()
            assert abs(share - rate) < 0.03, (rate, share)
            assert np.all(np.isin(out[key][masks[key]], SNAP_VALUES))
            assert np.array_equal(out[key][~masks[key]], arrays[key][~masks[key]])
        both = masks["a"] & masks["b"]
        assert np.array_equal(out["a"][both], out["b"][both])  # snapped together: a tie
    # through a body's case: parameters, initial carry and xs, at the rate the body carries
    snapped = total = 0
    for i in range(150):
        body = generate(8, i, Grammar("edge", 0.3))
        case, plain = body_case(body, "fuzz"), body_case(dataclasses.replace(body, snap_rate=0.0), "fuzz")
        vectors = [case.params[p] for p in ("p0", "p1") if p in case.params] + list(case.carry0)
        before = [plain.params[p] for p in ("p0", "p1") if p in plain.params] + list(plain.carry0)
        if case.xs is not None:
            vectors, before = vectors + [case.xs], before + [plain.xs]
        for v, w in zip(vectors, before):
            snapped += int(np.sum(v != w))
            total += v.size
    assert abs(snapped / total - 0.3) < 0.05, snapped / total


def _every_op_body(table: dict = EDGE_OPS) -> Body:
    """One body using every edge op of `table` once (no snapping: the script checks a correct driver)."""
    ops = [("edge", op, *[("leaf", "p0"), ("leaf", "p1"), ("leaf", "c0")][: e.arity]) for op, e in table.items()]
    total = ops[0]
    for e in ops[1:]:
        total = ("bin", "+", total, e)
    return Body(
        updates=(("bin", "*", ("const", 0.5), total),),
        output=total,
        n=2,
        length=2,
        has_xs=False,
        carry_grad=(True,),
        xs_grad=False,
        data_seed=4,
    )


@pytest.mark.parametrize("table", [EDGE_OPS, EDGE2_OPS], ids=["edge", "edge2"])
@pytest.mark.parametrize("driver", ["torch_loop", "jax_loop"])
def test_repro_scripts_render_every_edge_op(tmp_path, driver, table) -> None:
    from rnnbench.fuzz.repro import export

    fc = build(_every_op_body(table))
    assert fc.ill_conditioned is None and fc.oracle is not None
    path = export(
        tmp_path / "repro.py",
        fc,
        registry.get_driver(driver),
        second_order=False,
        status="ok",
        tolerance=1e-9,
        absolute_scale=0.0,
    )
    run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0 and "OK" in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize("plant, drivers", [("grad:jax", ("torch_loop", "jax_loop")), ("hvp:torch", ("torch_loop",))])
def test_planted_wrong_derivatives_are_flagged_on_the_planted_framework_only(plant, drivers) -> None:
    """Smooth bodies: every planted outcome is a mismatch (beside kinks: the two tests below)."""
    campaign = Campaign(cases=4, seed=2, drivers=drivers, grammar=Grammar("smooth", 0.0, plant), shrink_per_kind=0)
    summary = fuzz(campaign)
    planted = [o for o in summary.outcomes if summary.is_planted(o)]
    assert len(planted) == 4 - sum(summary.ill_conditioned.values()) > 0
    assert summary.plant_verdicts() == {"caught": len(planted)} and not summary.misses, summary.format()
    assert not summary.failures, summary.format()  # the unplanted driver is judged as usual
    assert f"plant {plant}" in summary.format()


def test_no_planted_edge_body_is_called_right() -> None:
    """Snapped edge bodies: no planted outcome is ok (a miss); most are mismatches."""
    campaign = Campaign(cases=4, seed=2, drivers=("jax_loop",), grammar=Grammar("edge", 0.25, "grad:jax"))
    summary = fuzz(dataclasses.replace(campaign, shrink_per_kind=0))
    assert not summary.misses and summary.plant_verdicts()["caught"] >= 2, summary.format()


def _dead_carry_verdicts(op: str, length: int, dtype: str) -> tuple[str, str]:
    """c0' = op(c0) + plant (grad:torch), y = c0, carry0 = -0.5: op(c0) is 0 after step 0, so every later step
    sits on op's kink. (jax_loop's status, torch_loop's status)."""
    from rnnbench.check.oracles.oracle import oracle_grads
    from rnnbench.fuzz.cases import FuzzCase
    from rnnbench.fuzz.runner import run_driver

    body = Body(
        updates=(("edge", op, ("leaf", "c0")),),
        output=("leaf", "c0"),
        n=1,
        length=length,
        has_xs=False,
        carry_grad=(True,),
        xs_grad=False,
        data_seed=1,
        plant="grad:torch",
    )
    fc = build(body)
    case = dataclasses.replace(fc.case, carry0=(np.array([-0.5]),))
    fc = FuzzCase(body, fc.model, case, None, oracle_grads(fc.model, case))
    jax, torch = (run_driver(fc, registry.get_driver(d), dtype, second_order=False) for d in ("jax_loop", "torch_loop"))
    return jax.status, torch.status


def test_a_planted_wrong_gradient_beside_a_kink_is_a_mismatch() -> None:
    """The edge campaign's planted miss, shrunk: T = 2, relu by where (step 1 sits on its kink). The kink
    cannot explain torch's value (it is outside every value the kink's one-sided derivatives allow,
    check/oracles/kink_range.py): jax, without the plant, is ok on the same case."""
    assert _dead_carry_verdicts("relu_where", 2, "float64") == ("ok", "grad_mismatch")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("op", ["relu_where", "relu_maximum"])
def test_a_planted_wrong_gradient_through_a_carry_dead_for_16_steps_is_a_mismatch(op: str, dtype: str) -> None:
    """Finding 4's body before shrinking (seed 37, body 40): c0 at 0 for 16 steps, 16 ties on carry0's one
    entry: beyond the 8 corners enumerated, so it was cannot_decide; interval tangents bound the range in
    one pass (check/differentiation/dual_interval.py). jax, unplanted, is ok."""
    assert _dead_carry_verdicts(op, 17, dtype) == ("ok", "grad_mismatch")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["fuzz", "--grammar", "rough"], "unknown grammar 'rough'"),
        (["fuzz", "--plant", "grad:numpy"], "unknown plant 'grad:numpy'"),
        (["fuzz", "--grammar", "edge", "--snap-rate", "1.5"], "--snap-rate must be within [0, 1]"),
    ],
)
def test_cli_edge_flags_bad_input_is_one_line(argv, message, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_a_planted_wrong_hvp_beside_a_tie_is_judged() -> None:
    """The edge campaign's planted-H v body 10, shrunk: maximum(c0, p1) at a tie (c0 = p1), jax's
    H v planted wrong on p0, which the tie does not reach. The whole H v was ill_conditioned (the
    difference oracle disagreed with itself on p1 and c0); now the nested dual numbers judge every
    entry whose H v does not depend on the tie (check/oracles/kink_range.py) and leave the others undecided."""
    import rnnbench

    def step(ops, params, carry, x):
        (c0,) = carry
        p0, p1 = params["p0"], params["p1"]
        plant = 0.5 * ops.sum((p0 - ops.stop_gradient(p0)) ** 2) if ops.name == "jax" else 0.0
        return (p0 + plant,), ops.maximum(c0, p1) + plant

    report = rnnbench.check_recurrence(
        step,
        params={"p0": np.array([0.7]), "p1": np.array([0.3])},
        carry0=(np.array([0.3]),),
        carry0_requires_grad=True,
        length=2,
        drivers=["torch_loop", "jax_loop"],
        losses=["weighted"],
        order=2,
    )
    by_driver = {r.driver: r for r in report.results}
    assert by_driver["jax_loop"].status == by_driver["jax_loop"].hvp_status == "hvp_mismatch", str(report)
    assert (by_driver["torch_loop"].status, by_driver["torch_loop"].hvp_status) == ("ok", "ill_conditioned")


# kinks whose first order is undecided only there (Check.kinks_only), each with that status: relu(c0)
# - relu(-a c0) at c0 = 0 is differentiable for a = 1 (the frameworks' subgradient differs), not for a = 0.7
KINK_ONLY = {"subgradient_differs": -1.0, "cannot_decide": -0.7}


@pytest.mark.parametrize("first_order", sorted(KINK_ONLY))
def test_a_kink_only_pair_with_a_wrong_hvp_is_classed_as_a_run_row_classes_it(first_order: str) -> None:
    """c0' = relu(c0) - relu(a c0) + p0^2, c0 = (0, 0.3): entry 0 on the kink, its first order
    undecided there only; torch's H v planted wrong. The fuzzer's classes (its outcome, and the one
    rebuilt from its record) are the row's status (rows.pair.check_pair, what rows/row.py records):
    hvp_mismatch, failed, shrunk as that kind."""
    from rnnbench.check.oracles.oracle import oracle_grads
    from rnnbench.fuzz.campaign import Campaign, outcome_from_record, shrunk_from_records
    from rnnbench.fuzz.cases import FuzzCase
    from rnnbench.fuzz.outcome import Outcome
    from rnnbench.fuzz.runner import run_driver
    from rnnbench.rows.pair import PairPlan, check_pair

    def relu(e: tuple) -> tuple:
        return ("edge", "relu_where", e)

    c0, p0 = ("leaf", "c0"), ("leaf", "p0")
    pair = ("bin", "-", relu(c0), relu(("bin", "*", ("const", KINK_ONLY[first_order]), c0)))
    body = Body(
        updates=(("bin", "+", pair, ("bin", "*", p0, p0)),),
        output=c0,
        n=2,
        length=2,
        has_xs=False,
        carry_grad=(True,),
        xs_grad=False,
        data_seed=1,
        plant="hvp:torch",
    )
    fc = build(body)
    case = dataclasses.replace(fc.case, carry0=(np.array([0.0, 0.3]),))
    fc = FuzzCase(body, fc.model, case, None, oracle_grads(fc.model, case))
    driver = registry.get_driver("torch_loop")
    plan = PairPlan(order=2, oracle=fc.oracle, hvp_oracle=fc.hvp_oracle, repeat=False, localize=False)
    with np.errstate(invalid="ignore"):  # the kink's infinite oracle bound times a zero weight
        row = check_pair(fc.model, driver, fc.case, dtype="float64", device="cpu", plan=plan)
        judged = run_driver(fc, driver, "float64", second_order=True)
        status, hvp_status, report = judged.status, judged.hvp_status, judged.report
    assert row.check.kinks_only and (row.check.status, row.hvp_status) == (first_order, "hvp_mismatch"), row.report
    assert (status, hvp_status) == (first_order, "hvp_mismatch"), report
    outcome = Outcome(0, driver.name, status, hvp_status, report, body, minimal=body)
    rec = Campaign(cases=1, seed=0, drivers=(driver.name,)).to_record(outcome)
    rebuilt = outcome_from_record(rec)
    for out in (outcome, rebuilt):
        assert out.kind == out.verdict == row.status == "hvp_mismatch"
        assert out.failed and not out.known and not out.errored and out.first_order_ok
    assert shrunk_from_records([rec]) == {(driver.name, "hvp_mismatch"): 1}  # a resumed campaign's kinds
