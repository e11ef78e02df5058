"""Differentiation modes (rnnbench.modes): every mode a driver runs is judged by the one judge
against the one oracle, with the same edge rules (kinks, ties, NaN, float32 rounding); a mode a
driver cannot run is unavailable with its reason; a planted wrong derivative is caught in each mode,
through check_recurrence and the fuzzer. The matrix is generated from the registry (quick suite x
core drivers x modes x dtypes); its compiled and slow-to-trace rows are in the slow tier. per_example
judges each example against its own case's oracle: the edges run it on a batch of two copies of the
edge (check_recurrence(batched=True)), the fuzzer on its bodies' batches (tests/test_per_example.py:
the batch and the oracle themselves)."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

import rnnbench
from rnnbench import batch, modes, record, registry
from rnnbench.check.bugs.known_issues import expect_ok
from rnnbench.fuzz.campaign import Campaign
from rnnbench.fuzz.grammar import Grammar
from rnnbench.fuzz.runner import fuzz
from rnnbench.machine.environments import current, runs
from rnnbench.rows.pair import PairPlan, check_pair, unavailable_reason
from rnnbench.suites import QUICK
from test_edges import EDGES, Edge
from test_edges_planted import WRONG, first_order, nan_derivative, torch_only

SLOW = pytest.mark.slow
NEW_MODES = tuple(m for m in modes.FIRST_ORDER if m != modes.VJP)
FAST = {("taylor_exp", "torch_loop"), ("rnn", "jax_lax_scan")}  # cheap to trace: the fast tier's rows
# Framework failures the checks found that no registry entry covers yet: (driver, mode) -> (models, what torch
# raises). A strict xfail each, so a fix shows; to be registered by mechanism (docs/bugs.md).
UNREGISTERED = {
    ("torch_scan", "func"): (
        ("taylor_exp", "newton_sqrt"),
        "torch raises AssertionError: Expected FakeTensor (torch.func over the scan higher-order op)",
    ),
    ("torch_scan", "per_example"): (
        ("rnn", "lstm", "lstm2"),
        "torch raises AssertionError inside dynamo (False != True in its meta conversion of a vmapped tensor, or "
        "Expected FakeTensor) under torch.func.vmap(torch.func.grad) over the eager scan higher-order op",
    ),
    # the transform of the eager scan loss, compiled with the driver's settings (drivers/torch/_compile.py)
    **{
        ("torch_scan_compiled", mode): (
            ("rnn",),
            "torch raises AssertionError: Expected FakeTensor (dynamo's speculate_subgraph of the scan op under "
            "torch.compile of a torch.func transform)",
        )
        for mode in ("jvp", "func", "per_example")
    },
}


# The matrix's thinning (docs/testing.md#tiers): a compiled row of a new mode is an inductor compile of a
# functorch-transformed program (30-190 s each here), so the compiled drivers run it on one model at float64: the two
# compiled mechanisms torch.func composes with (dynamo over the unrolled loop, over the scan op) and the associative
# scan; the others are settings of those programs (autocast, inductor options, a clone) whose vjp rows the gradient
# matrix keeps. Eager drivers run every quick model at float64 and their first runnable model at float32 (the float32
# bounds per mode are the edge tests' subject below, on every edge).
COMPILED_IN_MODES = {"torch_loop_compiled", "torch_scan_compiled", "torch_associative_scan_compiled"}
COMPILED_MODEL = "rnn"


def _thinned_out(model_name: str, driver, dtype: str) -> bool:
    if driver.slow_to_compile:
        return driver.name not in COMPILED_IN_MODES or model_name != COMPILED_MODEL or dtype != "float64"
    if dtype == "float64":
        return False
    runnable = [m for m in QUICK.models if driver.supports(registry.get_model(m)) is None]
    return model_name != (runnable or [None])[0]


def _matrix() -> list:
    out = []
    for model_name in QUICK.models:
        for driver in registry.drivers().values():
            if driver.suite != "core" or not runs(driver, current()):
                continue
            for mode in NEW_MODES:
                for dtype in ("float64", "float32"):
                    if (model_name, driver.name) not in FAST and _thinned_out(model_name, driver, dtype):
                        continue
                    marks = [] if (model_name, driver.name) in FAST else [SLOW]
                    models, why = UNREGISTERED.get((driver.name, mode), ((), ""))
                    if model_name in models:
                        marks.append(pytest.mark.xfail(strict=True, reason=why))
                    out.append(pytest.param(model_name, driver.name, mode, dtype, marks=marks))
    return out


@pytest.mark.parametrize("quick_model, core_driver, mode, dtype", _matrix())
def test_every_quick_pair_has_a_verdict_in_every_mode(
    quick_model: str, core_driver: str, mode: str, dtype: str
) -> None:
    """ok, or unavailable with the driver's or the framework's own reason; never an unexplained failure."""
    model, driver = registry.get_model(quick_model), registry.get_driver(core_driver)
    if unavailable_reason(model, driver, dtype=dtype) is not None:
        pytest.skip("the pair itself cannot run here")
    case = model.make_case(model.sizes_with_defaults(), seed=0).rounded_to(dtype)
    pair = check_pair(model, driver, case, dtype=dtype, device="cpu", plan=PairPlan(repeat=False, mode=mode))
    if pair.status == "unavailable":
        assert pair.report.strip(), "an unavailable mode says why"
        declared = driver.mode_missing(mode) or (mode == modes.PER_EXAMPLE and batch.unavailable(model, case))
        assert declared or "the framework declines it" in pair.report, pair.report
        return
    expect_ok(pair.status, pair.report)
    assert pair.check.errors, "no gradient was compared"


def test_modes_are_data_and_parse_as_the_flags_take_them() -> None:
    assert modes.parse("all") == tuple(modes.MODES)
    assert modes.parse("jvp,vjp") == ("vjp", "jvp")
    assert modes.rows_and_hvp("hvp") == (("vjp",), True)
    assert modes.rows_and_hvp("jvp") == (("jvp",), False)
    with pytest.raises(ValueError, match="unknown mode"):
        modes.parse("reverse")


def test_a_mode_is_part_of_the_row_key_and_old_records_read_as_vjp() -> None:
    rec = {"model": "rnn", "driver": "torch_loop", "dtype": "float64"}
    assert record.row_key(rec).mode == "vjp"
    assert record.row_key({**rec, "mode": "jvp"}) != record.row_key(rec)
    key = record.row_key(rec)
    # a vjp row's fingerprint is the one it had before modes existed (--resume keeps matching)
    assert key.fingerprint("v", {}) == record.RowKey(*key[:-1]).fingerprint("v", {})
    assert record.row_key({**rec, "mode": "jvp"}).fingerprint("v", {}) != key.fingerprint("v", {})


def test_a_registry_entry_without_modes_covers_vjp_only() -> None:
    from rnnbench.check.bugs import known_issues

    issue = known_issues.registry()[0]
    assert issue.modes == ("vjp",)
    model = registry.get_model(issue.witnesses[0]["model"] if issue.witnesses else (issue.models or ("rnn",))[0])
    case = model.make_case(model.sizes_with_defaults(), seed=0)
    kw = {"dtype": "float64", "versions": lambda p: "0", "order": issue.order}
    for mode in NEW_MODES:
        assert not issue.covers(issue.drivers[0], model, case, **kw, mode=mode)


# ---- the edge rules, per mode, through check_recurrence ----
def check(edge: Edge, dtype: str, mode: str, step=None) -> rnnbench.RecurrenceReport:
    """The edge through check_recurrence in `mode`; per_example's on a batch of two copies of the edge (its
    steps are elementwise: each example meets the edge, and is judged against its own case's oracle)."""
    batched = mode == modes.PER_EXAMPLE
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # sqrt / log at the domain boundary, as numpy says
        return rnnbench.check_recurrence(
            step or edge.step,
            params=edge.params,
            carry0=tuple(np.stack([c, c]) for c in edge.carry0) if batched else edge.carry0,
            xs=np.stack([edge.xs, edge.xs], axis=1) if batched else edge.xs,
            drivers=["torch_loop", "jax_loop"],
            losses=["weighted"],
            dtype=dtype,
            modes=mode,
            carry0_requires_grad=edge.carry0_requires_grad,
            batched=batched,
        )


def ran(report, driver: str) -> list:
    return [r for r in report.results if r.driver == driver and r.status != "unavailable"]


# one kink (a tie at 0) and one point without a derivative (sqrt at 0): the fast tier's
FAST_EDGES = {"relu_pair_at_kink", "safe_sqrt_at_zero"}
# edges whose float32 loss overflows: forward mode carries every tangent through that loss (inf * 0 is NaN), so
# at float32 no entry of a jvp row can be decided, a planted one included (reverse mode keeps the other entries)
LOSS_OVERFLOWS_IN_FLOAT32 = {"float32_overflow"}


# Found by these tests (torch 2.13.0 and jax 0.10.2 alike). Forward mode has no where trap: at the where-trap
# edges (and the LRU at decay 1.0) both frameworks' jvp is right, where their reverse mode is NaN (grad_mismatch,
# tests/test_edges.py). At a square root's pole the frameworks' forward mode (one unit tangent per input entry)
# multiplies the pole's infinite derivative by a zero tangent, so their jvp is NaN in columns whose exact derivative is
# finite: grad_mismatch on both, "not finite where the oracle's derivative is finite" (a framework behaviour).
JVP_RIGHT_AT_TRAPS = {
    "lru_decay_one", "where_trap_division_by_zero", "where_trap_exp_overflow", "where_trap_fractional_power_at_zero",
    "where_trap_log_at_zero", "where_trap_sqrt_of_negative",
}  # fmt: skip
JVP_NAN_AT_POLES = {
    "sqrt_abs_pole", "sqrt_at_domain_boundary", "sqrt_max_pole", "sqrt_pole_beside_smooth", "sqrt_pole_upstream",
}  # fmt: skip


def expected(edge: Edge, mode: str, dtype: str) -> set[str]:
    """The verdict the frameworks' rows get at the edge in `mode` (reverse mode's, but for jvp at traps and poles)."""
    if mode == "jvp" and edge.name in JVP_RIGHT_AT_TRAPS:
        return {"ok"}
    if mode == "jvp" and edge.name in JVP_NAN_AT_POLES:
        return {"grad_mismatch"}
    return set(edge.expected[dtype])


def undecidable(edge: Edge, mode: str, dtype: str) -> bool:
    return mode == "jvp" and dtype == "float32" and edge.name in LOSS_OVERFLOWS_IN_FLOAT32


EDGE_PARAMS = [pytest.param(e, marks=[] if e.name in FAST_EDGES else [SLOW], id=e.name) for e in EDGES]
# Per mode and dtype: the fast tier's two edges at both dtypes; every other edge at float64 for the verdict and the
# planted wrong derivative, and the float32 rows on the edges whose float32 bound differs (CI's budget: each case is
# a check on two drivers, and the float32 judge and NaN rule are the gradient edge tests' subject at both dtypes,
# tests/test_edges*.py; docs/testing.md#tiers).
FLOAT32_EDGES = FAST_EDGES | LOSS_OVERFLOWS_IN_FLOAT32


def edge_cases(*, nan: bool = False) -> list:
    """(edge, mode, dtype) params: every edge at float64 (NaN plants: the fast tier's edges only), FLOAT32_EDGES at
    float32 too."""
    out = []
    for e in EDGES:
        if nan and e.name not in FLOAT32_EDGES:
            continue
        for mode in NEW_MODES:
            for dtype in ("float64", "float32"):
                if dtype == "float32" and e.name not in FLOAT32_EDGES:
                    continue
                marks = [] if e.name in FAST_EDGES else [SLOW]
                out.append(pytest.param(e, mode, dtype, marks=marks, id=f"{e.name}-{mode}-{dtype}"))
    return out


@pytest.mark.parametrize(("edge", "mode", "dtype"), edge_cases())
def test_each_edge_gets_its_verdict_in_each_mode(edge: Edge, mode: str, dtype: str) -> None:
    """A correct framework's forward mode (or torch.func) gets the verdict its reverse mode gets at
    the edge: the kinks' range, cannot_decide where no derivative exists, the float32 bounds."""
    report = check(edge, dtype, mode)
    assert ran(report, "torch_loop"), str(report)
    for driver in ("torch_loop", "jax_loop"):
        assert all(r.status in expected(edge, mode, dtype) for r in ran(report, driver)), str(report)


@pytest.mark.parametrize(("edge", "mode", "dtype"), edge_cases())
def test_a_planted_wrong_derivative_is_a_mismatch_in_each_mode(edge: Edge, mode: str, dtype: str) -> None:
    """torch's derivative planted wrong beside the edge: grad_mismatch (or missing_grad) in every
    mode torch runs; jax, unplanted, keeps the edge's verdict."""
    report = check(edge, dtype, mode, functools.partial(edge.step, plant=torch_only(first_order)))
    wanted = {"cannot_decide"} if undecidable(edge, mode, dtype) else WRONG
    assert ran(report, "torch_loop") and all(r.status in wanted for r in ran(report, "torch_loop")), str(report)
    assert all(r.status in expected(edge, mode, dtype) for r in ran(report, "jax_loop")), str(report)


def nan_tangent(ops, c):
    """c, with a NaN forward-mode tangent and a right backward (a custom torch.autograd.Function): a
    wrong JVP as a framework's forward-mode formula would give it, where the exact derivative is finite."""
    import torch

    class NanTangent(torch.autograd.Function):
        generate_vmap_rule = True  # torch.func.jacfwd vmaps it

        @staticmethod
        def forward(x):
            return x.clone()

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, grad):
            return grad

        @staticmethod
        def jvp(ctx, tangent):
            return tangent * float("nan")

    return NanTangent.apply(c)


# a NaN derivative per mode: the where trap (0 * inf in a where's backward) is reverse mode's; forward mode
# selects the tangent of the taken branch, so its NaN is planted in the forward-mode formula itself
NAN_PLANTS = {"jvp": nan_tangent, "func": nan_derivative, "per_example": nan_derivative}


@pytest.mark.parametrize(("edge", "mode", "dtype"), edge_cases(nan=True))
def test_a_planted_nan_derivative_is_a_mismatch_in_each_mode(edge: Edge, mode: str, dtype: str) -> None:
    """A NaN derivative where the exact one is finite: grad_mismatch with a line naming a non-finite entry."""
    report = check(edge, dtype, mode, functools.partial(edge.step, plant=torch_only(NAN_PLANTS[mode])))
    assert ran(report, "torch_loop"), str(report)
    if undecidable(edge, mode, dtype):
        assert {r.status for r in ran(report, "torch_loop")} == {"cannot_decide"}, str(report)
        return
    for r in ran(report, "torch_loop"):
        assert r.status == "grad_mismatch", str(report)
        assert any(e.status == "mismatch" and not np.isfinite(e.got) for e in r.grad_errors), r.report


@pytest.mark.parametrize("edge", [p for p in EDGE_PARAMS if p.values[0].name not in JVP_NAN_AT_POLES])
def test_forward_mode_has_no_where_trap(edge: Edge) -> None:
    """The where trap that makes reverse mode NaN leaves forward mode right: torch's jvp row gets the
    edge's own verdict (the judge calls a right forward mode right)."""
    report = check(edge, "float64", "jvp", functools.partial(edge.step, plant=torch_only(nan_derivative)))
    assert all(r.status in expected(edge, "jvp", "float64") for r in ran(report, "torch_loop")), str(report)


def test_a_mode_a_driver_cannot_run_is_unavailable_with_its_reason() -> None:
    edge = next(e for e in EDGES if e.name in FAST_EDGES)
    report = rnnbench.check_recurrence(
        edge.step, params=edge.params, carry0=edge.carry0, xs=edge.xs, drivers=["jax_loop"], losses=["weighted"],
        modes="func",
    )  # fmt: skip
    [row] = report.results
    assert (row.mode, row.status) == ("func", "unavailable") and "torch's functional API" in row.report
    assert "jax_loop func unavailable:" in str(report)


# ---- the fuzzer: --plant jvp:FW / func:FW judged in that mode ----
@pytest.mark.parametrize("plant, drivers", [("jvp:torch", ("torch_loop", "jax_loop")), ("jvp:jax", ("jax_loop",))])
def test_the_fuzzer_catches_planted_wrong_jvps(plant: str, drivers: tuple) -> None:
    grammar = Grammar("smooth", 0.0, plant)
    summary = fuzz(Campaign(cases=3, seed=2, drivers=drivers, grammar=grammar, shrink_per_kind=0, mode="jvp"))
    planted = [o for o in summary.outcomes if summary.is_planted(o)]
    assert planted and summary.plant_verdicts() == {"caught": len(planted)} and not summary.misses, summary.format()
    assert not summary.failures, summary.format()  # the unplanted driver is judged as usual, in jvp


def test_the_fuzzer_catches_planted_wrong_func_gradients() -> None:
    grammar = Grammar("smooth", 0.0, "func:torch")
    summary = fuzz(Campaign(cases=2, seed=3, drivers=("torch_loop",), grammar=grammar, shrink_per_kind=0, mode="func"))
    planted = [o for o in summary.outcomes if summary.is_planted(o)]
    assert planted and summary.plant_verdicts() == {"caught": len(planted)}, summary.format()


@pytest.mark.parametrize(
    "plant, dtype",
    [
        ("per_example:torch", "float64"),
        pytest.param("per_example:torch", "float32", marks=SLOW),
        pytest.param("per_example:jax", "float64", marks=SLOW),
        ("per_example:jax", "float32"),
    ],
)
def test_the_fuzzer_catches_planted_wrong_per_example_gradients(plant: str, dtype: str) -> None:
    """Each body on a batch of examples, the plant wrong in each example's own gradient on one framework:
    caught on every planted outcome; the other framework's rows, judged per example too, all agree."""
    grammar = Grammar("smooth", 0.0, plant)
    campaign = Campaign(
        cases=3, seed=4, drivers=("torch_loop", "jax_loop"), dtype=dtype, grammar=grammar, shrink_per_kind=0,
        mode="per_example", second_order=False,
    )  # fmt: skip
    summary = fuzz(campaign)
    planted = [o for o in summary.outcomes if summary.is_planted(o)]
    assert planted and summary.plant_verdicts() == {"caught": len(planted)} and not summary.misses, summary.format()
    assert not summary.failures, summary.format()
    assert all(o.body.examples == 2 for o in summary.outcomes)
    assert all("per example (each against the oracle of its own case" in o.report for o in planted), planted[0].report


@pytest.mark.parametrize("mode", ["jvp", "per_example"])
def test_a_mode_plant_needs_its_mode(mode: str) -> None:
    from rnnbench.errors import InputError
    from rnnbench.fuzz.campaign import check_plant

    campaign = Campaign(cases=1, seed=0, drivers=("torch_loop",), grammar=Grammar("smooth", 0.0, f"{mode}:torch"))
    with pytest.raises(InputError, match=f"add --mode {mode}"):
        check_plant([campaign])
