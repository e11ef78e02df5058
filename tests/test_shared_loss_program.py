"""One compiled program for every linear loss form (rnnbench.losses.at_own_weights, Driver.shared_loss_program):
each linear form is the weighted loss at its own cotangents, with the form's loss and gradient; a compiled loop
judges all of check_recurrence's forms with one compile and each form's gradient still agrees with the oracle;
the drivers whose registered bugs depend on the layout of the loss's cotangent keep one program per form, and
the registry covers the same rows either way on the drivers that share."""

from __future__ import annotations

import numpy as np
import pytest

import rnnbench
from rnnbench import losses, registry
from rnnbench.check.bugs.known_issues import installed_version
from rnnbench.check.bugs.known_issues import registry as known_issues
from rnnbench.check.oracles.oracle import oracle_grads
from rnnbench.model import rollout
from rnnbench.ops import numpy_ops

LINEAR = [name for name, form in losses.FORMS.items() if form.linear]
MODELS = ("decay", "rnn", "lstm")  # one and two carry leaves, a carry of one element and of several


def _case(model_name: str):
    model = registry.get_model(model_name)
    return model, model.make_case(model.sizes_with_defaults({}), 0)


def test_only_sum_squares_is_not_linear() -> None:
    assert [name for name in losses.FORMS if name not in LINEAR] == ["sum_squares"]


@pytest.mark.parametrize("which", MODELS)
def test_each_linear_form_is_the_weighted_loss_at_its_own_weights(which: str) -> None:
    model, case = _case(which)
    shared = losses.at_own_weights(model, case, LINEAR)
    assert list(shared) == LINEAR
    assert len({id(m) for m, _ in shared.values()}) == 1, "the forms do not share one Model object"
    ops = numpy_ops()
    for name in LINEAR:
        own_model, own_case = losses.with_loss(model, case, name)
        weighted_model, weighted_case = shared[name]
        assert weighted_case.loss == name  # the registry matches on it
        ys, carry = rollout(ops, model, case.params, carry0=case.carry0, xs=case.xs, length=case.length)
        own = own_model.loss(ops, own_case.consts, ys, carry)
        np.testing.assert_allclose(weighted_model.loss(ops, weighted_case.consts, ys, carry), own, rtol=1e-13)
        want, got = oracle_grads(own_model, own_case), oracle_grads(weighted_model, weighted_case)
        for key, value in want.grads.items():
            np.testing.assert_allclose(got.grads[key], value, rtol=1e-12, atol=1e-14, err_msg=f"{name}: {key}")


def _step(ops, params, carry, x):
    (h,) = carry
    h = ops.tanh(params["w"] * h + x)
    return (h,), h


def _graphs_and_report(driver: str, forms: list[str]):
    """check_recurrence of the README's step on one driver under `forms`, compiled by dynamo with
    torch.compile's eager backend (the programs dynamo captures are the ones inductor would be given; no C++):
    (how many programs dynamo captured, the report)."""
    pytest.importorskip("torch")
    from torch._dynamo.utils import counters

    from rnnbench.drivers.torch._compile import at_backend

    before = counters["stats"]["unique_graphs"]
    with at_backend("eager"):
        report = rnnbench.check_recurrence(
            _step,
            params={"w": np.array([0.5, -0.3])},
            carry0=(np.zeros(2),),
            xs=np.ones((3, 2)),
            drivers=[driver],
            losses=forms,
        )
    return counters["stats"]["unique_graphs"] - before, report


def test_one_compile_serves_every_loss_form_of_a_compiled_loop() -> None:
    graphs, report = _graphs_and_report("torch_loop_compiled", list(losses.CHECKED))
    assert [r.loss for r in report.results] == list(losses.CHECKED)
    assert all(r.status == "ok" for r in report.results), report  # each form's gradient agrees with the oracle
    assert graphs == 1


def test_the_compiled_scan_keeps_one_program_per_loss_form() -> None:
    forms = ["weighted", "sum_carry"]  # dense weights and the stride-0 carry cotangent a registered bug needs
    graphs, report = _graphs_and_report("torch_scan_compiled", forms)
    assert [r.loss for r in report.results] == forms
    assert graphs == len(forms)


def test_no_sharing_driver_has_a_registered_bug_of_some_loss_forms_only() -> None:
    """A bug the registry scopes to some loss forms (KnownIssue.losses) depends on the form's own program: the
    weighted loss at another form's weights can show it where that form's program does not (the expanded
    index_put buffer under last_y did), so a driver it names judges each form's own program."""
    sharing = {name for name, d in registry.drivers().items() if d.shared_loss_program}
    for issue in known_issues():
        if issue.losses is not None:
            assert not sharing & set(issue.drivers), f"{issue.id} shows under some loss forms only"


def test_the_registry_covers_the_same_rows_of_a_sharing_driver_either_way() -> None:
    """A registered bug scoped by the loss's cotangent (its conditions read the eager backward of the loss) covers
    a form's own program and not the weighted loss at its weights: none of its drivers may share; on every other
    bug the coverage is the same either way, so sharing changes no row's expected verdict."""
    pytest.importorskip("torch")
    sharing = {name for name, d in registry.drivers().items() if d.shared_loss_program}
    assert "torch_loop_compiled" in sharing and "torch_scan_compiled" not in sharing
    differs = set()
    for model_name in MODELS:
        model, case = _case(model_name)
        shared = losses.at_own_weights(model, case, LINEAR)
        for name in LINEAR:
            own = losses.with_loss(model, case, name)
            for issue in known_issues():
                for driver in issue.drivers:
                    covered = [
                        issue.covers(driver, m, c, dtype="float64", versions=installed_version)
                        for m, c in (own, shared[name])
                    ]
                    if covered[0] != covered[1]:
                        differs.add(issue.id)
                        assert driver not in sharing, f"{issue.id} covers {model_name} {name} on {driver} one way only"
    assert "torch-inductor-scan-expanded-carry-cotangent" in differs  # the check can tell the two apart
