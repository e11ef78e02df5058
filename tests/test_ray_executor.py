"""`--executor ray` (rnnbench.rows.executors) on a real local Ray cluster: the same verdicts as the
local pool for the same rows, timed rows on cores of their own, records streamed into the file and
resumable across executors, a row's crash and hang, a lost Ray task retried once then recorded, a
lost node (its unit retried once on another node, then recorded), an environment created on the
node that lacks it, a unit past its deadline, interrupts (a local instance rnnbench starts and
stops; a cluster given by --address, left running), usage errors.

Most tests share one cluster started here with `ray start --head --block`; the node tests share a
head without CPUs and add nodes of their own to it (`ray start --address --block`). Each node's
processes carry a marker of their own in their environment, so a test stops or loses that node
alone (`ray stop` would stop every cluster on the machine) and checks that none of its processes
is left. Runs are real `rnnbench` processes started as
tests/test_faults.py starts them (a unique marker in their environment, which the executor passes
on to the rows' workers on the node, so no worker left behind goes unseen)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed: the --executor ray tests need it (requirements/ray.txt)")

from rnnbench import cli  # noqa: E402
from rnnbench.machine import cpus as run_cpus  # noqa: E402
from rnnbench.rows import executors  # noqa: E402
from test_faults import PLUGIN_DIR, _default_signals, finish, gone_after, hanging, marked, start  # noqa: E402

RAY = str(Path(sys.executable).with_name("ray"))
ROWS = ("--models", "decay,rnn", "--environments", "main", "--no-time", "--threads", "1")
HANG = "faulty_hang_with_child_on_rnn"  # decay finishes, rnn starts a child and hangs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Node death is found by the head's health checks: every 0.5 s, 3 misses (Ray's default: 3 s, 5).
HEALTH_CHECKS = {
    "RAY_health_check_initial_delay_ms": "0",
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "500",
    "RAY_health_check_failure_threshold": "3",
}


class Cluster:
    """One Ray node started by `ray start --block`: a head (join None), or a node joining `join`'s
    cluster. Its processes (daemons, Ray workers, the rows' workers they start) carry a marker of
    their own in their environment, so this node alone is stopped (`ray stop` stops every cluster
    on the machine) and a node can be lost at once (stop(lost=True): SIGKILL to all its processes).
    Each node has a private TMPDIR (its own CPU claims: nodes of one machine act as machines of
    their own, and claims of other runs on this machine do not make its units wait); `env` is
    added to its processes' environment."""

    def __init__(self, cpus: int = 2, join: Cluster | None = None, **env: str) -> None:
        self.marker = uuid.uuid4().hex
        self.joined = join is not None
        if join is None:
            self.temp = Path(
                tempfile.mkdtemp(prefix="rnnbench-test-ray-", dir="/tmp")
            )  # short: Ray's sockets live here
            port = _free_port()
            self.address = f"127.0.0.1:{port}"
            where = ["--head", "--port", str(port), "--include-dashboard", "false"]
        else:
            self.temp, self.address = join.temp, join.address
            where = ["--address", join.address]
        tmp = self.temp / f"tmp-{self.marker[:8]}"
        tmp.mkdir()
        env = {
            **os.environ,
            "RAY_USAGE_STATS_ENABLED": "0",
            "RNNBENCH_TEST_CLUSTER": self.marker,
            "TMPDIR": str(tmp),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(PLUGIN_DIR), os.environ.get("PYTHONPATH")])),
            **HEALTH_CHECKS,
            **env,
        }
        self.proc = subprocess.Popen(
            [
                RAY,
                "start",
                "--block",
                *where,
                "--node-ip-address",
                "127.0.0.1",
                "--num-cpus",
                str(cpus),
                "--temp-dir",
                str(self.temp),
                "--dashboard-agent-listen-port",
                str(_free_port()),
                "--object-store-memory",
                str(100 * 2**20),
                "--disable-usage-stats",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            # as a cluster started by a background shell job: SIGINT ignored in
            # every Ray worker, where Ray's cancel (interrupt_main) then does nothing
            preexec_fn=_default_signals((signal.SIGINT,)),
        )
        deadline = time.monotonic() + 120
        for line in self.proc.stdout:
            if b"Ray runtime started" in line:
                break
            assert time.monotonic() < deadline, "the test cluster did not start"
        else:
            raise AssertionError("ray start ended before the cluster was up")

    def processes(self) -> list[int]:
        return marked(self.marker, "RNNBENCH_TEST_CLUSTER")

    def node_id(self) -> str:
        """This node's Ray id (its raylet's --node_id)."""
        for pid in self.processes():
            try:
                args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            for arg in args:
                if arg.startswith(b"--node_id="):
                    return arg.split(b"=", 1)[1].decode()
        raise AssertionError("no raylet of this node runs")

    def stop(self, lost: bool = False) -> None:
        """This node only: `ray start --block` ends its daemons on SIGTERM, and what is left of its
        processes is killed; lost: every process of the node is SIGKILLed at once (a machine gone)."""
        if not lost:
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
        if not self.joined:
            shutil.rmtree(self.temp, ignore_errors=True)

    def assert_gone(self) -> None:
        deadline = time.monotonic() + 5
        while self.processes():
            assert time.monotonic() < deadline, f"processes of a test cluster left: {self.processes()}"
            time.sleep(0.05)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    try:
        yield c
    finally:
        c.stop()
    c.assert_gone()


@pytest.fixture(scope="module")
def bare_head() -> Iterator[Cluster]:
    """A head with no CPUs: every unit runs on a node a test adds (and may lose)."""
    c = Cluster(cpus=0)
    try:
        yield c
    finally:
        c.stop()
    c.assert_gone()


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def verdicts(recs: list[dict]) -> dict[tuple, str]:
    return {(r["model"], r["driver"], r.get("case")): r["status"] for r in recs}


def ray_leftovers(pid: int) -> list[str]:
    """The private temporary directory of a local Ray instance started by rnnbench process `pid`."""
    return [p.name for root in {tempfile.gettempdir(), "/tmp"} for p in Path(root).glob(f"rnnbench-run-{pid}-*-ray-*")]


# ---------------------------------------------------------------------------------------------
# Usage errors (in-process: no cluster)


@pytest.mark.parametrize(
    "argv, words",
    [
        (["run", "--address", "127.0.0.1:1"], "--address needs --executor ray"),
        (["fuzz", "--address", "127.0.0.1:1", "--executor", "local"], "--address needs --executor ray"),
        (["sweep", "--executor", "dask"], "invalid choice: 'dask'"),
        (["versions", "--address", "127.0.0.1:1"], "--address needs --executor ray"),
    ],
)
def test_usage_errors(argv: list[str], words: str, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("rnnbench: error: ") and words in line
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize("command", ["run", "fuzz", "sweep", "versions"])
def test_ray_missing_is_one_line_exit_2(command: str, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    assert cli.main([command, "--executor", "ray"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("rnnbench: error: --executor ray needs the ray package")
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# Connecting to --address (no cluster: listeners of this test process that are no Ray head)


class Listener:
    """A TCP listener on 127.0.0.1 that accepts and then says nothing (`grpc=False`) or greets each
    connection as a gRPC server does (an HTTP/2 SETTINGS frame) and then says nothing more: what a
    Ray client then waits for never comes. `accepted` counts connections."""

    def __init__(self, grpc: bool):
        import threading

        self.sock = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.grpc, self.accepted, self.conns = grpc, 0, []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            self.accepted += 1
            if self.grpc:
                conn.sendall(bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))

    def close(self) -> None:
        self.sock.close()
        for conn in self.conns:
            conn.close()


def _connect_run(tmp_path: Path, address: str, **popen) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rnnbench.cli",
            "run",
            "--models",
            "rnn",
            "--drivers",
            "torch_nn_lstm",
            "--out",
            "r.jsonl",
            "--executor",
            "ray",
            "--address",
            address,
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
        **popen,
    )


@pytest.mark.parametrize("what", ["nothing_listens", "silent_listener"])
def test_an_address_without_a_cluster_is_one_line_exit_2_and_no_file(tmp_path: Path, what: str) -> None:
    """Refused by the probe before ray.init (which retries such an address for many minutes) and
    before the results file is created."""
    listener = Listener(grpc=False) if what == "silent_listener" else None
    address = listener.address if listener else f"127.0.0.1:{_free_port()}"
    proc = _connect_run(tmp_path, address)
    try:
        out, err = proc.communicate(timeout=90)
    finally:
        proc.kill()
        if listener:
            listener.close()
    (line,) = err.splitlines()
    assert line.startswith(f"rnnbench: error: --address {address}: no Ray cluster there"), err
    assert not (tmp_path / "r.jsonl").exists()


def test_a_connect_that_never_completes_is_bounded(tmp_path: Path) -> None:
    """A gRPC greeting passes the probe; ray.init then waits for answers that never come: given up
    after CONNECT_S (3 s here), exit 2, no results file."""
    listener = Listener(grpc=True)
    script = (
        "import sys; from rnnbench.rows import executors; executors.CONNECT_S = 3.0; "
        "from rnnbench.cli.main import main; sys.exit(main(sys.argv[1:]))"
    )
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                script,
                "run",
                "--models",
                "rnn",
                "--drivers",
                "torch_nn_lstm",
                "--out",
                "r.jsonl",
                "--executor",
                "ray",
                "--address",
                listener.address,
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=90,
        )
    finally:
        listener.close()
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith(
        f"rnnbench: error: --address {listener.address}: something "
        "answers there, but no Ray cluster connected within 3 s"
    )
    assert listener.accepted >= 2  # the probe, then Ray's own connection
    assert not (tmp_path / "r.jsonl").exists()


def test_sigterm_during_the_connect_is_143_with_a_line(tmp_path: Path) -> None:
    """rnnbench's handlers are in force while ray.init connects (Ray installs its own SIGTERM
    handler when called from the main thread, which exited 15 with no line after ~30 s)."""
    listener = Listener(grpc=True)
    proc = _connect_run(tmp_path, listener.address, preexec_fn=_default_signals(()))
    try:
        deadline = time.monotonic() + 60
        while listener.accepted < 2:  # the probe's connection, then ray.init's
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        listener.close()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.splitlines()[-1] == "rnnbench: interrupted by SIGTERM" and "Traceback" not in err
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize(
    "address, target",
    [
        ("10.0.0.5:6379", ("10.0.0.5", 6379)),
        ("ray://h", ("h", 10001)),
        ("[::1]:7000", ("::1", 7000)),
        ("h", ("h", 6379)),
        ("auto", None),
    ],
)
def test_address_forms(address: str, target) -> None:
    assert executors.host_port(address) == target


def test_cpu_claims_are_distinct_and_released(tmp_path: Path, monkeypatch) -> None:
    """Two concurrent claims on one machine get distinct CPUs; a claim that cannot be met is None
    at once without wait; a released claim is free again."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setattr(run_cpus, "allowed_cpus", lambda: [0, 1, 2, 3])
    monkeypatch.setattr(run_cpus, "_core_of", lambda cpu: (0, cpu))
    with run_cpus.claimed_cpus(1) as a, run_cpus.claimed_cpus(2) as b:
        assert a == [3] and b == [1, 2]
        with run_cpus.claimed_cpus(2, wait=False) as c:
            assert c is None
        with run_cpus.claimed_cpus(1, wait=False) as d:
            assert d == [0]
    with run_cpus.claimed_cpus(4) as e:
        assert e == [0, 1, 2, 3]
    monkeypatch.setenv(run_cpus.CPUS_VAR, "1,2")
    assert run_cpus.choose_cpus(1) == [2] and run_cpus.choose_cpus(4) == [1, 2]  # a worker pins inside its claim


# ---------------------------------------------------------------------------------------------
# The same rows, locally and on Ray


def test_run_same_verdicts_locally_and_on_ray_with_crash_and_hang(tmp_path: Path, cluster: Cluster) -> None:
    args = (*ROWS, "--drivers", "torch_loop,faulty_crash_on_rnn,faulty_hang", "--timeout", "2")
    (tmp_path / "local").mkdir(), (tmp_path / "ray").mkdir()
    local = start(tmp_path / "local", "run", *args, "--out", "r.jsonl")
    on_ray = start(
        tmp_path / "ray", "run", *args, "--out", "r.jsonl", "--executor", "ray", "--address", cluster.address
    )
    (code_local, _), (code_ray, lines) = finish(local, 120), finish(on_ray, 120)
    assert code_local == code_ray == 1, lines
    here, there = records(local.out), records(on_ray.out)
    assert (
        verdicts(here)
        == verdicts(there)
        == {
            ("decay", "torch_loop", None): "ok",
            ("rnn", "torch_loop", None): "ok",
            ("decay", "faulty_crash_on_rnn", None): "ok",
            ("rnn", "faulty_crash_on_rnn", None): "crash",
            ("decay", "faulty_hang", None): "timeout",
            ("rnn", "faulty_hang", None): "timeout",
        }
    )
    crash = next(r for r in there if r["status"] == "crash")
    assert "SIGSEGV" in crash["report"]  # the row's worker died on the node: that row's record, made there
    for rec in there:
        assert (
            rec["node"]["ray_node_id"] and rec["node"]["hostname"] == rec["machine"]["hostname"] == socket.gethostname()
        )
        assert rec["node"]["ip"] and rec["fingerprint"] in {r["fingerprint"] for r in here}
        if "cpu" in rec:  # its worker pinned itself to the CPU claimed for its unit on the node
            assert rec["cpu"]["affinity"] == rec["node"]["cpus"] and len(rec["node"]["cpus"]) == 1
    assert all("node" not in rec for rec in here)
    gone_after(on_ray.marker)


def test_timed_rows_on_a_node_have_cores_of_their_own_and_name_their_node(tmp_path: Path, cluster: Cluster) -> None:
    """Timed rows (--threads 1) of two drivers: two units on the 2-CPU node at once, each on a CPU
        it claimed there, which its rows' workers pin to. Claims are taken in one fixed order, so two
        distinct CPUs mean the second unit claimed while the first held its CPU. Every record names
        its node and has its timings; the gradient verdicts are those of a local run of the same rows
    (untimed: timing is measured after the check and does not change a verdict; a second timed run
    on the same 2 cores cost about 30 s more)."""
    args = (
        "run",
        "--models",
        "decay",
        "--drivers",
        "torch_loop,jax_lax_scan",
        "--environments",
        "main",
        "--threads",
        "1",
        "--budget",
        "0.05",
        "--out",
        "r.jsonl",
    )
    (tmp_path / "local").mkdir(), (tmp_path / "ray").mkdir()
    local = start(tmp_path / "local", *args, "--no-time")  # the verdicts: timing does not change them
    on_ray = start(tmp_path / "ray", *args, "--executor", "ray", "--address", cluster.address)
    (code_local, lines_local), (code_ray, lines) = finish(local, 180), finish(on_ray, 180)
    assert code_local == code_ray == 0, (lines_local, lines)
    here, there = records(local.out), records(on_ray.out)
    assert verdicts(here) == verdicts(there) and set(verdicts(there).values()) == {"ok"}
    assert {r["driver"] for r in there} == {"torch_loop", "jax_lax_scan"}
    cpus = {}
    for rec in there:
        assert rec["node"]["ray_node_id"] and rec["node"]["hostname"] == rec["machine"]["hostname"]
        assert rec["fwd"]["median_ms"] > 0 and rec["fwd_bwd"]["median_ms"] > 0
        assert rec["cpu"]["affinity"] == rec["node"]["cpus"] and len(rec["node"]["cpus"]) == 1
        cpus.setdefault(rec["driver"], set()).add(rec["node"]["cpus"][0])
    (a,), (b,) = cpus.values()  # one CPU per unit, a different one for each
    assert a != b
    assert {r["node"]["ray_node_id"] for r in there} == {cluster.node_id()}
    gone_after(on_ray.marker)


def test_fuzz_same_verdicts_locally_and_on_ray(tmp_path: Path, cluster: Cluster) -> None:
    args = (
        "fuzz",
        "--cases",
        "4",
        "--drivers",
        "torch_loop,faulty_crash_at_length_3",
        "--no-second-order",
        "--losses",
        "weighted",
        "--timeout",
        "30",
        "--out",
        "r.jsonl",
    )
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
    on_ray = start(
        tmp_path,
        "run",
        *ROWS,
        "--drivers",
        "torch_loop",
        "--out",
        "r.jsonl",
        "--resume",
        "--executor",
        "ray",
        "--address",
        cluster.address,
        stdout=subprocess.PIPE,
    )
    out, _ = on_ray.proc.communicate(timeout=120)
    assert on_ray.proc.returncode == 0 and "(1 already done, skipped)" in out.decode()
    again = start(tmp_path, "run", *ROWS, "--drivers", "torch_loop", "--out", "r.jsonl", "--resume")
    out, _ = again.proc.communicate(timeout=60)
    assert again.proc.returncode == 0 and "rnnbench: 0 rows" in out.decode()
    recs = records(tmp_path / "r.jsonl")
    assert [(r["model"], "node" in r) for r in recs] == [("decay", False), ("rnn", True)]


def test_versions_on_ray(tmp_path: Path, cluster: Cluster, monkeypatch, capsys) -> None:
    """`rnnbench versions --executor ray`: its probes (here the main environment's torch_loop ones,
    the cheap part) run on the cluster, each record names its node, and the table is printed."""
    from rnnbench.planning import bug_versions

    every = bug_versions.probe_jobs
    monkeypatch.setattr(
        bug_versions, "probe_jobs", lambda probes, envs: [j for j in every(probes, envs) if j.driver == "torch_loop"]
    )
    monkeypatch.chdir(tmp_path)
    assert (
        cli.main(
            [
                "versions",
                "--environments",
                "main",
                "--out",
                "v.jsonl",
                "--executor",
                "ray",
                "--address",
                cluster.address,
            ]
        )
        == 0
    )
    recs = records(tmp_path / "v.jsonl")
    assert recs and all(r["driver"] == "torch_loop" and r["node"]["ray_node_id"] for r in recs)
    assert "| s4-accumulator-jacobian | (class) | ok 4/4 |" in capsys.readouterr().out  # the table, from them


# ---------------------------------------------------------------------------------------------
# Faults of the task and of the parent


def _ray_worker_of(row_worker: int) -> int:
    stat = Path(f"/proc/{row_worker}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def test_a_lost_task_is_retried_once_then_its_rows_are_crash_records(tmp_path: Path, cluster: Cluster) -> None:
    run = start(
        tmp_path,
        "run",
        *ROWS,
        "--drivers",
        HANG,
        "--timeout",
        "120",
        "--out",
        "r.jsonl",
        "--executor",
        "ray",
        "--address",
        cluster.address,
    )
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


# ---------------------------------------------------------------------------------------------
# A node lost: two and three nodes on this machine (a head without CPUs, nodes added and lost)

ON_MARKED_NODE = (*ROWS, "--drivers", "faulty_hang_with_child_on_marked_node", "--timeout", "120")
HANG_HERE = {"FAULTY_HANG_ON_THIS_NODE": "1"}  # the driver hangs on such a node (its worker and a child)
RAY_ERRORS = tuple(name for name in dir(ray.exceptions) if name.endswith("Error"))


def test_a_lost_node_s_unit_is_retried_once_on_another_node(tmp_path: Path, bare_head: Cluster) -> None:
    """The unit hangs on the first node, which is then lost (all its processes SIGKILLed); a
    second node joins; Ray retries the unit there, and its rows are `ok` records naming that node."""
    run = start(
        tmp_path, "run", *ON_MARKED_NODE, "--out", "r.jsonl", "--executor", "ray", "--address", bare_head.address
    )  # its unit waits for a node with a CPU
    first = Cluster(cpus=1, join=bare_head, **HANG_HERE)
    second = None
    try:
        worker, child = hanging(run, 120)
        assert {worker, child} <= set(first.processes())
        lost_id = first.node_id()
        first.stop(lost=True)
        second = Cluster(cpus=1, join=bare_head)
        code, lines = finish(run, 120)
        assert code == 0, lines
        recs = records(run.out)
        assert [(r["model"], r["status"]) for r in recs] == [("decay", "ok"), ("rnn", "ok")]
        assert {r["node"]["ray_node_id"] for r in recs} == {second.node_id()} != {lost_id}
        assert len(list((tmp_path / "sentinel").glob("hanging-*"))) == 1  # one hang: the lost node's
        gone_after(run.marker)
    finally:
        for node in filter(None, (first, second)):
            node.stop()
    first.assert_gone()
    second.assert_gone()


def test_a_unit_lost_with_two_nodes_is_crash_records_naming_ray_s_error(tmp_path: Path, bare_head: Cluster) -> None:
    """The unit hangs on a node that is lost, then on the node that took its retry, lost too:
    every row of the unit becomes a `crash` record whose report names Ray's error."""
    run = start(
        tmp_path, "run", *ON_MARKED_NODE, "--out", "r.jsonl", "--executor", "ray", "--address", bare_head.address
    )
    nodes = []
    try:
        for attempt in (1, 2):
            nodes.append(Cluster(cpus=1, join=bare_head, **HANG_HERE))
            worker, child = hanging(run, 120)
            assert {worker, child} <= set(nodes[-1].processes())
            (tmp_path / "sentinel" / f"hanging-{worker}").rename(tmp_path / f"attempt-{attempt}")
            nodes[-1].stop(lost=True)
        code, lines = finish(run, 120)
        assert code == 1, lines
        recs = records(run.out)
        assert [(r["model"], r["status"]) for r in recs] == [("decay", "crash"), ("rnn", "crash")]
        for rec in recs:
            assert "was lost after 1 retry" in rec["report"], rec["report"]
            assert any(name in rec["report"] for name in RAY_ERRORS), rec["report"]
            assert "node" not in rec  # made by rnnbench itself
        gone_after(run.marker)
    finally:
        for node in nodes:
            node.stop()
    for node in nodes:
        node.assert_gone()


def test_an_environment_missing_on_a_node_is_created_there_before_its_rows(tmp_path: Path, bare_head: Cluster) -> None:
    """A --config environment (the main environment's jax pins: uv installs them from its cache in
    seconds) that neither the run's machine nor the node has: the run creates it in its own cache
    (XDG_CACHE_HOME), the node, whose cache is another, creates it in its own before the rows."""
    from rnnbench.machine import environments

    pins = [r for r in environments.get("main").requirements if r.split("==")[0] in ("jax[cpu]", "jaxlib", "numpy")]
    config = tmp_path / "c.toml"
    config.write_text(f"[environments.jax-only]\nrequirements = {json.dumps(pins)}\n")
    uv_cache = {"UV_CACHE_DIR": str(tmp_path / "uv-cache")}  # shared: the second creation copies from the first's
    run = start(
        tmp_path,
        "run",
        "--config",
        str(config),
        "--models",
        "decay",
        "--drivers",
        "jax_lax_scan",
        "--no-time",
        "--threads",
        "1",
        "--out",
        "r.jsonl",
        "--executor",
        "ray",
        "--address",
        bare_head.address,
        **uv_cache,
    )
    node = Cluster(cpus=1, join=bare_head, XDG_CACHE_HOME=str(tmp_path / "node-cache"), **uv_cache)
    try:
        code, lines = finish(run, 180)
        assert code == 0, lines
        (rec,) = records(run.out)
        assert (rec["driver"], rec["environment_name"], rec["status"]) == ("jax_lax_scan", "jax-only", "ok")
        assert rec["node"]["ray_node_id"] == node.node_id()
        assert rec["environment"]["versions"]["jax"] == next(r for r in pins if r.startswith("jax[")).split("==")[1]
        for cache in ("cache", "node-cache"):  # the run's machine's, then the node's
            (prefix,) = (tmp_path / cache / "rnnbench" / "envs").glob("jax-only-*/")
            assert (prefix / environments.COMPLETE_MARK).is_file()
        gone_after(run.marker)
    finally:
        node.stop()
    node.assert_gone()


def _sleep_forever(emit) -> None:
    Path(os.environ["RNNBENCH_TEST_PIDFILE"]).write_text(str(os.getpid()))
    time.sleep(3600)


def test_a_unit_past_its_deadline_is_cancelled_and_its_rows_time_out(
    tmp_path: Path, cluster: Cluster, monkeypatch
) -> None:
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    pidfile = tmp_path / "pid"
    monkeypatch.setenv("RNNBENCH_TEST_PIDFILE", str(pidfile))  # forwarded to the task (RNNBENCH_*)
    unit = executors.Unit(
        "sleeper", _sleep_forever, lambda status, report: [{"status": status, "report": report}], cpus=1, deadline_s=3.0
    )
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
    run = start(
        tmp_path,
        "run",
        *ROWS,
        "--drivers",
        f"torch_loop,{HANG}",
        "--timeout",
        "120",
        "--out",
        "r.jsonl",
        "--executor",
        "ray",
        "--address",
        cluster.address,
    )
    hanging(run, 120)
    deadline = time.monotonic() + 60
    while len(records(run.out) if run.out.exists() else []) < 2:  # torch_loop's unit, written while the other hangs
        assert time.monotonic() < deadline and run.proc.poll() is None
        time.sleep(0.05)
    os.kill(run.proc.pid, sig)
    code, lines = finish(run, 30)
    assert code == 128 + sig, lines
    assert (
        lines[-1]
        == f"rnnbench: interrupted by {sig.name}; 2 records kept in r.jsonl; continue with --resume --out r.jsonl"
    )
    gone_after(run.marker)
    assert [(r["driver"], r["status"]) for r in records(run.out)] == [("torch_loop", "ok")] * 2
    assert cluster.proc.poll() is None and len(cluster.processes()) > 2  # --address: never stopped


def test_ctrl_c_stops_the_local_ray_instance(tmp_path: Path) -> None:
    """No --address: rnnbench starts a Ray instance of its own (its processes inherit the run's
    marker) and stops it on Ctrl-C; no process and no temporary directory is left."""
    run = start(
        tmp_path,
        "run",
        *ROWS,
        "--models",
        "rnn",
        "--drivers",
        HANG,
        "--timeout",
        "120",
        "--out",
        "r.jsonl",
        "--executor",
        "ray",
    )
    hanging(run, 120)
    assert len(marked(run.marker)) > 4  # the rows' workers and the local instance's daemons
    os.kill(run.proc.pid, signal.SIGINT)
    code, lines = finish(run, 60)
    assert code == 130
    assert lines[-1] == "rnnbench: interrupted by SIGINT; no records written to r.jsonl"
    gone_after(run.marker)
    assert ray_leftovers(run.proc.pid) == []
