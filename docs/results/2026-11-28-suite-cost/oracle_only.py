"""The first-order oracle of one realistic row (lstm, T=128, B=32, I=H=256, float32, the model's own
loss), as a row's worker asks for it (rnnbench.check.oracle.oracle_grads): wall seconds, the kind,
and whether the hand-oracle cache (rnnbench.check.oracle_cache) held it before the call."""

import os
import time

from rnnbench import losses, registry
from rnnbench.check import oracle_cache
from rnnbench.check.oracle import oracle_grads

model = registry.get_model("lstm")
base, case = losses.with_loss(model, model.make_case(model.sizes_with_defaults({"T": 128, "B": 32, "I": 256, "H": 256}), 0), "model")
case = case.rounded_to("float32")
load = os.getloadavg()
started = time.perf_counter()
key = oracle_cache.cache_key(base, case)
held = (oracle_cache.root() / f"{key}.npz").exists()
key_s = time.perf_counter() - started
oracle = oracle_grads(base, case)
wall = time.perf_counter() - started
print(f"oracle {oracle.kind}: {wall:.2f} s (key {key_s:.2f} s), cached before: {held}, load {load} -> {os.getloadavg()}")
