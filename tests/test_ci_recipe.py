"""The CI recipe (docs/ci.md): `compare --format github` and its exit codes, where a slower row's
time went (rnnbench.rows.profile, rnnbench.report.profile_diff), and the recipe's steps
(docs/ci/rnnbench-ci.sh) run end to end with GitHub's environment variables set, on a scratch
repository whose two commits differ by a plant (tests/plugins/rnnbench_ci_plant.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rnnbench import record_fields, registry
from rnnbench.cli import main
from rnnbench.report.compare_format import GITHUB_MARKER, as_github, where_time_went
from rnnbench.report.compare_pairs import NOTHING_MEASURED, compare
from rnnbench.rows import row as row_module
from rnnbench.rows.row import Job, run_row
from rnnbench.rows.timing import TimingConfig
from test_compare import _record, _timing, _write

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "docs" / "ci" / "rnnbench-ci.sh"
WORKFLOW = ROOT / "docs" / "ci" / "github-workflow.yml"


# --- compare --format github: the order of what it says, and the exit codes -------------------------


def test_github_format_says_status_changes_first_then_speed_then_the_noise(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(5)
    base = [
        _record("torch_loop", timing=_timing(rng, 1.0, 0.01)),
        _record("torch_scan", timing=_timing(rng, 1.0, 0.01)),
        _record("jax_loop", timing=_timing(rng, 1.0, 0.40)),  # a wide spread: noisy
        _record("flax_scan", timing=_timing(rng, 1.0, 0.01)),
    ]
    new = [
        _record("torch_loop", "grad_mismatch"),
        _record("torch_scan", timing=_timing(rng, 2.0, 0.01)),  # twice the time: slower
        _record("jax_loop", timing=_timing(rng, 1.1, 0.40)),
        _record("flax_scan", timing=_timing(rng, 1.0, 0.01)),
    ]
    a = _write(tmp_path / "a.jsonl", [{**r, "run_id": "a"} for r in base])
    b = _write(tmp_path / "b.jsonl", [{**r, "run_id": "b"} for r in new])
    assert main(["compare", str(a), str(b), "--format", "github"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(GITHUB_MARKER + "\n")
    assert "FAIL: 1 status regression(s), 1 row(s) slower (exit 1)" in out
    status, speed, noise = (out.index(s) for s in ("#### Status changes", "#### Speed", "**Noise:** 1 row(s) noisy"))
    assert status < speed < noise
    assert "| **REGRESSION** |" in out and "ok -> grad_mismatch" in out
    assert "| **SLOWER** |" in out and "jax_loop" in out[noise:]
    assert "1 the same" in out
    # rows slower without a profile on a side say how to get one
    assert "#### Where the time went" in out and "rnnbench run --profile" in out


def test_nothing_measured_is_its_own_exit_code(tmp_path: Path, capsys) -> None:
    """Every row noisy: exit 3, said as such, in every format; an empty side: exit 3 too, with the
    comment body still written for a CI step."""
    rng = np.random.default_rng(6)
    a = _write(tmp_path / "a.jsonl", [{**_record("jax_loop", timing=_timing(rng, 1.0, 0.4)), "run_id": "a"}])
    b = _write(tmp_path / "b.jsonl", [{**_record("jax_loop", timing=_timing(rng, 1.2, 0.4)), "run_id": "b"}])
    for fmt in ("text", "markdown", "json", "github"):
        assert main(["compare", str(a), str(b), "--format", fmt]) == NOTHING_MEASURED
    out = capsys.readouterr().out
    assert "MEASURED NOTHING" in out and "1 noisy -> exit 3" in out
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"benchmarks": [], "datetime": "2026-12-07T00:00:00"}))
    assert main(["compare", str(a), str(empty), "--format", "github"]) == NOTHING_MEASURED
    captured = capsys.readouterr()
    assert captured.out.startswith(GITHUB_MARKER) and "MEASURED NOTHING" in captured.out
    assert captured.err.startswith("rnnbench: measured nothing:") and str(empty) in captured.err


def test_nothing_measured_code_is_in_the_help_and_the_docs() -> None:
    help_text = " ".join(main_help("compare").split())
    assert f"{NOTHING_MEASURED} measured nothing" in help_text
    docs = (ROOT / "docs" / "ci.md").read_text()
    assert f"| {NOTHING_MEASURED} |" in docs


def main_help(command: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "rnnbench", command, "--help"], capture_output=True, text=True, env=_env(), timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _env(**extra: str) -> dict[str, str]:
    src = str(ROOT / "src")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, *filter(None, [os.environ.get("PYTHONPATH")])]), **extra}


# --- where the time went ---------------------------------------------------------------------------


@pytest.fixture
def plant_registered(monkeypatch):
    """The ci_plant driver in the registry for one test."""
    monkeypatch.setenv("RNNBENCH_PLUGINS", "rnnbench_ci_plant")
    registry.drivers.cache_clear()
    yield
    monkeypatch.undo()
    registry.drivers.cache_clear()


def test_a_planted_slowdown_is_explained_by_the_profile_difference(plant_registered, monkeypatch) -> None:
    """Two runs of one row, the second with extra matrix products in every call: compare decides it
    slower, and the profile difference puts the planted op first (aten::mm in torch's op table,
    torch.mm among Python's functions). The profile runs after both timed loops, never inside one."""
    order: list[str] = []
    measure, profile = row_module.measure, row_module.profile

    def measured(*args, **kwargs):
        order.append("measure")
        assert sys.getprofile() is None  # no profiler hooked into a timed sample
        return measure(*args, **kwargs)

    def profiled(*args, **kwargs):
        order.append("profile")
        return profile(*args, **kwargs)

    monkeypatch.setattr(row_module, "measure", measured)
    monkeypatch.setattr(row_module, "profile", profiled)
    job = Job(model="rnn", driver="ci_plant", timing=TimingConfig(budget_s=0.3), profile=True)
    torch = registry.get_driver("ci_plant").framework
    sides = []
    for plant in ("", "slow"):
        monkeypatch.setenv("RNNBENCH_CI_PLANT", plant)
        with torch.keep_settings():  # one thread, as a worker sets it (rows.worker), put back after
            torch.set_threads(1)
            rec = run_row(job)
        assert rec["status"] == "ok", rec.get("report")
        assert record_fields.problem(json.loads(json.dumps(rec))) is None  # a valid record, profile included
        sides.append([{**rec, "run_id": plant or "base"}])
    assert order == ["measure", "measure", "profile"] * 2
    assert set(sides[0][0]["profile"]) >= {"calls", "python", "ops"}
    result = compare(*sides, 0.1, alpha=0.01)
    (pair,) = result.pairs
    assert pair.verdict == "slower", (pair.notes, {q: t.estimate.ratio for q, t in pair.times.items()})
    found = where_time_went(result, pair)
    assert found, "no profile difference for a slower row with both sides profiled"
    ops = [c for c in found if c.view == "ops"]
    python = [c for c in found if c.view == "python"]
    assert ops[0].name == "aten::mm" and ops[0].delta > 0, [(c.name, c.delta) for c in ops]
    assert python[0].name == "<built-in method torch.mm>" and python[0].delta > 0, [(c.name, c.delta) for c in python]
    body = as_github(result)
    assert "#### Where the time went" in body and "| op (self ms per call) | aten::mm |" in body
