"""No false alarms: a correct driver is never reported wrong because of the oracle's own error, a true
zero gradient, a stationary point, or a registry entry whose symptom cannot show; and the checks
that end those false alarms do not let planted bugs through.

Every case here was a false grad_mismatch / missing_grad / error on correct drivers before the
finite-difference oracle carried error bounds (check/differentiation/finite_diff.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import rnnbench
from _sizes import halved
from rnnbench import registry
from rnnbench.check.compare import verdict
from rnnbench.check.oracles.oracle import finite_difference_oracle
from rnnbench.check.verdicts.judge import failure_report
from rnnbench.rows.pair import check_gradients, unavailable_reason
from rnnbench.status import Status, is_known

TORCH_LOOP = registry.get_driver("torch_loop")


def user_step_drivers() -> list[str]:
    """Every driver that runs a user's step here without compiling it (compiled ones take seconds
    per case; the campaign in docs/results covers them)."""
    probe = registry.get_model("decay")
    return [
        name
        for name, d in registry.drivers().items()
        if not d.compiled and not d.anchor and unavailable_reason(probe, d, dtype="float64") is None
    ]


DRIVERS = user_step_drivers()


def unregistered_statuses(report: rnnbench.RecurrenceReport) -> set[str]:
    """The statuses of the rows no registered upstream bug explains (a bug-class driver's known issue, e.g. the
    while loop's cut carry chain, is the registry's claim, not the judge's on a correct driver)."""
    return {r.status for r in report.results if not is_known(r.status)}


def temperature(ops, params, carry, x):
    """tanh(c * a / p + x): p is a temperature of 1e-2..1e-1 and a ~1e-3, so the loss varies on the
    scale of the parameters themselves. A fixed step h = 1e-3 is 10% of p: the old oracle's
    truncation error was 8.6e-4 relative, a false grad_mismatch on every driver."""
    (c,) = carry
    c = ops.tanh(c * params["a"] / params["p"] + x)
    return (c,), c


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_step_follows_the_scale_of_small_inputs(dtype: str) -> None:
    rng = np.random.default_rng(0)
    report = rnnbench.check_recurrence(
        temperature,
        params={"p": np.array([1e-2, 3e-2, 0.1]), "a": np.array([1e-3, 5e-3, 1e-2])},
        carry0=(np.array([0.3, -0.2, 0.1]),),
        xs=0.01 * rng.uniform(-1, 1, (16, 3)),
        carry0_requires_grad=True,
        dtype=dtype,
        drivers=DRIVERS,
    )
    assert report.as_registered, str(report)


@pytest.mark.parametrize(
    "name", [n for n, m in registry.models().items() if m.oracle is not None and m.oracle_kind != "finite_differences"]
)
def test_error_bounds_cover_the_oracle_error(name: str) -> None:
    """On every model with an exact oracle, finite differences are within their own error bounds
    of the exact gradient, entry by entry (up to the exact oracle's float64 roundoff)."""
    model = registry.get_model(name)
    case = model.make_case({**halved(model), "T": 5, "K": 5}, 0)  # FD's cost: tests/_sizes.py
    exact = model.oracle(case)
    fd = finite_difference_oracle(model, case)
    names = [n for n in fd.grads if n in exact]  # a variant's exact oracle may cover only some inputs
    G = max(float(np.max(np.abs(exact[n]))) for n in names)
    for n in names:
        assert np.all(np.isfinite(fd.error_of(n))), f"{n}: the smoothness probe refuted a smooth model"  # no blind spot
        off = np.abs(fd.grads[n] - exact[n]) - fd.error_of(n)
        assert np.all(off <= 1e-12 * G), f"{n}: FD outside its bound by {off.max():.3g} (G = {G:.3g})"


def unused(ops, params, carry, x):
    (c,) = carry
    return (ops.tanh(params["w"] * c + x),), c  # params["u"] never reaches the loss


def test_an_unused_parameter_has_a_zero_gradient() -> None:
    """torch said "gradient is None" -> missing_grad; jax's zeros were compared with FD roundoff."""
    report = rnnbench.check_recurrence(
        unused,
        params={"w": np.array([0.5, -0.3]), "u": np.array([1.0, 2.0])},
        carry0=(np.zeros(2),),
        xs=np.ones((6, 2)),
        drivers=DRIVERS,
    )
    assert report.as_registered, str(report)
    for r in report.results:
        u = next(e for e in r.grad_errors if e.name == "u")
        assert u.got == 0.0 and u.status == "ok"


def no_parameter_reaches(ops, params, carry, x):
    (c,) = carry
    return (c + x,), c


def test_no_input_reaching_the_loss_is_all_zero_gradients() -> None:
    """torch raised "element 0 of tensors does not require grad" (error); jax was missing_grad."""
    report = rnnbench.check_recurrence(
        no_parameter_reaches,
        params={"u": np.array([1.0, 2.0])},
        carry0=(np.zeros(2),),
        xs=np.ones((4, 2)),
        drivers=DRIVERS,
    )
    assert report.as_registered, str(report)


def cos_of_param(ops, params, carry, x):
    (c,) = carry
    return (c + ops.cos(params["x"]),), c


def final_carry(ops, consts, ys, carry):
    return ops.sum(carry[0])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_stationary_point_is_compared_absolutely(dtype: str) -> None:
    """d/dx cos(x) at x = pi is ~1e-16: compared relative to itself, any roundoff was a mismatch."""
    report = rnnbench.check_recurrence(
        cos_of_param,
        params={"x": np.array(np.pi)},
        carry0=(np.array(0.0),),
        length=1,
        loss=final_carry,
        dtype=dtype,
        drivers=DRIVERS,
    )
    assert report.as_registered, str(report)


def aliased(ops, params, carry, x):
    (c,) = carry
    return (c + ops.sin(1e5 * params["p"]) * x,), c


def test_where_finite_differences_cannot_decide_the_verdict_says_so() -> None:
    """sin(1e5 p) at p = 1: the stencil's steps alias the oscillation (6.25e-5 * 1e5 ~ 2 pi), so
    finite differences look self-consistent at the wrong value 531 (true -99936). The error bound
    covers the neighbouring step's disagreement: cannot_decide, never grad_mismatch. The default
    oracle (exact dual numbers, here at 50 digits: the condition number is ~1e5) resolves it: ok."""
    args = dict(params={"p": np.array([1.0, 0.3])}, carry0=(np.zeros(2),), xs=np.ones((3, 2)), drivers=DRIVERS)
    report = rnnbench.check_recurrence(aliased, oracle="finite_differences", **args)
    assert {r.status for r in report.results} == {Status.CANNOT_DECIDE}, str(report)
    assert "cannot decide" in report.results[0].report
    exact = rnnbench.check_recurrence(aliased, **args)
    assert unregistered_statuses(exact) == {Status.OK} and exact.oracle_kind in ("dual", "dual_mp"), str(exact)


def chaotic(ops, params, carry, x):
    """c0 doubles and c1 ~ c0^2 grows: sin(c1) varies with p on scales far below any finite-difference
    step, so every step from h down to h/64 sees a smooth envelope (derivative ~1e6, bound ~1e3)
    while the true derivative (torch and jax agree; 60-digit arithmetic agrees) is ~1e12."""
    c0, c1 = carry
    return (ops.sin(c1) + (c0 + c0), (2.0 * params["p"] + c0) * c0), ops.matmul(params["W"], ops.exp(ops.tanh(c1)))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_loss_not_smooth_at_the_step_cannot_be_decided(dtype: str) -> None:
    """Found by the 2026-11-24 campaign (a fuzzed body, every torch and jax driver 'wrong'): the
    smoothness probe refutes the bound, and the verdict is cannot_decide. W, which the chaos does not
    reach, is still checked. At float32 the chaotic forward itself drifts from the float64 loss:
    rounding alone explains it (the condition number is unbounded), so not forward_mismatch either.
    The default oracle takes the 50-digit rung (condition number ~1e9): still cannot_decide, now
    because float64 (or float32) rounding alone moves the gradient that far."""
    args = dict(
        params={"p": np.array([1.0, -0.85]), "W": np.array([[-0.08, -0.1], [-0.25, 0.26]])},
        carry0=(np.array([-1.57, 1e-3]), np.array([-0.78, 0.2])),
        length=12,
        drivers=DRIVERS,
        dtype=dtype,
        losses=["weighted", "sum_carry"],
    )  # the forms the chaotic final carry reaches (mean, last_y: ok)
    exact = rnnbench.check_recurrence(chaotic, **args)
    assert unregistered_statuses(exact) == {Status.CANNOT_DECIDE} and exact.oracle_kind == "dual_mp", str(exact)
    assert all("rounding alone" in r.report for r in exact.results if not is_known(r.status)), str(exact)
    report = rnnbench.check_recurrence(chaotic, oracle="finite_differences", **args)
    assert unregistered_statuses(report) == {Status.CANNOT_DECIDE}, str(report)
    for r in (r for r in report.results if not is_known(r.status)):
        by_name = {e.name: e for e in r.grad_errors}
        assert by_name["p"].oracle_error == np.inf and "not smooth" in by_name["p"].detail
        assert by_name["W"].status == "ok" and np.isfinite(by_name["W"].oracle_error)
        assert by_name["p"].to_dict()["oracle_error"] is None  # strict JSON in the records


def test_forward_rounding_decides_only_ill_conditioned_losses() -> None:
    """L = sum(w * x) at x = 1, w = 1e4 (4 entries): condition number 4e4 / 4e4 = 1, so a float32
    forward off by 1e-3 is a forward_mismatch; with the loss cancelling to 1 (w = [1e4, -1e4, ...])
    the condition number is ~4e4 and float32 rounding alone reaches 2.4e-3: cannot_decide (float64
    rounding, 4.4e-12, still decides)."""
    from rnnbench.check.compare import loss_condition
    from rnnbench.check.tolerance import tolerance

    tol = tolerance("float32", "finite_differences")
    x, w = {"x": np.ones(4)}, np.full(4, 1e4)
    cond = loss_condition(x, {"x": w}, {}, float(w.sum()))
    assert cond == pytest.approx(1.0)
    assert verdict(1e-3, [], tol, cond) == Status.FORWARD_MISMATCH
    w = np.array([1e4, -1e4, 1e4, -1e4 + 1])
    cond = loss_condition(x, {"x": w}, {}, float(w.sum()))
    assert cond == pytest.approx(4e4 - 1)
    assert verdict(1e-3, [], tol, cond) == Status.CANNOT_DECIDE
    assert verdict(1e-3, [], tolerance("float64", "finite_differences"), cond) == Status.FORWARD_MISMATCH


def _to_bf16(v: np.ndarray) -> np.ndarray:
    bits = np.asarray(v, dtype=np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
    return bits.view(np.float32).astype(np.float64)


def _tampered(name: str, transform):
    def prepare(model, case, dtype, device):
        p = TORCH_LOOP.prepare(model, case, dtype, device)
        return dataclasses.replace(p, loss_and_grads=lambda: transform(*p.loss_and_grads()))

    return dataclasses.replace(TORCH_LOOP, name=name, prepare=prepare)


PLANTS = {
    # every gradient 0.1% too large: far beyond the float64 tolerance, and the error bounds must
    # stay tight enough to say so
    "scaled_gradients": _tampered(
        "scaled", lambda loss, g: (loss, {k: None if v is None else v * 1.001 for k, v in g.items()})
    ),
    # every gradient truncated to bfloat16's 8-bit mantissa (up to 4e-3 relative): the float32
    # rounding bound (10x an independent float32 computation's error) must not absorb it
    "bf16_rounded": _tampered(
        "bf16_rounded", lambda loss, g: (loss, {k: None if v is None else _to_bf16(v) for k, v in g.items()})
    ),
    # the carry cotangent cut between steps (truncated BPTT to one step)
    "cut_carry": None,
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_plants_on_fuzzed_bodies_are_still_caught(plant: str, dtype: str) -> None:
    """The finite-difference path (fuzzed bodies with small parameters, long trip counts, unused
    parameters and stationary points): a planted bug is a wrong gradient on every body where it
    changes the gradient, never ok and never cannot_decide (at float32 too, where a failing row
    is re-judged with the float32 rounding bound)."""
    from rnnbench_faulty import faulty_loop

    from rnnbench.fuzz.cases import build
    from rnnbench.fuzz.grammar import generate

    driver = PLANTS[plant] or faulty_loop("cut", cut_carry_from=1)
    caught = 0
    for index in range(24):
        fc = build(generate(3, index), dtype=dtype)
        if fc.ill_conditioned:
            continue
        honest, _ = check_gradients(fc.model, TORCH_LOOP, fc.case, dtype=dtype, device="cpu", oracle=fc.oracle)
        planted, _ = check_gradients(fc.model, driver, fc.case, dtype=dtype, device="cpu", oracle=fc.oracle)
        assert honest.status == Status.OK, honest.report
        changed = any(
            np.max(
                np.abs(
                    np.asarray(planted.grads[n] if planted.grads[n] is not None else 0.0)
                    - np.asarray(honest.grads[n] if honest.grads[n] is not None else 0.0)
                )
            )
            > 1e-3 * max(1.0, float(np.max(np.abs(fc.oracle.grads[n])))) * 1e-2
            for n in fc.oracle.grads
        )
        if changed:
            caught += 1
            assert planted.status in (Status.GRAD_MISMATCH, Status.MISSING_GRAD), planted.report
    assert caught >= 5, f"the plant changed only {caught} of 24 bodies: the test checks too little"


def test_a_zero_dim_mismatch_shows_got_and_want() -> None:
    """A 0-d input has index (): its values were left out of the report."""
    model = registry.get_model("decay_scalar")
    case = model.make_case(model.sizes_with_defaults(), 0)
    chk, _ = check_gradients(
        model,
        _tampered("scaled", lambda loss, g: (loss, {k: v * 1.5 for k, v in g.items()})),
        case,
        dtype="float64",
        device="cpu",
    )
    bad = [line for line in chk.report.splitlines() if line.startswith("!!")]
    assert bad and all("got " in line and "want " in line for line in bad), chk.report


def test_a_compile_error_shows_the_framework_message() -> None:
    """A compiler wrapper's first line ("backend='inductor' raised:") is not the message."""
    try:
        try:
            raise NotImplementedError("Pointwise lowering of while_loop is not supported")
        except NotImplementedError as inner:
            raise RuntimeError(
                "backend='inductor' raised:\nLoweringException: NotImplementedError: Pointwise"
            ) from inner
    except RuntimeError as exc:
        head = failure_report(exc).splitlines()[:2]
    assert "LoweringException: NotImplementedError: Pointwise" in head[0]
    assert "Pointwise lowering of while_loop is not supported" in head[1]


def test_localization_hints_only_what_the_case_has() -> None:
    """A wrong xs gradient that no suffix shows was blamed on "an initial carry without grad" on a
    case whose initial carry requires grad; the hint now names what the full problem has."""
    from rnnbench.check.verdicts.localize import localize

    def wrong_xs(loss, g):
        return loss, {**g, "xs": g["xs"] * 2.0} if "xs" in g else g  # suffixes do not ask for xs

    model = registry.get_model("scan_reference")  # carry0 and xs both differentiated
    case = model.make_case(model.sizes_with_defaults({"T": 3}), 0)
    assert all(case.carry0_requires_grad) and case.xs_requires_grad
    text = localize(model, _tampered("wrong_xs", wrong_xs), case, dtype="float64").format()
    assert "initial-carry leaves without grad" not in text and "initial carry without grad" not in text
    assert "the gradient with respect to xs" in text, text


# ---- the error bounds hold for any smooth function, by property ------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from rnnbench.model import Case, Model  # noqa: E402

FUNCTIONS = {  # f(ops, p) and its exact derivative, elementwise
    "sin(a p)": (lambda ops, p, a: ops.sin(a * p), lambda p, a: a * np.cos(a * p)),
    "tanh(a / p)": (lambda ops, p, a: ops.tanh(a / p), lambda p, a: -a / p**2 / np.cosh(a / p) ** 2),
    "p^9": (lambda ops, p, a: a * p**9, lambda p, a: 9 * a * p**8),
    "exp(tanh(a p))": (
        lambda ops, p, a: ops.exp(ops.tanh(a * p)),
        lambda p, a: a * np.exp(np.tanh(a * p)) / np.cosh(a * p) ** 2,
    ),
}


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(sorted(FUNCTIONS)),
    a=st.floats(0.1, 50.0),
    p=st.floats(1e-3, 2.0).flatmap(lambda v: st.sampled_from([v, -v])),
)
def test_the_error_bound_covers_the_true_error(name: str, a: float, p: float) -> None:
    """Whatever the scale of the parameter (down to 1e-3) and of the function's features, the
    oracle's value is within its own bound of the exact derivative."""
    f, df = FUNCTIONS[name]

    def step(ops, params, carry, x):
        (c,) = carry
        return (c + f(ops, params["p"], a),), c

    model = Model(
        name="prop",
        summary="",
        carry_names=("c",),
        default_sizes={},
        make_case=None,
        step=step,
        loss=lambda ops, consts, ys, carry: ops.sum(carry[0]),
    )
    case = Case(model="prop", sizes={}, seed=0, params={"p": np.array([p])}, carry0=(np.zeros(1),), xs=None, length=1)
    oracle = finite_difference_oracle(model, case)
    with np.errstate(over="ignore"):  # cosh(a / p) overflows where the derivative is 0
        exact = df(np.array([p]), a)
    assert np.all(np.abs(oracle.grads["p"] - exact) <= oracle.error_of("p") + 1e-13 * max(1.0, np.abs(exact).max())), (
        oracle.grads["p"],
        exact,
        oracle.error_of("p"),
    )
