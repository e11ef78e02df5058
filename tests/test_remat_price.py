"""Remat's price from records (rnnbench.report.charts.remat_price): each remat mechanism against its plain
counterpart at the same T, sizes and machine, its speed-up on the clock that decides both rows and the
step memory it keeps; a pair without a number says why; the chart draws those numbers, read back from
the figure. And suites.REMAT names every remat driver of the registry with its plain counterpart."""

from __future__ import annotations

from pathlib import Path

import pytest

from rnnbench import registry
from rnnbench.report.charts import remat_price
from rnnbench.suites import REMAT


def _rec(driver: str, T: int, *, cpu_ms: float | None, saved: float | None, status: str = "ok", host: str = "a"):
    """A record as `rnnbench run` writes one at model lstm, B=4, H=8: timed on the CPU clock (its wall
    median twice its CPU median, so a ratio of the wrong clock shows) where `cpu_ms` is given."""
    rec = {
        "model": "lstm",
        "driver": driver,
        "dtype": "float32",
        "status": status,
        "framework": "jax",
        "env_label": "jax 0.10.2",
        "sizes": {"B": 4, "H": 8, "T": T},
        "timestamp": "t",
        "machine": {"hostname": host},
        "timing": {"clock": "cpu", "contended": False, "unstable": False, "marks": []},
    }
    if cpu_ms is not None:
        rec["fwd_bwd"] = {
            "median_ms": 2 * cpu_ms + (7.0 if driver in REMAT else 0.0),
            "q1_ms": cpu_ms,
            "q3_ms": 3 * cpu_ms,
            "cpu_median_ms": cpu_ms,
            "cpu_samples": [cpu_ms] * 5,
        }
    if saved is not None:
        rec["step_memory"] = {"saved_mb": saved, "method": "counted"}
    return rec


def _records() -> list[dict]:
    remat, plain = "jax_lax_scan_remat_nothing", "jax_lax_scan"
    return [
        _rec(plain, 64, cpu_ms=10.0, saved=8.0),
        _rec(remat, 64, cpu_ms=12.5, saved=2.0),
        _rec(plain, 256, cpu_ms=40.0, saved=32.0),
        _rec(remat, 256, cpu_ms=None, saved=None, status="known_issue:x"),
        _rec(remat, 1024, cpu_ms=200.0, saved=32.0),  # no plain row at T=1024 on this machine
        _rec(plain, 1024, cpu_ms=100.0, saved=128.0, host="b"),
        _rec("torch_loop", 64, cpu_ms=5.0, saved=1.0),  # a plain driver alone: no pair
    ]


def test_each_pair_is_priced_on_its_deciding_clock_and_a_missing_number_says_why() -> None:
    prices = remat_price.remat_prices(_records())
    (panel,) = prices
    assert panel == ("lstm", "B=4,H=8", "float32", "cpu", "model")
    by_t = {p.T: p for p in prices[panel] if p.env == "jax 0.10.2 @ a"}
    assert by_t[64].speedup == pytest.approx(10.0 / 12.5) and by_t[64].clock == "cpu"
    assert by_t[64].memory == pytest.approx(0.25) and by_t[64].why == ""
    assert by_t[256].speedup is None and by_t[256].memory is None and by_t[256].why == "remat: known_issue:x"
    assert by_t[1024].speedup is None and by_t[1024].why == "no plain row"
    assert {p.mechanism for p in prices[panel]} == {"jax_lax_scan_remat_nothing"}


def test_a_pair_on_the_wall_clock_when_either_row_was_decided_by_it() -> None:
    plain, remat = (
        _rec("torch_loop", 64, cpu_ms=10.0, saved=4.0),
        _rec("torch_loop_checkpoint", 64, cpu_ms=10.0, saved=4.0),
    )
    plain["timing"]["clock"] = "wall"
    (price,) = next(iter(remat_price.remat_prices([plain, remat]).values()))
    assert price.clock == "wall" and price.speedup == pytest.approx(20.0 / 27.0) and price.memory == 1.0


def test_the_chart_draws_the_numbers_with_a_gap_and_its_reason(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("matplotlib")
    figs = []
    monkeypatch.setattr(remat_price, "save_png", lambda fig, path: figs.append(fig) or path)
    assert remat_price.remat_price_chart(_records(), tmp_path) == tmp_path / "remat_price.png"
    (fig,) = figs
    ax_t, ax_m = fig.axes[:2]
    for ax, want in ((ax_t, 10.0 / 12.5), (ax_m, 0.25)):
        line = next(ln for ln in ax.get_lines() if str(ln.get_label()).startswith("jax_lax_scan_remat_nothing"))
        assert list(line.get_xdata()) == [64] and list(line.get_ydata()) == pytest.approx([want])
        assert any(ln.get_marker() == "x" for ln in ax.get_lines())  # where the line stops
    (row_legend,) = fig.subfigs[0].legends  # one a row, below both panels
    legend = " ".join(" ".join(t.get_text() for t in row_legend.get_texts()).split())
    assert "none at T=256: remat: known_issue:x" in legend and "none at T=1024: no plain row" in legend
    remat_price.pyplot().close(fig)


def test_no_remat_mechanism_no_chart(tmp_path: Path) -> None:
    assert remat_price.remat_price_chart([_rec("jax_lax_scan", 64, cpu_ms=1.0, saved=1.0)], tmp_path) is None


def test_remat_names_every_remat_driver_with_a_plain_driver_of_its_framework() -> None:
    drivers = registry.drivers()
    remat = {n for n, d in drivers.items() if "jax.checkpoint" in d.summary or "(remat)" in d.summary}
    assert remat == set(REMAT)
    for mechanism, plain in REMAT.items():
        assert drivers[plain].framework is drivers[mechanism].framework
        assert drivers[plain].compiled == drivers[mechanism].compiled
