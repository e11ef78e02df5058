"""`compare` relative to each run's machine-speed reference (rnnbench.machine.reference; the ratio of
ratios in rnnbench.report.compare.evidence), and measure() timing that reference beside each call.
Planted samples and a fake clock only, never timed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rnnbench import record_fields
from rnnbench.machine import reference
from rnnbench.report.compare import format as compare_format
from rnnbench.report.compare.evidence import REF_MOVED
from rnnbench.report.compare.pairs import compare
from rnnbench.rows.timing import Clocks, TimingConfig, measure
from test_compare_clocks import _record as clock_record

COST, REF = 2.0, 0.25  # ms: a row's call and the reference kernel's, on an undisturbed machine


def _record(run: str, cpu: np.ndarray, ref: np.ndarray | None, kernel: str = reference.KERNEL) -> dict:
    """test_compare_clocks' planted CPU-clock record (wall = CPU), with the reference's samples beside
    each quantity's."""
    rec = clock_record(run, "torch_loop", cpu, cpu)
    if ref is not None:
        for quantity in ("fwd_bwd", "fwd"):
            rec[quantity] |= {"ref_samples": [float(x) for x in ref], "ref_cpu_samples": [float(x) for x in ref]}
            rec[quantity]["ref_kernel"] = kernel
    return rec


def _run(
    rng: np.random.Generator, speed: float | np.ndarray = 1.0, slow: float = 1.0, n: int = 40
) -> tuple[np.ndarray, np.ndarray]:
    """(row, reference) CPU samples of one run: every call and its reference take `speed` times
    their cost (the machine's speed in that process, per call where an array), the row `slow`
    times more (a planted slowdown), each with a little one-sided noise."""
    noise = 1 + rng.exponential(0.02, (2, n))
    return COST * speed * slow * noise[0], REF * speed * noise[1]


def _verdict(base: dict, new: dict) -> tuple[str, object]:
    pair = compare([base], [new], threshold=0.1, alpha=0.01).pairs[0]
    return pair.verdict, pair.times["fwd_bwd"]


def test_a_machine_slower_in_one_process_is_not_a_slowdown() -> None:
    # one run per side, the new process got a machine 1.4x slower throughout: its own samples
    # cannot see it, its reference can
    rng = np.random.default_rng(0)
    verdict, timed = _verdict(_record("a", *_run(rng)), _record("b", *_run(rng, speed=1.4)))
    assert verdict == "same" and timed.relative
    assert timed.raw_ratio == pytest.approx(1.4, rel=0.05)  # the raw times are kept, and say 1.4x
    # without references (older records) the same samples are judged raw: a false slowdown
    rng = np.random.default_rng(0)
    (b, _), (n, _) = _run(rng), _run(rng, speed=1.4)
    verdict, timed = _verdict(_record("a", b, None), _record("b", n, None))
    assert verdict == "slower" and not timed.relative


@pytest.mark.parametrize("speed", [1.0, 0.8, 1.4])
def test_a_planted_2x_is_slower_whatever_the_machine_did(speed: float) -> None:
    rng = np.random.default_rng(1)
    verdict, timed = _verdict(_record("a", *_run(rng)), _record("b", *_run(rng, speed=speed, slow=2.0)))
    assert verdict == "slower"
    assert timed.estimate.ratio == pytest.approx(2.0, rel=0.05)


def test_one_side_without_a_reference_falls_back_to_raw_times() -> None:
    rng = np.random.default_rng(2)
    verdict, timed = _verdict(_record("a", *_run(rng)), _record("b", _run(rng, slow=2.0)[0], None))
    assert verdict == "slower" and not timed.relative


def test_two_reference_kernels_are_not_compared() -> None:
    # a reference is a unit only where both sides ran the same kernel: else raw times decide
    rng = np.random.default_rng(3)
    other = _record("b", *_run(rng, speed=1.4), kernel="another-kernel")
    verdict, timed = _verdict(_record("a", *_run(rng)), other)
    assert not timed.relative and verdict == "slower"


def test_a_reference_that_moved_more_than_the_bound_within_a_run_is_noisy() -> None:
    rng = np.random.default_rng(4)
    n = 40
    moved = np.where(np.arange(n) < n // 2, 1.0, REF_MOVED * 1.1)  # the second half ran that much slower
    pair = compare([_record("a", *_run(rng))], [_record("b", *_run(rng, speed=moved))], 0.1, alpha=0.01).pairs[0]
    assert pair.verdict == "noisy"
    assert any("moved" in note for note in pair.notes)


def test_a_machine_change_within_the_bound_that_the_reference_tracks_is_judged() -> None:
    rng = np.random.default_rng(5)
    n = 40
    moved = np.where(np.arange(n) < n // 2, 1.0, 1.3)  # below REF_MOVED, and both slowed alike
    verdict, timed = _verdict(_record("a", *_run(rng)), _record("b", *_run(rng, speed=moved)))
    assert verdict == "same" and timed.relative


def test_a_row_that_drifts_while_its_reference_does_not_is_noisy() -> None:
    # the row's second half 1.3x slower, its reference steady: the reference does not explain it
    rng = np.random.default_rng(6)
    row, ref = _run(rng)
    row = np.where(np.arange(len(row)) < len(row) // 2, row, row * 1.3)
    pair = compare([_record("a", *_run(rng))], [_record("b", row, ref)], 0.1, alpha=0.01).pairs[0]
    assert pair.verdict == "noisy"
    assert any("relative to their reference" in note for note in pair.notes)


def test_measure_times_the_reference_after_each_call_on_the_same_clocks() -> None:
    now = {"wall": 0.0, "cpu": 0.0}

    def advance(wall_s: float, cpu_s: float) -> None:
        now["wall"] += wall_s
        now["cpu"] += cpu_s

    clocks = Clocks(wall=lambda: now["wall"], cpu=lambda: now["cpu"])
    calls: list[str] = []

    def fn() -> None:
        calls.append("row")
        advance(0.004, 0.002)

    def ref() -> None:
        calls.append("ref")
        advance(0.0005, 0.0004)

    config = TimingConfig(warmup=1, min_repeats=3, max_repeats=3, budget_s=0.0)
    t = measure(fn, lambda r: None, config, clocks=clocks, reference=ref)
    assert calls == ["row", "ref"] * 4  # the warm-up too: the kernel is warm when first timed
    assert t.samples == (4.0, 4.0, 4.0) and t.cpu_samples == (2.0, 2.0, 2.0)
    assert t.ref_samples == (0.5, 0.5, 0.5) and t.ref_cpu_samples == (0.4, 0.4, 0.4)
    d = t.to_dict()
    assert d["ref_kernel"] == reference.KERNEL and d["ref_cpu_samples"] == [0.4, 0.4, 0.4]
    assert record_fields.problem({"model": "m", "driver": "d", "dtype": "f", "status": "ok", "fwd_bwd": d}) is None


def test_without_a_reference_a_timing_keeps_its_old_shape() -> None:
    config = TimingConfig(warmup=0, min_repeats=2, max_repeats=2, budget_s=0.0)
    d = measure(lambda: None, lambda r: None, config).to_dict()
    assert not {"ref_samples", "ref_cpu_samples", "ref_kernel"} & set(d)


def test_the_kernel_is_fixed_work() -> None:
    run = reference.kernel()
    assert run() == run() == reference.kernel()()  # the same inputs in every process


def test_the_output_shows_the_relative_speed_up_and_the_raw_one_beside_it() -> None:
    # the new process got a 1.4x slower machine and the row is unchanged: relative 1.0x, raw 0.71x
    rng = np.random.default_rng(7)
    result = compare([_record("a", *_run(rng))], [_record("b", *_run(rng, speed=1.4))], 0.1, alpha=0.01)
    row = json.loads(compare_format.as_json(result))["rows"][0]["times"]["fwd_bwd"]
    assert row["relative"] and row["speedup"] == pytest.approx(1.0, rel=0.05)
    assert row["raw_speedup"] == pytest.approx(1 / 1.4, rel=0.05)
    assert row["lo"] <= row["speedup"] <= row["hi"]
    text = compare_format.as_text(result)
    assert "on raw times" in text and "relative to each run's machine-speed reference" in text
