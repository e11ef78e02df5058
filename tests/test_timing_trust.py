"""Which clock decides a row and whether its numbers are its own (rnnbench.rows.timing.measure's two
clocks, judge_timing): planted samples and a fake clock, never a timed test."""

from __future__ import annotations

import itertools

from rnnbench import record
from rnnbench.planning.settings import RunSettings
from rnnbench.rows import timing
from rnnbench.rows.timing import Clocks, Timing, TimingConfig, instability, judge_timing, measure


def fake_clocks(wall_steps: list[float], cpu_steps: list[float]) -> Clocks:
    """Clocks that advance by the given steps (seconds) on each reading, cycling."""
    wall, cpu = itertools.cycle(wall_steps), itertools.cycle(cpu_steps)
    now = {"wall": 0.0, "cpu": 0.0}

    def tick(name: str, steps) -> float:
        now[name] += next(steps)
        return now[name]

    return Clocks(wall=lambda: tick("wall", wall), cpu=lambda: tick("cpu", cpu))


def test_measure_reads_both_clocks_per_call() -> None:
    # wall: 0 at the start reading, 0.004 s at the end; cpu: 0 at the start, 0.002 s at the end
    config = TimingConfig(warmup=0, min_repeats=5, max_repeats=5, budget_s=0.0)
    t = measure(lambda: None, lambda r: None, config, clocks=fake_clocks([0.0, 0.004], [0.0, 0.002]))
    assert t.repeats == 5
    assert all(abs(s - 4.0) < 1e-9 for s in t.samples)
    assert all(abs(s - 2.0) < 1e-9 for s in t.cpu_samples)
    assert t.cpu_median_ms is not None and abs(t.cpu_median_ms - 2.0) < 1e-9


def test_a_record_without_cpu_samples_keeps_its_old_shape() -> None:
    d = Timing.of([1.0, 2.0, 3.0]).to_dict()
    assert "cpu_samples" not in d and "cpu_median_ms" not in d


def _row(threads: int, wall: list[float], cpu: list[float], notes=(), fwd_scale: float = 0.4) -> dict:
    fwd_bwd = Timing.of(wall, cpu).to_dict()
    fwd = Timing.of([w * fwd_scale for w in wall], [c * fwd_scale for c in cpu]).to_dict()
    return {
        "model": "lstm",
        "driver": "d",
        "dtype": "float32",
        "status": "ok",
        "fwd_bwd": fwd_bwd,
        "fwd": fwd,
        "cpu": {"threads": threads, "notes": list(notes)},
    }


STEADY = [10.0, 10.1, 9.9, 10.0, 10.2, 9.8, 10.0, 10.1]


def test_a_one_thread_row_is_decided_by_its_cpu_time_even_when_contended() -> None:
    rec = _row(1, [w * 3 for w in STEADY], STEADY, notes=["contended"])
    trust = judge_timing(rec)
    assert trust == {"clock": "cpu", "contended": True, "unstable": False, "marks": ["contended"]}
    rec["timing"] = trust
    assert record.problem(rec) is None


def test_a_many_thread_row_is_decided_by_wall_time() -> None:
    assert judge_timing(_row(2, STEADY, [s * 2 for s in STEADY]))["clock"] == "wall"


def test_spread_and_drift_are_unstable() -> None:
    spread = [1.0, 3.0, 1.0, 3.0, 1.0, 3.0, 1.0, 3.0]
    drift = [1.0, 1.0, 1.0, 1.0, 1.4, 1.4, 1.4, 1.4]
    assert "spread" in instability(spread)
    assert instability(drift) == ["drift"]
    assert instability(STEADY) == []
    assert instability([1.0, 5.0]) == []  # too few to judge
    trust = judge_timing(_row(1, STEADY, spread))
    assert trust["unstable"] and "spread" in trust["marks"] and not trust["contended"]


def test_a_forward_slower_than_its_forward_backward_is_marked() -> None:
    trust = judge_timing(_row(1, STEADY, STEADY, fwd_scale=1.3))
    assert trust["unstable"] and "fwd_over_fwd_bwd" in trust["marks"]
    assert not judge_timing(_row(1, STEADY, STEADY, fwd_scale=0.9))["unstable"]


def test_an_untimed_row_has_no_timing_field() -> None:
    assert judge_timing({"status": "grad_mismatch", "fwd_bwd": None}) is None


def test_run_defaults_to_one_thread_per_row() -> None:
    """The suite never contends with itself, and its CPU time decides (docs/measuring.md)."""
    assert RunSettings().threads == 1
    assert timing.SPREAD > 1 and timing.DRIFT > 1


def test_the_table_marks_unstable_rows_and_a_forward_over_its_forward_backward() -> None:
    from rnnbench.report.marks import CONTENDED_MARK, UNSTABLE_MARK
    from rnnbench.report.table import format_table

    rec = _row(1, STEADY, STEADY, fwd_scale=1.3)
    rec |= {"environment_name": "main", "env_label": "torch 2.13.0"}
    rec["timing"] = judge_timing(rec)
    text = format_table([rec])
    row = next(line for line in text.splitlines() if line.startswith("lstm"))
    assert row.count(UNSTABLE_MARK) == 2 and CONTENDED_MARK not in row  # the fwd+bwd cell and the fwd cell
    assert "1 row(s) unstable" in text and "fwd_over_fwd_bwd" in text
    old = {k: v for k, v in rec.items() if k != "timing"}  # a record older than the timing field
    assert UNSTABLE_MARK in next(line for line in format_table([old]).splitlines() if line.startswith("lstm"))
    steady = _row(1, STEADY, STEADY)
    steady |= {"environment_name": "main", "env_label": "torch 2.13.0", "timing": judge_timing(steady)}
    assert UNSTABLE_MARK not in format_table([steady])


def test_csv_and_json_tables_hold_numbers_and_marks_in_their_own_fields() -> None:
    import csv
    import io
    import json

    from rnnbench.report.table import format_as

    rec = _row(1, STEADY, STEADY, fwd_scale=1.3, notes=["contended"])
    rec |= {"environment_name": "main", "env_label": "torch 2.13.0", "max_rel_error": 1.7e-07}
    rec["timing"] = judge_timing(rec)
    (row,) = json.loads(format_as([rec], "json"))
    assert row["fwd+bwd ms"] == rec["fwd_bwd"]["median_ms"] and isinstance(row["fwd ms"], float)
    assert row["max rel err"] == 1.7e-07 and row["clock"] == "cpu"
    assert row["contended"] is True and row["unstable"] is True
    assert row["marks"] == ["contended", "fwd_over_fwd_bwd"]
    header, line = list(csv.reader(io.StringIO(format_as([rec], "csv"))))
    cells = dict(zip(header, line, strict=True))
    assert float(cells["fwd+bwd ms"]) == rec["fwd_bwd"]["median_ms"]
    assert cells["unstable"] == "true" and cells["marks"] == "contended;fwd_over_fwd_bwd"


def test_the_html_note_column_says_contended_and_unstable() -> None:
    from rnnbench.report.site.html import COLUMNS, table_rows

    rec = _row(1, STEADY, STEADY, fwd_scale=1.3, notes=["load"])
    rec |= {"environment_name": "main", "env_label": "torch 2.13.0", "sizes": {"T": 8}}
    rec["timing"] = judge_timing(rec)
    (cells,) = table_rows([rec])
    assert cells[COLUMNS.index("note")] == "contended (load); unstable (fwd_over_fwd_bwd)"
    steady = _row(1, STEADY, STEADY)
    steady |= {"environment_name": "main", "env_label": "torch 2.13.0", "sizes": {"T": 8}}
    steady["timing"] = judge_timing(steady)
    assert table_rows([steady])[0][COLUMNS.index("note")] == ""


def test_a_row_that_waited_for_its_core_is_contended_even_when_its_loops_were_too_short_to_measure() -> None:
    """An XLA row's timed loops under 0.5 s leave cpu.notes empty (10 ms ticks); its CPU time /
    wall of 0.1 still says it waited for a core. A GPU row's CPU waits on the device: not judged."""
    from rnnbench.report.marks import CONTENDED_MARK, contention
    from rnnbench.report.table import format_table

    rec = _row(1, STEADY, STEADY)
    rec["cpu"] |= {"cpu_ratio": 0.1, "others_on_cpus": None}
    rec |= {"environment_name": "main", "env_label": "jax 0.10.2", "timing": judge_timing(rec)}
    assert rec["timing"]["contended"] and rec["timing"]["marks"] == ["starved"] and not rec["timing"]["unstable"]
    assert contention(rec) == ["starved"] and CONTENDED_MARK in format_table([rec])
    assert not judge_timing({**rec, "device": "cuda"})["contended"]
    assert not judge_timing({**rec, "cpu": {"threads": 1, "notes": [], "cpu_ratio": 0.95}})["contended"]
