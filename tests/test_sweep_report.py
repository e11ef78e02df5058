"""`rnnbench sweep` and `rnnbench report`: bad input is one line with exit 2; a row that runs past
its driver's time budget is recorded as skipped with the reason, never dropped; rows carry the
GEMM peak, FLOPs and roofline; the report writes charts and a page from the records alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def rnnbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rnnbench.cli", *args], capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["sweep", "--lengths", "16,abc"], "is not an integer"),
        (["sweep", "--lengths", "0"], "must be positive"),
        (["sweep", "--lengths", "", "--hidden", ""], "nothing to sweep"),
        (["sweep", "--dtype", "float8"], "unknown dtype"),
        (["sweep", "--driver-budget", "0"], "--driver-budget must be a finite number > 0"),
        (["sweep", "--models", "nosuch"], "unknown model"),
        (["report", "/nonexistent/r.jsonl"], "does not exist"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], words: str) -> None:
    proc = rnnbench(*args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in proc.stderr


def test_sweep_budget_skips_are_recorded_and_report_draws(tmp_path: Path) -> None:
    """A 4 s budget: the eager loop fits its first row; inductor's cold compile does not, so that
    row is killed and every later size of that driver is recorded as skipped: budget."""
    out = tmp_path / "s.jsonl"
    proc = rnnbench(
        "sweep",
        "--models",
        "rnn",
        "--drivers",
        "torch_loop,torch_loop_compiled,torch_nn_lstm",
        "--lengths",
        "4,8",
        "--threads",
        "1",
        "--budget",
        "0.02",
        "--driver-budget",
        "4",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 6  # 3 drivers x 2 lengths: nothing dropped
    by = {(r["driver"], r["sizes"]["T"]): r for r in records}
    assert by[("torch_nn_lstm", 4)]["status"] == "unavailable"
    first = by[("torch_loop", 4)]
    assert first["status"] == "ok"
    assert first["gemm_peak"]["gflops"] > 0 and first["flops"]["fwd_bwd"] > first["flops"]["fwd"] > 0
    assert (
        0
        < first["roofline"]["fwd_bwd"]["fraction_of_peak"]
        == pytest.approx(first["roofline"]["fwd_bwd"]["gflops"] / first["gemm_peak"]["gflops"])
    )
    assert first["memory"]["peak_rss_mb"] >= first["memory"]["rss_before_row_mb"] > 0
    assert first["environment"]["threads_in_use"]["torch_intra_op"] == 1
    for T in (4, 8):
        skipped = by[("torch_loop_compiled", T)]
        assert skipped["status"] == "skipped" and skipped["reason"].startswith("budget:") and "fwd_bwd" not in skipped

    report_dir = tmp_path / "report"
    proc = rnnbench("report", str(out), "--out-dir", str(report_dir))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pngs = {p.name for p in report_dir.glob("*.png")}
    assert {"length_rnn.png", "speedup_rnn.png", "grad_error_heatmap.png", "roofline.png"} <= pngs
    page = (report_dir / "index.html").read_text()
    assert all(name in page for name in pngs) and "skipped" in page and "budget:" in page
