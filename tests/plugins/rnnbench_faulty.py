"""Deliberately faulty drivers, loaded through RNNBENCH_PLUGINS by the robustness tests.

Each one fails in a way real drivers do (segfault, hang, OOM kill, allocation failure, exception,
missing framework, non-determinism); the suite must record the failure on that row only."""

from __future__ import annotations

import ctypes
import dataclasses
import os
import signal
import time

import numpy as np

from rnnbench.drivers.torch_loop import DRIVER as TORCH_LOOP


def _fault(name: str, fail, only_model: str | None = None, **extra):
    """torch_loop, except that `fail()` runs in prepare (for every model, or only `only_model`)."""

    def prepare(model, case, dtype, device):
        if only_model is None or model.name == only_model:
            fail()
        return TORCH_LOOP.prepare(model, case, dtype, device)

    return dataclasses.replace(TORCH_LOOP, name=name, framework="test", summary=f"test: {name}", prepare=prepare,
                               environments=("main",), **extra)


def _segfault():
    ctypes.string_at(0)  # reads address 0: SIGSEGV


def _hang():
    time.sleep(3600)


def _oom_kill():
    os.kill(os.getpid(), signal.SIGKILL)  # what the kernel's OOM killer sends


def _memory_hog():
    hoard = []
    while True:  # touches every page: under --memory-limit-gb this ends in MemoryError
        hoard.append(np.ones(2**25))


def _raise():
    raise ValueError("driver bug")


def _nondeterministic_prepare(model, case, dtype, device):
    p = TORCH_LOOP.prepare(model, case, dtype, device)
    calls = [0]

    def loss_and_grads():
        calls[0] += 1
        loss, grads = p.loss_and_grads()
        name = next(iter(grads))
        return loss, {**grads, name: grads[name] * (1 + 1e-15 * calls[0])}

    return dataclasses.replace(p, loss_and_grads=loss_and_grads)


DRIVERS = (
    _fault("faulty_segfault", _segfault),
    _fault("faulty_hang", _hang),
    _fault("faulty_oom_kill", _oom_kill),
    _fault("faulty_memory_hog", _memory_hog),
    _fault("faulty_raises", _raise),
    _fault("faulty_crash_on_rnn", _segfault, only_model="rnn"),
    _fault("faulty_missing_framework", _raise, available=lambda: "python package 'nosuchframework' is not installed"),
    dataclasses.replace(TORCH_LOOP, name="faulty_nondeterministic", framework="test", prepare=_nondeterministic_prepare,
                        environments=("main",)),
)
