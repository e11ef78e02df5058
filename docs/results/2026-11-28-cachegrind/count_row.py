"""One curated row's training step, N times, for a cachegrind count: python count_row.py N."""

import sys
import time

from rnnbench import registry

N = int(sys.argv[1])
model, driver = registry.get_model("rnn"), registry.get_driver("torch_loop")
case = model.make_case(model.sizes_with_defaults({"T": 8, "B": 8, "I": 16, "H": 32}), 0).rounded_to("float32")
prepared = driver.prepare(model, case, "float32", "cpu")
for _ in range(3):  # warm-up: the first calls allocate and dispatch for the first time
    prepared.block(prepared.forward_backward())
start = time.process_time()
for _ in range(N):
    prepared.block(prepared.forward_backward())
print(f"loop_cpu_s {time.process_time() - start:.6f} calls {N}")
