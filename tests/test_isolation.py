"""rnnbench.processes.isolation, the one worker-process layer of `run` and `fuzz`: a crash or hang costs
its item only, later items run in a fresh worker, and no worker outlives the call."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from rnnbench.processes.isolation import run_isolated
from rnnbench.status import Status

PLUGINS = Path(__file__).parent / "plugins"


def _run(items, timeout_s=5.0, context=lambda: "ctx", memory_limit_gb=None):
    results, failures, started = {}, {}, []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PLUGINS), os.environ.get("PYTHONPATH")]))}
    run_isolated(
        [sys.executable, "-m", "isolation_worker"],
        items,
        timeout_s,
        on_result=lambda i, r: results.__setitem__(i, r),
        on_failure=lambda i, status, report: failures.__setitem__(i, (status, report)),
        on_start=started.append,
        context=context,
        env=env,
        memory_limit_gb=memory_limit_gb,
    )
    return results, failures, started


def _alive(pids) -> list[int]:
    return [
        p for p in pids if Path(f"/proc/{p}").exists() and "isolation_worker" in Path(f"/proc/{p}/cmdline").read_text()
    ]


def test_each_failure_costs_its_item_only() -> None:
    items = ["a", "segfault", "b", "hang", "c", "sigkill", "raise", "d"]
    results, failures, started = _run(items, timeout_s=3.0)
    assert sorted(results) == [0, 2, 4, 7] and [results[i][0] for i in (0, 2, 4, 7)] == ["a", "b", "c", "d"]
    assert failures[1][0] == Status.CRASH and "SIGSEGV" in failures[1][1]
    assert failures[3][0] == Status.TIMEOUT and "worker killed" in failures[3][1]
    assert failures[5][0] == Status.CRASH and "out-of-memory" in failures[5][1]
    assert failures[6][0] == Status.CRASH and "handler bug" in failures[6][1]  # the traceback, from stderr
    assert started == list(range(len(items)))
    pids = {r[2] for r in results.values()}
    assert len(pids) == 4  # b, c and d each in a fresh worker after a failure
    assert not _alive(pids)


def test_the_memory_limit_binds_the_worker_only() -> None:
    """--memory-limit-gb: the worker sets its own address-space limit before it reads work; an item
    that needs more fails alone, the next one runs in a fresh worker under the same limit."""
    results, failures, _ = _run(["a", "allocate_2gb", "b"], memory_limit_gb=1.0)
    assert failures[1][0] == Status.CRASH and "MemoryError" in failures[1][1]
    assert results[0][0] == "a" and results[2][0] == "b"


def test_context_is_sent_to_every_new_worker() -> None:
    calls = []

    def context():
        calls.append(1)
        return len(calls)

    results, failures, _ = _run(["a", "segfault", "b"], context=context)
    assert results[0][1] == 1 and results[2][1] == 2 and set(failures) == {1}


def test_a_worker_that_cannot_start_is_a_crash_of_its_first_item() -> None:
    failures = {}
    run_isolated(
        [sys.executable, "-c", "import sys; sys.exit(3)"],
        ["x", "y"],
        5.0,
        on_result=lambda i, r: None,
        on_failure=lambda i, s, r: failures.__setitem__(i, (s, r)),
    )
    assert failures[0][0] == Status.CRASH and "exited with code 3" in failures[0][1]
    assert failures[1][0] == Status.CRASH


# A worker whose items start a child that outlives the item ("spawn") or hang with one ("hang").
WORKER = """
import subprocess, sys, time
from rnnbench.processes.isolation import serve

def handle(context, item):
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    if item == "hang":
        time.sleep(3600)
    return item

sys.exit(serve(handle))
"""


def _marked(marker: str) -> list[int]:
    needle = f"RNNBENCH_TEST_MARKER={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and needle in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def _gone(marker: str, within_s: float = 5.0) -> None:
    deadline = time.monotonic() + within_s
    while _marked(marker):
        assert time.monotonic() < deadline, f"still running: {_marked(marker)}"
        time.sleep(0.02)


def _marked_env() -> tuple[str, dict[str, str]]:
    marker = uuid.uuid4().hex
    return marker, {**os.environ, "RNNBENCH_TEST_MARKER": marker}


def test_a_worker_is_ended_with_everything_it_started() -> None:
    marker, env = _marked_env()
    results, failures = {}, {}
    run_isolated(
        [sys.executable, "-c", WORKER],
        ["spawn", "hang", "spawn"],
        3.0,
        on_result=results.__setitem__,
        on_failure=lambda i, s, r: failures.__setitem__(i, s),
        env=env,
    )
    assert results == {0: "spawn", 2: "spawn"} and failures == {1: "timeout"}
    _gone(marker)  # the hanging worker, both workers' children, the guards


def test_a_raising_callback_ends_the_worker_and_its_children() -> None:
    marker, env = _marked_env()

    def on_result(i, result):
        raise RuntimeError("callback bug")

    with pytest.raises(RuntimeError, match="callback bug"):
        run_isolated(
            [sys.executable, "-c", WORKER],
            ["spawn", "hang"],
            30.0,
            on_result=on_result,
            on_failure=lambda i, s, r: None,
            env=env,
        )
    _gone(marker)


def test_the_workers_watchdog_ends_its_group_when_its_parent_goes() -> None:
    """The portable layer alone: a parent without the death signal or the guard (a plain Popen in
    a session of its own) exits; the worker's watchdog kills it and its child."""
    marker, env = _marked_env()
    parent = f"""
import os, pickle, struct, subprocess, sys, time
w = subprocess.Popen([sys.executable, "-c", {WORKER!r}], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     start_new_session=True, env={{**os.environ, "RNNBENCH_PARENT_PID": str(os.getpid())}})
pickle.dump((None, ["hang"]), w.stdin)
w.stdin.close()
(size,) = struct.unpack("<Q", w.stdout.read(8))  # rnnbench.processes.protocol: one length-framed event
assert pickle.loads(w.stdout.read(size))[:2] == ("start", 0)
time.sleep(0.5)  # the child is started
os._exit(0)
"""
    subprocess.run([sys.executable, "-c", parent], env=env, timeout=60, check=True)
    _gone(marker)


# Daemons: a step that double-forks and calls setsid leaves the worker's process group and session.


def _daemons(folder: Path) -> list[int]:
    return [int(p.name.split("-")[1]) for p in folder.glob("daemon-*")]


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed orphan is a zombie until its new parent reaps it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def _none_running(pids: list[int], within_s: float = 5.0) -> None:
    deadline = time.monotonic() + within_s
    while [p for p in pids if _running(p)]:
        assert time.monotonic() < deadline, f"still running: {[p for p in pids if _running(p)]}"
        time.sleep(0.02)


@pytest.mark.parametrize(
    "item, outcome",
    [
        ("daemonize", "result"),
        ("daemonize_then_hang", Status.TIMEOUT),
        ("daemonize_then_segfault", Status.CRASH),
        ("daemonize_then_sigkill", Status.CRASH),
    ],
)
def test_a_daemon_a_row_started_does_not_outlive_its_worker(
    tmp_path: Path, monkeypatch, item: str, outcome: str
) -> None:
    """Whether the row ends with a result, a timeout (the parent stops and kills the worker's
    tree) or the worker's own death (its orphans already gone to init: their token finds them)."""
    monkeypatch.setenv("ISOLATION_DAEMON_DIR", str(tmp_path))
    results, failures, _ = _run([item, "a"], timeout_s=3.0)
    assert (0 in results) if outcome == "result" else failures[0][0] == outcome
    assert results[1][0] == "a"
    daemons = _daemons(tmp_path)
    assert len(daemons) == 1
    _none_running(daemons)


def test_a_daemon_does_not_outlive_a_killed_parent(tmp_path: Path) -> None:
    """SIGKILL of the parent while the row hangs: the worker dies by its death signal at once (its
    orphans go to init), and the guard kills what carries the worker's token."""
    parent = f"""
import os, sys
sys.path.insert(0, {str(PLUGINS)!r})
from rnnbench.processes.isolation import run_isolated
run_isolated([sys.executable, "-m", "isolation_worker"], ["daemonize_then_hang"], 600.0,
             on_result=lambda i, r: None, on_failure=lambda i, s, r: None,
             env={{**os.environ, "PYTHONPATH": {str(PLUGINS)!r}}})
"""
    env = {**os.environ, "ISOLATION_DAEMON_DIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-c", parent], env=env)
    try:
        deadline = time.monotonic() + 120
        while not _daemons(tmp_path):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        proc.kill()
        proc.wait()
    _none_running(_daemons(tmp_path))


def test_the_parent_reads_a_bounded_tail_of_a_worker_s_stderr() -> None:
    """32 MiB of stderr before the worker fails: the report holds the last lines, and the parent's
    memory (Python allocations, traced) stays far below what the worker wrote."""
    import tracemalloc

    tracemalloc.start()
    try:
        _, failures, _ = _run(["stderr_flood", "a"], timeout_s=60.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    status, report = failures[0]
    assert status == Status.CRASH and "the last line" in report and "after the flood" in report
    assert len(report) < 32 * 1024
    assert peak < 4 * 2**20, f"the parent's peak traced memory was {peak / 2**20:.1f} MiB"


# Deadlines: a stopped parent (Ctrl-Z, SIGSTOP) must not turn a finished row into a timeout.
PARENT = f"""
import json, os, sys
from rnnbench.processes.isolation import run_isolated
out = {{}}
run_isolated([sys.executable, "-m", "isolation_worker"], sys.argv[2:], float(sys.argv[1]),
             on_start=lambda i: print("start", i, flush=True),
             on_result=lambda i, r: out.__setitem__(i, "ok"),
             on_failure=lambda i, s, r: out.__setitem__(i, s),
             env={{**os.environ, "PYTHONPATH": {str(PLUGINS)!r}}})
print(json.dumps(out), flush=True)
"""


def _stopped_around_a_row(items: list[str], timeout_s: float, stopped_s: float) -> dict[str, str]:
    """Run items in a parent process; once the last item starts, SIGSTOP the parent for stopped_s."""
    proc = subprocess.Popen([sys.executable, "-c", PARENT, str(timeout_s), *items], stdout=subprocess.PIPE, text=True)
    try:
        while proc.stdout.readline().strip() != f"start {len(items) - 1}":
            assert proc.poll() is None
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(stopped_s)
        os.kill(proc.pid, signal.SIGCONT)
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("item", ["sleep_0.5", "big_0.5", "big_0.25"])
def test_a_row_that_finished_while_the_parent_was_stopped_is_its_result(item: str) -> None:
    """The row ends long before the parent wakes; its result (big_: 64 MiB, more than the pipe
    holds, so the worker is still writing it when the parent wakes) is found before the deadline
    is judged."""
    assert _stopped_around_a_row(["a", item], timeout_s=2.0, stopped_s=5.0) == {"0": "ok", "1": "ok"}


def test_a_row_still_running_past_its_deadline_after_the_stop_times_out() -> None:
    """The deadline runs on the row's clock: the stop does not extend it either."""
    assert _stopped_around_a_row(["a", "sleep_30"], timeout_s=2.0, stopped_s=4.0) == {"0": "ok", "1": "timeout"}


def test_results_written_before_an_interruption_are_kept(tmp_path: Path) -> None:
    """The parent is interrupted while results the worker already wrote wait unread in the pipe
    (a loaded machine, a slow callback): they are delivered before the interruption goes on."""
    flag = tmp_path / "hanging"
    results: dict[int, tuple] = {}

    def slow_then_interrupted(i: int, result: tuple) -> None:
        results[i] = result
        if i == 0:  # the worker goes on meanwhile: writes b and c, then hangs on the last item
            deadline = time.monotonic() + 30
            while not flag.exists():
                assert time.monotonic() < deadline
                time.sleep(0.01)
            raise KeyboardInterrupt

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(PLUGINS), os.environ.get("PYTHONPATH")])),
        "ISOLATION_FLAG": str(flag),
    }
    with pytest.raises(KeyboardInterrupt):
        run_isolated(
            [sys.executable, "-m", "isolation_worker"],
            ["a", "b", "c", "flag_then_hang"],
            30.0,
            on_result=slow_then_interrupted,
            on_failure=lambda i, status, report: pytest.fail(f"item {i}: {status}"),
            env=env,
        )
    assert [results[i][0] for i in sorted(results)] == ["a", "b", "c"]
    assert not _alive({r[2] for r in results.values()})


def test_a_signal_whose_handler_runs_inside_a_deferred_block_is_raised_after_it() -> None:
    """A signal that arrived just before a signals_deferred block has its Python handler run at the
    block's first instruction (the mask cannot hold back what already arrived): the block runs to
    its end (a result read from a worker is written whole), then the interruption is raised."""
    from rnnbench.processes import parent

    ran = []
    with parent.handle_signals():
        with pytest.raises(parent.Interrupted) as caught:
            with parent.signals_deferred():
                parent._on_signal(signal.SIGTERM, None)  # what a handler that ran inside does
                os.kill(os.getpid(), signal.SIGINT)  # arrives within the block: held back by the mask
                ran.append("the rest of the block")
    assert ran == ["the rest of the block"] and caught.value.signum == signal.SIGTERM
