"""One report across environments: torch 2.13.0 (main) and torch 2.9.0 + torch_xla (xla) rows in
one results file and one table, and what a run says when the torch_xla environment is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rnnbench.run import environments


def rnnbench(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rnnbench.cli", *args], capture_output=True, text=True,
                          timeout=900, env={**os.environ, **(env or {})})


def test_missing_xla_environment_rows_say_how_to_create_it(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    proc = rnnbench("run", "--models", "decay", "--drivers", "torch_xla_scan,torch_loop", "--environments", "xla",
                    "--no-time", "--out", str(out), env={environments.XLA_PYTHON_VAR: str(tmp_path / "no" / "python")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["status"] for r in records] == ["unavailable", "unavailable"]
    assert all("run `make venv-xla` to create the torch_xla environment" in r["reason"] for r in records)
    assert "make venv-xla" in proc.stdout


@pytest.fixture
def xla_environment() -> environments.Environment:
    env = environments.get("xla")
    reason = env.missing_reason()
    if reason is not None:
        if os.environ.get("RNNBENCH_REQUIRE_XLA"):
            pytest.fail(reason)
        pytest.skip(reason)
    return env


@pytest.mark.cross_environment
def test_one_report_holds_both_torch_versions_and_torch_xla(tmp_path: Path, xla_environment) -> None:
    """docs/bugs.md §1 side by side: torch_scan on `decay` is ok on torch 2.13.0 and a known issue
    (raw grad_mismatch, no speed number) on torch 2.9.0; torch_xla's loop and scan are ok and timed."""
    out = tmp_path / "r.jsonl"
    proc = rnnbench("run", "--models", "decay", "--drivers", "torch_scan,torch_xla_loop,torch_xla_scan_cached",
                    "--budget", "0.05", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr  # a known issue does not fail the run
    rows = {(r["driver"], r["environment_name"]): r for r in map(json.loads, out.read_text().splitlines())}
    assert set(rows) == {("torch_scan", "main"), ("torch_scan", "xla"), ("torch_xla_loop", "xla"),
                         ("torch_xla_scan_cached", "xla")}
    new, old = rows[("torch_scan", "main")], rows[("torch_scan", "xla")]
    assert (new["env_label"], new["status"]) == ("torch 2.13.0", "ok") and new["fwd_bwd"]["median_ms"] > 0
    assert (old["env_label"], old["status"]) == ("torch 2.9.0", "known_issue:torch-scan-drops-carry-cotangent")
    assert old["raw_status"] == "grad_mismatch" and "fwd_bwd" not in old
    for driver in ("torch_xla_loop", "torch_xla_scan_cached"):
        row = rows[(driver, "xla")]
        assert row["status"] == "ok" and row["fwd_bwd"]["median_ms"] > 0, row.get("report")
        assert row["environment"]["versions"]["torch_xla"] == "2.9.0"
    lines = proc.stdout.splitlines()
    scan_rows = [i for i, line in enumerate(lines) if line.startswith("decay") and " torch_scan " in line]
    assert len(scan_rows) == 2 and scan_rows[1] == scan_rows[0] + 1, proc.stdout  # adjacent in the table
    assert "torch 2.13.0" in lines[scan_rows[0]] and "torch 2.9.0" in lines[scan_rows[1]]
