import numpy as np

import rnnbench


def step(ops, params, carry, x):  # written once; ops is numpy, torch or jax
    (h,) = carry
    h = ops.tanh(params["w"] * h + x)
    return (h,), h


report = rnnbench.check_recurrence(step, params={"w": np.array([0.5, -0.3])}, carry0=(np.zeros(2),), xs=np.ones((6, 2)))
print(report)  # per driver and loss form: status, max rel error, the oracle's own error bound, H v
print(report.trusted_drivers)  # the drivers this step can be trusted with; report.ok: every driver right
