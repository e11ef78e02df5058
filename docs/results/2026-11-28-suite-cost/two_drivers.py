"""The README's example on the two drivers of rnnbench.api's docstring, as a script: wall seconds
of the whole process and of the check, with the load before and after."""

import os
import time

T0 = time.perf_counter()
import numpy as np  # noqa: E402

import rnnbench  # noqa: E402


def step(ops, params, carry, x):
    (h,) = carry
    h = ops.tanh(params["w"] * h + x)
    return (h,), h


load = os.getloadavg()
started = time.perf_counter()
report = rnnbench.check_recurrence(
    step, params={"w": np.array([0.5, -0.3])}, carry0=(np.zeros(2),), xs=np.ones((6, 2)), drivers=["torch_loop", "jax_lax_scan"]
)
now = time.perf_counter()
print(f"ok={report.ok} check {now - started:.1f} s, process {now - T0:.1f} s, load {load} -> {os.getloadavg()}")
