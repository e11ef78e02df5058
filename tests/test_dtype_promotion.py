"""Issue 49: a float32 step that the framework silently computes in float64 (jax: a numpy float64
scalar under x64; torch: a float64 constant tensor) is detected from the dtype its loss comes back in
and said: check_recurrence's row and report, the record's computed_dtype, the table's dtype cell and
legend. Judged with the row's own tolerance, not refused (docs/checking.md, "Dtype promotion")."""

from __future__ import annotations

import numpy as np
import pytest

import rnnbench

DRIVERS = ["torch_loop", "jax_loop"]


def promoting(ops, params, carry, x):
    """tanh(w x + h / 2)^2, with the square taken in float64 on both frameworks (numpy: plainly)."""
    (h,) = carry
    h = ops.tanh(params["w"] * x + 0.5 * h)
    if ops.name == "jax":
        h = h ** np.float64(2.0)  # not weakly typed: promotes a float32 array to float64 under x64
    elif ops.name == "torch":
        import torch

        h = h * h * torch.ones(2, dtype=torch.float64)  # a float64 tensor of one dimension promotes
    else:
        h = h * h
    return (h,), h


def plain(ops, params, carry, x):
    (h,) = carry
    h = ops.tanh(params["w"] * x + 0.5 * h) ** 2.0  # a Python float is weak: no promotion
    return (h,), h


def _check(step, dtype: str) -> rnnbench.RecurrenceReport:
    return rnnbench.check_recurrence(
        step,
        params={"w": np.array([1.0, 0.5])},
        carry0=(np.zeros(2),),
        xs=np.ones((3, 2)),
        drivers=DRIVERS,
        losses=["weighted"],
        dtype=dtype,
    )


def test_a_promoting_float32_step_is_said() -> None:
    report = _check(promoting, "float32")
    assert [(r.driver, r.status, r.computed_dtype) for r in report.results] == [
        (d, "ok", "float64") for d in DRIVERS
    ], str(report)
    text = str(report)
    assert text.count("computed in float64, not float32: the step promotes") == len(DRIVERS), text
    assert all("computed in float64" in line for line in text.splitlines()[1:3]), text  # the table's rows


@pytest.mark.parametrize(("step", "dtype"), [(promoting, "float64"), (plain, "float32")], ids=["float64", "weak"])
def test_no_promotion_is_said_where_none_happened(step, dtype: str) -> None:
    report = _check(step, dtype)
    assert all(r.status == "ok" and r.computed_dtype == "" for r in report.results), str(report)
    assert "computed in" not in str(report)


@pytest.mark.parametrize("driver", DRIVERS)
def test_registered_float32_rows_compute_in_float32(driver: str) -> None:
    """The suite's own models do not promote: a run row carries no computed_dtype (here: rnn)."""
    from rnnbench.machine.environments import current
    from rnnbench.rows.row import Job, run_row

    rec = run_row(Job(model="rnn", driver=driver, dtype="float32", time=False, environment=current()))
    assert rec["status"] == "ok" and "computed_dtype" not in rec, rec.get("report")


def test_the_table_marks_a_promoted_row(monkeypatch) -> None:
    from rnnbench.record_fields import problem
    from rnnbench.report.table import format_table, numeric_data
    from rnnbench.rows.timing import Timing

    monkeypatch.setenv("COLUMNS", "1000")
    rec = {
        "model": "rnn",
        "driver": "jax_loop",
        "dtype": "float32",
        "status": "ok",
        "env_label": "jax 0.10.2",
        "max_rel_error": 1e-7,
        "fwd_bwd": Timing.of([1.0, 1.1, 0.9, 1.0]).to_dict(),
        "computed_dtype": "float64",
    }
    assert problem(rec) is None
    plain_rec = {k: v for k, v in rec.items() if k != "computed_dtype"} | {"driver": "torch_loop"}
    text = format_table([rec, plain_rec])
    rows = text.splitlines()[2:4]
    assert "float32 (ran float64)" in rows[0] and "(ran" not in rows[1], text
    assert "1 row(s) computed in a wider dtype than their own" in text, text
    assert numeric_data([rec])[0]["marks"] == ["ran_float64"]
