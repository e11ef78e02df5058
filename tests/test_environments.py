"""One report across environments: torch 2.13.0 (main) and torch 2.9.0 + torch_xla (xla) rows in
one results file and one table, and what a run says when the torch_xla environment is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rnnbench.machine import env_create, environments


def rnnbench(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rnnbench.cli", *args],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **(env or {})},
    )


def test_missing_xla_environment_rows_say_how_to_create_it(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    proc = rnnbench(
        "run",
        "--models",
        "decay",
        "--drivers",
        "torch_xla_scan,torch_loop",
        "--environments",
        "xla",
        "--no-time",
        "--out",
        str(out),
        env={environments.XLA_PYTHON_VAR: str(tmp_path / "no" / "python")},
    )
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
    proc = rnnbench(
        "run",
        "--models",
        "decay",
        "--drivers",
        "torch_scan,torch_xla_loop,torch_xla_scan_cached",
        "--budget",
        "0.05",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr  # a known issue does not fail the run
    rows = {(r["driver"], r["environment_name"]): r for r in map(json.loads, out.read_text().splitlines())}
    assert set(rows) == {
        ("torch_scan", "main"),
        ("torch_scan", "xla"),
        ("torch_xla_loop", "xla"),
        ("torch_xla_scan_cached", "xla"),
    }
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


# --- environments as data (src/rnnbench/environments.toml, [environments.<name>] in a config) ---


def test_the_builtin_definitions_name_main_xla_and_the_version_matrix() -> None:
    envs = environments.environments()
    assert envs["main"].default and not envs["main"].creatable  # the running interpreter
    assert envs["xla"].default and envs["xla"].variables == {"PJRT_DEVICE": "CPU"}
    matrix = [e for e in envs.values() if not e.default]
    torch_versions = {r.split("==")[1] for e in matrix for r in e.requirements if r.startswith("torch==")}
    jax_versions = {r.split("==")[1] for e in matrix for r in e.requirements if r.startswith("jax[cpu]==")}
    # with main (2.13.0 / 0.10.2) and xla (torch 2.9.0): at least three versions of each framework
    assert len(torch_versions | {"2.13.0", "2.9.0"}) >= 3 and len(jax_versions | {"0.10.2"}) >= 3
    for env in matrix:  # every pin exact: a row records the versions it ran on, and they are these
        assert all("==" in r for r in env.requirements), env.requirements


def test_a_default_environment_runs_its_named_drivers_a_matrix_one_every_driver_of_its_frameworks() -> None:
    from rnnbench import registry

    torch_matrix = next(n for n, e in environments.environments().items() if not e.default and "torch" in e.packages())
    jax_matrix = next(n for n, e in environments.environments().items() if not e.default and "flax" in e.packages())
    for driver in registry.drivers().values():
        packages = set(driver.framework.packages) - {"numpy"}
        assert environments.runs(driver, "main") == ("main" in driver.environments)
        assert environments.runs(driver, "xla") == ("xla" in driver.environments)
        assert environments.runs(driver, torch_matrix) == (packages == {"torch"})
        assert environments.runs(driver, jax_matrix) == (packages <= {"jax", "jaxlib", "flax"})


def test_pip_sources_become_uv_flags(monkeypatch) -> None:
    out = (
        "global.extra-index-url='file:///a/simple file:///b/simple'\nglobal.find-links='/w'\n"
        ":env:.find-links='/w'\nglobal.constraint='/nonexistent/c.txt'\n"
    )
    monkeypatch.setattr(
        env_create.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=out, stderr="")
    )
    flags = env_create.pip_sources()
    assert flags == [
        "--extra-index-url",
        "file:///a/simple",
        "--extra-index-url",
        "file:///b/simple",
        "--find-links",
        "/w",
        "--index-strategy",
        "unsafe-best-match",
    ]  # a missing constraint file is left out


def _config_env(tmp_path: Path, name: str, requirements: list[str]) -> Path:
    config = tmp_path / "c.toml"
    config.write_text(f"[environments.{name}]\nrequirements = {json.dumps(requirements)}\n")
    return config


def test_a_config_defines_an_environment_that_is_created_on_first_use_and_reused(tmp_path: Path) -> None:
    """The pins of the main environment's jax (fast to install from the package cache): created
    with uv into the cache, rows record the versions the worker found there, a second run reuses it."""
    pins = [r for r in environments.get("main").requirements if r.split("==")[0] in ("jax[cpu]", "jaxlib", "numpy")]
    config = _config_env(tmp_path, "jax-only", pins)
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    out = tmp_path / "r.jsonl"
    proc = rnnbench(
        "run",
        "--config",
        str(config),
        "--models",
        "decay",
        "--drivers",
        "jax_lax_scan,flax_scan,torch_loop",
        "--no-time",
        "--out",
        str(out),
        env=cache,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "creating environment jax-only" in proc.stdout
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    # flax and torch are not pinned there: only the jax driver has a row in it
    assert [(r["driver"], r["environment_name"], r["status"]) for r in rows] == [("jax_lax_scan", "jax-only", "ok")]
    versions = rows[0]["environment"]["versions"]
    assert versions["jax"] == next(r for r in pins if r.startswith("jax[")).split("==")[1]
    assert "torch" not in versions and "flax" not in versions
    (prefix,) = (tmp_path / "cache" / "rnnbench" / "envs").glob("jax-only-*/")
    assert (prefix / environments.COMPLETE_MARK).is_file()
    again = rnnbench(
        "run",
        "--config",
        str(config),
        "--models",
        "decay",
        "--drivers",
        "jax_lax_scan",
        "--no-time",
        "--out",
        str(tmp_path / "r2.jsonl"),
        env=cache,
    )
    assert again.returncode == 0 and "creating environment" not in again.stdout, again.stdout + again.stderr


def test_a_creation_cut_short_is_missing_and_built_again(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    environments.add_definitions({"cut": {"requirements": ["numpy==2.4.6"]}}, "test")
    try:
        env = environments.get("cut")
        (env.prefix / "bin").mkdir(parents=True)
        Path(env.python).symlink_to(sys.executable)
        (env.prefix / ".rnnbench-partial").touch()  # what create leaves until its last step
        assert env.missing_reason() is not None
        (env.prefix / ".rnnbench-partial").unlink()
        (env.prefix / environments.COMPLETE_MARK).write_text(json.dumps({"requirements": ["numpy==2.4.5"]}))
        assert env.missing_reason() is not None  # made from other pins: stale
        made = {"requirements": ["numpy==2.4.6"], "rnnbench_dependencies": ["numpy"]}
        (env.prefix / environments.COMPLETE_MARK).write_text(json.dumps(made))
        assert env.missing_reason() is not None  # made with other rnnbench dependencies: stale
        made["rnnbench_dependencies"] = list(environments.rnnbench_dependencies())
        (env.prefix / environments.COMPLETE_MARK).write_text(json.dumps(made))
        assert env.missing_reason() is not None  # built by an older recipe: stale
        made["recipe"] = environments.RECIPE
        (env.prefix / environments.COMPLETE_MARK).write_text(json.dumps(made))
        assert env.missing_reason() is None
    finally:
        environments._EXTRA.pop("cut", None)
        monkeypatch.delenv(environments.DEFINITIONS_VAR, raising=False)


@pytest.mark.parametrize(
    "argv, words",
    [
        (["env", "create", "nosuch"], "unknown environment 'nosuch'"),
        (["env", "create"], "names nothing"),
        (["env", "frobnicate"], "invalid choice"),
        (["versions", "--environments", "nosuch"], "unknown environment 'nosuch'"),
        (["versions", "--from", "/nonexistent.jsonl"], "does not exist"),
    ],
)
def test_env_and_versions_bad_input_is_one_line_exit_2(argv: list[str], words: str) -> None:
    proc = rnnbench(*argv)
    assert proc.returncode == 2 and words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_env_list_names_every_environment() -> None:
    proc = rnnbench("env", "list")
    assert proc.returncode == 0, proc.stderr
    for name in environments.environments():
        assert any(line.startswith(name + " ") for line in proc.stdout.splitlines()), proc.stdout
