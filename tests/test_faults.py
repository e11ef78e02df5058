"""Faults of the parent process (rnnbench.processes.parent, rnnbench.cli.main): a signal to the parent
alone, SIGKILL, an uncaught exception, a closed stdout. Each leaves no worker or worker descendant
running, no temporary file behind (after SIGKILL: once the next run started), keeps every record
finished before the fault as a complete line, and says at most one line on stderr.

Every run here is a real `rnnbench` process with a unique marker in its environment, so every
process it starts (the worker, its guard, the child the faulty driver starts) can be found in
/proc/<pid>/environ; TMPDIR is a fresh directory per test."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from rnnbench import cli
from rnnbench.cli import list as cli_list

PLUGIN_DIR = Path(__file__).parent / "plugins"
HANG_ON_RNN = "faulty_hang_with_child_on_rnn"  # decay finishes, rnn starts a child and hangs
HANG_HOLDING_GIL = "faulty_hang_holding_gil_on_rnn"  # the same, hanging in C code that holds the GIL
HANG_AT_3 = "faulty_hang_with_child_at_length_3"  # fuzz body 3 (3 steps) hangs; bodies 0-2 finish
RUN = (
    "run",
    "--models",
    "decay,rnn",
    "--drivers",
    HANG_ON_RNN,
    "--environments",
    "main",
    "--no-time",
    "--timeout",
    "60",
    "--out",
    "r.jsonl",
)
FUZZ = ("fuzz", "--cases", "4", "--drivers", HANG_AT_3, "--no-second-order", "--losses", "weighted", "--timeout", "60")
GONE_WITHIN_S = 5.0


@dataclass
class Run:
    proc: subprocess.Popen
    marker: str
    dir: Path

    @property
    def tmpdir(self) -> Path:
        return self.dir / "tmp"

    @property
    def out(self) -> Path:
        return self.dir / "r.jsonl"


def _default_signals(ignored: tuple[signal.Signals, ...]) -> Callable[[], None]:
    """For the child: the signals these tests send at their default disposition, whatever the test
    runner inherited (under `nohup` SIGHUP is ignored, and rnnbench keeps an ignored signal ignored),
    except those in `ignored`."""

    def set_dispositions() -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN if sig in ignored else signal.SIG_DFL)

    return set_dispositions


def start(
    tmp_path: Path, *args: str, stdout=subprocess.PIPE, ignored: tuple[signal.Signals, ...] = (), **extra_env: str
) -> Run:
    marker = uuid.uuid4().hex
    (tmp_path / "tmp").mkdir(exist_ok=True)
    (tmp_path / "sentinel").mkdir(exist_ok=True)
    env = {
        **os.environ,
        "RNNBENCH_PLUGINS": "rnnbench_faulty",
        "TMPDIR": str(tmp_path / "tmp"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(PLUGIN_DIR), os.environ.get("PYTHONPATH")])),
        "RNNBENCH_TEST_MARKER": marker,
        "RNNBENCH_FAULTY_SENTINEL": str(tmp_path / "sentinel"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        **extra_env,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "rnnbench.cli", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
        preexec_fn=_default_signals(ignored),
    )
    return Run(proc, marker, tmp_path)


def marked(marker: str, variable: str = "RNNBENCH_TEST_MARKER") -> list[int]:
    """Live processes with `variable`=marker in their environment (zombies have none)."""
    needle = f"{variable}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def gone_after(marker: str) -> float:
    """Seconds until no process carries the marker (fails after GONE_WITHIN_S)."""
    begin = time.monotonic()
    while marked(marker):
        assert time.monotonic() - begin < GONE_WITHIN_S, f"still running: {marked(marker)}"
        time.sleep(0.02)
    return time.monotonic() - begin


def hanging(run: Run, timeout_s: float = 60.0) -> tuple[int, int]:
    """Wait until the worker hangs with its child: (worker pid, child pid)."""
    deadline = time.monotonic() + timeout_s
    while not list((run.dir / "sentinel").glob("hanging-*")):
        assert run.proc.poll() is None, run.proc.communicate()
        assert time.monotonic() < deadline, "the worker never reached the hanging row"
        time.sleep(0.02)
    worker, child = map(int, next((run.dir / "sentinel").glob("hanging-*")).read_text().split())
    assert {worker, child} <= set(marked(run.marker))
    return worker, child


def finish(run: Run, timeout_s: float = 30.0) -> tuple[int, list[str]]:
    """Exit code and stderr's lines (a fuzz run's progress segments, \\r-separated, left out)."""
    _, err = run.proc.communicate(timeout=timeout_s)
    text = err.decode()
    assert "Traceback" not in text, text
    lines = [
        seg for seg in re.split(r"[\r\n]", text) if seg.strip() and not re.search(r": case \d+/\d+ \(\d+ s\)", seg)
    ]
    return run.proc.returncode, lines


def rnnbench_temp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("rnnbench"))


def assert_records_kept(run: Run) -> None:
    data = run.out.read_bytes()
    assert data.endswith(b"\n")
    rows = [json.loads(line) for line in data.splitlines()]
    assert [(r["model"], r["status"]) for r in rows] == [("decay", "ok")]  # finished before the fault, and only it


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_signal_to_the_run_alone(tmp_path: Path, sig: signal.Signals) -> None:
    run = start(tmp_path, *RUN)
    hanging(run)
    os.kill(run.proc.pid, sig)
    code, lines = finish(run)
    assert code == 128 + sig
    assert lines == [
        f"rnnbench: interrupted by {sig.name}; 1 record kept in r.jsonl; continue with --resume --out r.jsonl"
    ]
    gone_after(run.marker)
    assert_records_kept(run)
    assert rnnbench_temp_files(run.tmpdir) == []


def test_a_hangup_under_nohup_does_not_stop_the_run(tmp_path: Path) -> None:
    """SIGHUP ignored by whoever started rnnbench (nohup) stays ignored: the run goes on; SIGTERM
    still ends it the usual way."""
    run = start(tmp_path, *RUN, ignored=(signal.SIGHUP,))
    hanging(run)
    os.kill(run.proc.pid, signal.SIGHUP)
    time.sleep(1.0)
    assert run.proc.poll() is None, "a hangup stopped a run started under nohup"
    os.kill(run.proc.pid, signal.SIGTERM)
    code, _ = finish(run)
    assert code == 128 + signal.SIGTERM
    gone_after(run.marker)
    assert_records_kept(run)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_signal_to_the_fuzzer_alone(tmp_path: Path, sig: signal.Signals) -> None:
    run = start(tmp_path, *FUZZ)
    hanging(run)
    os.kill(run.proc.pid, sig)
    code, lines = finish(run)
    assert code == 128 + sig
    (line,) = lines
    match = re.fullmatch(
        rf"rnnbench: interrupted by {sig.name}(?:; (\d+) records? kept in (\S+); "
        r"continue with --resume --out \2)?",
        line,
    )
    assert match, line
    if match.group(2):  # the fuzzer's results file: bodies 0-2 finished before body 3 hung
        data = (tmp_path / match.group(2)).read_bytes()
        assert data.endswith(b"\n") and len([json.loads(x) for x in data.splitlines()]) == int(match.group(1)) == 3
    gone_after(run.marker)
    assert rnnbench_temp_files(run.tmpdir) == []


def test_sigkill_of_the_run(tmp_path: Path) -> None:
    """The worker hangs holding the GIL (its watchdog thread cannot run): the kernel's death signal
    ends it, its guard process ends its child."""
    run = start(tmp_path, *[HANG_HOLDING_GIL if a == HANG_ON_RNN else a for a in RUN])
    hanging(run)
    os.kill(run.proc.pid, signal.SIGKILL)
    assert run.proc.wait(10) == -signal.SIGKILL
    gone_after(run.marker)
    assert_records_kept(run)
    (left,) = rnnbench_temp_files(run.tmpdir)  # no chance to clean up ...
    assert left.startswith(f"rnnbench-run-{run.proc.pid}-")
    after = start(
        tmp_path,
        "run",
        "--models",
        "decay",
        "--drivers",
        "torch_loop",
        "--environments",
        "main",
        "--no-time",
        "--out",
        "next.jsonl",
    )
    code, _ = finish(after)
    assert code == 0
    assert rnnbench_temp_files(run.tmpdir) == []  # ... the next run removed it


def test_uncaught_exception_in_the_parent(tmp_path: Path) -> None:
    run = start(tmp_path, *RUN, RNNBENCH_FAULTY_PARENT_RAISES="1")
    code, lines = finish(run)
    assert code == 1
    (line,) = lines
    match = re.fullmatch(r"rnnbench: internal error: RuntimeError: planted parent bug \(full traceback: (.+)\)", line)
    assert match, line
    saved = Path(match.group(1))
    assert saved.parent == tmp_path / "cache" / "rnnbench" / "tracebacks"
    assert "Traceback" in saved.read_text() and "planted parent bug" in saved.read_text()
    gone_after(run.marker)
    assert_records_kept(run)
    assert rnnbench_temp_files(run.tmpdir) == []


def test_closed_stdout_during_a_run(tmp_path: Path) -> None:
    run = start(tmp_path, *RUN)
    hanging(run)
    run.proc.stdout.close()  # as `rnnbench run ... | head -1` does once it has its line
    code, lines = finish(run)
    assert code == 128 + signal.SIGPIPE
    assert lines == ["rnnbench: output closed; 1 record kept in r.jsonl; continue with --resume --out r.jsonl"]
    gone_after(run.marker)
    assert_records_kept(run)
    assert rnnbench_temp_files(run.tmpdir) == []


@pytest.mark.parametrize("command", ["list", "table"])
def test_closed_stdout_of_a_listing(tmp_path: Path, command: str) -> None:
    rec = {"model": "rnn", "driver": "torch_loop", "dtype": "float32", "status": "ok"}
    (tmp_path / "r.jsonl").write_text(json.dumps(rec) + "\n")
    read_end, write_end = os.pipe()
    os.close(read_end)  # `rnnbench list | head` after head left
    run = start(tmp_path, *(["list"] if command == "list" else ["table", "r.jsonl"]), stdout=write_end)
    os.close(write_end)
    code, lines = finish(run)
    assert code == 128 + signal.SIGPIPE and lines == []


# The watcher's wake-up lands at whichever instruction the main thread is at: here, inside the results
# file's read, as a loaded machine once timed it. The process holds its stdout pipe's read end itself and
# lets it go from within the read, so the watcher can only fire there.
_CLOSED_DURING_READ = """
import os, signal, sys, time
from pathlib import Path
from rnnbench import cli
# as a terminal starts it: a runner that started this test ignoring SIGINT (a background job) would
# pass that on, and rnnbench keeps an ignored SIGINT ignored, which leaves the watcher nothing to wake it
signal.signal(signal.SIGINT, signal.default_int_handler)
reader, writer = os.pipe()
os.dup2(writer, 1)
os.close(writer)
def read_bytes(self):
    os.close(reader)  # stdout's reader goes away while the file is read
    time.sleep(60)  # the watcher's wake-up lands here
Path.read_bytes = read_bytes
sys.exit(cli.main(["table", sys.argv[1]]))
"""


def test_a_closed_stdout_met_while_reading_a_results_file_is_141(tmp_path: Path) -> None:
    """It was exit 2, "cannot read results file ...: stdout was closed": the exception was an OSError,
    which the read's own error handling took for its own."""
    rec = {"model": "rnn", "driver": "torch_loop", "dtype": "float32", "status": "ok"}
    (tmp_path / "r.jsonl").write_text(json.dumps(rec) + "\n")
    proc = subprocess.run(
        [sys.executable, "-c", _CLOSED_DURING_READ, str(tmp_path / "r.jsonl")],
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    assert (proc.returncode, proc.stderr) == (128 + signal.SIGPIPE, "")


# In-process: main()'s error boundary, without a worker.


def test_main_restores_signal_handlers(capsys) -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    assert cli.main(["list"]) == 0
    assert {s: signal.getsignal(s) for s in before} == before


def test_internal_error_is_one_line_exit_1_with_the_traceback_saved(tmp_path: Path, monkeypatch, capsys) -> None:
    def broken(args):
        raise ValueError("not a user's mistake\nsecond line")

    monkeypatch.setattr(cli_list, "run", broken)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cli.main(["list"]) == 1
    err = capsys.readouterr().err
    (line,) = err.splitlines()
    assert line.startswith("rnnbench: internal error: ValueError: not a user's mistake (full traceback: ")
    (saved,) = (tmp_path / "rnnbench" / "tracebacks").iterdir()
    assert line.endswith(f"{saved})") and "second line" in saved.read_text() and "in broken" in saved.read_text()


def test_two_internal_errors_in_one_second_keep_two_traceback_files(tmp_path: Path, monkeypatch, capsys) -> None:
    """The file's name is the second and the pid: a second error of the same process in the same
    second (main() called twice by a library user or a test) takes the next free name rather than
    failing to save, and the names sort in the order written (the newest 50 are kept by name)."""
    messages = iter(["first bug", "second bug"])

    def broken(args):
        raise ValueError(next(messages))

    one_second = time.localtime()
    real_strftime = time.strftime
    monkeypatch.setattr(time, "strftime", lambda fmt, t=None: real_strftime(fmt, one_second))
    monkeypatch.setattr(cli_list, "run", broken)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cli.main(["list"]) == 1 and cli.main(["list"]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and all("(full traceback: " in line for line in lines), lines
    saved = sorted((tmp_path / "rnnbench" / "tracebacks").iterdir())
    assert [line.endswith(f"{path})") for line, path in zip(lines, saved)] == [True, True], (lines, saved)
    assert ["first bug" in saved[0].read_text(), "second bug" in saved[1].read_text()] == [True, True]


def test_internal_error_prints_the_traceback_where_it_cannot_be_saved(tmp_path: Path, monkeypatch, capsys) -> None:
    def broken(args):
        raise RuntimeError("bug")

    monkeypatch.setattr(cli_list, "run", broken)
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))  # not a directory
    assert cli.main(["list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rnnbench: internal error: RuntimeError: bug (could not save the traceback")
    assert "Traceback (most recent call last)" in err and "in broken" in err


def test_input_error_is_exit_2(capsys) -> None:
    assert cli.main(["table", "/nonexistent/r.jsonl"]) == 2
    assert capsys.readouterr().err.startswith("rnnbench: error: ")


def test_a_run_started_with_stdout_closed_records_its_rows(tmp_path: Path) -> None:
    """`rnnbench run ... >&-` (a daemon or CI step without a console): nothing is written to the
    console, nothing breaks, the rows are recorded and the exit code is the run's."""
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "TMPDIR": str(tmp_path / "tmp")}
    proc = subprocess.run(
        [
            "sh",
            "-c",
            'exec "$@" >&-',
            "sh",
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
            "--no-time",
            "--out",
            "r.jsonl",
        ],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    rows = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert [(r["model"], r["driver"], r["status"]) for r in rows] == [("decay", "torch_loop", "ok")]
