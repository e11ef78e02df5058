#!/usr/bin/env python
"""torch_xla 2.9.0: a process segfaults (SIGSEGV in PjRtComputationClient::ExecuteComputation, on an XLA
thread-pool thread) at the first graph execution after a torch_xla.experimental.scan whose backward
raised, while that exception is still alive.

Sequence (in a child process):
  1. scan over a step that never reads one of its carry leaves; .backward() raises the AssertionError
     "assert carry_len + y_len == len(fn_outputs)" in _scan_impl_flat (the reverse scan). It is caught
     and the exception is kept, as a harness does that returns it from inside its `except` block for a
     report (the exception <-> frame reference cycle keeps it until the cyclic GC runs).
  2. a valid scan + backward + torch_xla.sync(): SIGSEGV.

Why: _scan_impl_flat traces the step on xb.create_placeholder_tensor() tensors (no device buffer) and
the assertion fires after that trace; the traceback's frames keep those placeholders and the lazy
tensors computed from them alive. The next sync gathers every live XLA tensor into one graph,
so it executes a computation whose parameter is a placeholder without data.

Controls (each in a fresh child): step 2 alone; step 1, the exception dropped and gc.collect(), then
step 2. Both must finish normally.

Run with PJRT_DEVICE=CPU (set here when unset). Standalone: torch, torch_xla, numpy.
Exit 1 while the bug reproduces (child killed by SIGSEGV), 0 when the child finishes normally,
3 when a control fails or the child ends some other way.
"""
import os
import signal
import subprocess
import sys

import numpy as np

A0, H0, XS0 = np.array([0.7, -0.4]), np.array([0.2, 0.1]), np.array([[0.5, -0.3], [0.1, 0.9], [-0.6, 0.4]])


def child(mode: str) -> None:
    import gc

    import torch
    import torch_xla
    from torch_xla.experimental.scan import scan

    dev = torch_xla.device()
    t = lambda v: torch.tensor(v, dtype=torch.float64, device=dev)  # noqa: E731

    def failing_scan() -> None:
        """carry (a, h, k): the step never reads k, so the scan's backward raises."""
        a = t(A0).requires_grad_()
        (_, h, k), _ = scan(lambda c, x: ((c[0], c[0] * c[1] + x, c[0] * x), c[1] * 1.0),
                            (a, t(H0), t(np.zeros(2))), t(XS0))
        (h.sum() + k.sum()).backward()

    def valid_scan() -> np.ndarray:
        a = t(A0).requires_grad_()
        (_, h), _ = scan(lambda c, x: ((c[0], c[0] * c[1] + x), c[1] * 1.0), (a, t(H0)), t(XS0))
        h.sum().backward()
        torch_xla.sync(wait=True)
        return a.grad.cpu().numpy()

    def attempt(fn):
        try:
            fn()
            return None
        except Exception as exc:  # noqa: BLE001 -- a harness keeps the error for its report
            return exc

    if mode in ("sequence", "dropped"):
        err = attempt(failing_scan)
        print(f"  [child] step 1: scan's backward raised {type(err).__name__} "
              f"{'(caught, kept)' if mode == 'sequence' else '(caught, dropped, gc.collect())'}", flush=True)
        if mode == "dropped":
            del err
            gc.collect()
    print("  [child] step 2: valid scan + backward + torch_xla.sync(wait=True)", flush=True)
    print(f"  [child] step 2 finished: d sum(h_T)/d a = {valid_scan()}", flush=True)


def run_child(mode: str) -> int:
    env = {**os.environ, "PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "CPU")}
    return subprocess.run([sys.executable, __file__, "--child", mode], env=env).returncode


def main() -> int:
    import torch_xla

    print(f"torch_xla {torch_xla.__version__}")
    print("control A: step 2 alone in a fresh process")
    rc_alone = run_child("alone")
    print("control B: step 1, its exception dropped and gc.collect(), then step 2")
    rc_dropped = run_child("dropped")
    print("sequence: step 1 (exception kept), then step 2")
    rc = run_child("sequence")
    print(f"controls: alone rc={rc_alone}, dropped rc={rc_dropped}")
    if rc_alone != 0 or rc_dropped != 0:
        print("a control did not finish normally: this script cannot tell the bug from something else")
        return 3
    if rc == -signal.SIGSEGV:
        print("child killed by SIGSEGV after a scan whose backward raised (unread carry leaf, exception kept) "
              "and a second, valid scan: the bug reproduces")
        return 1
    if rc == 0:
        print("child finished normally: the bug does not reproduce")
        return 0
    print(f"child ended with rc={rc}")
    return 3


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
        sys.exit(0)
    sys.exit(main())
