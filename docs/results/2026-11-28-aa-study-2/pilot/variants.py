"""Pilot: which reference kernel timing tracks the row across processes. python variants.py DRIVER TIMES OUT"""

import json
import sys
import time

from rnnbench import registry
from rnnbench.run.reference import kernel

driver_name, times, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
model, driver = registry.get_model("rnn"), registry.get_driver(driver_name)
case = model.make_case(model.sizes_with_defaults({"T": 8, "B": 8, "I": 16, "H": 32}), 0).rounded_to("float32")
p = driver.prepare(model, case, "float32", "cpu")
ref = kernel()


def step():
    for _ in range(times):
        r = p.forward_backward()
    p.block(r)


for _ in range(5):
    step()
    ref()
cpu = time.process_time
res = {"row": [], "a": [], "b": [], "c": []}
for i in range(300):
    s = cpu()
    step()
    res["row"].append(cpu() - s)
    v = "abc"[i % 3]
    if v == "a":
        s = cpu()
        ref()
        res["a"].append(cpu() - s)
    elif v == "b":
        s = cpu()
        ref()
        ref()
        ref()
        ref()
        res["b"].append((cpu() - s) / 4)
    else:
        ref()
        s = cpu()
        ref()
        res["c"].append(cpu() - s)
json.dump(res, open(out, "w"))
