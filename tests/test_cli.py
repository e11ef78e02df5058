"""The command line: bad input is one line on stderr with exit code 2; a real run writes records
and prints the table; a failing row makes the exit code 1."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def rnnbench(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rnnbench.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=600
    )


@pytest.mark.parametrize("args", [["--help"], ["fuzz", "--help"]])
def test_help_names_the_oracle_ladder_not_finite_differences(args: list[str]) -> None:
    """What gradients are compared with, as the help says it: the oracle ladder (finite differences
    are its last rung only, where a step has no derivative)."""
    proc = rnnbench(*args)
    text = " ".join(proc.stdout.split())
    assert proc.returncode == 0, proc.stderr
    assert "vs finite differences" not in text and "float64 finite differences" not in text, text
    assert args != ["--help"] or text.count("oracle ladder") == 2, text  # the description and fuzz's line


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["run", "--models", "nosuch"], "unknown model 'nosuch'"),
        (["run", "--drivers", "nosuch"], "unknown driver 'nosuch'"),
        (["run", "--dtypes", "float8"], "unknown dtype 'float8'"),
        (["run", "--sizes", "T=0"], "must be positive"),
        (["run", "--sizes", "T=-3"], "must be positive"),
        (["run", "--sizes", "T=abc"], "not an integer"),
        (["run", "--sizes", "Q=3"], "not used by any selected model"),
        (["run", "--sizes", "T"], "not KEY=VALUE"),
        (["run", "--device", "tpu"], "unknown device"),
        (["run", "--environments", "nosuch"], "unknown environment 'nosuch'"),
        (["run", "--threads", "0"], "--threads must be a finite number > 0"),
        (["run", "--bogus-flag"], "unrecognized arguments"),
        (["table", "/nonexistent/results.jsonl"], "does not exist"),
        (["run", "--models", "rnn", "--out", "/proc/forbidden/x.jsonl"], "cannot write results file"),
        (["run", "--models", ","], "names nothing"),
        (["sweep", "--dtypes", "float8"], "unknown dtype 'float8'"),
        (["sweep", "--dtype", "float8"], "unknown dtype 'float8'"),  # the old spelling still parses
        (["fuzz", "--dtypes", "bfloat16"], "unknown fuzzing dtype 'bfloat16'"),
        (["fuzz", "--dtype", ","], "names nothing"),
        (["run", "--losses", "weighted,nope"], "unknown loss 'nope'"),
        (["run", "--losses", ","], "selects no loss"),
        (["run", "--order", "3"], "order must be 1, 2 or auto"),
        (["fuzz", "--losses", "model"], "no model loss of its own"),
        (["versions", "--address", "127.0.0.1:1"], "--address needs --executor ray"),
        (["run", "--suite", "nightly"], "unknown suite 'nightly'; known: quick, core, bugs, all, realistic, gpu"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], words: str) -> None:
    proc = rnnbench(*args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rnnbench: error:"), proc.stderr
    assert words in lines[0]
    assert "Traceback" not in proc.stderr


def test_corrupt_results_file_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    good = '{"model": "rnn", "driver": "torch_loop", "dtype": "float32", "status": "ok"}\n'
    bad.write_text(good + "not json\n" + good)
    proc = rnnbench("table", str(bad))
    assert proc.returncode == 2 and "bad.jsonl:2" in proc.stderr and "Traceback" not in proc.stderr


def test_run_writes_records_and_table(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    proc = rnnbench(
        "run",
        "--models",
        "rnn,newton_sqrt",
        "--drivers",
        "torch_loop,jax_lax_scan,torch_nn_rnn",
        "--environments",
        "main",
        "--budget",
        "0.05",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 6
    by_key = {(r["model"], r["driver"]): r for r in records}
    assert by_key[("newton_sqrt", "torch_nn_rnn")]["status"] == "unavailable"
    ok = by_key[("rnn", "torch_nn_rnn")]
    assert ok["status"] == "ok" and ok["fwd_bwd"]["median_ms"] > 0 and ok["fwd_bwd"]["repeats"] >= 5
    assert ok["environment"]["versions"]["torch"].startswith("2.13.0")
    assert ok["max_rel_error"] < ok["tolerance"]
    assert "fwd+bwd ms" in proc.stdout and "rnn" in proc.stdout


def test_timed_out_row_fails_the_run_and_has_no_speed(tmp_path: Path) -> None:
    """A row that is not ok gets no speed number and fails the run: a per-row timeout shorter
    than inductor's compile turns the row into "timeout" (the worker is killed, the run goes on)."""
    out = tmp_path / "r.jsonl"
    proc = rnnbench("run", "--models", "lstm", "--drivers", "torch_loop_compiled", "--timeout", "1", "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rec = json.loads(out.read_text().splitlines()[0])
    assert rec["status"] == "timeout" and "fwd_bwd" not in rec
    assert "timeout" in proc.stdout


def _record(model: str, driver: str, status: str, host: str = "a", **extra) -> dict:
    return {
        "schema": 1,
        "model": model,
        "driver": driver,
        "framework": "torch",
        "environment_name": "main",
        "env_label": "torch 2.13.0",
        "dtype": "float32",
        "device": "cpu",
        "sizes": {"T": 4},
        "seed": 0,
        "status": status,
        "machine": {"hostname": host},
        **extra,
    }


def _table(tmp_path: Path, records: list[dict], *args: str) -> subprocess.CompletedProcess:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return rnnbench("table", str(path), *args)


def test_table_summarizes_unavailable_rows_and_known_issues_in_one_line_each(tmp_path: Path) -> None:
    traceback_report = (
        "known upstream issue some-bug: inductor refuses it (upstream: not known)\n"
        "Traceback (most recent call last):\n  File x\nRuntimeError: long story"
    )
    records = [
        _record("rnn", "torch_loop", "ok", max_rel_error=1e-7),
        *[
            _record(m, "flax_lstm_cell", "unavailable", reason="vendor layer computes lstm only")
            for m in ("rnn", "decay")
        ],
        _record("rnn", "torch_xla_loop", "unavailable", reason="run `make venv-xla`"),
        *[_record(m, "torch_scan_compiled", "known_issue:some-bug", report=traceback_report) for m in ("rnn", "lstm")],
    ]
    proc = _table(tmp_path, records)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "flax_lstm_cell" not in out.split("rows unavailable")[0]  # the table lists rows that ran
    assert "2 rows unavailable: vendor layer computes lstm only (drivers: flax_lstm_cell)" in out
    assert "1 rows unavailable: run `make venv-xla` (drivers: torch_xla_loop)" in out
    assert "Traceback" not in out
    assert "known upstream issue some-bug: inductor refuses it (upstream: not known) -- 2 row(s)" in out
    assert "flax_lstm_cell" in _table(tmp_path, records, "--all").stdout.split("rows unavailable")[0]


def test_a_failure_report_is_printed_in_full(tmp_path: Path) -> None:
    proc = _table(tmp_path, [_record("rnn", "torch_loop", "grad_mismatch", report="!! W_hh mismatch rel err 0.5")])
    assert "== rnn / torch_loop / torch 2.13.0 / float32: grad_mismatch\n!! W_hh mismatch rel err 0.5" in proc.stdout


def test_merged_tables_name_each_rows_own_machine(tmp_path: Path) -> None:
    """Rows are sorted for the table; each keeps the machine of its own record."""
    records = [
        _record("zeta", "torch_loop", "crash", host="host-b"),
        _record("alpha", "torch_loop", "ok", host="host-a"),
        _record("beta", "jax_loop", "unavailable", host="host-c", reason="no jax"),
    ]
    lines = _table(tmp_path, records).stdout.splitlines()
    assert any(line.startswith("host-b") and "zeta" in line and "crash" in line for line in lines), lines
    assert any(line.startswith("host-a") and "alpha" in line and "ok" in line for line in lines), lines


def test_rows_are_labelled_with_their_own_frameworks_version() -> None:
    from importlib.metadata import version

    from rnnbench.rows.row import Job

    label = {d: Job(model="rnn", driver=d).identity()["env_label"] for d in ("jax_lax_scan", "flax_scan", "torch_loop")}
    assert label["jax_lax_scan"] == f"jax {version('jax')}"
    assert label["flax_scan"] == f"flax {version('flax')}"
    assert label["torch_loop"] == f"torch {version('torch').split('+')[0]}"


def _selected(*flags: str) -> set[tuple[str, str, str]]:
    """(model, driver, environment) of every row `rnnbench run FLAGS` would run."""
    from rnnbench.cli import options
    from rnnbench.cli.main import parser
    from rnnbench.planning import plan

    args = parser().parse_args(["run", "--no-time", *flags])
    return {(j.model, j.driver, j.environment) for j in plan.jobs(options.settings(args))}


def test_suites_select_what_they_say() -> None:
    """quick (the default) is its models on every core driver in the main environment; core is every
    core model on the core drivers in the default environments; bugs and all add the bug-class
    models and drivers; an explicit axis overrides the suite's."""
    from rnnbench import registry
    from rnnbench.machine import environments
    from rnnbench.suites import QUICK

    core_drivers = {n for n, d in registry.drivers().items() if d.suite == "core"}
    quick = _selected()
    assert quick == _selected("--suite", "quick")
    assert {m for m, _, _ in quick} == set(QUICK.models) <= set(registry.models())
    assert {d for _, d, _ in quick} == {d for d in core_drivers if environments.runs(registry.get_driver(d), "main")}
    assert {e for _, _, e in quick} == {"main"}
    core = _selected("--suite", "core")
    assert {m for m, _, _ in core} == {n for n, m in registry.models().items() if m.suite == "core"}
    assert {e for _, _, e in core} == set(environments.default_names())
    assert {d for _, d, _ in core} == core_drivers
    every = _selected("--suite", "all")
    assert {m for m, _, _ in every} == set(registry.models()) and {d for _, d, _ in every} == set(registry.drivers())
    assert {m for m, _, _ in _selected("--suite", "bugs")} == {
        n for n, m in registry.models().items() if m.suite == "bugs"
    }
    assert {(m, e) for m, _, e in _selected("--models", "decay", "--environments", "xla")} == {("decay", "xla")}
    # a named driver runs in each of its default environments, whatever the suite's
    assert {e for _, _, e in _selected("--drivers", "torch_loop")} == set(environments.default_names())
    assert {e for _, _, e in _selected("--models", "lstm")} == {"main"}


def _options(p, path: tuple[str, ...] = ()):
    """(command path, action) of every option and positional of `p` and of its subcommands."""
    import argparse

    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                yield (*path, choice.dest), choice
            for name, sub in action.choices.items():
                yield from _options(sub, (*path, name))
        else:
            yield path, action


def test_every_option_of_every_command_has_help() -> None:
    """`rnnbench COMMAND --help` explains every flag and positional it lists (hidden aliases
    excepted), and the top-level help ends with what the exit codes mean, not a pointer into the
    source."""
    import argparse

    from rnnbench.cli.main import COMMANDS, parser

    walked = list(_options(parser()))
    assert {path[0] for path, _ in walked if path} == {c.NAME for c in COMMANDS}
    for path, action in walked:
        if action.help == argparse.SUPPRESS:
            continue
        assert action.help and action.help.strip(), f"rnnbench {' '.join(path)} {action.option_strings or action.dest}"
    text = parser().format_help()
    assert "See main()" not in text and "exit codes:" in text


@pytest.mark.parametrize("module", ["rnnbench", "rnnbench.cli"])
def test_a_bare_call_prints_the_help(module: str) -> None:
    """`rnnbench` (and `python -m rnnbench`) alone is someone asking what it does: the help, exit 0,
    no run started and no results file."""
    proc = subprocess.run([sys.executable, "-m", module], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: rnnbench") and "COMMAND" in proc.stdout
    assert "rows ->" not in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["run", "--models", "LSTM"], "unknown model 'LSTM' (did you mean 'lstm'?); `rnnbench list` names all"),
        (["run", "--drivers", "Torch_Loop"], "(did you mean 'torch_loop'?)"),
        (["run", "--suite", "Quick"], "(did you mean 'quick'?)"),
        (["run", "--environments", "MAIN"], "(did you mean 'main'?)"),
        (["run", "--dtypes", "Float32"], "(did you mean 'float32'?)"),
        (["bugs", "torch-xla-scan-c"], "(did you mean 'torch-xla-scan-closure-over-tensors'?)"),
        (["bugs", "TORCH-SCAN-DROPS-CARRY-COTANGENT"], "(did you mean 'torch-scan-drops-carry-cotangent'?)"),
        (["env", "create", "Jax-0.8.2"], "(did you mean 'jax-0.8.2'?)"),
    ],
)
def test_every_name_gets_a_suggestion_whatever_its_case(args: list[str], words: str) -> None:
    """A name in another case, a prefix or a typo is one line naming what it may mean (one
    suggestion function, rnnbench.errors.suggestions, for every kind of name), exit 2."""
    proc = rnnbench(*args)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and words in proc.stderr, proc.stderr


def test_suggestions_prefer_case_then_prefix_then_spelling() -> None:
    from rnnbench.errors import suggestions

    known = ["lstm", "lstm2", "rnn", "torch-xla-scan-a", "torch-xla-scan-b"]
    assert suggestions("LSTM", known) == ["lstm"]
    assert suggestions("torch-xla", known) == ["torch-xla-scan-a", "torch-xla-scan-b"]
    assert suggestions("rnm", known) == ["rnn"]
    assert suggestions("x", known) == [] and suggestions("zzzz", known) == []


def _main_drivers() -> list[str]:
    from rnnbench import registry

    return sorted(n for n, d in registry.drivers().items() if "main" in d.environments)


@pytest.mark.parametrize("name", _main_drivers())
def test_a_named_driver_without_its_framework_is_bad_input_naming_the_extra(name: str, monkeypatch) -> None:
    """Every framework alike: a driver named with --drivers whose framework is missing from this
    interpreter is one line naming the package extra to install (no path), exit 2 before any row;
    with only other environments selected it is theirs to decide (their rows say so)."""
    from rnnbench import registry
    from rnnbench.drivers.base import Framework
    from rnnbench.errors import InputError
    from rnnbench.planning import plan

    monkeypatch.setattr(Framework, "available", lambda self: f"python package '{self.module}' is not installed")
    family = registry.get_driver(name).framework.family
    with pytest.raises(InputError, match=rf"install it with `pip install 'rnnbench\[{family}\]'`") as caught:
        plan.check_drivers_runnable([name], ["main"])
    assert "site-packages" not in str(caught.value) and "\n" not in str(caught.value)
    plan.check_drivers_runnable([name], ["xla"])  # not this interpreter: no verdict here


def test_a_plugin_framework_gets_no_extra_of_ours() -> None:
    """The extras install rnnbench's own frameworks only: a plugin's framework is named by its package."""
    import dataclasses

    from rnnbench import registry
    from rnnbench.planning import plan

    own = registry.get_driver("torch_loop").framework
    assert "rnnbench[" in plan.install_hint(own)
    assert plan.install_hint(dataclasses.replace(own, name="plugin_fw", module="plugin_fw")) == "pip"


def test_fuzz_without_any_framework_names_the_extras(monkeypatch, tmp_path: Path, capsys) -> None:
    """No framework installed: `fuzz` is one line naming every extra that installs one, exit 2."""
    from rnnbench.cli.main import main
    from rnnbench.drivers.base import Framework

    monkeypatch.setattr(Framework, "available", lambda self: f"python package '{self.module}' is not installed")
    assert main(["fuzz", "--cases", "1", "--out", str(tmp_path / "f.jsonl")]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and "no driver can fuzz here" in line, line
    assert "`pip install 'rnnbench[jax]'` or `pip install 'rnnbench[torch]'`" in line, line
    assert not (tmp_path / "f.jsonl").exists()


def _list_lines(tmp_path: Path, monkeypatch, capsys, columns: int = 1000) -> list[str]:
    """`rnnbench list`'s lines with no environment but main created (an empty cache, no torch_xla
    interpreter), `columns` wide: wide enough, every entry is one line."""
    from rnnbench.cli.main import main
    from rnnbench.machine import environments

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(environments.XLA_PYTHON_VAR, str(tmp_path / "no-xla" / "bin" / "python"))
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["list"]) == 0
    return capsys.readouterr().out.splitlines()


def _drivers_section(lines: list[str]) -> list[str]:
    start = next(i for i, line in enumerate(lines) if line.startswith("drivers:"))
    end = next((i for i, line in enumerate(lines) if i > start and not line.startswith(" ")), len(lines))
    return lines[start + 1 : end]


def test_list_says_one_line_per_driver_and_how_to_create_each_missing_environment_once(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """Every driver is one line: its name, the environments it runs in (those it cannot run in now
    marked *) and its summary. Each environment not created is said once, below: the command that
    creates it and the interpreter it would be, not under every driver that needs it."""
    from rnnbench import registry
    from rnnbench.cli.list import UNAVAILABLE_MARK
    from rnnbench.machine import environments

    lines = _list_lines(tmp_path, monkeypatch, capsys)
    drivers = registry.drivers()
    section = _drivers_section(lines)
    assert [line.split()[0] for line in section] == list(drivers), section
    envs = environments.environments()
    for line, d in zip(section, drivers.values()):
        shown = line.split()[1].strip("[]").split(",")
        expected = [n + ("" if n == "main" else UNAVAILABLE_MARK) for n in envs if environments.runs(d, n)]
        assert shown == expected and line.endswith(d.summary), (line, expected)
    missing = [env for env in envs.values() if env.name != "main"]
    assert missing and all(env.missing_reason() for env in missing)
    for env in missing:
        said = [line for line in lines if f"`{env.create_command}`" in line]
        assert len(said) == 1 and env.python in said[0] and said[0].split()[0] == env.name, (env.name, said)
    assert not any("unavailable" in line for line in lines), "the old per-driver block"


def test_list_says_a_drivers_own_reason_in_this_interpreter_once(tmp_path: Path, monkeypatch, capsys) -> None:
    """A framework missing from this interpreter marks main on each of its drivers, and each reason
    is one line naming the drivers it stops (not a line under each driver)."""
    from rnnbench import registry
    from rnnbench.cli.list import UNAVAILABLE_MARK
    from rnnbench.drivers.base import Framework

    def available(self: Framework) -> str | None:
        return f"python package '{self.module}' is not installed" if self.family == "jax" else None

    monkeypatch.setattr(Framework, "available", available)
    lines = _list_lines(tmp_path, monkeypatch, capsys)
    jax = [n for n, d in registry.drivers().items() if d.framework.family == "jax" and "main" in d.environments]
    assert jax
    for line in _drivers_section(lines):
        name, shown = line.split()[0], line.split()[1].strip("[]").split(",")
        if "main" in registry.get_driver(name).environments:
            assert shown[0] == ("main" + UNAVAILABLE_MARK if name in jax else "main"), line
    said = [line for line in lines if "is not installed" in line]  # one per reason: jax's, flax's
    assert all(line.startswith("unavailable in main") for line in said), said
    named = [n for line in said for n in line.rsplit(": ", 1)[1].split(", ")]
    assert sorted(named) == sorted(jax), said  # each driver once
