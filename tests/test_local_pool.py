"""rnnbench.processes.local_pool: correctness-only units (fuzz chunks) several at once on this machine,
one writer, and an interruption that keeps what the units had finished."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from rnnbench.processes.isolation import cancel_requested
from rnnbench.processes.local_pool import LocalPool
from rnnbench.processes.protocol import Cancelled
from rnnbench.rows.executors import Unit
from test_faults import FUZZ, HANG_AT_3, finish, gone_after, hanging, rnnbench_temp_files, start


def _unit(name: str, records: int, then_block: bool, running: list, peak: list, fail: bool = False) -> Unit:
    def work(emit) -> None:
        running.append(name)
        peak.append(len(running))
        try:
            for k in range(records):
                emit({"unit": name, "k": k})
            if fail:
                raise ValueError(f"{name} failed")
            while then_block:  # a worker that hangs: only the pool's stop ends it, as run_isolated does
                if cancel_requested():
                    raise Cancelled
                time.sleep(0.01)
        finally:
            running.remove(name)
            if then_block:
                emit({"unit": name, "k": "written before the interruption"})  # what the pipe held

    return Unit(name, work, lambda status, report: [])


def test_units_run_at_most_workers_at_once_and_every_record_reaches_the_one_writer() -> None:
    running, peak, got, writers = [], [], [], set()

    def emit(rec) -> None:
        writers.add(threading.current_thread())
        got.append(rec)

    units = [_unit(f"u{i}", 3, False, running, peak) for i in range(5)]
    LocalPool(2).run(units, emit)
    assert sorted((r["unit"], r["k"]) for r in got) == [(f"u{i}", k) for i in range(5) for k in range(3)]
    assert writers == {threading.main_thread()}
    assert max(peak) <= 2 and running == []


@pytest.fixture
def python_sigint():
    """Python's own SIGINT handler (KeyboardInterrupt) for a test that interrupts itself: a shell that
    starts pytest in the background leaves SIGINT ignored, and Python then installs none."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("python_sigint")
def test_an_interruption_stops_every_unit_and_keeps_what_they_had_written() -> None:
    running, peak, got = [], [], []
    units = [_unit(f"u{i}", 2, True, running, peak) for i in range(2)]
    before = set(threading.enumerate())
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        LocalPool(2).run(units, got.append)
    timer.join()
    assert running == [] and set(threading.enumerate()) <= before  # the pool's threads have ended
    assert sorted(str(r["k"]) for r in got if r["unit"] == "u0") == ["0", "1", "written before the interruption"]
    assert sorted(str(r["k"]) for r in got if r["unit"] == "u1") == ["0", "1", "written before the interruption"]


def test_a_unit_that_raises_stops_the_others_and_its_error_is_raised() -> None:
    running, peak, got = [], [], []
    units = [_unit("hangs", 1, True, running, peak), _unit("fails", 1, False, running, peak, fail=True)]
    before = set(threading.enumerate())
    with pytest.raises(ValueError, match="fails failed"):
        LocalPool(2).run(units, got.append)
    assert running == [] and set(threading.enumerate()) <= before  # the pool's threads have ended


def _verdicts(path: Path) -> dict:
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    return {r["fingerprint"]: r.get("status") for r in recs}


def test_drivers_fuzzed_at_once_give_the_records_of_drivers_one_after_another(tmp_path: Path) -> None:
    args = ("fuzz", "--cases", "4", "--drivers", "torch_loop,faulty_crash_at_length_3", "--no-second-order")
    args += ("--losses", "weighted", "--timeout", "60")
    (tmp_path / "one").mkdir(), (tmp_path / "two").mkdir()
    one = start(tmp_path / "one", *args, "--workers", "1", "--out", "r.jsonl")
    assert finish(one, 120)[0] == 1  # the crashing driver's body 3 is a driver error
    two = start(tmp_path / "two", *args, "--workers", "2", "--out", "r.jsonl")
    assert finish(two, 120)[0] == 1
    here, there = _verdicts(tmp_path / "one" / "r.jsonl"), _verdicts(tmp_path / "two" / "r.jsonl")
    assert here == there and "crash" in there.values()


def test_a_signal_to_the_fuzzer_running_drivers_at_once(tmp_path: Path) -> None:
    """One driver hangs on body 3 while the other runs: SIGINT ends both drivers' workers, keeps
    the hanging driver's bodies 0-2 and whatever the other had finished, and leaves nothing."""
    args = [a if a != HANG_AT_3 else f"{HANG_AT_3},torch_loop" for a in FUZZ]
    run = start(tmp_path, *args, "--workers", "2", "--out", "r.jsonl")
    hanging(run)
    os.kill(run.proc.pid, signal.SIGINT)
    code, lines = finish(run)
    assert code == 128 + signal.SIGINT and lines[-1].startswith("rnnbench: interrupted by SIGINT; ")
    recs = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert sorted(r["case"] for r in recs if r["driver"] == HANG_AT_3) == [0, 1, 2]
    assert f"{len(recs)} records kept" in lines[-1]
    gone_after(run.marker)
    assert rnnbench_temp_files(run.tmpdir) == []
