"""Speed by road from records (rnnbench.report.charts.mode_speed): each road of a row against that row's
vjp road on the clock that decides the row, a road without a time says why, a series answered from its
vjp row is not drawn again from its jvp row; the chart draws those numbers, read back from the figure.
And the roads as data: every road names the mode that checks it, every mode's BESIDE roads are roads."""

from __future__ import annotations

from pathlib import Path

import pytest

from rnnbench.modes import BESIDE, FIRST_ORDER, ROADS
from rnnbench.report.charts import mode_speed


def _timing(cpu_ms: float) -> dict:
    """A quantity timed on both clocks: its wall median twice its CPU median, so a ratio of the wrong
    clock shows."""
    return {"median_ms": 2 * cpu_ms + 1.0, "q1_ms": cpu_ms, "q3_ms": cpu_ms, "cpu_median_ms": cpu_ms}


def _rec(driver: str, mode: str, own_ms: float | None, roads: dict, *, status: str = "ok", framework="torch"):
    """A record as `rnnbench run --roads` writes one at rnn, T=8, B=4."""
    rec = {
        "model": "rnn",
        "driver": driver,
        "mode": mode,
        "dtype": "float32",
        "status": status,
        "framework": framework,
        "env_label": f"{framework} 1.0",
        "sizes": {"T": 8, "B": 4},
        "timestamp": "t",
        "machine": {"hostname": "a"},
        "timing": {"clock": "cpu", "contended": False, "unstable": False, "marks": []},
        "roads": roads,
    }
    if own_ms is not None:
        rec["fwd_bwd"] = _timing(own_ms)
        rec["road"] = mode
        rec["roofline"] = {"fwd_bwd": {"fraction_of_peak": 0.1}}
    return rec


def _records() -> list[dict]:
    timed = lambda ms, peak=None: {"fwd_bwd": _timing(ms), "max_rel_error": 1e-7, "checked": "x",
                                   **({"roofline": {"fraction_of_peak": peak}} if peak else {})}  # fmt: skip
    return [
        _rec("torch_loop", "vjp", 2.0, {"jvp": timed(8.0, 0.02), "jvp_dual": timed(4.0)}),
        _rec("torch_loop", "jvp", 8.0, {"vjp": timed(2.0), "jvp_dual": timed(4.0)}),  # answered above
        _rec(
            "jax_lax_scan",
            "vjp",
            1.0,
            {"jvp": timed(0.5), "jvp_dual": {"status": "unavailable", "reason": "jvp_dual: torch's API"}},
            framework="jax",
        ),
        _rec(
            "torch_loop",
            "per_example",
            6.0,
            {
                "vjp": {"fwd_bwd": _timing(2.0), "max_rel_error": None, "checked": "its vjp row"},
                "per_example_loop": timed(24.0),
                "per_example_batched_loss": {"status": "differs", "reason": "rel error 0.5 > tolerance 1e-4"},
            },
        ),
        _rec("jax_lax_scan", "per_example", None, {}, status="grad_mismatch", framework="jax"),
        _rec("torch_scan", "vjp", 3.0, {}),  # a vjp row timed without its roads: no question answered
    ]


def test_each_road_against_its_rows_vjp_on_the_deciding_clock_and_a_gap_says_why() -> None:
    (panel, questions), *_ = mode_speed.road_speeds(_records()).items()
    assert panel == ("rnn", "T=8,B=4", "float32", "cpu", "model")
    forward = {(s.series, s.road): s for s in questions[mode_speed.FORWARD]}
    assert len(questions[mode_speed.FORWARD]) == 4  # torch_loop's jvp row is not drawn again
    jvp = forward[("torch_loop (torch 1.0)", "jvp")]
    assert jvp.speedup == pytest.approx(2.0 / 8.0) and jvp.clock == "cpu" and jvp.peak == 0.02
    assert forward[("torch_loop (torch 1.0)", "jvp_dual")].speedup == pytest.approx(0.5)
    assert forward[("jax_lax_scan (jax 1.0)", "jvp")].speedup == pytest.approx(2.0)
    gap = forward[("jax_lax_scan (jax 1.0)", "jvp_dual")]
    assert gap.speedup is None and gap.why == "jvp_dual: torch's API"
    each = {(s.series, s.road): s for s in questions[mode_speed.PER_EXAMPLE_Q]}
    assert each[("torch_loop (torch 1.0)", "per_example")].speedup == pytest.approx(2.0 / 6.0)
    assert each[("torch_loop (torch 1.0)", "per_example")].peak == 0.1
    assert each[("torch_loop (torch 1.0)", "per_example_loop")].speedup == pytest.approx(2.0 / 24.0)
    differs = each[("torch_loop (torch 1.0)", "per_example_batched_loss")]
    assert differs.speedup is None and differs.why.startswith("rel error 0.5")
    failed = [s for (series, _), s in each.items() if series.startswith("jax_lax_scan")]
    assert len(failed) == 3 and {s.why for s in failed} == {"row grad_mismatch"}


def test_the_chart_draws_the_ratios_and_the_gaps_with_their_reasons(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("matplotlib")
    figs = []
    monkeypatch.setattr(mode_speed, "save_png", lambda fig, path: figs.append(fig) or path)
    assert mode_speed.mode_speed_chart(_records(), tmp_path) == tmp_path / "mode_speed.png"
    (fig,) = figs
    ax_fwd, ax_each = fig.axes[:2]
    widths = sorted(round(p.get_width(), 6) for p in ax_fwd.patches)
    assert widths == sorted(round(w, 6) for w in (0.25, 0.5, 2.0))
    assert sorted(round(p.get_width(), 6) for p in ax_each.patches) == sorted(round(w, 6) for w in (2 / 6, 2 / 24))
    texts = " ".join(t.get_text() for ax in (ax_fwd, ax_each) for t in ax.texts)
    assert "0.25x  8 ms, 2% peak" in texts and "jvp_dual: torch's API" in texts
    assert "rel error 0.5 > tolerance" in texts and "row grad_mismatch" in texts
    mode_speed.pyplot().close(fig)


def test_no_road_no_chart(tmp_path: Path) -> None:
    assert mode_speed.mode_speed_chart([_rec("torch_loop", "vjp", 1.0, {})], tmp_path) is None


def test_roads_are_data_every_mode_checks_its_roads() -> None:
    assert set(BESIDE) == set(FIRST_ORDER)  # every first-order mode says what is timed beside it
    for mode, beside in BESIDE.items():
        assert mode in ROADS and set(beside) <= set(ROADS) and mode not in beside
    for road in ROADS.values():
        assert road.checked_by in FIRST_ORDER, road
    assert set(mode_speed.ROAD_LABELS) == set(ROADS) - {"vjp", "func"}  # the chart names each road it draws
