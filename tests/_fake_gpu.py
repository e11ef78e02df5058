"""A fake CUDA device for tests on machines without one: torch.cuda's device queries and allocator
statistics, jax's device object and the driver tool's (nvidia-smi) answers are monkeypatched, so
the real query code of the framework layer (drivers/torch/_framework.py, drivers/jax/_framework.py) and of
rnnbench.machine.accelerator runs against them. Tensors stay on the CPU: a fake driver runs its
mechanism on "cpu" while its row says "cuda"."""

from __future__ import annotations

import dataclasses
import os
from types import SimpleNamespace
from typing import Any

from rnnbench.drivers.torch import _framework as _torch

UUID = "GPU-5e1f0a2b-0000-4000-8000-123456789abc"
NAME = "Fake H100 80GB HBM3"
TOTAL = 80 * 2**30
PEAK_ALLOCATED = 1234 * 2**20
OTHER_PID = 999_999  # a process that is neither the test's nor its parent


class FakeAllocator:
    """torch.cuda's allocator statistics: the peak reads PEAK_ALLOCATED once reset was called."""

    def __init__(self) -> None:
        self.resets = 0

    def reset_peak_memory_stats(self, device: Any = None) -> None:
        self.resets += 1

    def max_memory_allocated(self, device: Any = None) -> int:
        assert self.resets, "the peak was read without a reset before the timed steps"
        return PEAK_ALLOCATED

    def max_memory_reserved(self, device: Any = None) -> int:
        return 2 * PEAK_ALLOCATED

    def memory_allocated(self, device: Any = None) -> int:
        return PEAK_ALLOCATED // 2


def patch_torch(monkeypatch) -> FakeAllocator:
    """torch.cuda as on a one-GPU machine (queries and allocator statistics only)."""
    import torch

    allocator = FakeAllocator()
    props = SimpleNamespace(name=NAME, total_memory=TOTAL, major=9, minor=0, uuid=UUID, multi_processor_count=132)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    for name in ("reset_peak_memory_stats", "max_memory_allocated", "max_memory_reserved", "memory_allocated"):
        monkeypatch.setattr(torch.cuda, name, getattr(allocator, name))
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 91300)
    return allocator


def patch_smi(monkeypatch, others: bool = True) -> None:
    """nvidia-smi's answers: the GPU, and on it this process, its parent and (others) one more."""
    from rnnbench.machine import accelerator

    def smi(query: str, what: str) -> list[list[str]]:
        if what == "gpu" and query.startswith("index"):
            return [["0", NAME, UUID, "580.159.04", str(TOTAL // 2**20)]]
        if what == "gpu":
            return [[UUID]]
        pids = [os.getpid(), os.getppid()] + ([OTHER_PID] if others else [])
        return [[UUID, str(pid), "500"] for pid in pids]

    monkeypatch.setattr(accelerator, "_smi", smi)


def cpu_gemm(dtype: str, m: int, k: int, n: int, device: str):
    """The torch device GEMM of the framework layer, run on the CPU (the fake device's compute)."""
    return _torch.cuda_gemm(dtype, m, k, n, "cpu")


# torch as the framework layer has it, except that the fake device is visible and computes on the CPU.
FAKE_TORCH = dataclasses.replace(
    _torch.TORCH,
    name="fake_cuda_torch",
    device_missing=lambda device: None,
    device=dataclasses.replace(_torch.TORCH.device, gemm=cpu_gemm),
)


def on_fake_device(driver):
    """`driver` on FAKE_TORCH, its mechanism run on the CPU whatever device its row names."""

    def prepare(model, case, dtype, device):
        return driver.prepare(model, case, dtype, "cpu")

    return dataclasses.replace(
        driver,
        name=f"fake_cuda_{driver.name}",
        framework=FAKE_TORCH,
        prepare=prepare,
        devices=("cuda",),
        environments=("main",),
    )


class FakeJaxDevice:
    """A jax device object as the CUDA backend has it (kind, platform version, memory statistics)."""

    device_kind = "NVIDIA H100 80GB HBM3"
    compute_capability = "9.0"
    client = SimpleNamespace(platform_version="PJRT C API\ncuda 13000")

    def memory_stats(self) -> dict[str, int]:
        return {"bytes_limit": TOTAL * 3 // 4, "peak_bytes_in_use": 2 * PEAK_ALLOCATED, "bytes_in_use": PEAK_ALLOCATED}
