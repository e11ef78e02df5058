"""The known-issues registry: its file follows its format, and the rule that applies it turns an
expected upstream failure into known_issue:<id>, a stale entry into a failing known_issue_fixed:<id>,
and leaves every other failure a failure."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from conftest import compile_marks
from rnnbench import registry
from rnnbench.check.bugs import conditions, known_issues
from rnnbench.check.bugs.known_issues import KnownIssue, RegistryError, classify, parse, version_matches
from rnnbench.status import is_failing

REQUIRED_IDS = {
    "torch-scan-drops-carry-cotangent",  # docs/bugs.md §1, torch 2.9.0
    "torch-inductor-scan-needs-capture-scalar-outputs",  # docs/bugs.md §1, capture_scalar_outputs off
    "torch-inductor-scan-backward-lowering",  # torch 2.9.0 inductor, scan backward
    "torch-xla-scan-closure-over-tensors",  # docs/bugs.md §2
    "torch-scan-double-backward-drops-saved-values",  # second order, found by the fuzzer
}


def test_registry_loads_and_names_real_drivers_and_models() -> None:
    issues = known_issues.registry()
    assert REQUIRED_IDS <= {i.id for i in issues}
    for issue in issues:
        assert set(issue.drivers) <= set(registry.drivers()), issue.id
        assert issue.models is None or set(issue.models) <= set(registry.models()), issue.id
        assert issue.upstream is None or issue.upstream.startswith("https://"), issue.id
        assert issue.title and issue.symptom and issue.versions, issue.id


def test_every_entry_covers_some_registered_case() -> None:
    """An entry whose conditions no model satisfies (under any loss form it allows) could never
    reproduce nor be noticed as fixed."""
    from rnnbench.losses import NAMES, with_loss

    def covered(issue, m) -> bool:
        for form in issue.losses or NAMES:
            model, case = with_loss(m, m.make_case(m.sizes_with_defaults(), 0), form)
            if all(conditions.CONDITIONS[c](model, case, "float64") for c in issue.conditions):
                return True
        return False

    for issue in known_issues.registry():
        models = [registry.get_model(m) for m in (issue.models or registry.models())]
        assert any(
            covered(issue, m) for m in models if any(registry.get_driver(d).supports(m) is None for d in issue.drivers)
        ), issue.id


@pytest.mark.parametrize(
    ("version", "spec", "expected"),
    [
        ("2.9.0", "==2.9.0", True),
        ("2.9.0+cu128", "==2.9.0", True),
        ("2.13.0+cpu", "==2.9.0", False),
        ("2.9.1", "==2.9.*", True),
        ("2.10.0", "==2.9.*", False),
        ("2.13.0", ">=2.9.0,<=2.13.0", True),
        ("2.14.0", ">=2.9.0,<=2.13.0", False),
        ("2.8.9", ">=2.9.0,<=2.13.0", False),
        ("2.9", "==2.9.0", True),
        ("2.10.0", ">2.9.0", True),  # numeric, not lexicographic
        ("2.13.0", "==2.9.0|==2.13.0", True),
        ("2.11.0", "==2.9.0|==2.13.0", False),  # alternatives claim only the measured versions
    ],
)
def test_version_specifiers(version: str, spec: str, expected: bool) -> None:
    assert version_matches(version, spec) is expected


@pytest.mark.parametrize("spec", ["~=2.9", ">=2.9.*", "2.9.0", ">=2.9,,<3", "==2.9.0|", "==2.9.0|latest"])
def test_malformed_specifier_is_rejected(spec: str) -> None:
    with pytest.raises(RegistryError):
        version_matches("2.9.0", spec)


def _issue(**overrides) -> KnownIssue:
    base = KnownIssue(
        id="demo",
        title="demo bug",
        upstream=None,
        symptom="wrong",
        drivers=("torch_scan",),
        versions={"torch": "==2.9.0"},
        conditions=(),
        statuses=("grad_mismatch",),
    )
    return dataclasses.replace(base, **overrides)


def test_matching_failure_is_known_issue_and_does_not_fail_the_run() -> None:
    status, note = classify("grad_mismatch", "!! a mismatch", [_issue()])
    assert status == "known_issue:demo" and "demo bug" in note
    assert not is_failing(status)


def test_ok_where_an_entry_expects_a_failure_is_known_issue_fixed_and_fails_the_run() -> None:
    status, note = classify("ok", "", [_issue()])
    assert status == "known_issue_fixed:demo" and "NO LONGER REPRODUCES" in note
    assert is_failing(status)


def test_other_failure_stays_a_failure() -> None:
    assert classify("compile_error", "boom", [_issue()])[0] == "compile_error"
    assert classify("error", "AssertionError: other", [_issue(statuses=("error",), match="FakeTensors")])[0] == "error"
    assert classify("grad_mismatch", "", [])[0] == "grad_mismatch"
    assert is_failing("grad_mismatch")


def test_coverage_follows_driver_version_model_and_condition() -> None:
    decay, lstm = registry.get_model("decay"), registry.get_model("lstm")
    decay_case, lstm_case = (m.make_case(m.sizes_with_defaults(), 0) for m in (decay, lstm))
    issue = _issue(conditions=("carry0_without_grad",))
    torch_290 = {"torch": "2.9.0+cu128"}.get
    assert known_issues.covering(
        "torch_scan", decay, decay_case, dtype="float64", versions=torch_290, issues=[issue]
    ) == [issue]
    assert not known_issues.covering(
        "torch_loop", decay, decay_case, dtype="float64", versions=torch_290, issues=[issue]
    )
    assert not known_issues.covering(
        "torch_scan", decay, decay_case, dtype="float64", versions={"torch": "2.13.0"}.get, issues=[issue]
    )
    assert not known_issues.covering(
        "torch_scan", decay, decay_case, dtype="float64", versions={}.get, issues=[issue]
    )  # not installed
    assert not known_issues.covering(
        "torch_scan", lstm, lstm_case, dtype="float64", versions=torch_290, issues=[issue]
    )  # carry0 has grad
    only_lstm = _issue(models=("lstm",), dtypes=("float32",))
    assert not known_issues.covering(
        "torch_scan", decay, decay_case, dtype="float32", versions=torch_290, issues=[only_lstm]
    )
    assert not known_issues.covering(
        "torch_scan", lstm, lstm_case, dtype="float64", versions=torch_290, issues=[only_lstm]
    )
    assert known_issues.covering(
        "torch_scan", lstm, lstm_case, dtype="float32", versions=torch_290, issues=[only_lstm]
    ) == [only_lstm]


@pytest.mark.parametrize(
    "broken",
    [
        {"id": "x"},  # fields missing
        {
            "id": "x",
            "title": "t",
            "upstream": None,
            "symptom": "s",
            "affects": {"drivers": ["torch_scan"], "conditions": ["no_such_condition"]},
            "produces": {"statuses": ["grad_mismatch"]},
        },
        {
            "id": "x",
            "title": "t",
            "upstream": None,
            "symptom": "s",
            "affects": {"drivers": ["torch_scan"]},
            "produces": {"statuses": ["slow"]},
        },
        {
            "id": "x",
            "title": "t",
            "upstream": None,
            "symptom": "s",
            "affects": {"drivers": ["torch_scan"], "versions": {"torch": "latest"}},
            "produces": {"statuses": ["error"]},
        },
        # not certain, and nothing to keep it from going stale
        {
            "id": "x",
            "title": "t",
            "upstream": None,
            "symptom": "s",
            "affects": {"drivers": ["torch_scan"]},
            "produces": {"statuses": ["grad_mismatch"], "certain": False},
        },
    ],
)
def test_malformed_entries_are_rejected(broken: dict) -> None:
    with pytest.raises(RegistryError):
        parse({"issues": [broken]})


def test_second_order_entries_cover_only_the_second_order_check() -> None:
    decay = registry.get_model("decay")
    case = decay.make_case(decay.sizes_with_defaults(), 0)
    entry = {
        "id": "x",
        "title": "t",
        "upstream": None,
        "symptom": "s",
        "affects": {"drivers": ["torch_scan"], "order": 2},
        "produces": {"statuses": ["hvp_mismatch"]},
    }
    (issue,) = parse({"issues": [entry]})
    assert known_issues.covering("torch_scan", decay, case, dtype="float64", issues=[issue], order=2) == [issue]
    assert not known_issues.covering("torch_scan", decay, case, dtype="float64", issues=[issue])  # the row check
    for bad in (
        {**entry, "produces": {"statuses": ["grad_mismatch"]}},  # a row status on a second-order entry
        {**entry, "affects": {"drivers": ["torch_scan"]}},  # an hvp status on a first-order entry
        {**entry, "affects": {"drivers": ["torch_scan"], "order": 3}},
    ):
        with pytest.raises(RegistryError):
            parse({"issues": [bad]})


def test_duplicate_ids_are_rejected() -> None:
    entry = {
        "id": "x",
        "title": "t",
        "upstream": None,
        "symptom": "s",
        "affects": {"drivers": ["torch_scan"]},
        "produces": {"statuses": ["error"]},
    }
    with pytest.raises(RegistryError):
        parse({"issues": [entry, entry]})


def test_swapped_carries_show_section1_as_a_missing_gradient() -> None:
    """c0' = c1, c1' = c0 over two steps with only c0 differentiated: c0's whole path to the loss is
    the carry chain, so docs/bugs.md §1 makes its gradient identically zero. Strict both ways: the
    registered versions must fail exactly so, the others must be right."""
    from rnnbench.fuzz.cases import build
    from rnnbench.fuzz.grammar import Body
    from rnnbench.rows.pair import check_gradients

    body = Body(
        updates=(("leaf", "c1"), ("leaf", "c0")),
        output=("leaf", "p1"),
        n=1,
        length=2,
        has_xs=True,
        carry_grad=(True, False),
        xs_grad=False,
        data_seed=5,
    )
    fc = build(body)
    driver = registry.get_driver("torch_scan")
    chk, _ = check_gradients(fc.model, driver, fc.case, dtype="float64", device="cpu")
    if known_issues.covering(driver.name, fc.model, fc.case, dtype="float64"):
        assert chk.status == "known_issue:torch-scan-drops-carry-cotangent" and chk.raw_status == "missing_grad", (
            chk.report
        )
    else:
        assert chk.status == "ok", chk.report


def test_an_uncertain_entry_leaves_a_right_row_ok() -> None:
    """An entry whose mechanism shows on some covered cases only (certain: false): a covered row
    that comes out right is ok, with a note; a certain entry on the same row says it is stale."""
    status, note = classify("ok", "", [_issue(certain=False, witnesses=({"model": "decay", "dtype": "float64"},))])
    assert status == "ok" and "some covered cases only" in note
    assert classify("grad_mismatch", "", [_issue(certain=False)])[0] == "known_issue:demo"


def _model(name: str, sizes: dict):
    model = registry.get_model(name)
    return model, model.make_case(model.sizes_with_defaults(sizes), 0)


@pytest.mark.parametrize(
    "name, sizes, covered",
    [
        ("rnn", {"I": 3, "H": 3}, True),  # W_hh (body) and W_ih (prologue) both 9 entries
        ("lstm", {"I": 3, "H": 3}, True),
        ("rnn", {}, False),  # I=8, H=16: nothing of equal size across the loop boundary
        ("rnn@params_in_carry", {"I": 3, "H": 3}, False),  # nothing differentiated upstream of the loop
        ("rnn@carry0_grad", {"I": 3, "H": 3, "T": 5}, True),
        ("decay", {}, False),  # no prologue, xs without grad: no upstream gradient at all
    ],
)
def test_the_donated_buffer_condition_follows_the_mechanism(name: str, sizes: dict, covered: bool) -> None:
    """A differentiated tensor the step reads, and one upstream of the loop, of equal element count
    (docs/bugs.md#torch-inductor-scan-body-grad-reuses-donated-buffer); equal shapes are irrelevant."""
    model, case = _model(name, sizes)
    assert conditions.CONDITIONS["body_grad_numel_shared_upstream"](model, case, "float64") is covered


def test_which_tensors_the_step_and_the_prologue_read() -> None:
    body, upstream = conditions.differentiated_sizes(*_model("rnn", {"T": 4, "B": 2, "I": 3, "H": 5}))
    assert body == {"W_hh": 25}  # h0 does not require grad; W_ih and b are read by the prologue only
    assert upstream == {"W_ih": 15, "b": 5, "xs'": 4 * 2 * 5}


def _witness_rows():
    for issue in known_issues.registry():
        for k, witness in enumerate(issue.witnesses):
            for driver in issue.drivers:
                loss = witness.get("loss", "model")
                yield pytest.param(
                    issue.id,
                    k,
                    driver,
                    witness["model"],
                    witness["dtype"],
                    witness.get("sizes", {}),
                    loss,
                    marks=compile_marks(driver) if driver in registry.drivers() else [],
                    id=f"{issue.id}-{driver}-{witness['model']}-{witness['dtype']}-{loss}",
                )


@pytest.mark.parametrize("issue_id, k, witness_driver, witness_model, dtype, sizes, loss", list(_witness_rows()))
def test_entries_reproduce_on_their_witnesses(
    issue_id: str, k: int, witness_driver: str, witness_model: str, dtype: str, sizes: dict, loss: str
) -> None:
    """An entry that is not certain stays honest through its witnesses: where its versions are
    installed, each witness row reproduces it (a fix upstream fails this test, so the entry is
    narrowed or removed)."""
    from rnnbench.rows.pair import check_gradients, unavailable_reason

    issue = next(i for i in known_issues.registry() if i.id == issue_id)
    model, driver = registry.get_model(witness_model), registry.get_driver(witness_driver)
    if unavailable_reason(model, driver, dtype=dtype) is not None:
        pytest.skip(f"{witness_driver} does not run {witness_model} here")
    if not all(
        known_issues.installed_version(p) and version_matches(known_issues.installed_version(p), spec)
        for p, spec in issue.versions.items()
    ):
        pytest.skip(f"{issue_id} claims {issue.versions}; installed here: another version")
    witness_versions = issue.witnesses[k].get("versions", {})
    if not all(version_matches(known_issues.installed_version(p) or "", spec) for p, spec in witness_versions.items()):
        pytest.skip(f"this witness of {issue_id} is claimed on {witness_versions} only (measured)")
    from rnnbench.losses import with_loss

    model, case = with_loss(model, model.make_case(model.sizes_with_defaults(sizes), 0), loss)
    chk, prepared = check_gradients(model, driver, case.rounded_to(dtype), dtype=dtype, device="cpu")
    if issue.order == 2:  # a second-order entry: the H v check of a row whose gradients agree
        from rnnbench.check.verdicts.second_order import check_second_order

        assert chk.status == "ok", chk.report
        chk = check_second_order(model, witness_driver, case.rounded_to(dtype), prepared=prepared)
    assert chk.status == f"known_issue:{issue_id}", chk.report


def test_every_driver_of_an_uncertain_entry_has_a_witness_it_runs() -> None:
    for issue in known_issues.registry():
        if issue.certain:
            continue
        for name in issue.drivers:
            driver = registry.get_driver(name)
            assert any(driver.supports(registry.get_model(w["model"])) is None for w in issue.witnesses), (
                issue.id,
                name,
            )


@pytest.mark.parametrize(
    "name, covered",
    [
        ("loop_add@params_as_xs", True),  # acc' = acc + x, acc' also y: one summed cotangent to acc and x
        ("loop_add_sq@params_as_xs", False),  # acc + x*x: x's gradient is 2x g, a tensor of its own
        ("loop_mul@params_as_xs", False),
        ("loop_add", False),  # x closed over: its gradient is accumulated, not returned per step
    ],
)
def test_the_gradient_returned_twice_condition_follows_the_mechanism(name: str, covered: bool) -> None:
    """docs/bugs.md#torch-inductor-scan-aliasing-gradient-returned-twice: measured on torch 2.9.0."""
    model, case = _model(name, {})
    assert conditions.CONDITIONS["step_gradient_returned_twice"](model, case, "float64") is covered


def test_the_gradient_returned_twice_condition_needs_both_inputs_differentiated_and_a_summed_cotangent() -> None:
    """The variations measured in plain torch 2.9.0: acc0 or xs without grad compiles; a second
    acc + x for y compiles; two carry leaves added (c1' = c1 + c2, y = c1') is refused."""

    def condition(model, case) -> bool:
        return conditions.CONDITIONS["step_gradient_returned_twice"](model, case, "float64")

    model, case = _model("loop_add@params_as_xs", {})
    assert not condition(model, dataclasses.replace(case, xs_requires_grad=False))
    assert not condition(model, dataclasses.replace(case, carry0_requires_grad=(False,)))

    def second_add(ops, params, carry, x):
        return (carry[0] + x,), carry[0] + x

    assert not condition(dataclasses.replace(model, step=second_add), case)

    def two_leaves(ops, params, carry, x):
        c1 = carry[0] + carry[1]
        return (c1, x * 2), c1

    two = dataclasses.replace(case, carry0=(case.carry0[0], case.carry0[0] * 0.5), carry0_requires_grad=(True, True))
    assert condition(dataclasses.replace(model, step=two_leaves), dataclasses.replace(two, xs_requires_grad=False))


def test_a_covered_case_where_the_symptom_cannot_show_is_ok() -> None:
    """Two equal-shape parameters used symmetrically in the body (their gradients are identical) and
    nothing differentiated upstream: the old equal-shape condition covered this case, and the right
    answer came out as a failing known_issue_fixed. By mechanism the entry does not cover it."""
    import numpy as np

    import rnnbench

    def step(ops, params, carry, x):
        (c,) = carry
        c = ops.tanh(params["p0"] * c + params["p1"] * c + x)
        return (c,), c

    report = rnnbench.check_recurrence(
        step,
        params={"p0": np.array([0.3, -0.2]), "p1": np.array([0.3, -0.2])},
        carry0=(np.array([0.5, 0.1]),),
        xs=np.ones((4, 2)),
        carry0_requires_grad=True,
        drivers=["torch_scan_compiled"],
    )
    status = report.results[0].status
    assert not is_failing(status), str(report)  # in particular, not known_issue_fixed


def test_loss_scoped_entries_cover_only_their_loss_forms() -> None:
    from rnnbench.losses import with_loss

    rnn = registry.get_model("rnn")
    entry = {
        "id": "x",
        "title": "t",
        "upstream": None,
        "symptom": "s",
        "affects": {"drivers": ["torch_scan"], "losses": ["sum_carry"]},
        "produces": {"statuses": ["grad_mismatch"]},
    }
    (issue,) = parse({"issues": [entry]})
    base = rnn.make_case(rnn.sizes_with_defaults(), 0)
    for form, covered in (("sum_carry", True), ("weighted", False), ("model", False)):
        model, case = with_loss(rnn, base, form)
        assert bool(known_issues.covering("torch_scan", model, case, dtype="float64", issues=[issue])) is covered, form
    with pytest.raises(RegistryError):  # a loss form that does not exist
        parse({"issues": [{**entry, "affects": {"drivers": ["torch_scan"], "losses": ["sum_carr"]}}]})


def test_per_recurrence_carry_conditions() -> None:
    """A stacked model of one-leaf layers has one-leaf recurrences; an LSTM layer carries two leaves."""

    def holds(name: str, condition: str) -> bool:
        m = registry.get_model(name)
        return conditions.CONDITIONS[condition](m, m.make_case(m.sizes_with_defaults(), 0), "float64")

    assert holds("rnn2", "one_carry_leaf_of_several_entries") and not holds(
        "rnn2", "several_carry_leaves_in_a_recurrence"
    )
    assert holds("lstm2", "several_carry_leaves_in_a_recurrence") and not holds(
        "lstm2", "one_carry_leaf_of_several_entries"
    )
    assert not holds("decay_scalar", "one_carry_leaf_of_several_entries")  # one 0-d leaf: one lane


@pytest.mark.parametrize(
    "name, sizes, loss, driver, torch_version, expected",
    [
        # torch 2.13.0: the wrong lane shows only once the carried gradient crosses a backward step
        ("rnn", {}, "sum_carry", "torch_scan_compiled", "2.13.0", "torch-inductor-scan-expanded-carry-cotangent"),
        (
            "decay",
            {},
            "sum_carry",
            "torch_scan_compiled_clone_y_only",
            "2.13.0",
            "torch-inductor-scan-expanded-carry-cotangent",
        ),
        ("rnn", {"T": 1}, "sum_carry", "torch_scan_compiled", "2.13.0", None),  # one step, carry0 without grad: right
        (
            "decay@carry0_grad",
            {"T": 1, "n": 2},
            "sum_carry",
            "torch_scan_compiled",
            "2.13.0",
            "torch-inductor-scan-expanded-carry-cotangent",
        ),  # d carry0 is the loop's last carried value
        ("decay", {"n": 1}, "sum_carry", "torch_scan_compiled", "2.13.0", None),  # one lane: nothing to lose
        ("rnn", {}, "weighted", "torch_scan_compiled", "2.13.0", None),
        ("rnn", {}, "mean", "torch_scan_compiled", "2.13.0", None),
        # torch 2.9.0: the lowering fails at compile time, whatever the step count
        (
            "rnn",
            {"T": 1},
            "sum_carry",
            "torch_scan_compiled",
            "2.9.0",
            "torch-inductor-scan-expanded-carry-cotangent-lowering",
        ),
        ("decay", {"n": 1}, "sum_carry", "torch_scan_compiled", "2.9.0", None),
        # several carry leaves, one unweighted sum: the aliasing refusal on both versions, even for one lane
        (
            "lstm",
            {"B": 1, "H": 1, "T": 1},
            "sum_carry",
            "torch_scan_compiled",
            "2.9.0",
            "torch-inductor-scan-aliasing-expanded-carry-cotangents",
        ),
        (
            "lstm",
            {},
            "sum_carry",
            "torch_scan_compiled",
            "2.13.0",
            "torch-inductor-scan-aliasing-expanded-carry-cotangents",
        ),
        ("lstm", {}, "weighted", "torch_scan_compiled", "2.13.0", None),
    ],
)
def test_expanded_carry_cotangent_entries_follow_the_measured_scope(
    name: str, sizes: dict, loss: str, driver: str, torch_version: str, expected
) -> None:
    """docs/bugs.md#torch-inductor-scan-expanded-carry-cotangent: which of the three entries covers
    a row, by loss form, carry shape, step count and torch version (each row measured)."""
    from rnnbench.losses import with_loss

    model, case = with_loss(*_model(name, sizes), loss)
    ids = {
        i.id
        for i in known_issues.covering(driver, model, case, dtype="float64", versions=lambda p: torch_version)
        if "expanded-carry" in i.id
    }
    assert ids == ({expected} if expected else set())


# --- the registry's version ranges are the measured ones (docs/results/*-bug-versions.md) ---

BUG_VERSIONS = sorted((known_issues.REGISTRY_PATH.parents[2] / "docs" / "results").glob("*-bug-versions.jsonl"))
# `versions --bisect` probes (releases outside the matrix), which extend the latest table
BISECT_PROBES = sorted((known_issues.REGISTRY_PATH.parents[2] / "docs" / "results").glob("*-bug-versions-bisect.jsonl"))


def _records() -> list:
    from rnnbench import results_file

    return results_file.load([BUG_VERSIONS[-1], *BISECT_PROBES])


@functools.cache  # the records take seconds to judge; the tests below only read the result
def _measured() -> dict:
    from rnnbench.report import bug_table

    assert BUG_VERSIONS, "no committed bug x version records (docs/results/<date>-bug-versions.jsonl)"
    return bug_table.reproduced_versions(_records())


def test_every_entry_was_measured_on_at_least_three_versions_or_all_there_are() -> None:
    """The table measured each entry's package on three or more versions; torch_xla has one release
    that runs with this suite's Python and torch (2.9.0), so its entry is measured on that one."""
    measured = _measured()
    for issue in known_issues.registry():
        for package in issue.versions:
            seen = measured.get(issue.id, {}).get(package, {})
            assert len(seen) >= (1 if package == "torch_xla" else 3), (issue.id, package, seen)


def test_version_ranges_and_measured_on_agree_with_the_measured_table() -> None:
    """On every version the committed table measured, an entry's `affects.versions` holds exactly
    where the bug reproduced, and `measured_on` lists every version where it did and none where it
    did not: the ranges are measured, not guessed."""
    import json

    measured = _measured()
    raw = {e["id"]: e for e in json.loads(known_issues.REGISTRY_PATH.read_text())["issues"]}
    for issue in known_issues.registry():
        for package, spec in issue.versions.items():
            for version, reproduced in measured.get(issue.id, {}).get(package, {}).items():
                if reproduced is None:
                    continue  # the table cannot decide there (ambiguous rows, or another failure first)
                assert version_matches(version, spec) == reproduced, (
                    f"{issue.id}: {package} {version} {'reproduces' if reproduced else 'does not reproduce'} "
                    f"in the table, but affects.versions says {spec!r}"
                )
                listed = version in raw[issue.id].get("measured_on", {}).get(package, [])
                assert listed == reproduced, f"{issue.id}: measured_on and the table disagree on {package} {version}"


def test_every_entry_has_both_edges_or_the_reason_one_is_not_known() -> None:
    """`edges` (docs/results/*-bug-versions-bisect.md): per package, `from` the first release the bug
    reproduces on and `fixed_in` the first release after its range where it does not, each a release
    the committed records measured that way with nothing beyond it reproducing, or null with the
    reason (`from_why`, `fixed_why`): the search's edges, not guesses."""
    import json

    key = known_issues._release
    measured = _measured()
    raw = {e["id"]: e for e in json.loads(known_issues.REGISTRY_PATH.read_text())["issues"]}
    for issue in known_issues.registry():
        for package in issue.versions:
            edge = raw[issue.id].get("edges", {}).get(package)
            assert edge, f"{issue.id}: no edges for {package}"
            seen = {v: r for v, r in measured.get(issue.id, {}).get(package, {}).items() if r is not None}
            first, fixed = edge.get("from"), edge.get("fixed_in")
            assert first or edge.get("from_why"), f"{issue.id}: no first release and no reason"
            assert fixed or edge.get("fixed_why"), f"{issue.id}: no fix release and no reason"
            if first:
                assert seen.get(first) is True, (issue.id, first, seen)
                assert not [v for v, r in seen.items() if r and key(v) < key(first)], (issue.id, first, seen)
            if fixed:
                assert seen.get(fixed) is False, (issue.id, fixed, seen)
                assert not [v for v, r in seen.items() if r and key(v) > key(fixed)], (issue.id, fixed, seen)


def test_witness_versions_agree_with_the_measured_table() -> None:
    """On every measured version the entry claims, a witness reproduces it unambiguously on every
    driver exactly where the witness's own `versions` (default: the entry's) hold."""
    from rnnbench.report import bug_table

    measured = bug_table.witness_outcomes(_records())
    for issue in known_issues.registry():
        for k, witness in enumerate(issue.witnesses):
            for package, spec in issue.versions.items():
                own = witness.get("versions", {}).get(package, spec)
                for version, reproduced in measured.get((issue.id, k), {}).items():
                    if version_matches(version, spec):
                        assert version_matches(version, own) == reproduced, (issue.id, witness, version, reproduced)


@pytest.mark.parametrize("loss", ["model", "ys_only", "carry_only", "sum_carry", "mean", "last_y"])
def test_the_cut_carry_chain_condition_is_scoped_by_mechanism_not_by_loss_name(loss: str) -> None:
    """torch-scan-drops-carry-cotangent covers an Elman RNN with an initial carry without grad under
    every loss (each reaches the loss through the carry chain), and never the same case with one step
    (no chain to cut) or with the initial carry differentiated (nothing is cut)."""
    from rnnbench.losses import with_loss

    condition = conditions.CONDITIONS["carry_chain_of_leaf_without_grad_matters"]
    model, case = with_loss(*_model("rnn", {"T": 4, "B": 2, "I": 3, "H": 3}), loss)
    assert not all(case.carry0_requires_grad or (False,))
    assert condition(model, case, "float64") and condition(model, case, "float32")
    assert not condition(*with_loss(*_model("rnn", {"T": 1, "B": 2, "I": 3, "H": 3}), loss), "float64")
    assert not condition(model, dataclasses.replace(case, carry0_requires_grad=(True,)), "float64")


def test_the_cut_carry_chain_condition_sees_that_a_converged_fixed_point_loses_nothing() -> None:
    """Newton-Schulz converges: its carry Jacobian vanishes at the fixed point, so under a loss of the
    final carry cutting the chain changes nothing and the condition does not cover it."""
    from rnnbench.losses import with_loss

    condition = conditions.CONDITIONS["carry_chain_of_leaf_without_grad_matters"]
    for loss in ("carry_only", "sum_carry"):  # the final carry alone: the converged iterate
        model, case = with_loss(*_model("newton_schulz", {}), loss)
        assert not all(case.carry0_requires_grad or (False,))
        assert not condition(model, case, "float64")
    assert condition(*with_loss(*_model("newton_schulz", {}), "ys_only"), "float64")  # the iterates on the way


@pytest.mark.skipif(
    not known_issues.version_matches(
        known_issues.installed_version("torch") or "0",
        {i.id: i for i in known_issues.registry()}["torch-scan-drops-carry-cotangent"].versions["torch"],
    ),
    reason="eager scan drops the carry chain only where torch-scan-drops-carry-cotangent claims (2.8.0-2.12.1)",
)
@pytest.mark.parametrize("name, loss", [("rnn", "carry_only"), ("rnn", "mean"), ("decay", "sum_carry")])
def test_the_cut_carry_chain_is_what_eager_scan_computes_where_the_bug_is(name: str, loss: str) -> None:
    """The condition's model of the bug is exact: eager torch_scan's gradient on this torch equals the
    eager loop's gradient with the carry chain of the leaves without grad cut, to rounding."""
    from rnnbench.losses import with_loss

    model, case = with_loss(*_model(name, {}), loss)
    _, cut = conditions._loop_gradient(model, case, cut=True)
    _, true = conditions._loop_gradient(model, case, cut=False)
    _, got = registry.get_driver("torch_scan").prepare(model, case, "float64", "cpu").loss_and_grads()
    scale = max(float(np.max(np.abs(g))) for g in true.values())
    assert max(float(np.max(np.abs(np.asarray(got[n]) - cut[n]))) for n in cut) <= 1e-12 * max(scale, 1.0)
    assert max(float(np.max(np.abs(cut[n] - true[n]))) for n in cut) > 1e-3 * max(scale, 1.0)
