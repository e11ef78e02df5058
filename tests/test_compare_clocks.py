"""`compare` on a busy machine: the clock that decides, and `noisy` where the evidence cannot
support slower or faster (rnnbench.report.compare.evidence). Planted samples only, never timed."""

from __future__ import annotations

import numpy as np
import pytest

from rnnbench.report.compare.pairs import NOTHING_MEASURED, compare
from rnnbench.report.compare.stats import _weighted_quantiles
from rnnbench.report.ratios import clock_of

MACHINE = {"hostname": "planted-host", "cpu": "planted cpu", "cores": 2, "platform": "Linux"}


def _quantity(wall: np.ndarray, cpu: np.ndarray | None) -> dict:
    q1, med, q3 = np.percentile(wall, [25, 50, 75])
    out = {"median_ms": float(med), "q1_ms": float(q1), "q3_ms": float(q3), "samples": [float(x) for x in wall]}
    if cpu is not None:
        out |= {"cpu_samples": [float(x) for x in cpu], "cpu_median_ms": float(np.median(cpu))}
    return out


def _record(run: str, driver: str, wall: np.ndarray, cpu: np.ndarray | None, notes=(), clock="cpu") -> dict:
    rec = {
        "model": "lstm",
        "driver": driver,
        "dtype": "float32",
        "status": "ok",
        "device": "cpu",
        "sizes": {"T": 8},
        "seed": 0,
        "loss_form": "model",
        "run_id": run,
        "machine": MACHINE,
        "settings": {"threads": 1},
        "fwd_bwd": _quantity(wall, cpu),
        "fwd": _quantity(wall / 3, None if cpu is None else cpu / 3),
        "cpu": {"threads": 1, "notes": list(notes)},
    }
    if cpu is not None:
        rec["timing"] = {"clock": clock, "contended": bool(notes), "unstable": False, "marks": list(notes)}
    return rec


def _busy(rng: np.random.Generator, cost: float, n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """(wall, cpu) samples of calls costing `cost` ms on a busy machine: other work adds to the
    CPU time only now and then (caches refilled) and multiplies the wall time 1x to 6x."""
    cpu = cost * (1 + rng.exponential(0.3, n) * (rng.random(n) < 0.5))
    return cpu * rng.uniform(1.0, 6.0, n), cpu


def _sides(seed: int, slow: float = 1.0) -> tuple[list[dict], list[dict]]:
    rng = np.random.default_rng(seed)
    base = [_record("a", d, *_busy(rng, 2.0), notes=["load", "contended"]) for d in ("torch_loop", "planted")]
    new = [
        _record("b", d, *_busy(rng, 2.0 * (slow if d == "planted" else 1.0)), notes=["load", "contended"])
        for d in ("torch_loop", "planted")
    ]
    return base, new


def test_busy_one_thread_rows_are_decided_on_cpu_time() -> None:
    base, new = _sides(1)
    assert clock_of(base + new) == "cpu"
    result = compare(base, new, threshold=0.1, alpha=0.01)
    assert {p.key.driver: p.verdict for p in result.pairs} == {"torch_loop": "same", "planted": "same"}
    assert result.exit_code == 0


def test_a_planted_2x_slowdown_under_load_is_slower() -> None:
    base, new = _sides(2, slow=2.0)
    result = compare(base, new, threshold=0.1, alpha=0.01)
    verdicts = {p.key.driver: p.verdict for p in result.pairs}
    assert verdicts == {"torch_loop": "same", "planted": "slower"}, verdicts
    assert result.exit_code == 1
    planted = next(p for p in result.pairs if p.key.driver == "planted")
    # the planted samples are exactly twice the base's: the CPU-time statistic recovers the factor itself
    assert planted.times["fwd_bwd"].estimate.ratio == pytest.approx(2.0, rel=1e-9)


def test_wall_time_under_contention_is_noisy_never_slower() -> None:
    """The same planted 2x, but the records were decided by wall time (several threads): the
    contention they carry leaves nothing to decide on."""
    rng = np.random.default_rng(3)
    base = [_record("a", "planted", *_busy(rng, 2.0), notes=["contended"], clock="wall")]
    new = [_record("b", "planted", *_busy(rng, 4.0), notes=["contended"], clock="wall")]
    result = compare(base, new, threshold=0.1, alpha=0.01)
    (pair,) = result.pairs
    assert clock_of(base + new) == "wall"
    assert pair.verdict == "noisy" and result.exit_code == NOTHING_MEASURED  # never 1: it measured nothing
    assert any("contention" in n for n in pair.notes)


def test_a_run_that_drifted_is_noisy() -> None:
    """One run per side whose CPU times doubled halfway: its own statistic disagrees with itself."""
    steady = np.full(40, 2.0)
    drifted = np.concatenate([np.full(20, 2.0), np.full(20, 4.4)])
    base = [_record("a", "planted", steady * 2, steady)]
    new = [_record("b", "planted", drifted * 2, drifted)]
    (pair,) = compare(base, new, threshold=0.1, alpha=0.01).pairs
    assert pair.verdict == "noisy" and any("disagree" in n for n in pair.notes)


def test_weighted_quantiles_match_numpy() -> None:
    rng = np.random.default_rng(0)
    values = np.sort(rng.random(9))
    counts = rng.integers(0, 4, (5, 9))
    counts[:, 0] += 1
    for q in (0.1, 0.25, 0.5, 0.9):
        expected = [np.quantile(np.repeat(values, c), q) for c in counts]
        assert np.allclose(_weighted_quantiles(values, counts, q), expected)


def test_thresholds_per_pattern_take_the_largest_match(tmp_path, capsys) -> None:
    """As asv's regressions_thresholds: 'jax_*=20%' for jax rows, 10 % for the rest; flags after a
    config file's `thresholds` table."""
    from rnnbench.cli.compare import thresholds
    from rnnbench.cli.main import main
    from rnnbench.record import row_key
    from rnnbench.report.compare.pairs import threshold_of
    from rnnbench.results_file import dumps

    default, patterns = thresholds(["jax_*=20%", "10%", "lstm/*=15%"])
    assert default == 0.1 and patterns == (("jax_*", 0.2), ("lstm/*", 0.15))
    jax = row_key({"model": "lstm", "driver": "jax_lax_scan", "dtype": "float32"})
    torch = row_key({"model": "rnn", "driver": "torch_loop", "dtype": "float32"})
    assert threshold_of(jax, default, patterns) == 0.2 and threshold_of(torch, default, patterns) == 0.1
    # a 15 % slower steady row: slower at 10 %, same-or-noisy under a 20 % pattern
    steady = np.full(40, 2.0) * (1 + 0.01 * np.sin(np.arange(40)))
    base = tmp_path / "base.jsonl"
    new = tmp_path / "new.jsonl"
    base.write_text(dumps(_record("a", "jax_lax_scan", steady * 2, steady)))
    new.write_text(dumps(_record("b", "jax_lax_scan", steady * 2.3, steady * 1.15)))
    assert main(["compare", str(base), str(new)]) == 1
    config = tmp_path / "compare.toml"
    config.write_text('thresholds = {"jax_*" = "20%", "*" = "10%"}\n')
    assert main(["compare", str(base), str(new), "--config", str(config)]) == 0
    assert "jax_* 20 %" in capsys.readouterr().out
    assert main(["compare", str(base), str(new), "--threshold", "=5%"]) == 2
    config.write_text('thresholds = ["jax_*=20%"]\n')
    assert main(["compare", str(base), str(new), "--config", str(config)]) == 2


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 40, 64])
def test_compare_recomputes_the_quartiles_a_record_holds(n: int) -> None:
    """One quartile function (rnnbench.stats.quartiles): a CPU side's quartiles recomputed from its
    kept samples are bit for bit the ones rows.timing.Timing records, and both are numpy's percentiles
    as each computed them before they shared it (ties and short runs included)."""
    from rnnbench.report.compare.evidence import side_of
    from rnnbench.rows.timing import Timing

    rng = np.random.default_rng(n)
    runs = [_busy(rng, 2.0, n) for _ in range(3)]
    runs.append((np.round(runs[0][0], 1), np.round(runs[0][1], 1)))  # ties
    side = side_of([_record("a", "planted", wall, cpu) for wall, cpu in runs], "fwd_bwd", "cpu")
    assert side is not None and side.clock == "cpu"
    for (_, cpu), q1, q3 in zip(runs, side.q1, side.q3, strict=True):
        timing = Timing.of(list(cpu))
        old_q1, old_med, old_q3 = np.percentile(list(cpu), [25, 50, 75])
        assert (q1, q3) == (timing.q1_ms, timing.q3_ms) == (float(old_q1), float(old_q3))
        assert timing.median_ms == float(old_med)
    if side.has_samples:  # at least two samples a run: the pooled range
        pooled = np.percentile(np.concatenate([cpu for _, cpu in runs]), [25, 75])
        assert side.iqr == (float(pooled[0]), float(pooled[1]))
    else:
        assert side.iqr == (min(side.q1), max(side.q3))
