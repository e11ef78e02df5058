"""The CI recipe (docs/ci.md): `compare --format github` and its exit codes, where a slower row's
time went (rnnbench.rows.profile, rnnbench.report.compare.profile_diff), and the recipe's steps
(docs/ci/rnnbench-ci.sh) run end to end with GitHub's environment variables set, on a scratch
repository whose two commits differ by a plant (tests/plugins/rnnbench_ci_plant.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rnnbench import record_fields, registry
from rnnbench.cli import main
from rnnbench.report.compare import profile_diff
from rnnbench.report.compare.format import GITHUB_MARKER, as_github, where_time_went
from rnnbench.report.compare.pairs import NOTHING_MEASURED, compare
from rnnbench.rows import row as row_module
from rnnbench.rows.profile import least
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


def test_profile_difference_orders_by_change_within_each_view() -> None:
    base = {"ops": {"aten::mm": 0.1, "aten::tanh": 0.2, "aten::add": 0.05}, "python": {"f": 1.0}, "hlo": {"flops": 10}}
    new = {"ops": {"aten::mm": 1.1, "aten::tanh": 0.15, "aten::add": 0.05, "aten::cat": 0.3}, "python": {"f": 1.0}}
    found = profile_diff.changes(base, new)
    assert [(c.view, c.name) for c in found] == [("ops", "aten::mm"), ("ops", "aten::cat"), ("ops", "aten::tanh")]
    assert found[0].ratio == pytest.approx(11.0) and found[1].ratio is None  # new on this side: no ratio
    assert "ops aten::mm: 0.1 -> 1.1 (+1 (11.00x))" == profile_diff.lines(found)[0]


def test_a_profile_entry_keeps_its_least_value_over_passes() -> None:
    """Other work only adds to an entry: a pass preempted once does not move it."""
    assert least([{"mm": 1.0, "tanh": 0.2}, {"mm": 9.0, "tanh": 0.1}, {"mm": 1.1}]) == {"mm": 1.0, "tanh": 0.0}


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


# --- the workflow file: valid against GitHub's workflow schema, and it runs the one script ----------


def test_the_workflow_is_a_valid_github_workflow_that_runs_the_script(tmp_path: Path) -> None:
    """check-jsonschema's vendored GitHub workflow schema (requirements/dev.txt pins it): a misspelt key
    (`runs_on`) fails it, so the check can fail."""
    pytest.importorskip("check_jsonschema", reason="check-jsonschema is not installed (requirements/dev.txt)")

    def check(path: Path) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(path)]
        return subprocess.run(command, capture_output=True, text=True, timeout=120)

    ok = check(WORKFLOW)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    text = WORKFLOW.read_text()
    assert "bash docs/ci/rnnbench-ci.sh" in text and "pull_request:" in text  # one copy of the steps
    assert GITHUB_MARKER in text  # the comment step finds its earlier comment by the body's marker
    broken = tmp_path / "broken.yml"
    broken.write_text(text.replace("runs-on:", "runs_on:"))
    assert check(broken).returncode != 0


# --- the recipe's steps end to end, with GitHub's variables set --------------------------------------

PLUGIN = Path("tests/plugins/rnnbench_ci_plant.py")
SCRATCH_PARTS = ("src", "models", "tests", "docs/ci", "pyproject.toml")


def _git(repo: Path, *args: str) -> str:
    command = ["git", "-C", str(repo), "-c", "user.email=ci@example.invalid", "-c", "user.name=ci", *args]
    return subprocess.run(command, check=True, capture_output=True, text=True, timeout=120).stdout.strip()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> tuple[Path, str]:
    """A scratch repository of this tree's code (the parts the recipe runs), one commit: the base."""
    repo = tmp_path_factory.mktemp("scratch")
    for part in SCRATCH_PARTS:
        source = ROOT / part
        if source.is_dir():
            shutil.copytree(source, repo / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "data"))
        else:
            (repo / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / part)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    return repo, _git(repo, "rev-parse", "HEAD")


def _pull_request(repo: Path, base: str, plant: str) -> str:
    """A branch off the base whose one commit plants `plant` (PLANT's default in the plugin)."""
    _git(repo, "checkout", "-q", "-B", f"pr-{plant or 'none'}", base)
    path = repo / PLUGIN
    path.write_text(path.read_text().replace('PLANT = ""', f'PLANT = "{plant}"', 1))
    _git(repo, "commit", "-q", "--allow-empty", "-am", f"plant {plant!r}")
    return _git(repo, "rev-parse", "HEAD")


def _inherited(name: str) -> bool:
    """A variable of this test process that a CI job would not have: this tree's PYTHONPATH, the plant's,
    and pytest-xdist's worker variables (pytest-benchmark times nothing on a worker)."""
    return name in ("PYTHONPATH", "RNNBENCH_CI_PLANT", "RNNBENCH_PLUGINS") or name.startswith("PYTEST_")


def _recipe(repo: Path, tmp: Path, base: str, head: str, **env: str) -> tuple[int, str, str, str]:
    """Run docs/ci/rnnbench-ci.sh as a pull_request job would: (exit code, job summary as GitHub got
    it, summary.md, comment.md)."""
    event = tmp / "event.json"
    event.write_text(
        json.dumps(
            {
                "action": "synchronize",
                "number": 7,
                "pull_request": {
                    "number": 7,
                    "base": {"sha": base, "ref": "main"},
                    "head": {"sha": head, "ref": "feature"},
                },
            }
        )
    )
    summary = tmp / "step-summary.md"
    summary.write_text("earlier step\n")
    out = tmp / "ci"
    variables = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_BASE_REF": "main",
        "GITHUB_HEAD_REF": "feature",
        "GITHUB_REPOSITORY": "example/rnnbench",
        "RNNBENCH_PLUGINS": "rnnbench_ci_plant",
        "RNNBENCH_CI_PYTHON": sys.executable,
        "RNNBENCH_CI_OUT": str(out),
        "RNNBENCH_CI_SELECT": "rnn and ci_plant",
        **env,
    }
    clean = {k: v for k, v in os.environ.items() if not _inherited(k)}
    proc = subprocess.run(
        ["bash", str(repo / "docs/ci/rnnbench-ci.sh")],
        cwd=repo,
        env={**clean, **variables},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.stderr.strip().splitlines()[-1].startswith("rnnbench-ci:"), proc.stderr
    return proc.returncode, summary.read_text(), (out / "summary.md").read_text(), (out / "comment.md").read_text()


def test_recipe_slowdown_exit_1(scratch, tmp_path: Path) -> None:
    repo, base = scratch
    head = _pull_request(repo, base, "slow")
    cache = tmp_path / "baseline"
    # CPU time and --threshold 100%: the plant multiplies the row's time several times; a shared machine moves
    # a pytest-benchmark process's wall time by more than that between runs (its runs disagree: noisy), as
    # docs/ci.md says; the row runs on one torch thread, so its CPU time is its own
    settings = {
        "RNNBENCH_CI_BASELINE": str(cache),
        "RNNBENCH_CI_COMPARE_ARGS": "--threshold 100%",
        "RNNBENCH_CI_PYTEST_ARGS": "--benchmark-timer=time.process_time",
    }
    code, step_summary, summary, comment = _recipe(repo, tmp_path, base, head, **settings)
    assert code == 1, summary
    assert step_summary == "earlier step\n" + summary  # appended to the job summary, nothing lost
    assert comment.startswith(GITHUB_MARKER + "\n") and summary.startswith(comment)
    assert "FAIL: 1 row(s) slower (exit 1)" in comment and "| **SLOWER** |" in comment, comment
    assert "Gradient checks that failed" not in comment
    went = comment[comment.index("#### Where the time went") :]
    first_op = next(line for line in went.splitlines() if line.startswith("| op "))
    assert "| aten::mm |" in first_op, went  # the planted op tops the difference
    assert f"Base `{base}`, 2 run(s) of the pull request and 2 of the base" in comment
    assert sorted(p.name for p in cache.iterdir()) == ["base-1.json", "base-2.json"]  # the cache filled


def test_recipe_gradient_bug_exit_1(scratch, tmp_path: Path) -> None:
    repo, base = scratch
    head = _pull_request(repo, base, "grad")
    code, _, summary, comment = _recipe(repo, tmp_path, base, head, RNNBENCH_CI_ROUNDS="1")
    assert code == 1, summary
    assert "#### Gradient checks that failed (pytest)" in comment
    assert "FAILED tests/test_benchmarks.py::test_fwd_bwd[rnn-ci_plant]" in comment
    assert "GradientDisagreement: rnn / ci_plant: grad_mismatch" in comment  # the failure's first line, whole


def test_recipe_nothing_measured_exit_3(scratch, tmp_path: Path) -> None:
    repo, base = scratch
    head = _pull_request(repo, base, "")
    code, _, summary, comment = _recipe(
        repo, tmp_path, base, head, RNNBENCH_CI_ROUNDS="1", RNNBENCH_CI_SELECT="no_such_row"
    )
    assert code == NOTHING_MEASURED, summary
    assert "MEASURED NOTHING" in comment and "(exit 3)" in comment


def test_recipe_without_a_base_commit_is_bad_input(scratch, tmp_path: Path) -> None:
    repo, _ = scratch
    code, _ = _recipe_no_event(repo, tmp_path)
    assert code == 2


def _recipe_no_event(repo: Path, tmp: Path) -> tuple[int, str]:
    clean = {k: v for k, v in os.environ.items() if not _inherited(k) and not k.startswith(("GITHUB_", "RNNBENCH_CI_"))}
    proc = subprocess.run(
        ["bash", str(repo / "docs/ci/rnnbench-ci.sh")],
        cwd=repo,
        env={**clean, "RNNBENCH_CI_PYTHON": sys.executable, "RNNBENCH_CI_OUT": str(tmp / "ci")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "no base commit" in proc.stderr, proc.stderr
    return proc.returncode, proc.stderr


def test_compare_commits_profile_asks_each_run_for_profiles(tmp_path: Path, capsys) -> None:
    """`compare --commits A B --profile`: each commit's `rnnbench run` gets `--profile`, a flag."""
    from rnnbench.cli import compare as compare_command
    from rnnbench.cli.main import parser
    from rnnbench.planning.commits import run_arguments

    args = run_arguments({"profile": True, "budget": "0.2"})
    assert args.count("--profile") == 1 and args[args.index("--profile") + 1].startswith("--")
    seen: dict = {}
    rng = np.random.default_rng(7)

    def stand_in(base, new, options, *, rounds, out_dir):
        seen.update(options)
        a = _write(tmp_path / "a.jsonl", [{**_record("torch_loop", timing=_timing(rng, 1.0, 0.01)), "run_id": "a"}])
        b = _write(tmp_path / "b.jsonl", [{**_record("torch_loop", timing=_timing(rng, 1.0, 0.01)), "run_id": "b"}])
        return [a], [b], (base, new)

    parsed = parser().parse_args(["compare", "--commits", "A", "B", "--profile", "--models", "rnn"])
    assert compare_command.run(parsed, run_commits=stand_in) == 0
    assert seen == {"models": "rnn", "profile": True}
    capsys.readouterr()
