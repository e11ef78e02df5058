#!/usr/bin/env python
"""torch's double backward of a ** b (both tensors requiring grad) at an exponent exactly 0 drops
d/db of df/da: f = a^b has d2f/(db da) = a^(b-1) (1 + b log a) = 1/a at b = 0, and the Hessian of a
smooth function is symmetric. torch gives 0 for d/db (df/da) and 1/a for d/da (df/db).

Standalone: torch only. Exit 1 while the bug reproduces, 0 once it is fixed, 3 if another failure
comes first.
"""

import sys

import torch

A = 2.0
print(f"torch {torch.__version__}: f = a ** b at a = {A}, b = 0; want d2f/(db da) = 1/a = {1 / A}")
try:
    a = torch.tensor(A, dtype=torch.float64, requires_grad=True)
    b = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
    df_da, df_db = torch.autograd.grad(a**b, (a, b), create_graph=True)
    (d_db_of_df_da,) = torch.autograd.grad(df_da, b, allow_unused=True)
    (d_da_of_df_db,) = torch.autograd.grad(df_db, a)
except Exception as e:  # noqa: BLE001
    print(f"another failure first: {type(e).__name__}: {e}")
    sys.exit(3)
got = 0.0 if d_db_of_df_da is None else d_db_of_df_da.item()
print(f"  d/db (df/da) = {got}   d/da (df/db) = {d_da_of_df_db.item()}")
print(f"got {got}, want {1 / A}")
sys.exit(1 if abs(got - 1 / A) > 1e-12 else 0)
