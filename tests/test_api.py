"""The public API on user-written recurrences, against the oracle ladder (exact dual numbers)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap

import numpy as np
import pytest

import rnnbench
import rnnbench.api
from rnnbench import registry
from rnnbench.api.report import DriverResult, RecurrenceReport
from rnnbench.api.selection import driver_selection, left_out_by_default
from rnnbench.api.validate import Inputs
from rnnbench.status import is_known


def tanh_step(ops, params, carry, x):
    (h,) = carry
    h = ops.tanh(params["w"] * h + x)
    return (h,), h


def test_readme_example_agrees_on_every_driver() -> None:
    report = rnnbench.check_recurrence(
        tanh_step, params={"w": np.array([0.5, -0.3])}, carry0=(np.zeros(2),), xs=np.ones((6, 2)), drivers="all"
    )
    assert report.left_out == () and "not run" not in str(report)
    # Two drivers compute wrong numbers here under registered upstream bugs: a user asserting ok
    # before picking a driver must not pass, the trusted view names what is safe.
    assert not report.ok and report.as_registered, str(report)
    assert report.known_wrong == {
        "torch_scan": ("torch-scan-double-backward-drops-saved-values",),
        "torch_scan_compiled": ("torch-inductor-scan-expanded-carry-cotangent",),
        # the bug-class configurations of the same mechanisms (issue 52) and the while loop
        "torch_scan_checkpoint": ("torch-scan-double-backward-drops-saved-values",),
        "torch_scan_reverse": ("torch-scan-double-backward-drops-saved-values",),
        "torch_scan_checkpoint_compiled": ("torch-inductor-scan-expanded-carry-cotangent",),
        "torch_loop_expanded_index_put_compiled": ("torch-inductor-index-put-expanded-self",),
        "torch_while_loop": ("torch-while-loop-drops-carry-cotangent",),
        "torch_while_loop_compiled": ("torch-while-loop-drops-carry-cotangent",),
    }, str(report)
    assert {"torch_loop", "jax_lax_scan", "jax_loop"} <= set(report.trusted_drivers)
    assert not set(report.trusted_drivers) & set(report.known_wrong)
    assert "known wrong (registered upstream bugs): " in str(report)
    assert "torch_scan (torch-scan-double-backward-drops-saved-values)" in str(report)
    ran = {r.driver for r in report.results if r.status == "ok"}
    assert {"torch_loop", "jax_lax_scan", "jax_loop"} <= ran
    # eager torch scan: gradients right, H v the registered second-order bug, under every loss form
    scan = [r for r in report.results if r.driver == "torch_scan"]
    assert (
        all(
            r.max_rel_error < 1e-9 and r.hvp_status == "known_issue:torch-scan-double-backward-drops-saved-values"
            for r in scan
        )
        and len(scan) == 4
    ), str(report)
    assert report.oracle_kind == "dual"  # exact: dual numbers over the numpy step (check/oracles/oracle.py)


def test_the_default_drivers_are_the_core_ones_that_compile_fast_and_the_report_names_the_rest() -> None:
    """drivers=None runs the core drivers but the torch.compile ones (seconds of C++ compiles per loss form); the
    bug-class configurations and the compiled drivers are listed under "not run", by reason, so a default check never
    reads as a check of all."""
    every = registry.drivers()
    default = [n for n, d in every.items() if d.suite == "core" and not d.slow_to_compile]
    assert driver_selection(None) == default and "torch_loop" in default and "jax_lax_scan" in default
    assert driver_selection("all") == list(every)
    assert set(left_out_by_default(None)) == {n for n in every if n not in default and every[n].available() is None}
    assert left_out_by_default(["torch_loop"]) == left_out_by_default("all") == ()
    row = DriverResult("torch_loop", "ok", 0.0, "", loss="weighted")
    left_out = ("torch_loop_compiled", "torch_loop_checkpoint", "torch_scan_compiled", "jax_lax_scan_reverse")
    shown = str(RecurrenceReport("float64", "dual", [row], left_out))
    assert (
        "not run by default (drivers='all' runs them): slow to compile: torch_loop_compiled, torch_scan_compiled; "
        "bug-class configurations (--suite bugs): torch_loop_checkpoint, jax_lax_scan_reverse" in shown
    ), shown
    assert "not run" not in str(RecurrenceReport("float64", "dual", [row]))


def test_the_api_docstring_example_runs() -> None:
    """The example of rnnbench.api's docstring (its indented block), run as written."""
    lines = rnnbench.api.__doc__.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("    "))
    end = next(i for i in range(first, len(lines)) if lines[i] and not lines[i].startswith("    "))
    example = textwrap.dedent("\n".join(lines[first:end]))
    assert "check_recurrence(" in example and "drivers=" in example  # the example, on a few drivers
    exec(compile(example, "rnnbench.api.__doc__", "exec"), {})


def test_check_recurrence_arguments_are_the_inputs_fields() -> None:
    """check_recurrence hands its arguments on as one Inputs value, by name: one field each."""
    assert list(inspect.signature(rnnbench.check_recurrence).parameters) == [f.name for f in dataclasses.fields(Inputs)]


def _argument_entries(doc: str) -> dict[str, list[str]]:
    """A docstring's "Args:" section: {name: [each entry's text]} (a name twice keeps both).
    An entry starts at `name:` one level in from "Args:"; deeper lines continue it."""
    lines = doc.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "Args:")
    indent = len(lines[start]) - len(lines[start].lstrip()) + 4
    entries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines[start + 1 :]:
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            break  # the section ends where a line comes back out
        if line.strip() and len(line) - len(line.lstrip()) == indent:
            name, _, text = line.strip().partition(":")
            current = [text]
            entries.setdefault(name, []).append(current)
        elif current is not None:
            current.append(line.strip())
    return {name: [" ".join(parts) for parts in texts] for name, texts in entries.items()}


def _stated_default(entry: str) -> object:
    """The default an entry states ("Default: `value`."), or REQUIRED ("Required.")."""
    found = re.findall(r"Default: `([^`]*)`\.", entry)
    required = entry.rstrip().endswith("Required.")
    assert len(found) + required == 1, f"one 'Default: `value`.' or 'Required.' each: {entry!r}"
    return ast.literal_eval(found[0]) if found else inspect.Parameter.empty


def _doc_drift(function) -> list[str]:
    """Where a function's "Args:" entries and its signature disagree: a parameter without exactly
    one entry, an entry for no parameter, a default stated that is not the signature's."""
    entries = _argument_entries(function.__doc__)
    parameters = inspect.signature(function).parameters
    counts = {name: len(entries.get(name, [])) for name in parameters}
    problems = [f"{name}: {n} entries" for name, n in counts.items() if n != 1]
    problems += [f"{name}: no such parameter" for name in entries if name not in parameters]
    for name, parameter in parameters.items():
        if counts[name] == 1:
            stated = _stated_default(entries[name][0])
            if stated != parameter.default or type(stated) is not type(parameter.default):
                problems.append(f"{name}: documented default {stated!r}, signature {parameter.default!r}")
    return problems


def test_check_recurrence_documents_each_argument_once_with_its_default() -> None:
    """Every parameter of check_recurrence has one "Args:" entry stating the signature's default
    (or "Required."), so the docstring cannot drift from the signature."""
    assert _doc_drift(rnnbench.check_recurrence) == []


def test_the_argument_doc_check_catches_drift() -> None:
    """The check above fails on a missing entry, a doubled one, an unknown one and a wrong default."""

    def sample(a, b=1, *, c="x"):
        """Sample.

        Args:
            a: first. Required.
            b: second, with a long
                explanation. Default: `2`.
            b: again. Default: `1`.
            d: none such. Default: `None`.

        Returns nothing.
        """

    assert sorted(_doc_drift(sample)) == ["b: 2 entries", "c: 0 entries", "d: no such parameter"]

    def wrong(a, b=1, *, c="x"):
        """Sample.

        Args:
            a: first. Required.
            b: second. Default: `1.0`.
            c: third. Default: `"y"`.
        """

    assert _doc_drift(wrong) == ["b: documented default 1.0, signature 1", "c: documented default 'y', signature 'x'"]


def test_pytree_carry_without_xs_and_trainable_init() -> None:
    def step(ops, params, carry, _x):  # a rotation-like pair with a parameter-dependent Jacobian
        u, v = carry
        return (u * ops.cos(params["t"]) - v * ops.sin(params["t"]), u * params["t"] + v), u * v

    report = rnnbench.check_recurrence(
        step,
        params={"t": np.array([0.3, -0.2, 0.7])},
        carry0=(np.ones(3), np.full(3, 0.5)),
        length=5,
        carry0_requires_grad=True,
        drivers=["torch_loop", "torch_scan", "jax_lax_scan"],
    )
    assert report.as_registered, str(report)
    names = {e.name for e in report.results[0].grad_errors}
    assert names == {"t", "carry0.c0", "carry0.c1"}


def test_a_wrong_custom_gradient_is_reported() -> None:
    """A step whose torch backward is wrong (a custom autograd.Function with a bad derivative)
    must fail against finite differences on the torch drivers and pass on jax."""

    def step(ops, params, carry, x):
        (h,) = carry
        if ops.name == "torch":
            h = _BadTanh.apply(params["w"] * h + x)
        else:
            h = ops.tanh(params["w"] * h + x)
        return (h,), h

    report = rnnbench.check_recurrence(
        step,
        params={"w": np.array([0.5, -0.3])},
        carry0=(np.zeros(2),),
        xs=np.ones((6, 2)),
        drivers=["torch_loop", "jax_lax_scan"],
    )
    status = {r.driver: r.status for r in report.results}
    assert status == {"torch_loop": "grad_mismatch", "jax_lax_scan": "ok"}
    assert not report.ok and "grad_mismatch" in str(report)


import torch  # noqa: E402


class _BadTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z):
        y = torch.tanh(z)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y)  # wrong: should be 1 - y**2


def _tree_step(ops, params, carry, x):
    """Trees everywhere: nested params (dict, tuple), a nested dict carry, a dict of per-step inputs
    of different shapes, and a (array, dict) output."""
    h, s = carry["h"], carry["acc"]["s"]
    a = ops.tanh(ops.matmul(h, params["layer"]["W"]) + x["u"] * params["b"][0] + ops.sum(x["v"]) * 0.1)
    s2 = s + ops.sin(a) * params["b"][1]
    return {"h": a, "acc": {"s": s2}}, (a * a, {"m": ops.reshape(s2, (1, 3))})


def _tree_problem():
    rng = np.random.default_rng(0)
    params = {"layer": {"W": 0.5 * rng.uniform(-1, 1, (3, 3))}, "b": (rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3))}
    carry0 = {"h": rng.uniform(-1, 1, 3), "acc": {"s": np.zeros(3)}}
    xs = {"u": rng.uniform(-1, 1, (5, 3)), "v": rng.uniform(-1, 1, (5, 2, 2))}
    return params, carry0, xs


# Both loss forms at float64 (last_y reads one leaf of the ys tree); float32 under one (the trees' flattening
# does not depend on the dtype, and each form is an inductor compile per compiled driver).
@pytest.mark.parametrize(("dtype", "losses"), [("float64", ["weighted", "last_y"]), ("float32", ["weighted"])])
def test_pytrees_on_every_driver(dtype: str, losses: list[str]) -> None:
    params, carry0, xs = _tree_problem()
    report = rnnbench.check_recurrence(
        _tree_step,
        params=params,
        carry0=carry0,
        xs=xs,
        carry0_requires_grad={"h": True, "acc": {"s": False}},
        xs_requires_grad=True,
        dtype=dtype,
        losses=losses,
        drivers="all",
    )
    ran = [r for r in report.results if r.status != "unavailable"]
    # Found, not registered yet (docs/bugs.md#unregistered): torch's scan with a checkpointed step raises on this tree
    # step; pinned here so a change shows, and left out of the registered-or-ok check below.
    found = [r for r in ran if r.driver == "torch_scan_checkpoint"]
    assert all(r.status == "error" and "selective activation checkpoint has been mutated" in r.report for r in found)
    ran = [r for r in ran if r.driver != "torch_scan_checkpoint"]
    assert len({r.driver for r in ran}) >= 8 and all(r.status == "ok" or is_known(r.status) for r in ran), str(report)
    names = {e.name for r in ran for e in r.grad_errors}
    assert names == {"layer.W", "b.0", "b.1", "carry0.h", "xs"}


def test_a_user_loss_reads_the_trees() -> None:
    params, carry0, xs = _tree_problem()

    def loss(ops, consts, ys, carry):
        squares, extra = ys  # (T, 3) and {"m": (T, 1, 3)}
        return ops.sum(squares) + ops.sum(extra["m"] * extra["m"]) + ops.sum(carry["acc"]["s"])

    report = rnnbench.check_recurrence(
        _tree_step, params=params, carry0=carry0, xs=xs, loss=loss, drivers=["torch_loop", "jax_lax_scan"]
    )
    assert report.ok and {r.loss for r in report.results} == {"model"}, str(report)


def _report(*rows: tuple[str, str]) -> rnnbench.RecurrenceReport:
    """A report of (driver, status) rows, without running any driver."""
    results = [rnnbench.DriverResult(driver, status, None, "") for driver, status in rows]
    return rnnbench.RecurrenceReport("float64", "dual", results)


@pytest.mark.parametrize(
    ("rows", "ok", "as_registered", "trusted", "known_wrong"),
    [
        ([("a", "ok"), ("b", "ok"), ("c", "unavailable")], True, True, ("a", "b"), {}),
        (
            [("a", "ok"), ("b", "ok"), ("b", "known_issue:torch-inductor-scan-expanded-carry-cotangent")],
            False,
            True,
            ("a",),
            {"b": ("torch-inductor-scan-expanded-carry-cotangent",)},
        ),
        # a registered error (a compile error) is not a wrong result: not trusted, not known wrong
        ([("a", "ok"), ("b", "known_issue:torch-inductor-scan-backward-lowering")], False, True, ("a",), {}),
        ([("a", "ok"), ("b", "grad_mismatch")], False, False, ("a",), {}),
        ([("a", "unavailable")], False, False, (), {}),
    ],
)
def test_ok_trusted_and_known_wrong_answer_their_own_questions(rows, ok, as_registered, trusted, known_wrong) -> None:
    """ok: every driver that ran is right (a registered bug included); as_registered: nothing the
    registry does not expect; trusted_drivers: every row ok; known_wrong: wrong numbers under a
    registered bug whose symptom is a wrong result, with its id."""
    report = _report(*rows)
    assert (report.ok, report.as_registered) == (ok, as_registered)
    assert report.trusted_drivers == trusted and report.known_wrong == known_wrong
    assert f"ok: {ok}" in str(report)
