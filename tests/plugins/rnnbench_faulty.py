"""Deliberately faulty drivers, loaded through RNNBENCH_PLUGINS by the robustness tests.

Each one fails in a way real drivers do (segfault, hang, OOM kill, allocation failure, exception,
missing framework, non-determinism, a backward that cuts the carry chain); the suite must record the
failure on that row only. faulty_loop is also imported by tests (tests/plugins is on their path)."""

from __future__ import annotations

import ctypes
import dataclasses
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from rnnbench.drivers.base import unflatten
from rnnbench.drivers.torch import _framework as _torch
from rnnbench.drivers.torch import loop as torch_loop
from rnnbench.model import run_forward
from rnnbench.ops import torch_ops

# Not through the registry: this module is imported while the registry collects drivers.
TORCH_LOOP = next(d for d in torch_loop.DRIVERS if d.name == "torch_loop")
TEST = dataclasses.replace(_torch.TORCH, name="test")  # torch underneath, recorded as "test"
MISSING = dataclasses.replace(_torch.TORCH, name="test", module="nosuchframework")


def _fault(name: str, fail, only_model: str | None = None, only_length: int | None = None, **extra):
    """torch_loop, except that `fail()` runs in prepare (for every case, or only those of
    `only_model` / with trip count `only_length`)."""

    def prepare(model, case, dtype, device):
        if (only_model is None or model.name == only_model) and (only_length is None or case.length == only_length):
            fail()
        return TORCH_LOOP.prepare(model, case, dtype, device)

    return dataclasses.replace(
        TORCH_LOOP,
        **{
            "name": name,
            "framework": TEST,
            "summary": f"test: {name}",
            "prepare": prepare,
            "environments": ("main",),
            "repro": None,  # test doubles have no standalone script
            **extra,
        },
    )


def _segfault():
    ctypes.string_at(0)  # reads address 0: SIGSEGV


def _hang():
    time.sleep(3600)


SENTINEL_VAR = "RNNBENCH_FAULTY_SENTINEL"  # a directory: a hanging worker says there that it hangs
PARENT_RAISES_VAR = "RNNBENCH_FAULTY_PARENT_RAISES"  # the parent raises when the hanging row starts
# Set in the environment of one Ray node's processes (not an RNNBENCH_ variable, so a run does not
# forward it to every node): faulty_hang_with_child_on_marked_node hangs there and runs elsewhere.
HANG_ON_NODE_VAR = "FAULTY_HANG_ON_THIS_NODE"


def _hang_with_child(hold_gil: bool = False):
    """Start a child (as inductor's compile workers or jax's helpers are started: it inherits the
    environment), say so in $RNNBENCH_FAULTY_SENTINEL/hanging-<pid>, then hang: asleep, or
    (hold_gil) in C code that never releases the GIL, so no other thread of the worker runs."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    folder = os.environ.get(SENTINEL_VAR)
    if folder:
        tmp = Path(folder) / f".hanging-{os.getpid()}"
        tmp.write_text(f"{os.getpid()} {child.pid}\n")
        tmp.rename(Path(folder) / f"hanging-{os.getpid()}")
    if hold_gil:
        re.match(r"(a|aa)+b", "a" * 80)  # exponential backtracking in _sre, GIL held throughout
    time.sleep(3600)


def _hang_with_child_on_marked_node():
    if os.environ.get(HANG_ON_NODE_VAR):
        _hang_with_child()


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


def faulty_loop(name: str = "faulty_loop", cut_carry_from: int | None = None, detach_params_last: bool = False):
    """torch_loop with one planted backward fault, keyed on the step index t within the run:
    detach the carry entering every step t >= cut_carry_from (0: the docs/bugs.md §1 class, the
    gradient through time lost; 1: the initial carry still differentiated), or detach the
    parameters in the last step."""

    def prepare(model, case, dtype, device):
        inputs, consts, wrt = _torch.model_tensors(model, case, dtype, device)
        ops = torch_ops()

        def recur(step, params, carry, xs, length):
            ys = []
            for t in range(length):
                if cut_carry_from is not None and t >= cut_carry_from:
                    carry = tuple(c.detach() for c in carry)
                p = {k: v.detach() for k, v in params.items()} if detach_params_last and t == length - 1 else params
                carry, y = step(ops, p, carry, None if xs is None else xs[t])
                ys.append(y)
            return ops.stack(ys), carry

        def loss_fn(inputs):
            params, carry0, xs = unflatten(model, case, inputs)
            ys, carry = run_forward(ops, model, params, carry0=carry0, xs=xs, length=case.length, recur=recur)
            return model.loss(ops, consts, ys, carry)

        return _torch.prepared_from_loss(loss_fn, inputs, wrt, settings={})

    return dataclasses.replace(
        TORCH_LOOP,
        name=name,
        framework=TEST,
        summary=f"test: {name}",
        prepare=prepare,
        environments=("main",),
        second_order=False,
        repro=None,  # a standalone script would run torch's loop, not the planted fault
    )


DRIVERS = (
    _fault("faulty_segfault", _segfault),
    _fault("faulty_hang", _hang),
    _fault("faulty_oom_kill", _oom_kill),
    _fault("faulty_memory_hog", _memory_hog),
    _fault("faulty_raises", _raise),
    _fault("faulty_crash_on_rnn", _segfault, only_model="rnn"),
    _fault("faulty_crash_at_length_3", _segfault, only_length=3),  # fuzzed bodies of 3 steps
    _fault("faulty_hang_at_length_3", _hang, only_length=3),
    _fault("faulty_hang_with_child_on_rnn", _hang_with_child, only_model="rnn"),
    _fault("faulty_hang_holding_gil_on_rnn", lambda: _hang_with_child(hold_gil=True), only_model="rnn"),
    _fault("faulty_hang_with_child_at_length_3", _hang_with_child, only_length=3),
    _fault("faulty_hang_with_child_on_marked_node", _hang_with_child_on_marked_node),
    _fault("faulty_missing_framework", _raise, framework=MISSING),
    faulty_loop("faulty_cut_carry", cut_carry_from=1),
    dataclasses.replace(
        TORCH_LOOP,
        name="faulty_nondeterministic",
        framework=TEST,
        prepare=_nondeterministic_prepare,
        environments=("main",),
        repro=None,
    ),
)


def _parent_raises_when_a_hang_starts() -> None:
    """With $RNNBENCH_FAULTY_PARENT_RAISES set, the parent of a run (not its workers) raises
    RuntimeError in its progress display once a worker hangs with a child (an uncaught exception in
    the parent while a worker is busy). The registry imports this module in every process."""
    if not os.environ.get(PARENT_RAISES_VAR) or os.environ.get("RNNBENCH_PARENT_PID"):
        return
    from rnnbench.report.progress import Progress

    start = Progress.start

    def start_then_raise(self, job):
        start(self, job)
        if job.driver == "faulty_hang_with_child_on_rnn" and job.model == "rnn":
            folder = Path(os.environ[SENTINEL_VAR])
            deadline = time.monotonic() + 60
            while not list(folder.glob("hanging-*")) and time.monotonic() < deadline:
                time.sleep(0.05)
            raise RuntimeError("planted parent bug")

    Progress.start = start_then_raise


_parent_raises_when_a_hang_starts()
