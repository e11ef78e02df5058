"""The memory a training step saves for backward (rnnbench.rows.memory): counted per framework from
the step itself, proportional to what the recurrence must keep (one state per step at least), a
weight saved at every step counted once, and "not measured" with the reason where no count exists."""

from __future__ import annotations

import pytest

from rnnbench import record_fields, registry
from rnnbench.drivers.base import Prepared
from rnnbench.rows.memory import step_memory

SIZES = {"T": 16, "B": 4, "I": 8, "H": 8}


def _prepared(driver: str, sizes: dict[str, int]) -> Prepared:
    model = registry.get_model("rnn")
    case = model.make_case(model.sizes_with_defaults(sizes), 0).rounded_to("float32")
    drv = registry.get_driver(driver)
    if drv.available():
        pytest.skip(drv.available())
    return drv.prepare(model, case, "float32", "cpu")


def test_no_count_is_not_measured_with_the_reason() -> None:
    nothing = Prepared(lambda: (0.0, {}), lambda: None, lambda: None, lambda r: None)
    assert step_memory(nothing)["saved_mb"] is None
    assert step_memory(nothing)["method"].startswith("not measured")

    def broken() -> int:
        raise RuntimeError("no hooks here")

    got = step_memory(
        Prepared(lambda: (0.0, {}), lambda: None, lambda: None, lambda r: None, saved_for_backward=broken)
    )
    assert got["saved_mb"] is None and "no hooks here" in got["method"]
    assert (
        record_fields.problem({"model": "m", "driver": "d", "dtype": "f", "status": "ok", "step_memory": got}) is None
    )


@pytest.mark.parametrize("driver", ["torch_loop", "torch_scan", "jax_lax_scan"])
def test_a_step_saves_at_least_its_states_and_grows_with_T(driver: str) -> None:
    """An Elman step's backward needs each step's state (tanh' is read from it): at least T*B*H
    float32 values are kept, and twice the steps keep about twice the bytes (a weight saved at
    every step counts once, not T times)."""
    short = step_memory(_prepared(driver, SIZES))["saved_mb"] * 2**20
    long = step_memory(_prepared(driver, {**SIZES, "T": 32}))["saved_mb"] * 2**20
    longer = step_memory(_prepared(driver, {**SIZES, "T": 48}))["saved_mb"] * 2**20
    states = SIZES["T"] * SIZES["B"] * SIZES["H"] * 4
    assert states <= short < 8 * states
    # every step adds the same bytes (a weight saved once, not per step): exactly linear in T
    assert longer - long == long - short > 0


def test_eager_torch_scan_counts_what_its_autograd_node_keeps() -> None:
    """torch's eager scan keeps its forward's intermediates on its autograd node, past the
    saved-tensor hooks, and clones every carry it keeps (scan's CLONE policy): for an Elman step each
    step's input state (for h @ W's weight gradient) and its tanh output are two stacked (T, B, H)
    tensors, at least 2 T B H float32 values. The count once held only what the ops around the scan
    saved (T B H values: the stacked ys the loss reads)."""
    pytest.importorskip("torch")
    states = SIZES["T"] * SIZES["B"] * SIZES["H"] * 4
    assert step_memory(_prepared("torch_scan", SIZES))["saved_mb"] * 2**20 >= 2 * states


def _eager_residual_bytes(loss_fn, diff: dict, rest: dict) -> int:
    """The residuals of jax.vjp run op by op (the count as it was first written): distinct array
    objects among the vjp function's leaves, less the inputs."""
    import jax

    _, vjp_fn = jax.vjp(lambda d: loss_fn(d, rest), diff)
    own = {id(x) for x in jax.tree_util.tree_leaves((diff, rest))}
    kept = {id(x): x for x in jax.tree_util.tree_leaves(vjp_fn) if hasattr(x, "nbytes") and id(x) not in own}
    return int(sum(x.nbytes for x in kept.values()))


@pytest.mark.parametrize(("model", "driver"), [("lstm", "jax_lax_scan"), ("rnn", "jax_loop"), ("lstm", "flax_scan")])
def test_the_traced_jax_count_is_the_eager_vjps_residuals(monkeypatch, model: str, driver: str) -> None:
    """jax's count reads the residuals off the traced vjp instead of running it: the same bytes."""
    pytest.importorskip("jax")
    from rnnbench.drivers.jax import _framework as _jax

    seen = []
    traced = _jax.residual_bytes
    monkeypatch.setattr(_jax, "residual_bytes", lambda *args: seen.append(args) or traced(*args))
    m, drv = registry.get_model(model), registry.get_driver(driver)
    case = m.make_case(m.sizes_with_defaults({}), 0).rounded_to("float32")
    count = drv.prepare(m, case, "float32", "cpu").saved_for_backward()
    assert len(seen) == 1 and count > 0
    assert count == _eager_residual_bytes(*seen[0])


def _planted() -> list[dict]:
    """Two ok rows, one with a counted step memory and one whose driver gives no count."""
    from rnnbench.rows.timing import Timing

    base = {"dtype": "float32", "environment_name": "main", "env_label": "torch 2.13.0", "max_rel_error": 3e-7}
    timed = {**base, "model": "lstm", "status": "ok", "fwd_bwd": Timing.of([10.0, 10.1, 9.9, 10.0]).to_dict()}
    counted = {**timed, "driver": "torch_loop", "step_memory": {"saved_mb": 2.25, "method": "counted"}}
    uncounted = {**timed, "driver": "torch_xla_scan", "step_memory": {"saved_mb": None, "method": "not measured"}}
    return [counted, uncounted]


def test_csv_and_json_hold_the_count_as_a_number() -> None:
    import json

    from rnnbench.report.table import format_as

    data = json.loads(format_as(_planted(), "json"))
    assert [row["saved for bwd MiB"] for row in data] == [2.25, None]
    header, first, second = format_as(_planted(), "csv").splitlines()
    at = header.split(",").index("saved for bwd MiB")
    assert first.split(",")[at] == "2.25" and second.split(",")[at] == ""


def test_the_html_table_shows_the_count_beside_the_workers_high_water_mark() -> None:
    from rnnbench.report.site.html import COLUMNS, table_rows

    at = COLUMNS.index("saved for bwd MiB")
    assert [cells[at] for cells in table_rows(_planted())] == ["2.25", "-"]
    assert any("peak RSS" in c and "high-water mark" in c for c in COLUMNS)
