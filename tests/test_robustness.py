"""Failure modes of a run: every injected fault costs its own row only, killed runs resume, bad
input is one line with exit code 2, shards partition the matrix, device plumbing degrades to
`unavailable` where the device is missing."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PLUGIN_DIR = Path(__file__).parent / "plugins"


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`rnnbench ...` with the faulty drivers loaded; runs are pinned to the main environment."""
    if args and args[0] == "run" and "--environments" not in args:
        args = (*args, "--environments", "main")
    env = {
        **os.environ,
        "RNNBENCH_PLUGINS": "rnnbench_faulty",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(PLUGIN_DIR), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run(
        [sys.executable, "-m", "rnnbench.cli", *args], capture_output=True, text=True, env=env, timeout=timeout
    )


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_each_fault_costs_only_its_row(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    proc = run_cli(
        "run",
        "--models",
        "decay",
        "--drivers",
        "faulty_segfault,faulty_hang,faulty_oom_kill,faulty_memory_hog,faulty_raises,torch_loop",
        "--timeout",
        "20",
        "--memory-limit-gb",
        "1.5",
        "--budget",
        "0.05",
        "--out",
        str(out),
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    status = {r["driver"]: r for r in records(out)}
    assert status["faulty_segfault"]["status"] == "crash"
    assert "SIGSEGV" in status["faulty_segfault"]["report"]
    assert status["faulty_hang"]["status"] == "timeout"
    assert status["faulty_oom_kill"]["status"] == "crash" and "SIGKILL" in status["faulty_oom_kill"]["report"]
    assert status["faulty_memory_hog"]["status"] == "error" and "MemoryError" in status["faulty_memory_hog"]["report"]
    assert status["faulty_raises"]["status"] == "error" and "driver bug" in status["faulty_raises"]["report"]
    assert status["torch_loop"]["status"] == "ok" and "fwd_bwd" in status["torch_loop"]
    assert all("fwd_bwd" not in r for d, r in status.items() if d != "torch_loop")


def test_crash_mid_group_continues_with_the_next_rows(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    proc = run_cli(
        "run", "--models", "decay,rnn,newton_sqrt", "--drivers", "faulty_crash_on_rnn", "--no-time", "--out", str(out)
    )
    assert proc.returncode == 1
    assert {r["model"]: r["status"] for r in records(out)} == {"decay": "ok", "rnn": "crash", "newton_sqrt": "ok"}


def test_wrong_gradient_row_says_where_it_goes_wrong(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    proc = run_cli(
        "run",
        "--models",
        "rnn",
        "--drivers",
        "faulty_cut_carry,torch_loop",
        "--no-time",
        "--sizes",
        "T=6",
        "--dtypes",
        "float64",
        "--out",
        str(out),
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = {r["driver"]: r for r in records(out)}
    bad = rows["faulty_cut_carry"]
    assert bad["status"] == "grad_mismatch"
    assert bad["localization"]["first_step"] == 4 and bad["localization"]["where"][0] == "cotangent of h"
    assert "first divergence at step 4: cotangent of h" in bad["report"]
    assert "localization" not in rows["torch_loop"]


@pytest.mark.parametrize(
    "driver, status", [("faulty_crash_at_length_3", "crash"), ("faulty_hang_at_length_3", "timeout")]
)
def test_fuzz_crash_or_hang_costs_only_that_body(driver: str, status: str, tmp_path: Path) -> None:
    from rnnbench.fuzz.grammar import generate

    lengths = [generate(0, i).length for i in range(8)]
    assert 3 in lengths and set(lengths) != {3}
    proc = run_cli(
        "fuzz",
        "--cases",
        "8",
        "--drivers",
        f"{driver},torch_loop",
        "--no-second-order",
        "--timeout",
        "10",
        "--losses",
        "weighted",
        "--out",
        str(tmp_path / "f.jsonl"),
    )  # one case per body: the isolation, not the loss forms, is tested
    assert proc.returncode == 1, proc.stdout + proc.stderr
    table = fuzz_table(proc.stdout)
    assert table[driver]["tried"] == 8 and table[driver]["error"] == lengths.count(3)
    assert table[driver]["agree"] == 8 - lengths.count(3)  # every other body still checked, and agrees
    assert f"on {driver}: {status}" in proc.stdout
    assert table["torch_loop"]["tried"] == table["torch_loop"]["agree"] == 8


def fuzz_table(stdout: str) -> dict[str, dict[str, int]]:
    """The fuzz summary table read by its header, so a new column does not shift what a test reads."""
    lines = stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:1] == ["driver"])
    header = lines[at].split()[1:]
    table = {}
    for line in lines[at + 1 :]:
        cells = line.split()
        if len(cells) != len(header) + 1:
            break
        table[cells[0]] = dict(zip(header, map(int, cells[1:])))
    return table


def test_killed_run_resumes_without_redoing_rows(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    env = {**os.environ}
    args = [
        sys.executable,
        "-m",
        "rnnbench.cli",
        "run",
        "--models",
        "decay,rnn,lstm,newton_sqrt,taylor_exp",
        "--drivers",
        "torch_loop,jax_lax_scan",
        "--environments",
        "main",
        "--budget",
        "0.05",
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 2):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the run and its worker, mid-row
    proc.wait()
    first = records(out)
    assert 2 <= len(first) < 10
    with open(out, "a") as f:  # as if killed mid-write
        f.write('{"model": "taylor_exp", "driver": "torch_lo')
    resumed = subprocess.run([*args, "--resume"], capture_output=True, text=True, env=env, timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "dropped an incomplete last line" in resumed.stderr
    assert f"({len(first)} already done, skipped)" in resumed.stdout
    final = records(out)  # every line parses again
    keys = [(r["model"], r["driver"]) for r in final]
    assert len(keys) == len(set(keys)) == 10
    assert final[: len(first)] == first


def test_repeatability_is_recorded(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    run_cli(
        "run",
        "--models",
        "rnn",
        "--drivers",
        "torch_loop,jax_lax_scan,faulty_nondeterministic",
        "--no-time",
        "--out",
        str(out),
    )
    rep = {r["driver"]: r["repeatable"] for r in records(out)}
    assert rep["torch_loop"] == {"bitwise": True} and rep["jax_lax_scan"] == {"bitwise": True}
    assert rep["faulty_nondeterministic"]["bitwise"] is False and rep["faulty_nondeterministic"]["max_abs_diff"] > 0


def test_cuda_rows_are_unavailable_without_a_gpu(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the CUDA path runs for real")
    out = tmp_path / "r.jsonl"
    proc = run_cli(
        "run", "--models", "rnn", "--drivers", "torch_loop,jax_lax_scan", "--device", "cuda", "--out", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    reasons = {r["driver"]: (r["status"], r["reason"]) for r in records(out)}
    assert reasons["torch_loop"] == ("unavailable", "no CUDA device visible to torch")
    assert reasons["jax_lax_scan"] == ("unavailable", "no GPU backend visible to jax")
    assert all(r["device"] == "cuda" for r in records(out))


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["run", "--drivers", "faulty_missing_framework"], "cannot run here: python package 'nosuchframework'"),
        (["run", "--shard", "0/3"], "needs 1 <= I <= N"),
        (["run", "--shard", "x"], "is not I/N"),
        (["run", "--resume"], "--resume needs --out"),
        (["run", "--resume", "--out", "/nonexistent/r.jsonl"], "does not exist"),
    ],
)
def test_more_bad_input(args: list[str], words: str) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 2 and words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_config_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("models = [rnn\n")
    proc = run_cli("run", "--config", str(bad))
    assert proc.returncode == 2 and "not valid TOML" in proc.stderr and "Traceback" not in proc.stderr
    unknown = tmp_path / "unknown.toml"
    unknown.write_text('modles = ["rnn"]\n')
    proc = run_cli("run", "--config", str(unknown))
    assert proc.returncode == 2 and "unknown key(s) modles" in proc.stderr
    good = tmp_path / "good.toml"
    good.write_text('models = ["decay"]\ndrivers = ["torch_loop"]\ndtypes = ["float64"]\n[sizes]\nT = 7\n')
    out = tmp_path / "r.jsonl"
    proc = run_cli("run", "--config", str(good), "--no-time", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    (rec,) = records(out)
    assert (rec["model"], rec["driver"], rec["dtype"], rec["sizes"]["T"]) == ("decay", "torch_loop", "float64", 7)


def test_shards_partition_the_matrix() -> None:
    from rnnbench.cli import options
    from rnnbench.planning import plan
    from rnnbench.planning.settings import CONFIG_KEYS

    def jobs(shard):
        args = argparse.Namespace(no_time=True, shard=shard, config=None, **{k: None for k in CONFIG_KEYS})
        return [j.key() for j in plan.jobs(options.settings(args))]

    whole = jobs(None)
    parts = [jobs(f"{i}/3") for i in (1, 2, 3)]
    assert sorted(sum(parts, [])) == sorted(whole)
    assert all(len(set(a) & set(b)) == 0 for a in parts for b in parts if a is not b)
    assert parts == [jobs(f"{i}/3") for i in (1, 2, 3)]  # deterministic
    assert max(map(len, parts)) - min(map(len, parts)) <= 1


def test_table_merges_machines(tmp_path: Path) -> None:
    from rnnbench.report.table import format_table

    base = {
        "model": "rnn",
        "driver": "torch_loop",
        "dtype": "float32",
        "status": "ok",
        "max_rel_error": 1e-7,
        "fwd_bwd": {"median_ms": 1.0, "q1_ms": 0.9, "q3_ms": 1.1},
        "fwd": None,
        "first_call_s": 0.1,
    }
    text = format_table([{**base, "machine": {"hostname": "alpha"}}, {**base, "machine": {"hostname": "beta"}}])
    assert text.splitlines()[0].startswith("machine") and "alpha" in text and "beta" in text


def test_progress_bar_on_a_terminal_and_plain_lines_otherwise() -> None:
    import io

    from rnnbench.report.progress import Progress
    from rnnbench.rows.row import Job

    rec = {"model": "rnn", "driver": "torch_loop", "dtype": "float32", "status": "ok", "max_rel_error": 2e-7}
    plain = io.StringIO()
    p = Progress(2, plain, tty=False)
    p.start(Job(model="rnn", driver="torch_loop"))
    p.done(rec)
    assert plain.getvalue().startswith("[1/2] rnn") and "\r" not in plain.getvalue()
    term = io.StringIO()
    p = Progress(2, term, tty=True)
    p.start(Job(model="rnn", driver="torch_loop"))
    p.done(rec)
    assert "\r\033[K" in term.getvalue() and "1/2" in term.getvalue() and "eta" in term.getvalue()
