"""`--executor ray` (rnnbench.run.executors) on a real local Ray cluster: the same verdicts as the
local pool for the same rows, records streamed into the file and resumable across executors, a
row's crash and hang, a lost Ray task retried once then recorded, a unit past its deadline,
interrupts (a local instance rnnbench starts and stops; a cluster given by --address, left
running), usage errors.

Most tests share one cluster started here with `ray start --head --block` (its processes carry a
marker of their own in their environment, so the teardown stops that cluster alone: `ray stop`
would stop every cluster on the machine). Runs are real `rnnbench` processes started as
tests/test_faults.py starts them (a unique marker in their environment, which the executor passes
on to the rows' workers on the node, so no worker left behind goes unseen)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed: the --executor ray tests need it (requirements/main.txt)")

from rnnbench import cli  # noqa: E402
from rnnbench.run import executors, timing  # noqa: E402
from test_faults import PLUGIN_DIR, Run, finish, gone_after, hanging, marked, start  # noqa: E402

RAY = str(Path(sys.executable).with_name("ray"))
ROWS = ("--models", "decay,rnn", "--environments", "main", "--no-time", "--threads", "1")
HANG = "faulty_hang_with_child_on_rnn"  # decay finishes, rnn starts a child and hangs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self) -> None:
        self.marker = uuid.uuid4().hex
        self.temp = Path(tempfile.mkdtemp(prefix="rnnbench-test-ray-", dir="/tmp"))  # short: Ray's sockets live here
        port = _free_port()
        self.address = f"127.0.0.1:{port}"
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RNNBENCH_TEST_CLUSTER": self.marker,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(PLUGIN_DIR), os.environ.get("PYTHONPATH")]))}
        self.proc = subprocess.Popen([RAY, "start", "--head", "--block", "--port", str(port), "--node-ip-address",
                                      "127.0.0.1", "--num-cpus", "2", "--temp-dir", str(self.temp),
                                      "--include-dashboard", "false", "--disable-usage-stats"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + 120
        for line in self.proc.stdout:
            if b"Ray runtime started" in line:
                break
            assert time.monotonic() < deadline, "the test cluster did not start"
        else:
            raise AssertionError("ray start ended before the cluster was up")

    def processes(self) -> list[int]:
        needle = f"RNNBENCH_TEST_CLUSTER={self.marker}".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if needle in (entry / "environ").read_bytes():
                        found.append(int(entry.name))
                except OSError:
                    pass
        return found

    def stop(self) -> None:
        """This cluster only: `ray start --block` ends its daemons on SIGTERM; what is left of its
        processes (found by the cluster's marker) is killed."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            pass
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        shutil.rmtree(self.temp, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    try:
        yield c
    finally:
        c.stop()


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def verdicts(recs: list[dict]) -> dict[tuple, str]:
    return {(r["model"], r["driver"], r.get("case")): r["status"] for r in recs}


def ray_leftovers(pid: int) -> list[str]:
    """The private temporary directory of a local Ray instance started by rnnbench process `pid`."""
    return [p.name for root in {tempfile.gettempdir(), "/tmp"} for p in Path(root).glob(f"rnnbench-run-{pid}-*-ray-*")]


# ---------------------------------------------------------------------------------------------
# Usage errors (in-process: no cluster)


@pytest.mark.parametrize("argv, words", [
    (["run", "--address", "127.0.0.1:1"], "--address needs --executor ray"),
    (["fuzz", "--address", "127.0.0.1:1", "--executor", "local"], "--address needs --executor ray"),
    (["sweep", "--executor", "dask"], "invalid choice: 'dask'"),
])
def test_usage_errors(argv: list[str], words: str, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("rnnbench: error: ") and words in line
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize("command", ["run", "fuzz", "sweep"])
def test_ray_missing_is_one_line_exit_2(command: str, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    assert cli.main([command, "--executor", "ray"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("rnnbench: error: --executor ray needs the ray package")
    assert list(tmp_path.iterdir()) == []


def test_cpu_claims_are_distinct_and_released(tmp_path: Path, monkeypatch) -> None:
    """Two concurrent claims on one machine get distinct CPUs; a claim that cannot be met is None
    at once without wait; a released claim is free again."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setattr(timing, "allowed_cpus", lambda: [0, 1, 2, 3])
    monkeypatch.setattr(timing, "_core_of", lambda cpu: (0, cpu))
    with timing.claimed_cpus(1) as a, timing.claimed_cpus(2) as b:
        assert a == [3] and b == [1, 2]
        with timing.claimed_cpus(2, wait=False) as c:
            assert c is None
        with timing.claimed_cpus(1, wait=False) as d:
            assert d == [0]
    with timing.claimed_cpus(4) as e:
        assert e == [0, 1, 2, 3]
    monkeypatch.setenv(timing.CPUS_VAR, "1,2")
    assert timing.choose_cpus(1) == [2] and timing.choose_cpus(4) == [1, 2]  # a worker pins inside its claim


# ---------------------------------------------------------------------------------------------
# The same rows, locally and on Ray


def test_run_same_verdicts_locally_and_on_ray_with_crash_and_hang(tmp_path: Path, cluster: Cluster) -> None:
    args = (*ROWS, "--drivers", "torch_loop,faulty_crash_on_rnn,faulty_hang", "--timeout", "2")
    (tmp_path / "local").mkdir(), (tmp_path / "ray").mkdir()
    local = start(tmp_path / "local", "run", *args, "--out", "r.jsonl")
    on_ray = start(tmp_path / "ray", "run", *args, "--out", "r.jsonl", "--executor", "ray", "--address", cluster.address)
    (code_local, _), (code_ray, lines) = finish(local, 120), finish(on_ray, 120)
    assert code_local == code_ray == 1, lines
    here, there = records(local.out), records(on_ray.out)
    assert verdicts(here) == verdicts(there) == {
        ("decay", "torch_loop", None): "ok", ("rnn", "torch_loop", None): "ok",
        ("decay", "faulty_crash_on_rnn", None): "ok", ("rnn", "faulty_crash_on_rnn", None): "crash",
        ("decay", "faulty_hang", None): "timeout", ("rnn", "faulty_hang", None): "timeout"}
    crash = next(r for r in there if r["status"] == "crash")
    assert "SIGSEGV" in crash["report"]  # the row's worker died on the node: that row's record, made there
    for rec in there:
        assert rec["node"]["ray_node_id"] and rec["node"]["hostname"] == rec["machine"]["hostname"] == socket.gethostname()
        assert rec["node"]["ip"] and rec["fingerprint"] in {r["fingerprint"] for r in here}
        if "cpu" in rec:  # its worker pinned itself to the CPU claimed for its unit on the node
            assert rec["cpu"]["affinity"] == rec["node"]["cpus"] and len(rec["node"]["cpus"]) == 1
    assert all("node" not in rec for rec in here)
    gone_after(on_ray.marker)


def test_fuzz_same_verdicts_locally_and_on_ray(tmp_path: Path, cluster: Cluster) -> None:
    args = ("fuzz", "--cases", "4", "--drivers", "torch_loop,faulty_crash_at_length_3", "--no-second-order",
            "--losses", "weighted", "--timeout", "30", "--out", "r.jsonl")
    (tmp_path / "local").mkdir(), (tmp_path / "ray").mkdir()
    local = start(tmp_path / "local", *args)
    on_ray = start(tmp_path / "ray", *args, "--executor", "ray", "--address", cluster.address)
    (code_local, _), (code_ray, _) = finish(local, 120), finish(on_ray, 120)
    assert code_local == code_ray
    here, there = records(local.out), records(on_ray.out)
    assert verdicts(here) == verdicts(there)
    assert "crash" in verdicts(there).values()
    assert sorted(r["fingerprint"] for r in here) == sorted(r["fingerprint"] for r in there)
    assert all(r["node"]["ray_node_id"] for r in there)


def test_resume_across_executors(tmp_path: Path, cluster: Cluster) -> None:
    """A file begun locally continues on Ray and back: the executor is not part of a row's
    fingerprint, so no row runs twice."""
    first = start(tmp_path, "run", *ROWS, "--drivers", "torch_loop", "--models", "decay", "--out", "r.jsonl")
    assert finish(first, 60)[0] == 0
    on_ray = start(tmp_path, "run", *ROWS, "--drivers", "torch_loop", "--out", "r.jsonl", "--resume",
                   "--executor", "ray", "--address", cluster.address, stdout=subprocess.PIPE)
    out, _ = on_ray.proc.communicate(timeout=120)
    assert on_ray.proc.returncode == 0 and "(1 already done, skipped)" in out.decode()
    again = start(tmp_path, "run", *ROWS, "--drivers", "torch_loop", "--out", "r.jsonl", "--resume")
    out, _ = again.proc.communicate(timeout=60)
    assert again.proc.returncode == 0 and "rnnbench: 0 rows" in out.decode()
    recs = records(tmp_path / "r.jsonl")
    assert [(r["model"], "node" in r) for r in recs] == [("decay", False), ("rnn", True)]


# ---------------------------------------------------------------------------------------------
# Faults of the task and of the parent


def _ray_worker_of(row_worker: int) -> int:
    stat = Path(f"/proc/{row_worker}/stat").read_text()
    return int(stat[stat.rindex(")") + 2:].split()[1])


def test_a_lost_task_is_retried_once_then_its_rows_are_crash_records(tmp_path: Path, cluster: Cluster) -> None:
    run = start(tmp_path, "run", *ROWS, "--drivers", HANG, "--timeout", "120", "--out", "r.jsonl",
                "--executor", "ray", "--address", cluster.address)
    for attempt in (1, 2):  # the task's Ray worker dies twice: Ray retries it once, then gives up
        worker, _child = hanging(run, 120)
        ray_worker = _ray_worker_of(worker)
        assert ray_worker in cluster.processes()
        os.kill(ray_worker, signal.SIGKILL)
        (tmp_path / "sentinel" / f"hanging-{worker}").rename(tmp_path / f"attempt-{attempt}")
    code, lines = finish(run, 120)
    assert code == 1, lines
    recs = records(run.out)
    assert [(r["model"], r["status"]) for r in recs] == [("decay", "crash"), ("rnn", "crash")]
    assert all("was lost after 1 retry" in r["report"] and "Error" in r["report"] for r in recs)
    gone_after(run.marker)  # the rows' workers and the hanging child died with their Ray worker


def _sleep_forever(emit) -> None:
    Path(os.environ["RNNBENCH_TEST_PIDFILE"]).write_text(str(os.getpid()))
    time.sleep(3600)


def test_a_unit_past_its_deadline_is_cancelled_and_its_rows_time_out(tmp_path: Path, cluster: Cluster, monkeypatch) -> None:
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    pidfile = tmp_path / "pid"
    monkeypatch.setenv("RNNBENCH_TEST_PIDFILE", str(pidfile))  # forwarded to the task (RNNBENCH_*)
    unit = executors.Unit("sleeper", _sleep_forever, lambda status, report: [{"status": status, "report": report}],
                          cpus=1, deadline_s=3.0)
    got: list[dict] = []
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    with executors.RayExecutor(cluster.address) as ex:
        assert os.environ["RAY_task_oom_retries"] == "1"  # the owner's OOM retry budget, capped
        begin = time.monotonic()
        ex.run([unit], got.append)
        took = time.monotonic() - begin
    assert {s: signal.getsignal(s) for s in handlers} == handlers  # ray.init's SIGTERM handler did not stay
    (rec,) = got
    assert rec["status"] == "timeout" and "past its deadline of 3 s" in rec["report"] and 3.0 <= took < 15.0
    pid = int(pidfile.read_text())
    for _ in range(100):  # the Ray worker that ran it was killed
        if not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the cancelled task's worker {pid} still runs")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_signal_to_a_campaign_on_a_cluster(tmp_path: Path, cluster: Cluster, sig: signal.Signals) -> None:
    """Records of finished units stream into the file while another unit runs; a signal cancels
    the campaign (the hanging unit's workers die on the node), keeps the records and leaves the
    cluster running."""
    run = start(tmp_path, "run", *ROWS, "--drivers", f"torch_loop,{HANG}", "--timeout", "120", "--out", "r.jsonl",
                "--executor", "ray", "--address", cluster.address)
    hanging(run, 120)
    deadline = time.monotonic() + 60
    while len(records(run.out) if run.out.exists() else []) < 2:  # torch_loop's unit, written while the other hangs
        assert time.monotonic() < deadline and run.proc.poll() is None
        time.sleep(0.05)
    os.kill(run.proc.pid, sig)
    code, lines = finish(run, 30)
    assert code == 128 + sig, lines
    assert lines[-1] == f"rnnbench: interrupted by {sig.name}; 2 records kept in r.jsonl; continue with --resume --out r.jsonl"
    gone_after(run.marker)
    assert [(r["driver"], r["status"]) for r in records(run.out)] == [("torch_loop", "ok")] * 2
    assert cluster.proc.poll() is None and len(cluster.processes()) > 2  # --address: never stopped


def test_ctrl_c_stops_the_local_ray_instance(tmp_path: Path) -> None:
    """No --address: rnnbench starts a Ray instance of its own (its processes inherit the run's
    marker) and stops it on Ctrl-C; no process and no temporary directory is left."""
    run = start(tmp_path, "run", *ROWS, "--models", "rnn", "--drivers", HANG, "--timeout", "120", "--out", "r.jsonl",
                "--executor", "ray")
    hanging(run, 120)
    assert len(marked(run.marker)) > 4  # the rows' workers and the local instance's daemons
    os.kill(run.proc.pid, signal.SIGINT)
    code, lines = finish(run, 60)
    assert code == 130
    assert lines[-1] == "rnnbench: interrupted by SIGINT; no records written to r.jsonl"
    gone_after(run.marker)
    assert ray_leftovers(run.proc.pid) == []
