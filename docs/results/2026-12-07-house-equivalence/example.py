import numpy as np

import rnnbench


def step(ops, params, carry, x):
    (h,) = carry
    h = ops.tanh(params["w"] * h + x)
    return (h,), h


report = rnnbench.check_recurrence(step, params={"w": np.array([0.5, -0.3])}, carry0=(np.zeros(2),), xs=np.ones((6, 2)))
print(report)
print(report.trusted_drivers)
