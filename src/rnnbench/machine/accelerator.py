"""What a CUDA row ran on and what it used of it: the accelerator's identity, the device memory of
the row's timed step, the GPU's GEMM peak (measured like the CPU one, cached per device) and
whether the row had the GPU and a launch thread to itself.

Framework-specific queries live in the framework layer (Framework.device: DeviceQueries); this
module only combines them, so every framework's GPU is described the same way:

- identity: each framework present reports the device as it sees it (torch: name, memory, compute
  capability, CUDA runtime, cuDNN; jax: its backend's device kind and platform version), the
  driver's own tool (nvidia-smi) the driver version and UUID. A row's record carries the union in
  machine.accelerator; its machine label (rnnbench.report.labels.machine_of) then tells two GPUs of
  one host, or of two hosts, apart.
- device memory: the framework's allocator peak around the timed steps (reset before where the
  allocator can reset), recorded with what the figure means.
- peak: the best GEMM any framework present does on the device at the row's dtype (float32 with
  TF32 off, as the rows run; bfloat16 on the tensor cores), over square sizes and the rows' own
  GEMM shapes, in a fresh process (the parent holds no GPU context while rows run), cached per
  device under the same rules as the CPU peak (rnnbench.machine.roofline.peak_for).
- contention: a GPU row's time is the GPU's and its launch thread's. It is marked contended when
  another process held a context on the GPU while it was timed (`gpu_shared`), or when other work
  left its CPUs less than one free core for the thread that launches kernels (`launch_starved`);
  the CPU rules for compute threads (timing.contention_notes) are kept under cpu.host_notes.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rnnbench import record
from rnnbench.machine.cpus import CONTENDED_CPUS, load_average

GPU_SQUARES = (4096, 8192)  # a GPU reaches its GEMM rate only on large products: measured besides timing's squares
SMI_TIMEOUT_S = 20.0
NOTES = {
    "gpu_shared": "another process held a context on the row's GPU while it was timed",
    "launch_starved": "other work left the row's CPUs less than one free core for the thread that launches kernels",
}
PEAK_METHOD = (
    "best GEMM among the frameworks present (torch.matmul with TF32 off, jax.jit(jnp.matmul) at precision "
    "highest; bfloat16 on the tensor cores) on the row's device at its dtype, in a fresh process: square n = "
    "256..8192 and the rows' own GEMM shapes, 2mkn / fastest call (each call waited for; 2 warm-ups, then "
    "at least 10 calls and 0.3 s), max over shapes and frameworks"
)


def device_index(device: str) -> int:
    """0 for "cuda", 1 for "cuda:1"."""
    return int(device.split(":", 1)[1]) if ":" in device else 0


def _smi(query: str, what: str) -> list[list[str]]:
    """Rows of `nvidia-smi --query-<what>=<query>` (empty where the tool is absent or fails)."""
    try:
        proc = subprocess.run(
            ["nvidia-smi", f"--query-{what}={query}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=SMI_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if proc.returncode != 0:
        return []
    return [[cell.strip() for cell in line.split(",")] for line in proc.stdout.splitlines() if line.strip()]


def driver_identity(device: str) -> dict[str, Any]:
    """What the driver's tool says of the device: name, UUID, driver version, total memory."""
    rows = _smi("index,name,uuid,driver_version,memory.total", "gpu")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    index = device_index(device)
    if visible:  # the process's device i is the i-th visible one; nvidia-smi counts all
        names = [v.strip() for v in visible.split(",") if v.strip()]
        index_or_uuid = names[index] if index < len(names) else None
    else:
        index_or_uuid = str(index)
    for row in rows:
        if len(row) == 5 and index_or_uuid in (row[0], row[2]):
            return {"name": row[1], "uuid": row[2], "driver_version": row[3], "total_memory_mb": _int(row[4])}
    return {}


def _int(text: str) -> int | None:
    try:
        return int(float(text))
    except ValueError:
        return None


def merge_identity(reports: Mapping[str, Mapping[str, Any]], driver: Mapping[str, Any]) -> dict[str, Any]:
    """One machine.accelerator from each framework's report and the driver tool's: a field the
    driver's tool gives wins (it is the device's own account), then the first framework's;
    `reported_by` keeps every source's fields as given."""
    out: dict[str, Any] = {}
    for report in [driver, *reports.values()]:
        for key, value in report.items():
            if value is not None and key not in out:
                out[key] = value
    out["reported_by"] = {
        **({"nvidia-smi": dict(driver)} if driver else {}),
        **{k: dict(v) for k, v in reports.items()},
    }
    return out


def identity(frameworks: Iterable[Any], device: str) -> dict[str, Any]:
    """machine.accelerator for `device` from the frameworks given (each Framework.device.identity;
    a framework that fails to answer is recorded with its error)."""
    reports: dict[str, dict[str, Any]] = {}
    for framework in frameworks:
        try:
            reports[framework.name] = dict(framework.device.identity(device))
        except Exception as exc:  # one framework's failure leaves the others' answers
            reports[framework.name] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
    reports = {k: v for k, v in reports.items() if v}
    driver = driver_identity(device)
    return merge_identity(reports, driver) if reports or driver else {}


def label(accelerator: Mapping[str, Any]) -> str:
    """How merged views name a GPU (rnnbench.record.accelerator_label)."""
    return record.accelerator_label(dict(accelerator))


# ---------------------------------------------------------------------------------------------
# Device memory of the timed step, and whether the row had the GPU to itself


def gpu_processes(uuid: str | None) -> list[dict[str, Any]] | None:
    """Processes with a context on the GPU `uuid` ({pid, used_mb}), or None where unknown."""
    if not uuid:
        return None
    rows = _smi("gpu_uuid,pid,used_memory", "compute-apps")
    if not rows and not _smi("uuid", "gpu"):
        return None  # no tool: unknown, not "alone"
    return [{"pid": _int(r[1]), "used_mb": _int(r[2])} for r in rows if len(r) == 3 and r[0] == uuid]


@dataclass
class RowDevice:
    """One CUDA row's device bookkeeping in its worker: start() before the timed steps, finish()
    after them; fill(rec) writes machine.accelerator, device_memory and the GPU contention notes."""

    framework: Any
    device: str
    accelerator: dict[str, Any] = field(default_factory=dict)
    processes: list[list[dict[str, Any]] | None] = field(default_factory=list)
    memory: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.accelerator = identity([self.framework], self.device)

    def start(self) -> None:
        self.framework.device.reset_peak(self.device)
        self.processes.append(gpu_processes(self.accelerator.get("uuid")))

    def finish(self, prepared: Any) -> None:
        self.processes.append(gpu_processes(self.accelerator.get("uuid")))
        try:
            self.memory = self.framework.device.read_peak(self.device, prepared)
        except Exception as exc:  # a failed query is recorded, not a failed row
            self.memory = {"error": f"{type(exc).__name__}: {exc}"[:200]}

    def others(self) -> list[dict[str, Any]] | None:
        """Processes other than this worker and its rnnbench parent seen on the GPU (None: unknown)."""
        if not self.processes or any(p is None for p in self.processes):
            return None
        mine = {os.getpid(), os.getppid()}
        seen = {p["pid"]: p for snapshot in self.processes for p in snapshot or [] if p["pid"] not in mine}
        return sorted(seen.values(), key=lambda p: p["pid"] or 0)

    def fill(self, rec: dict[str, Any]) -> dict[str, Any]:
        rec.setdefault("machine", {})["accelerator"] = self.accelerator
        if self.memory is not None:
            rec["device_memory"] = self.memory
        if "cpu" in rec and self.processes:  # timed: whether it had the GPU and a launch thread
            others = self.others()
            parent = [
                p["used_mb"]
                for snapshot in self.processes
                for p in snapshot or []
                if p["pid"] == os.getppid() and p["used_mb"] is not None
            ]
            rec["gpu_contention"] = {
                "other_processes": others,
                "parent_pid": os.getppid(),
                "parent_used_mb": max(parent, default=None),
                "method": "nvidia-smi compute apps on the row's GPU before and after its timed steps, this worker "
                "and its rnnbench parent (which computes nothing while rows run) left out; null: unknown",
            }
            rec["cpu"] = gpu_cpu_record(rec["cpu"], bool(others))
        return rec


def gpu_cpu_record(cpu: dict[str, Any], shared: bool) -> dict[str, Any]:
    """A CUDA row's cpu record: the CPU rules' notes kept as host_notes, its notes the GPU rules'
    (gpu_shared, launch_starved): a GPU row needs one free core, for the thread that launches its
    kernels, not `threads` of them."""
    out = {**cpu, "host_notes": list(cpu.get("notes") or [])}
    notes = ["gpu_shared"] if shared else []
    free_cpus = len(cpu.get("affinity") or [1]) - (cpu.get("others_on_cpus") or 0.0)
    # measured like the CPU rows' load note (others_on_machine), not from the lagging load average
    free_machine = (cpu.get("machine_cpus") or 1) - (cpu.get("others_on_machine") or 0.0)
    if free_cpus < 1 - CONTENDED_CPUS or free_machine < 1 - CONTENDED_CPUS:
        notes.append("launch_starved")
    out["notes"] = notes
    return out


def load_line(cores: int | None = None, load: float | None = None) -> str:
    """The line a CUDA run says about the machine before it times: its rows need one free core each."""
    cores = cores or os.cpu_count() or 1
    if load is None:
        averages = load_average()
        load = averages[0] if averages else 0.0
    starved = cores - load < 1 - CONTENDED_CPUS
    return f"load average {load:.1f} on {cores} cores at start" + (
        ": GPU rows' launch threads may be starved" if starved else " (GPU rows need one free core each)"
    )
