"""The timing methodology, in one module used by the CLI (`run`, `sweep`), asv and pytest-benchmark.

- Compile apart from steady state: the first call of each timed callable is timed on its own
  (`first_call`), it traces and compiles; `measure` then warms up and times steady state only.
- Cold compile: a compile is only "cold" in a fresh process whose on-disk compilation caches are
  off or empty. `cold_cache_env` disables inductor's FX-graph and AOT-autograd caches and points
  its cache dir (generated C++/kernels) at a fresh temp dir, and turns jax's persistent cache off;
  the sweep runs every row in a fresh process with it, so first-call seconds there are cold.
- Blocking: every timed call ends with `block(result)`, so asynchronous frameworks (jax
  dispatch, CUDA queues, lazy torch_xla) are timed to completion, not to the end of dispatch.
- Threads: `--threads N` means N cores for every framework. Each worker is pinned by CPU affinity
  to N CPUs of its parent's allowed set (`choose_cpus`, `pin_process`) before any framework is
  imported, so XLA's and torch's own pools (sized from the affinity) cannot spread further;
  environment variables (runner) and torch.set_num_threads (worker) fix the frameworks' own
  counts on top. Each row records its CPU list, the process CPU time / wall time over its timed
  loops, the load average at its start and end, and notes when it used more than its share
  (`over_share`) or was timed while other work left it less than its share (`load`,
  `contended`): `cpu_record`.
- Statistics: median, quartiles, min, max and the number of repeats. Means and standard
  deviations are not reported: on a shared machine outliers are one-sided, and the median with
  quartiles resists them.
- Memory: `peak_rss_mb` is the process RSS high-water mark (getrusage ru_maxrss); in a fresh
  process per row it is that row's peak (frameworks' CPU allocators keep no statistics of their own).
- Roofline: `gemm_peak` is the best GEMM rate among the frameworks present (torch.matmul,
  jax.jit(jnp.dot), numpy) at a dtype and thread count, measured in a process pinned like the rows,
  over square sizes and the rows' own GEMM shapes, cached per machine (`peak_for`);
  `with_roofline` turns a model's analytic FLOP count and a median time into GFLOP/s and a
  fraction of that peak, for every timed row of `run` and `sweep`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence


@dataclass(frozen=True)
class TimingConfig:
    warmup: int = 2  # untimed calls after the first (compiling) call
    min_repeats: int = 5
    max_repeats: int = 200
    budget_s: float = 1.0  # stop repeating once this much time was spent (after min_repeats)


@dataclass(frozen=True)
class Timing:
    median_ms: float
    q1_ms: float
    q3_ms: float
    min_ms: float
    max_ms: float
    repeats: int
    samples: tuple[float, ...] = ()  # record.kept_samples of the timed calls, ms, in the order they ran

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "samples": list(self.samples)}


def measure(fn: Callable[[], Any], block: Callable[[Any], None], config: TimingConfig) -> Timing:
    for _ in range(config.warmup):
        block(fn())
    samples: list[float] = []
    spent = 0.0
    while len(samples) < config.max_repeats and (len(samples) < config.min_repeats or spent < config.budget_s):
        start = time.perf_counter()
        block(fn())
        elapsed = time.perf_counter() - start
        samples.append(elapsed * 1e3)
        spent += elapsed
    import numpy as np  # imported here: a worker pins its CPUs through this module before any heavy import

    from rnnbench import record

    q1, med, q3 = np.percentile(samples, [25, 50, 75])
    return Timing(float(med), float(q1), float(q3), float(min(samples)), float(max(samples)), len(samples),
                  record.kept_samples(samples))


def timed_call(fn: Callable[[], Any]) -> tuple[Any, float]:
    """(result, seconds) of one call: used for the first, compiling, call."""
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def first_call(fn: Callable[[], Any], block: Callable[[Any], None]) -> float:
    """Seconds of one blocked call: the first call of a compiled callable (trace + compile + run)."""
    start = time.perf_counter()
    block(fn())
    return time.perf_counter() - start


def cold_cache_env(root: str | None = None) -> dict[str, str]:
    """Environment variables for a cold first call: every registered framework's on-disk compile
    caches off (Framework.cold_cache_env), their cache directories under one fresh temp dir. Set
    before the framework is imported (a fresh process). The temp dir is made under `root`, by
    default in this process's run directory (rnnbench.run.isolation.run_tmpdir), which goes when
    the process ends, however it ends (after a SIGKILL: when the next rnnbench process starts a
    worker)."""
    from rnnbench import registry
    from rnnbench.run.isolation import run_tmpdir

    fresh = tempfile.mkdtemp(prefix="rnnbench-cold-", dir=root if root is not None else run_tmpdir())
    env: dict[str, str] = {}
    for framework in registry.frameworks().values():
        env.update(framework.cold_cache_env(fresh))
    return env


def cache_root() -> Path:
    """$XDG_CACHE_HOME/rnnbench (default ~/.cache/rnnbench): what rnnbench keeps across runs."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "rnnbench"


def warm_cache_env() -> dict[str, str]:
    """Environment variables for `rnnbench run`'s workers: every registered framework's on-disk
    compile caches kept across runs under cache_root()/compile (Framework.warm_cache_env), except
    variables the user has set. A repeated run then reuses earlier compiles (its first calls are
    warm; each row records the cache variables it ran with)."""
    from rnnbench import registry

    env: dict[str, str] = {}
    for framework in registry.frameworks().values():
        env.update(framework.warm_cache_env(str(cache_root() / "compile")))
    return {k: v for k, v in env.items() if k not in os.environ}


def peak_rss_mb() -> float:
    """This process's resident-set high-water mark in MiB (ru_maxrss is KiB on Linux)."""
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib / 1024.0 if sys.platform != "darwin" else kib / 2**20


# ---------------------------------------------------------------------------------------------
# CPUs: which cores a row runs on, and what it used of them

OVER_SHARE = 1.1  # a row whose CPU time / wall exceeds threads * this used more cores than it was given
LOAD_SLACK = 0.25  # cores: an idle machine's load average is rarely 0
CONTENDED_CPUS = 0.1  # other work on the row's CPUs above this many CPUs' worth: its times are not its own
MIN_OTHERS_WALL_S = 0.5  # /proc/stat counts 10 ms ticks: other work is measured over timed loops at least this long
NOTES = {
    "over_share": f"CPU time / wall over the timed loops above threads x {OVER_SHARE:g}: it used more cores than --threads",
    "load": "the machine's load average left fewer free cores than the row's threads",
    "contended": f"other work used more than {CONTENDED_CPUS:g} of the row's CPUs while it was timed",
}


def _core_of(cpu: int) -> tuple[int, int]:
    """(package, core) of a logical CPU, from sysfs; (0, cpu) where the topology is not readable."""
    base = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
    try:
        return int((base / "physical_package_id").read_text()), int((base / "core_id").read_text())
    except (OSError, ValueError):
        return 0, cpu


def allowed_cpus() -> list[int]:
    """The CPUs this process may run on (all of os.cpu_count() where affinity is not supported)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


CPUS_VAR = "RNNBENCH_CPUS"  # "2,3": CPUs claimed for this process's rows (claimed_cpus); choose_cpus takes them


def assigned_cpus() -> Optional[list[int]]:
    """The CPUs named in $RNNBENCH_CPUS that this process may run on (a claim made by the Ray
    executor for the rows of one task: claimed_cpus), or None where it is unset or names none."""
    value = os.environ.get(CPUS_VAR, "")
    try:
        named = {int(c) for c in value.split(",") if c.strip()}
    except ValueError:
        return None
    return sorted(named & set(allowed_cpus())) or None


def cpu_order(pool: Iterable[int]) -> list[int]:
    """`pool` in the order CPUs are given out: one hardware thread per physical core first (two SMT
    siblings share one core's units: they are not two cores), cores taken from the highest-numbered
    CPU down, so CPU 0, where the kernel tends to run its housekeeping, comes last; siblings after."""
    first, siblings, seen = [], [], set()
    for cpu in sorted(set(pool), reverse=True):
        core = _core_of(cpu)
        (siblings if core in seen else first).append(cpu)
        seen.add(core)
    return first + siblings


def choose_cpus(threads: int, allowed: Optional[Iterable[int]] = None) -> list[int]:
    """The CPUs a worker with `threads` threads is pinned to: the first `threads` of `allowed` in
    cpu_order (default: the CPUs claimed for this process in $RNNBENCH_CPUS, else this process's
    affinity, which a worker inherits from its parent), the same ones every time. All of `allowed`
    when threads is at least its size."""
    pool = sorted(set((assigned_cpus() or allowed_cpus()) if allowed is None else allowed))
    if threads >= len(pool):
        return pool
    return sorted(cpu_order(pool)[:max(1, threads)])


CLAIM_POLL_S = 0.1


@contextlib.contextmanager
def claimed_cpus(count: int, wait: bool = True) -> Iterator[Optional[list[int]]]:
    """Claim `count` CPUs of this process's affinity for the block, so that concurrent claimers on
    this machine (two Ray tasks on one node) get distinct cores: one lock file per CPU in a
    directory per machine and user, held with flock (the kernel releases a dead holder's claim).
    CPUs are taken in cpu_order. Yields the claimed CPUs (sorted); with wait=False, None at once
    when `count` are not free (the caller then shares CPUs), else it waits for them."""
    pool = cpu_order(allowed_cpus())
    count = max(1, min(count, len(pool)))
    folder = Path(tempfile.gettempdir()) / f"rnnbench-cpu-claims-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    held: list[tuple[int, int]] = []
    try:
        while True:
            for cpu in pool:
                fd = os.open(folder / f"cpu{cpu}.lock", os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                held.append((cpu, fd))
                if len(held) == count:
                    break
            if len(held) == count:
                break
            for _, fd in held:  # not enough free: hold none while waiting (no two claimers deadlock)
                os.close(fd)
            held = []
            if not wait:
                break
            time.sleep(CLAIM_POLL_S)
        yield sorted(cpu for cpu, _ in held) if held else None
    finally:
        for _, fd in held:
            os.close(fd)


def pin_process(cpus: Iterable[int]) -> list[int]:
    """Pin every thread of this process to `cpus` and return the process's affinity afterwards.
    sched_setaffinity binds one thread; threads started later inherit the mask of the thread that
    starts them, so the pools a framework creates after this call stay inside `cpus`, and the
    threads that already run (numpy's BLAS pool, watchdogs) are pinned here one by one."""
    cpus = set(cpus)
    if not hasattr(os, "sched_setaffinity"):
        return allowed_cpus()
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = []
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:  # the thread ended meanwhile
            pass
    os.sched_setaffinity(0, cpus)
    return allowed_cpus()


@dataclass(frozen=True)
class CpuClock:
    """One reading of the clocks a row's share is judged by: this process's CPU seconds (user +
    system, all threads; getrusage, to the microsecond, where os.times counts 10 ms ticks), wall
    seconds (perf_counter), and the busy seconds of the CPUs it may run on, whoever ran there
    (/proc/stat: user, nice, system, irq, softirq and steal, the time a hypervisor gave to another
    machine; None where unreadable)."""

    cpu_s: float
    wall_s: float
    cpus_busy_s: Optional[float]


def _cpus_busy_s(cpus: Iterable[int]) -> Optional[float]:
    wanted = {f"cpu{c}" for c in cpus}
    try:
        lines = Path("/proc/stat").read_text().splitlines()
        tick = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return None
    busy, found = 0, 0
    for line in lines:
        fields = line.split()
        if fields and fields[0] in wanted:
            user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
            busy += user + nice + system + irq + softirq + steal
            found += 1
    return busy / tick if found == len(wanted) else None


def cpu_clock() -> CpuClock:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return CpuClock(usage.ru_utime + usage.ru_stime, time.perf_counter(), _cpus_busy_s(allowed_cpus()))


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (empty where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def cpu_record(threads: int, affinity: Sequence[int], spans: Sequence[tuple[CpuClock, CpuClock]],
               load_start: Sequence[float], load_end: Sequence[float]) -> dict[str, Any]:
    """What a row had of the machine: its CPU list, over its timed loops (`spans`: (before, after)
    readings around each) its CPU time / wall ratio and how many of its CPUs' worth other work
    used meanwhile (their busy time less its own), the load average at its start and end, and the
    notes (contention_notes) that say why its times may not be its own."""
    cpu = sum(b.cpu_s - a.cpu_s for a, b in spans)
    wall = sum(b.wall_s - a.wall_s for a, b in spans)
    busy = [b.cpus_busy_s - a.cpus_busy_s for a, b in spans if a.cpus_busy_s is not None and b.cpus_busy_s is not None]
    measurable = bool(spans) and len(busy) == len(spans) and wall >= MIN_OTHERS_WALL_S
    others = max(0.0, sum(busy) - cpu) / wall if measurable else None
    rec: dict[str, Any] = {
        "threads": threads,
        "affinity": sorted(int(c) for c in affinity),
        "machine_cpus": os.cpu_count() or 1,
        "timed_cpu_s": cpu if spans else None,
        "timed_wall_s": wall if spans else None,
        "cpu_ratio": cpu / wall if spans and wall > 0 else None,
        "others_on_cpus": others,
        "load_start": list(load_start),
        "load_end": list(load_end),
        "method": "cpu_ratio: process CPU time (getrusage user+system) / wall over the timed loops (warm-ups "
                  "included); others_on_cpus: busy time of the affinity's CPUs (/proc/stat, steal included) less "
                  f"the process's own, / wall, in CPUs (null when the loops took under {MIN_OTHERS_WALL_S:g} s: "
                  "10 ms ticks); load: 1/5/15-minute load averages",
    }
    rec["notes"] = contention_notes(rec)
    return rec


def contention_notes(cpu: Mapping[str, Any]) -> list[str]:
    """Why a row's times may not be its own (keys of NOTES), from its `cpu` record:
    over_share: cpu_ratio > threads * OVER_SHARE (it ran on more cores than it was given);
    load: the 1-minute load average, at the row's start or end, minus the row's own threads (a
        running worker counts in the load it reads) left fewer than its threads free, by more
        than LOAD_SLACK, of the machine's CPUs (a lagging estimate: a minute's average);
    contended: other work (other processes, the kernel's interrupts, a hypervisor's steal) used
        more than CONTENDED_CPUS of the row's own CPUs during its timed loops (measured, not a load
        estimate: /proc/stat per CPU, 10 ms ticks)."""
    threads = cpu.get("threads") or 1
    notes = []
    ratio = cpu.get("cpu_ratio")
    if ratio is not None and ratio > threads * OVER_SHARE:
        notes.append("over_share")
    loads = [load[0] for load in (cpu.get("load_start"), cpu.get("load_end")) if load]
    if loads:
        others = max(0.0, max(loads) - threads)
        if (cpu.get("machine_cpus") or 1) - others < threads - LOAD_SLACK:
            notes.append("load")
    others = cpu.get("others_on_cpus")
    if others is not None and others > CONTENDED_CPUS:
        notes.append("contended")
    return notes


def load_line(threads: int, cores: Optional[int] = None, load: Optional[float] = None) -> str:
    """'load average 1.9 on 2 cores at start: timings may be contended': the one line a run says
    about the machine before it times (contended when the load leaves fewer free cores than threads)."""
    cores = cores or os.cpu_count() or 1
    if load is None:
        averages = load_average()
        load = averages[0] if averages else 0.0
    busy = cores - load < threads - LOAD_SLACK
    return (f"load average {load:.1f} on {cores} cores at start" +
            (f": timings may be contended ({threads} thread{'s' if threads != 1 else ''} per row)" if busy else ""))


# ---------------------------------------------------------------------------------------------
# Roofline: the best GEMM here, and each row's fraction of it

PEAK_SQUARE = (256, 512, 1024, 2048)  # square GEMMs always measured
PEAK_MAX_AGE_DAYS = 30.0  # a cached peak older than this is measured again
PEAK_METHOD = ("best GEMM among torch.matmul, jax.jit(jnp.matmul), numpy @ present, at the row's dtype, in a process "
               "pinned to as many CPUs as the rows' threads: square n = 256..2048 and the rows' own GEMM shapes, "
               "2mkn / fastest call (2 warm-ups, then at least 10 calls and 0.3 s), max over shapes and frameworks")


def gemm_shapes(sizes: Iterable[Mapping[str, int]] = ()) -> list[tuple[int, int, int]]:
    """(m, k, n) shapes to measure: the squares of PEAK_SQUARE and, for each row's sizes, the GEMMs
    the recurrent models do: B x H @ H x 4H and B x H @ H x H (an LSTM's / Elman cell's recurrent
    matmul), B x I @ I x 4H and B x I @ I x H (its input projection per step), T*B x I @ I x 4H and
    T*B x I @ I x H (hoisted over the sequence), n x n @ n x n."""
    shapes = {(n, n, n) for n in PEAK_SQUARE}
    for s in sizes:
        B, H, I, T, n = (s.get(k) for k in ("B", "H", "I", "T", "n"))
        if B and H:
            shapes |= {(B, H, 4 * H), (B, H, H)}
            if I:
                shapes |= {(B, I, 4 * H), (B, I, H)}
                if T:
                    shapes |= {(T * B, I, 4 * H), (T * B, I, H)}
        if n:
            shapes.add((n, n, n))
    return sorted(shapes)


def _shape_name(shape: Sequence[int]) -> str:
    return "x".join(str(int(x)) for x in shape)


def _random_pair(m: int, k: int, n: int):
    import numpy as np

    rng = np.random.default_rng(0)
    return rng.standard_normal((m, k)), rng.standard_normal((k, n))


def _torch_gemm(dtype: str, m: int, k: int, n: int) -> Optional[Callable[[], Any]]:
    import torch

    a64, b64 = _random_pair(m, k, n)
    dt = getattr(torch, dtype)
    a, b = torch.tensor(a64, dtype=dt), torch.tensor(b64, dtype=dt)
    return lambda: torch.matmul(a, b)


def _jax_gemm(dtype: str, m: int, k: int, n: int) -> Optional[Callable[[], Any]]:
    from rnnbench.drivers import _jax

    _jax.configure()  # the rows' settings: x64 on, matmul precision "highest"
    import jax
    import jax.numpy as jnp

    a64, b64 = _random_pair(m, k, n)
    dt = getattr(jnp, dtype)
    a, b = jnp.asarray(a64, dtype=dt), jnp.asarray(b64, dtype=dt)
    f = jax.jit(jnp.matmul)
    return lambda: f(a, b).block_until_ready()


def _numpy_gemm(dtype: str, m: int, k: int, n: int) -> Optional[Callable[[], Any]]:
    if dtype not in ("float32", "float64"):
        return None  # numpy has no bfloat16
    a64, b64 = _random_pair(m, k, n)
    a, b = a64.astype(dtype), b64.astype(dtype)
    return lambda: a @ b


# (name recorded as gemm_peak.framework, module that must be importable, a callable computing one
# (m, k) @ (k, n) product to completion at a dtype, or None where it has no such dtype)
PEAK_GEMMS: tuple[tuple[str, str, Callable[[str, int, int, int], Optional[Callable[[], Any]]]], ...] = (
    ("torch", "torch", _torch_gemm),
    ("jax", "jax", _jax_gemm),
    ("numpy", "numpy", _numpy_gemm),
)
PEAK_FRAMEWORKS = tuple(name for name, _, _ in PEAK_GEMMS)


def best_gflops(fn: Callable[[], Any], flops: float, min_repeats: int = 10, budget_s: float = 0.3,
                max_repeats: int = 500) -> float:
    """flops / the fastest of at least min_repeats calls (and budget_s seconds), after 2 warm-ups:
    on a shared machine the fastest call is the one least disturbed."""
    fn()
    fn()
    best, spent, calls = float("inf"), 0.0, 0
    while calls < max_repeats and (calls < min_repeats or spent < budget_s):
        start = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - start
        best, spent, calls = min(best, elapsed), spent + elapsed, calls + 1
    return flops / max(best, 1e-9) / 1e9


def measure_gemms(dtype: str, threads: int, shapes: Sequence[Sequence[int]]) -> dict[str, Any]:
    """In this process (pinned already): GFLOP/s of each library of PEAK_GEMMS present on each shape,
    torch with `threads` intra-op threads. Returns {"by_framework": {name: {"mxkxn": gflops}},
    "errors": {name: why it has no numbers}}."""
    import importlib.util

    out: dict[str, Any] = {"by_framework": {}, "errors": {}}
    for name, module, gemm in PEAK_GEMMS:
        if importlib.util.find_spec(module) is None:
            out["errors"][name] = "not installed"
            continue
        try:
            if gemm is _torch_gemm:
                from rnnbench.drivers import _torch

                _torch.set_threads(threads)
            rates = {}
            for m, k, n in shapes:
                fn = gemm(dtype, int(m), int(k), int(n))
                if fn is None:
                    raise TypeError(f"no {dtype} GEMM")
                rates[_shape_name((m, k, n))] = best_gflops(fn, 2.0 * m * k * n)
            out["by_framework"][name] = rates
        except Exception as exc:  # one library failing leaves the others' numbers
            out["errors"][name] = f"{type(exc).__name__}: {exc}"[:300]
    return out


def peak_cache_path() -> Path:
    """$XDG_CACHE_HOME/rnnbench/gemm_peak.json (default ~/.cache/rnnbench/gemm_peak.json)."""
    return cache_root() / "gemm_peak.json"


def _peak_key(dtype: str, threads: int, cpus: Sequence[int]) -> dict[str, Any]:
    from rnnbench import record
    from rnnbench.run import environments

    machine = record.machine()
    versions = dict(environments.package_versions("main"))
    return {"hostname": machine["hostname"], "cpu": machine["cpu"], "affinity_size": len(cpus), "dtype": dtype,
            "threads": threads, "versions": {p: versions.get(p, "missing") for p in ("torch", "jax", "jaxlib", "numpy")}}


def peak_for(dtype: str, threads: int, sizes: Iterable[Mapping[str, int]] = (), cpus: Optional[Sequence[int]] = None,
             python: Optional[str] = None, timeout_s: float = 900.0) -> dict[str, Any]:
    """This machine's GEMM peak at `dtype` and `threads` (the record's `gemm_peak`): the best rate
    of any framework present on any shape of gemm_shapes(sizes), measured in a fresh process
    (`python`, default the main environment's) pinned to `cpus` (default choose_cpus(threads), the
    rows' CPUs) with the rows' thread settings. Cached in peak_cache_path() under hostname, CPU
    model, affinity size, dtype, threads and framework versions: shapes already measured are not
    measured again, new ones are added, an entry older than PEAK_MAX_AGE_DAYS is measured anew;
    rates of one shape keep their best (a disturbed measurement is only ever too slow), and an
    entry whose measurements all had other work on its CPUs (others_on_cpus > CONTENDED_CPUS) is
    measured again, every shape, at each call until one measurement is calm. The file is locked
    while one process measures, so two runs do not time GEMMs on the same CPUs at once."""
    from rnnbench.run import environments

    cpus = list(cpus) if cpus is not None else choose_cpus(threads)
    key = _peak_key(dtype, threads, cpus)
    key_text = json.dumps(key, sort_keys=True)
    shapes = gemm_shapes(sizes)
    path = peak_cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            cache = json.loads(path.read_text())
            entries = cache["entries"] if isinstance(cache.get("entries"), dict) else {}
        except (OSError, ValueError, AttributeError):
            entries = {}
        entry = entries.get(key_text)
        if not isinstance(entry, dict) or time.time() - entry.get("measured_epoch", 0) > PEAK_MAX_AGE_DAYS * 86400:
            entry = {"key": key, "by_framework": {}}
        done = set.intersection(*(set(r) for r in entry["by_framework"].values())) if entry["by_framework"] else set()
        missing = [s for s in shapes if _shape_name(s) not in done]
        if (entry.get("others_on_cpus") or 0.0) > CONTENDED_CPUS:
            # measured while other work ran on these CPUs: every shape again, until a calm measurement
            missing = sorted({*missing, *(tuple(int(x) for x in name.split("x")) for name in done)})
        if missing:
            got = _measure_in_worker({"dtype": dtype, "threads": threads, "cpus": cpus, "shapes": missing},
                                     python or environments.get("main").python, timeout_s)
            for framework, rates in got["by_framework"].items():
                old = entry["by_framework"].setdefault(framework, {})
                for shape, rate in rates.items():
                    old[shape] = max(rate, old.get(shape, 0.0))
            entry["errors"] = got.get("errors", {})
            if got.get("others_on_cpus") is not None:  # the calmest measurement so far
                entry["others_on_cpus"] = min(got["others_on_cpus"], entry.get("others_on_cpus", got["others_on_cpus"]))
            entry["measured_epoch"] = entry.get("measured_epoch") or time.time()
            entry["measured"] = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(entry["measured_epoch"]))
            entry["cpus"] = cpus
            entries[key_text] = entry
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"entries": entries}, indent=1, sort_keys=True))
            os.replace(tmp, path)
    return _peak_summary(entry, dtype, threads, cpus, path)


def _measure_in_worker(request: dict[str, Any], python: str, timeout_s: float) -> dict[str, Any]:
    """measure_gemms in a fresh `python` process with the rows' thread settings, pinned to
    request["cpus"] before it imports a framework (`python -m rnnbench.run.timing peak REQUEST`)."""
    from rnnbench.run import environments

    env = {**os.environ, **environments.thread_env(int(request["threads"]))}
    proc = subprocess.run([python, "-m", "rnnbench.run.timing", "peak", json.dumps(request)],
                          capture_output=True, text=True, env=env, timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"GEMM peak measurement failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _peak_summary(entry: Mapping[str, Any], dtype: str, threads: int, cpus: Sequence[int], path: Path) -> dict[str, Any]:
    best = (0.0, "", "")
    by_size: dict[str, float] = {}
    for framework, rates in entry["by_framework"].items():
        for shape, rate in rates.items():
            by_size[shape] = max(rate, by_size.get(shape, 0.0))
            best = max(best, (rate, framework, shape))
    if best[0] <= 0:
        raise RuntimeError(f"GEMM peak measurement found no framework: {entry.get('errors')}")
    squares = {f"{n}x{n}x{n}" for n in PEAK_SQUARE}
    return {"gflops": best[0], "framework": best[1], "shape": best[2], "dtype": dtype, "threads": threads,
            "cpus": list(cpus), "by_size": {s: round(r, 2) for s, r in sorted(by_size.items()) if s in squares or r >= 0.5 * best[0]},
            "by_framework_best": {f: round(max(r.values()), 2) for f, r in entry["by_framework"].items() if r},
            "shapes_measured": len(by_size), "measured": entry.get("measured"), "errors": entry.get("errors", {}),
            "others_on_cpus": entry.get("others_on_cpus"),
            "cache": str(path), "method": PEAK_METHOD}


def roofline(flops: float, median_ms: float, peak_gflops: float) -> dict[str, float]:
    """Achieved GFLOP/s of `flops` done in `median_ms`, and its fraction of the GEMM peak."""
    gflops = flops / (median_ms * 1e-3) / 1e9
    return {"flops": flops, "gflops": gflops, "fraction_of_peak": gflops / peak_gflops}


def with_roofline(rec: dict[str, Any], peak: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """Attach the GEMM peak (at the row's dtype) and, for an ok row whose model counts its FLOPs,
    GFLOP/s and the fraction of the peak for each timed quantity. Used by `run` and `sweep` alike."""
    if not peak:
        return rec
    rec["gemm_peak"] = dict(peak)
    flops = rec.get("flops")
    if rec.get("status") == "ok" and flops:
        rec["roofline"] = {
            q: roofline(flops[q], rec[q]["median_ms"], peak["gflops"]) for q in ("fwd", "fwd_bwd") if rec.get(q) and flops.get(q)
        }
    return rec


@dataclass
class Roofline:
    """A record annotator (Runner's `annotate`): with_roofline at the GEMM peak of the machine the
    record is annotated on, per dtype, measured (peak_for, cached per machine) on first need and
    kept per hostname: on a Ray node the peak is that node's, measured on the CPUs claimed there
    (choose_cpus), never the parent's. measure() beforehand in the parent reports failures there."""

    threads: int
    sizes: dict[str, list[dict[str, int]]]  # dtype -> the sizes of its timed rows (their GEMM shapes)
    peaks: dict[tuple[str, str], Optional[dict[str, Any]]] = field(default_factory=dict)  # (hostname, dtype)

    def peak(self, dtype: str, warn: Callable[[str], None] = lambda message: None) -> Optional[dict[str, Any]]:
        key = (socket.gethostname(), dtype)
        if key not in self.peaks:
            try:
                self.peaks[key] = peak_for(dtype, self.threads, self.sizes.get(dtype, []))
            except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as exc:
                warn(f"rnnbench: no GEMM peak for {dtype} ({exc}); rows get no % of peak")
                self.peaks[key] = None
        return self.peaks[key]

    def measure(self, warn: Callable[[str], None]) -> None:
        for dtype in sorted(self.sizes):
            self.peak(dtype, warn)

    def __call__(self, rec: dict[str, Any]) -> dict[str, Any]:
        if rec.get("device", "cpu") != "cpu" or rec.get("dtype") not in self.sizes:
            return rec
        return with_roofline(rec, self.peak(rec["dtype"]))


def _peak_main(request: dict[str, Any]) -> dict[str, Any]:
    pin_process(request["cpus"])  # before any framework is imported: its pools see these CPUs only
    before = cpu_clock()
    out = measure_gemms(request["dtype"], int(request["threads"]), [tuple(s) for s in request["shapes"]])
    after = cpu_clock()
    wall = after.wall_s - before.wall_s
    if before.cpus_busy_s is not None and after.cpus_busy_s is not None and wall >= MIN_OTHERS_WALL_S:
        # other work on these CPUs while the GEMMs were timed, in CPUs: peak_for measures again while it is high
        out["others_on_cpus"] = max(0.0, (after.cpus_busy_s - before.cpus_busy_s) - (after.cpu_s - before.cpu_s)) / wall
    return out


if __name__ == "__main__":  # `python -m rnnbench.run.timing peak REQUEST_JSON`: GEMM rates as JSON (peak_for)
    if len(sys.argv) == 3 and sys.argv[1] == "peak":
        print(json.dumps(_peak_main(json.loads(sys.argv[2]))))
    else:
        sys.exit("usage: python -m rnnbench.run.timing peak REQUEST_JSON")
