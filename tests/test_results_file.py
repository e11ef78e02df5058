"""The results file's one writer (rnnbench.results_file.ResultsFile): a lock keeps a second writer out,
an existing file needs --resume, repairs never delete a complete record, a failed write (full
disk) leaves only complete lines, and records carry what --resume matches."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rnnbench import record, results_file
from rnnbench.errors import InputError

QUICK = ("--models", "rnn", "--drivers", "torch_nn_lstm")  # a row decided without a worker


def rec(i: int, **over) -> dict:
    return {"model": "rnn", "driver": "torch_loop", "dtype": "float32", "status": "ok", "seed": i, **over}


def test_a_second_writer_is_refused_while_the_first_holds_the_file(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with results_file.ResultsFile(path) as first:
        first.append(rec(0))
        with pytest.raises(InputError, match="being written by another rnnbench process"):
            with results_file.ResultsFile(path, resume=True):
                pass
        first.append(rec(1))
    with results_file.ResultsFile(path, resume=True) as again:  # released: a resume may continue
        assert [r["seed"] for r in again.existing] == [0, 1]


def test_an_existing_file_needs_resume_and_is_left_as_it_was(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    with pytest.raises(InputError, match="already exists"):
        results_file.ResultsFile(notes).__enter__()
    with pytest.raises(InputError, match="notes.txt:1: not a JSON record"):
        results_file.ResultsFile(notes, resume=True).__enter__()
    assert notes.read_text() == "my notes"


def test_validation_comes_before_repair_and_a_complete_last_record_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    good = json.dumps(rec(0)) + "\n"
    path.write_text(good + "garbage\n" + json.dumps(rec(1)))  # bad middle line, complete tail without newline
    before = path.read_bytes()
    with pytest.raises(InputError, match="r.jsonl:2"):
        results_file.ResultsFile(path, resume=True).__enter__()
    assert path.read_bytes() == before  # nothing deleted
    path.write_text(good + json.dumps(rec(1)))  # complete tail without newline: it is a record
    with results_file.ResultsFile(path, resume=True) as f:
        assert [r["seed"] for r in f.existing] == [0, 1]
        f.append(rec(2))
    assert [r["seed"] for r in results_file.load([path])] == [0, 1, 2]


def test_an_incomplete_last_line_is_dropped_only_when_the_run_continues(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(rec(0)) + '\n{"model": "rn')
    before = path.read_bytes()
    with results_file.ResultsFile(path, resume=True) as f:
        assert len(f.existing) == 1
    assert path.read_bytes() == before  # opened and closed without a record: unchanged
    with results_file.ResultsFile(path, resume=True) as f:
        f.append(rec(1))
    assert path.read_text() == json.dumps(rec(0)) + "\n" + results_file.dumps({**rec(1), "run_id": f.run_id})


def test_no_nan_in_records(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with results_file.ResultsFile(path) as f:
        f.append(rec(0, max_rel_error=float("nan"), first_call_s=float("inf"), fwd_bwd={"median_ms": float("-inf")}))
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    loaded = json.loads(text)
    assert loaded["max_rel_error"] is None and loaded["first_call_s"] is None and loaded["fwd_bwd"]["median_ms"] is None


def _fill_at(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # a file cannot grow past `limit`: a full disk


def test_a_failed_write_leaves_only_complete_records(tmp_path: Path) -> None:
    """In a child whose files cannot grow past 300 bytes (Python ignores SIGXFSZ, so the write
    fails with EFBIG, as a full disk fails with ENOSPC): the record that does not fit is cut back."""
    path = tmp_path / "r.jsonl"
    script = (
        "import sys\nfrom rnnbench import results_file\n"
        "with results_file.ResultsFile(sys.argv[1]) as f:\n"
        "    for i in range(100):\n"
        "        try:\n"
        "            f.append({'model': 'rnn', 'driver': 'd', 'dtype': 'float32', 'status': 'ok', 'seed': i,\n"
        "                      'pad': 'x' * 40})\n"
        "        except results_file.WriteFailed as exc:\n"
        "            print(exc.strerror); sys.exit(3)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        capture_output=True,
        text=True,
        preexec_fn=lambda: _fill_at(300),
        timeout=60,
    )
    assert proc.returncode == 3, proc.stderr
    assert "cannot write results file" in proc.stdout and "record(s) written by this run are kept" in proc.stdout
    text = path.read_text()
    assert text.endswith("\n")
    records = results_file.load([path])
    assert len(records) == len(text.splitlines()) >= 1


def test_a_full_disk_mid_run_stops_with_one_line_and_keeps_every_complete_record(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rnnbench.cli",
            "run",
            "--models",
            "rnn,lstm,decay,taylor_exp",
            "--drivers",
            "torch_nn_lstm,flax_lstm_cell",
            "--out",
            str(path),
        ],
        capture_output=True,
        text=True,
        preexec_fn=lambda: _fill_at(4000),
        timeout=300,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and "cannot write results file" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    text = path.read_text()
    assert text == "" or text.endswith("\n")
    assert len(results_file.load([path])) == len(text.splitlines())


def test_a_full_disk_during_report_is_one_line_and_exit_1(tmp_path: Path) -> None:
    """`rnnbench report` whose charts cannot be written (files cannot grow past 2000 bytes, as on a
    full disk): one line naming the file, exit 1, no internal error."""
    records = Path(__file__).resolve().parents[1] / "docs/results/2026-11-28-one-pair/after/default.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "rnnbench.cli", "report", str(records), "--out-dir", str(tmp_path / "report")],
        capture_output=True,
        text=True,
        preexec_fn=lambda: _fill_at(2000),
        timeout=300,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("rnnbench: error: cannot write ") and "internal error" not in proc.stderr


def _start_run(out: Path, *extra: str) -> subprocess.Popen:
    args = [
        sys.executable,
        "-m",
        "rnnbench.cli",
        "run",
        "--models",
        "decay",
        "--drivers",
        "torch_loop",
        "--environments",
        "main",
        "--dtypes",
        "float64",
        "--sizes",
        "T=7",
        "--budget",
        "3",
        "--out",
        str(out),
        *extra,
    ]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_runs_on_one_file_one_is_refused_and_nothing_interleaves(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    first = _start_run(out)
    deadline = time.time() + 60
    while not out.exists() and time.time() < deadline:
        time.sleep(0.05)
    second = subprocess.run(
        [sys.executable, "-m", "rnnbench.cli", "run", *QUICK, "--resume", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    third = subprocess.run(
        [sys.executable, "-m", "rnnbench.cli", "run", *QUICK, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    first.communicate(timeout=300)
    assert first.returncode == 0
    assert second.returncode == 2 and "being written by another rnnbench process" in second.stderr, second.stderr
    assert third.returncode == 2 and second.stderr.count("\n") == 1
    (only,) = results_file.load([out])
    assert (only["model"], only["driver"]) == ("decay", "torch_loop")


def test_records_carry_version_settings_and_fingerprint(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "rnnbench.cli", "run", *QUICK, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    (r,) = results_file.load([out])
    assert r["schema"] == record.SCHEMA and r["rnnbench_version"].startswith("0.")
    assert set(r["settings"]) == {"threads", "timing", "time", "order", "versions"}
    assert r["settings"]["versions"]["torch"].startswith("2.") and r["fingerprint"] == record.fingerprint(r)
    # Resuming with the same settings skips it; other settings for a decided row are refused.
    again = subprocess.run(
        [sys.executable, "-m", "rnnbench.cli", "run", *QUICK, "--resume", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0 and "0 rows" in again.stdout and "1 already done" in again.stdout
    decided = {**r, "status": "ok"}
    out.write_text(results_file.dumps(decided))
    before = out.read_bytes()
    other = subprocess.run(
        [sys.executable, "-m", "rnnbench.cli", "run", *QUICK, "--resume", "--out", str(out), "--budget", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert other.returncode == 2 and "timing.budget_s 0.5 -> 2.0" in other.stderr, other.stderr
    assert out.read_bytes() == before


def test_each_writer_stamps_one_run_id(tmp_path: Path) -> None:
    """Every record a ResultsFile writes carries its run_id, one per opening (one command run): a
    resumed file holds two runs, and `compare` counts a row's runs by it."""
    path = tmp_path / "r.jsonl"
    with results_file.ResultsFile(path) as first:
        first.append(rec(0))
        first.append(rec(1, run_id="given"))  # the writer's id, whatever the record says
    with results_file.ResultsFile(path, resume=True) as second:
        second.append(rec(2))
    ids = [r["run_id"] for r in results_file.load([path])]
    assert ids == [first.run_id, first.run_id, second.run_id] and first.run_id != second.run_id
    assert record.FIELDS["run_id"] == "str"
