"""Where units of work run: `--executor ray [--address ADDR]` sends them to a Ray cluster.

The default stays the local process pool: `run`, `sweep` and `fuzz` call their units one after
another in this process. A unit is what runs locally in one go (a `run` group of rows, a `sweep`
(model, driver) size sequence with its budget, a chunk of fuzz bodies on one driver), written once
as a callable `work(emit)`. With Ray, a task runs that same callable on a node, the local way: each
row still in a fresh worker process from rnnbench.processes.isolation.run_isolated, so a row that
crashes or hangs becomes that row's crash/timeout record, made on the node with the node's
`machine`. The task returns the unit's records, each naming its node (`node`); this process takes
them as tasks finish (ray.wait) and stays the one writer of the results file (same records,
same --resume and lock as a local run: `node` is not part of a record's fingerprint or settings,
so a file begun locally resumes on Ray and back without running a row again).

Faults (a lost Ray worker or node, a Ray OOM kill, a unit past its deadline, a signal to rnnbench),
each with what it becomes and its test: docs/reliability.md#faults-on-ray.

Resources: a unit asks Ray for the CPUs its rows' threads need and a GPU for cuda rows. Timed rows
must have their cores to themselves: on the node the task claims that many distinct CPUs
(rnnbench.machine.cpus.claimed_cpus, flock'd lock files per machine) before its rows start, waiting for them if
needed, and passes them in $RNNBENCH_CPUS, which every row worker pins to (rnnbench.machine.cpus.choose_cpus);
the record's `cpu.affinity` and `node.cpus` name them. Correctness-only units (`run --no-time`,
fuzz) claim CPUs only where free (else they share, as local rows would) and never wait.

Environments: the parent creates the environments a run names on its own machine only; a `run` or
`sweep` unit whose environment rnnbench creates on demand (in its cache) and which is missing on
its node creates it there before its rows (runner.GroupWork.environment_here, under create()'s
lock: two units on one node never build one environment at once); a `run` unit's deadline has
ENVIRONMENT_CREATION_S more where its environment is one rnnbench creates. A task takes the run's
--config environment definitions ($RNNBENCH_ENVIRONMENTS, forwarded) before it runs its unit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rnnbench.errors import InputError
from rnnbench.machine import cpus as run_cpus
from rnnbench.machine import environments
from rnnbench.processes import isolation, owned, parent, tmpdirs
from rnnbench.status import Status

UNIT_GRACE_S = 60.0  # beyond its rows' timeouts and one worker start: a unit's deadline
ENVIRONMENT_CREATION_S = 900.0  # and beyond that, for a unit that may create its environment on the node
RETRIES = 1  # Ray's retries of a lost task, and of an OOM-killed one
CANCEL_GRACE_S = 5.0  # a cancelled task's time to end its workers itself before it is killed
CANCEL_WAIT_S = 10.0  # then how long to wait for the kill
WAIT_S = 0.2  # ray.wait's timeout: signals and deadlines are looked at this often
PROBE_S = 3.0  # --address: how long the TCP probe waits for the address to accept a connection
CONNECT_S = 120.0  # then how long ray.init may take to connect (a head reached over a slow network included)
DEFAULT_PORTS = {"": 6379, "ray://": 10001}  # a Ray head's GCS port; Ray Client's port
LOCAL_SOCKET_ROOM = 48  # a local instance's temp dir path at most this long (unix socket paths end near 107)
# Variables of this process a task does not take: they name this process or are set per worker.
NOT_FORWARDED = {isolation.PARENT_VAR, isolation.DEATH_SIGNAL_VAR, isolation.MEMORY_VAR, run_cpus.CPUS_VAR}

Emit = Callable[[dict], None]


@dataclass
class Unit:
    """What an executor runs: work(emit) runs the unit here, the local way, calling emit(record) for
    each record; lost(status, report) gives the records of its rows when the unit itself was lost
    (status crash) or cut off at its deadline (status timeout). cpus, gpus: what it asks of a node;
    exclusive: its rows are timed and must have `cpus` cores to themselves."""

    label: str
    work: Callable[[Emit], None]
    lost: Callable[[str, str], list[dict]]
    cpus: float = 1.0
    gpus: int = 0
    exclusive: bool = False
    deadline_s: float = 600.0 + UNIT_GRACE_S


def ray_module():
    """The ray package, or InputError (exit 2) where it cannot be imported."""
    try:
        import ray
    except ImportError as exc:
        raise InputError(
            f"--executor ray needs the ray package, which cannot be imported here ({exc}); "
            "install it (requirements/main.txt pins it) or leave out --executor"
        ) from None
    return ray


def host_port(address: str) -> tuple[str, int] | None:
    """The (host, port) an --address names: HOST:PORT, [IPV6]:PORT, HOST (Ray's default port) or
    ray://HOST[:PORT] (Ray Client); None for `auto` / `local` (found or started by Ray itself)."""
    if address in ("auto", "local"):
        return None
    scheme = "ray://" if address.startswith("ray://") else ""
    rest = address[len(scheme) :].rstrip("/")
    if rest.startswith("["):  # [IPV6]:PORT
        host, _, tail = rest[1:].partition("]")
        port = tail[1:] if tail.startswith(":") else tail
    elif rest.count(":") == 1:
        host, port = rest.split(":")
    else:  # a bare host (a bare IPv6 address included): Ray's default port
        host, port = rest, ""
    if not host or (port and not port.isdigit()) or (port and not 0 < int(port) < 65536):
        raise InputError(f"--address {address!r} is not HOST:PORT (e.g. 10.0.0.5:6379 or ray://10.0.0.5:10001)")
    return host, int(port) if port else DEFAULT_PORTS[scheme]


# A client's HTTP/2 connection preface and an empty SETTINGS frame: a gRPC server (a Ray head's GCS,
# a Ray Client server) answers with a SETTINGS frame of its own (frame type 4, the header's 4th byte).
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
HTTP2_SETTINGS = 4


def _speaks_grpc(target: tuple[str, int]) -> str:
    """Why `target` is no gRPC server answering within PROBE_S ("" when it is one)."""
    try:
        with socket.create_connection(target, timeout=PROBE_S) as sock:
            sock.settimeout(PROBE_S)
            sock.sendall(HTTP2_PREFACE)
            header = b""
            while len(header) < 9:
                chunk = sock.recv(9 - len(header))
                if not chunk:
                    return "the connection was closed without an answer"
                header += chunk
    except TimeoutError:
        return "no answer"
    except OSError as exc:
        return exc.strerror or str(exc)
    return "" if header[3] == HTTP2_SETTINGS else "what answers there does not speak gRPC"


def probe(address: str) -> None:
    """Refuse, within a few seconds and before any file is created, an --address where no gRPC
    server answers (Ray itself retries such an address for many minutes): a TCP connection and an
    HTTP/2 greeting, each given PROBE_S."""
    target = host_port(address)
    if target is None:
        return
    why = _speaks_grpc(target)
    if why:
        raise InputError(
            f"--address {address}: no Ray cluster there ({why}, {target[0]} port {target[1]}, "
            f"within {PROBE_S:g} s); start one with `ray start --head` or fix the address"
        )


def forwarded_env() -> dict[str, str]:
    """This process's RNNBENCH_* variables (plugins, environment paths, ...), which a task sets on
    its node for its rows: the node's workers then see the registry this process sees."""
    return {k: v for k, v in os.environ.items() if k.startswith("RNNBENCH_") and k not in NOT_FORWARDED}


def node_identity(cpus: list[int] | None) -> dict[str, Any]:
    """The `node` of a record made on a Ray node: its Ray id, hostname, IP and the CPUs claimed there."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    # The address the node joined the cluster with (the machine may have several).
    ip = next((n["NodeManagerAddress"] for n in ray.nodes() if n.get("NodeID") == node_id), None)
    return {
        "ray_node_id": node_id,
        "hostname": socket.gethostname(),
        "ip": ip or ray.util.get_node_ip_address(),
        "cpus": cpus,
    }


def run_unit(work: Callable[[Emit], None], cpus: float, exclusive: bool, env: dict[str, str]) -> list[dict]:
    """The body of a Ray task: claim CPUs, set the forwarded variables, run the unit here, return its
    records with their node. Its temporary directory (workers' stderr, cold caches) goes with it: a
    Ray worker outlives its tasks."""
    records: list[dict] = []
    saved = {k: os.environ.get(k) for k in (*env, run_cpus.CPUS_VAR)}
    # Ray cancels a task (force=False) by _thread.interrupt_main(), which does nothing where SIGINT
    # is ignored, as in every process a background shell job starts: without Python's handler
    # the cancel would wait for the forced kill.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with run_cpus.claimed_cpus(max(1, round(cpus)), wait=exclusive) as claimed:
            os.environ.update(env)
            environments.load_definitions()  # the run's --config environments (this worker imported them before)
            if claimed:
                os.environ[run_cpus.CPUS_VAR] = ",".join(map(str, claimed))
            node = node_identity(claimed)
            work(records.append)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        tmpdirs.remove_run_tmpdir()
    return [{**rec, "node": node} for rec in records]


@contextlib.contextmanager
def _signals_through_ray() -> Iterator[None]:
    """Ray's blocking calls turn the exception our signal handler raises (parent.Interrupted)
    into a plain KeyboardInterrupt: raise the one the signal meant (exit 143 for SIGTERM, not 130)."""
    try:
        yield
    except KeyboardInterrupt as exc:
        meant = parent.interruption()
        if meant is None or type(exc) is type(meant):
            raise
        raise meant from None


def _ray_error(exc: BaseException) -> str:
    """Ray's error, for the report of a lost unit's rows: its type and first lines."""
    lines = [line for line in str(exc).splitlines() if line.strip()][:6]
    return f"{type(exc).__name__}: " + "\n".join(lines)


def _cancel(ray: Any, refs: list) -> None:
    """Cancel running tasks: first by a KeyboardInterrupt in the task, whose run_isolated then ends
    its workers' process groups (what they started included: Ray itself kills only a killed
    worker's direct children); what has not ended after CANCEL_GRACE_S is killed (force=True).
    Returns when they are gone (a disconnect right after a cancel could drop it)."""
    for force, wait_s in ((False, CANCEL_GRACE_S), (True, CANCEL_WAIT_S)):
        if not refs:
            return
        for ref in refs:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=force)
        with contextlib.suppress(Exception):
            done, refs = ray.wait(refs, num_returns=len(refs), timeout=wait_s)


@dataclass
class _InFlight:
    unit: Unit
    ref: Any
    deadline: float


class RayExecutor:
    """Runs units on a Ray cluster, as a context manager: entering starts a local Ray instance
    (address None: num_cpus = the cores this process may use, no dashboard, no usage stats, a
    private temporary directory, OOM retries capped) or connects to `address`; leaving cancels what
    is still in flight and stops the local instance (a cluster given by address is left running)."""

    def __init__(self, address: str | None = None):
        self.address = address
        self.temp_dir: Path | None = None
        self.ray: Any = None
        self.task: Any = None
        self.in_flight: list[_InFlight] = []

    # --- the cluster ---------------------------------------------------------------------------

    def __enter__(self) -> RayExecutor:
        ray = self.ray = ray_module()
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
        # The owner of a task (this process) keeps its OOM retry budget: capped here for a cluster
        # given by address too, where _system_config cannot be set.
        os.environ["RAY_task_oom_retries"] = str(RETRIES)
        handlers = {sig: signal.getsignal(sig) for sig in parent.HANDLED_SIGNALS}
        options: dict[str, Any] = dict(
            log_to_driver=False, configure_logging=True, logging_level="ERROR", include_dashboard=False
        )
        try:
            with _signals_through_ray():  # a signal during start-up
                self._start(ray, options)
        except BaseException:
            self._stop()
            raise
        finally:
            for sig, handler in handlers.items():  # ray.init sets its own SIGTERM handler: ours stay
                if handler is not None:
                    signal.signal(sig, handler)
        return self

    def _start(self, ray: Any, options: dict[str, Any]) -> None:
        if self.address is None:
            self.temp_dir = tmpdirs.short_tmpdir("ray", LOCAL_SOCKET_ROOM)
            ray.init(
                address="local",
                num_cpus=len(run_cpus.allowed_cpus()),
                _temp_dir=str(self.temp_dir),
                _system_config={"task_oom_retries": RETRIES},
                **options,
            )
        else:
            self._connect(ray, options)
        self.task = ray.remote(run_unit)

    def _connect(self, ray: Any, options: dict[str, Any]) -> None:
        """ray.init(address) in a thread of its own, waited for here in slices: rnnbench's signal
        handlers stay in force (Ray installs its SIGTERM handler only when called from the main
        thread, and a Python handler would run only once a blocking connect returns), and the
        connect is bounded by CONNECT_S. A connect given up on is left to its daemon thread."""
        probe(self.address)
        outcome: list[BaseException] = []

        def connect() -> None:
            try:
                ray.init(address=self.address, **options)
            except BaseException as exc:  # handed to the waiting thread
                outcome.append(exc)

        thread = threading.Thread(target=connect, daemon=True, name="rnnbench-ray-connect")
        thread.start()
        deadline = time.monotonic() + CONNECT_S
        while thread.is_alive():
            if time.monotonic() > deadline:
                raise InputError(
                    f"--address {self.address}: something answers there, but no Ray cluster connected "
                    f"within {CONNECT_S:g} s; check the address and the cluster's version"
                )
            thread.join(WAIT_S)
        if outcome and isinstance(outcome[0], (ConnectionError, ValueError, RuntimeError)):
            first = (str(outcome[0]).strip().splitlines() or [type(outcome[0]).__name__])[0]
            raise InputError(f"--address {self.address}: cannot connect to a Ray cluster there ({first})")
        if outcome:
            raise outcome[0]

    def __exit__(self, *exc_info) -> None:
        with parent.signals_deferred():
            self.cancel()
            self._stop()

    def _stop(self) -> None:
        if self.ray is not None and self.ray.is_initialized():
            with contextlib.suppress(Exception):
                self.ray.shutdown()  # stops a local instance; only disconnects from an --address cluster
        if self.temp_dir is not None:  # made by tmpdirs.short_tmpdir: an owned folder
            owned.remove_owned(self.temp_dir, tmpdirs.TMP_KIND, "Ray's temporary directory", ignore_errors=True)
            self.temp_dir = None

    def cancel(self) -> None:
        """Cancel every unit in flight (its Ray worker killed, its rows' workers with it)."""
        refs = [f.ref for f in self.in_flight]
        self.in_flight = []
        _cancel(self.ray, refs)

    def capacity(self) -> tuple[float, float]:
        """The cluster's CPUs and GPUs now (nodes may join or leave)."""
        resources = self.ray.cluster_resources()
        return float(resources.get("CPU", 0.0)), float(resources.get("GPU", 0.0))

    @property
    def workers(self) -> int:
        """How many one-CPU units the cluster runs at once."""
        return max(1, int(self.capacity()[0]))

    # --- running units -------------------------------------------------------------------------

    def _submit(self, unit: Unit, env: dict[str, str]) -> _InFlight:
        task = self.task.options(
            num_cpus=unit.cpus,
            num_gpus=unit.gpus,
            max_retries=RETRIES,
            retry_exceptions=False,
            name=f"rnnbench: {unit.label}",
        )
        ref = task.remote(unit.work, unit.cpus, unit.exclusive, env)
        return _InFlight(unit, ref, time.monotonic() + unit.deadline_s)

    def _fits(self, unit: Unit) -> bool:
        """Whether `unit` fits beside what is in flight (one unit always goes: it may wait in Ray's queue)."""
        if not self.in_flight:
            return True
        cpus, gpus = self.capacity()
        return (
            sum(f.unit.cpus for f in self.in_flight) + unit.cpus <= cpus
            and sum(f.unit.gpus for f in self.in_flight) + unit.gpus <= gpus
        )

    def run(self, units: Sequence[Unit], emit: Emit) -> None:
        """Run every unit; emit(record) in this process for each record, unit by unit as they finish."""
        env = forwarded_env()
        waiting = list(units)
        try:
            with _signals_through_ray():
                self._loop(waiting, env, emit)
        finally:
            self.cancel()  # an interruption, or an emit that raised (disk full): nothing left running

    def _loop(self, waiting: list[Unit], env: dict[str, str], emit: Emit) -> None:
        """Submit what fits, wait, take what finished, cancel what ran past its deadline."""
        while waiting or self.in_flight:
            while waiting and self._fits(waiting[0]):
                self.in_flight.append(self._submit(waiting.pop(0), env))
            refs = [f.ref for f in self.in_flight]
            ready, _ = self.ray.wait(refs, num_returns=1, timeout=WAIT_S)
            now = time.monotonic()
            for f in list(self.in_flight):
                if f.ref in ready:
                    self.in_flight.remove(f)
                    for rec in self._records(f):
                        emit(rec)
                elif now > f.deadline:
                    self.in_flight.remove(f)
                    _cancel(self.ray, [f.ref])
                    for rec in f.unit.lost(
                        Status.TIMEOUT,
                        f"the unit ({f.unit.label}) ran past its deadline of "
                        f"{f.unit.deadline_s:g} s on Ray; task cancelled, its workers killed",
                    ):
                        emit(rec)

    def _records(self, f: _InFlight) -> list[dict]:
        try:
            return self.ray.get(f.ref)
        except self.ray.exceptions.RayError as exc:  # lost twice (worker or node died), or our own bug
            return f.unit.lost(
                Status.CRASH,
                f"the Ray task running this row's unit ({f.unit.label}) was lost "
                f"after {RETRIES} retry: {_ray_error(exc)}",
            )


@contextlib.contextmanager
def executor(name: str, address: str | None) -> Iterator[RayExecutor | None]:
    """The executor `--executor NAME [--address ADDR]` asks for: None for local (the default)."""
    if name != "ray":
        yield None
        return
    with RayExecutor(address) as ray_executor:
        yield ray_executor


def check_executor(name: str, address: str | None) -> None:
    """Bad input refused before any work: --address without --executor ray; ray not importable."""
    if address is not None and name != "ray":
        raise InputError("--address needs --executor ray (it names the Ray cluster to send work to)")
    if name == "ray":
        ray_module()
        if address is not None:
            probe(address)
