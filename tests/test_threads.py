"""`--threads N` means N cores for every framework: each worker is pinned by CPU affinity to N CPUs
before any framework is imported, and every row records its CPU list, its CPU time / wall ratio
over the timed loops, the load average at its start and end, and notes when its times may not be
its own (over_share, load, contended). These tests assert properties, not speeds."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from rnnbench import record
from rnnbench.machine import cpus
from rnnbench.report.marks import CONTENDED_MARK
from rnnbench.report.table import format_table
from rnnbench.rows.row import Job
from rnnbench.rows.runner import Runner
from rnnbench.rows.timing import TimingConfig

# Large enough that XLA would split its dots over a second core if it could (unpinned, two
# tf_XLAEigen threads share them), and ~1 s of timed calls per quantity, so the ratio is measured
# over hundreds of 10 ms scheduler slices.
JAX_SIZES = {"T": 32, "B": 32, "I": 128, "H": 256}
JAX_TIMING = TimingConfig(budget_s=1.0, min_repeats=5, max_repeats=1000)


@pytest.fixture(scope="module")
def jax_row() -> dict:
    pytest.importorskip("jax")
    job = Job(model="lstm", driver="jax_lax_scan", sizes=JAX_SIZES, timing=JAX_TIMING)
    (rec,) = Runner(None, 600.0).run([job])
    assert rec["status"] == "ok", rec.get("report") or rec.get("reason")
    return rec


def test_a_one_thread_worker_runs_on_one_cpu(jax_row: dict) -> None:
    cpu = jax_row["cpu"]
    assert len(cpu["affinity"]) == 1 and cpu["affinity"] == cpus.choose_cpus(1)
    assert jax_row["environment"]["threads_in_use"]["os_cpus_available"] == 1


def test_a_one_thread_jax_row_uses_at_most_one_core(jax_row: dict) -> None:
    """XLA sizes its pool from the affinity: pinned, the row's CPU time / wall is at most its share."""
    cpu = jax_row["cpu"]
    assert cpu["timed_wall_s"] >= 1.0  # enough timed calls for the ratio to mean something
    assert cpu["cpu_ratio"] <= 1.1, cpu
    assert "over_share" not in cpu["notes"]


def test_cpu_record_fields_exist_and_are_typed(jax_row: dict) -> None:
    assert record.problem(jax_row) is None
    cpu = jax_row["cpu"]
    assert isinstance(cpu["threads"], int) and cpu["threads"] == 1
    assert isinstance(cpu["affinity"], list) and all(isinstance(c, int) for c in cpu["affinity"])
    assert isinstance(cpu["machine_cpus"], int) and cpu["machine_cpus"] >= 1
    for name in ("timed_cpu_s", "timed_wall_s", "cpu_ratio"):
        assert isinstance(cpu[name], float) and cpu[name] > 0, name
    assert cpu["others_on_cpus"] is None or (isinstance(cpu["others_on_cpus"], float) and cpu["others_on_cpus"] >= 0)
    for name in ("load_start", "load_end"):
        assert isinstance(cpu[name], list) and len(cpu[name]) == 3 and all(isinstance(x, float) for x in cpu[name])
    assert isinstance(cpu["notes"], list) and set(cpu["notes"]) <= set(cpus.NOTES)
    assert cpu["notes"] == cpus.contention_notes(cpu)


def _cpu(**fields) -> dict:
    base = {
        "threads": 1,
        "affinity": [1],
        "machine_cpus": 2,
        "cpu_ratio": 1.0,
        "others_on_cpus": 0.0,
        "load_start": [0.2, 0.2, 0.2],
        "load_end": [0.3, 0.2, 0.2],
    }
    return {**base, **fields}


@pytest.mark.parametrize(
    ("fields", "notes"),
    [
        ({}, []),
        ({"cpu_ratio": 1.65}, ["over_share"]),  # XLA's pool on a second core at --threads 1
        ({"cpu_ratio": 1.05}, []),
        ({"threads": 2, "affinity": [0, 1], "cpu_ratio": 1.65}, []),  # within a 2-thread share
        ({"threads": 2, "affinity": [0, 1], "cpu_ratio": 2.4}, ["over_share"]),
        ({"others_on_machine": 1.5}, ["load"]),  # 1.5 cores of other work on 2 cores, 1 left free
        ({"others_on_machine": 0.9}, []),  # within the free core
        ({"threads": 2, "affinity": [0, 1], "others_on_machine": 0.3}, ["load"]),  # no core free
        ({"threads": 2, "affinity": [0, 1], "others_on_machine": 0.05}, []),  # the kernel's own ticks
        # the 1-minute load average is recorded, not judged: it lags and counts this run's own rows
        ({"load_start": [2.9, 2.0, 1.0], "load_end": [3.0, 2.0, 2.0]}, []),
        ({"threads": 2, "affinity": [0, 1], "load_start": [0.7, 0.5, 0.4], "others_on_machine": 0.02}, []),
        ({"others_on_cpus": 0.3}, ["contended"]),
        ({"others_on_cpus": None}, []),
        ({"cpu_ratio": 1.65, "others_on_cpus": 0.3, "others_on_machine": 1.4}, ["over_share", "load", "contended"]),
    ],
)
def test_contention_notes(fields: dict, notes: list[str]) -> None:
    assert cpus.contention_notes(_cpu(**fields)) == notes


def test_a_flagged_row_is_marked_in_the_table() -> None:
    cpu = _cpu(cpu_ratio=1.65)
    cpu["notes"] = cpus.contention_notes(cpu)
    timing_ = {"median_ms": 1.0, "q1_ms": 0.9, "q3_ms": 1.1, "min_ms": 0.8, "max_ms": 2.0, "repeats": 9}
    rec = {
        "model": "lstm",
        "driver": "jax_lax_scan",
        "dtype": "float32",
        "status": "ok",
        "env_label": "jax 0.10.2",
        "fwd_bwd": timing_,
        "fwd": timing_,
        "cpu": cpu,
    }
    calm = {**rec, "driver": "flax_scan", "cpu": _cpu(notes=[])}
    assert record.problem(rec) is None
    lines = format_table([rec, calm]).splitlines()
    flagged = next(line for line in lines if "jax_lax_scan" in line)
    assert f"[0.9-1.1] {CONTENDED_MARK}" in flagged
    assert CONTENDED_MARK not in next(line for line in lines if "flax_scan" in line)
    assert any(
        line.startswith(f"{CONTENDED_MARK} 1 row(s) timed under contention") and "over_share" in line for line in lines
    )


def test_cpus_are_chosen_deterministically_one_per_core(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cpus.choose_cpus(1, [0, 1, 2, 3]) == cpus.choose_cpus(1, [3, 2, 1, 0]) == [3]
    assert cpus.choose_cpus(4, [0, 1, 2, 3]) == [0, 1, 2, 3]
    assert cpus.choose_cpus(8, [5, 7]) == [5, 7]
    # SMT: CPUs 0/1 are one core, 2/3 another: two threads get one CPU of each core.
    monkeypatch.setattr(cpus, "_core_of", lambda cpu: (0, cpu // 2))
    assert cpus.choose_cpus(2, [0, 1, 2, 3]) == [1, 3]
    assert cpus.choose_cpus(3, [0, 1, 2, 3]) == [1, 2, 3]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_pin_process_pins_every_thread() -> None:
    import subprocess
    import sys

    script = (
        "import threading, time, os\n"
        "from rnnbench.machine.cpus import choose_cpus, pin_process\n"
        "ev = threading.Event(); t = threading.Thread(target=ev.wait); t.start()\n"  # a thread that predates the pin
        "cpus = choose_cpus(1); pin_process(cpus)\n"
        "masks = {int(tid): sorted(os.sched_getaffinity(int(tid))) for tid in os.listdir('/proc/self/task')}\n"
        "ev.set(); t.join()\n"
        "assert len(masks) >= 2 and all(m == cpus for m in masks.values()), (masks, cpus)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_load_line() -> None:
    assert (
        cpus.load_line(2, cores=2, load=1.9, busy=1.8)
        == "load average 1.9 on 2 cores at start, 1.8 cores busy now: timings may be contended (2 threads per row)"
    )
    assert cpus.load_line(1, cores=2, load=0.4, busy=0.3) == "load average 0.4 on 2 cores at start, 0.3 cores busy now"
    assert cpus.load_line(1, cores=2, load=1.9, busy=1.5).endswith("timings may be contended (1 thread per row)")
    # an idle machine whose last minute was busy (the average lags): not contended
    assert cpus.load_line(2, cores=2, load=0.7, busy=0.02) == "load average 0.7 on 2 cores at start, 0.0 cores busy now"


def test_machine_others_measures_work_now() -> None:
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        busy = cpus.machine_others(0.5)
    finally:
        spinner.kill()
        spinner.wait()
    assert busy is not None and busy >= 0.7  # the spinning process: about one CPU


def test_the_plain_progress_log_says_first_how_many_rows_are_unavailable() -> None:
    """Not a log that starts at [34/75]: its first line counts the rows decided unavailable before
    any ran, and a row found unavailable later gets a line before the next row's."""
    import io

    from rnnbench.report.progress import Progress

    out = io.StringIO()
    progress = Progress(5, stream=out, tty=False, unavailable=2)
    assert out.getvalue() == (
        "[0/5] 2 of the 5 rows are unavailable here (not run; listed by reason at the end), 3 to run\n"
    )
    row = {"model": "rnn", "driver": "torch_loop", "dtype": "float32", "env_label": "torch 2.13.0"}
    for status in ("unavailable", "unavailable", "ok", "unavailable", "ok"):
        progress.done({**row, "status": status})
    progress.close()
    lines = out.getvalue().splitlines()
    assert [line.split("]")[0] + "]" for line in lines] == ["[0/5]", "[3/5]", "[4/5]", "[5/5]"]
    assert lines[2] == "[4/5] 1 row(s) unavailable here (not run; listed by reason at the end)"
