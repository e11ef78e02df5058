"""Where one eager torch scan training step goes (torch_scan, the quick suite's sizes, float32, one thread).

Run from the repository root:  nice -n 10 .venv/bin/python docs/results/2026-11-28-torch-scan-eager/scan_profile.py lstm
Prints, per call: CPU time (time.process_time, so that other work on a loaded machine does not count) of the
forward, the forward+backward and the forward under no_grad; how many times torch traces the step with make_fx
(torch._higher_order_ops.utils.materialize_as_graph) and where; dynamo frames compiled; the same step with the
partitioned joint graph built once (an experiment on torch's internals, not a fix); a cProfile and a
torch.profiler summary of three training steps.
"""

import cProfile
import io
import pstats
import re
import sys
import time
import traceback
from collections import Counter

import numpy as np
import torch

torch.set_num_threads(1)
import torch._higher_order_ops.partitioner as partitioner  # noqa: E402
import torch._higher_order_ops.utils as hop_utils  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

from rnnbench import registry  # noqa: E402

scan_module = sys.modules["torch._higher_order_ops.scan"]  # the attribute `scan` of the package is the function
REPS = 9
traces: Counter = Counter()
original_materialize = hop_utils.materialize_as_graph


def counted_materialize(*args, **kwargs):
    caller = traceback.extract_stack(limit=2)[0]
    traces[f"{caller.filename.split('torch/')[-1]}:{caller.name}"] += 1
    return original_materialize(*args, **kwargs)


scan_module.materialize_as_graph = partitioner.materialize_as_graph = counted_materialize
hop_utils.materialize_as_graph = counted_materialize

model = registry.get_model(sys.argv[1] if len(sys.argv) > 1 else "lstm")
sizes = model.sizes_with_defaults({})
case = model.make_case(sizes, 0).rounded_to("float32")
prepared = registry.get_driver("torch_scan").prepare(model, case, "float32", "cpu")
print(f"{model.name} {sizes} torch {torch.__version__}, torch threads {torch.get_num_threads()}")


def cpu_ms(fn, reps=REPS) -> float:
    samples = []
    for _ in range(reps):
        start = time.process_time()
        fn()
        samples.append(time.process_time() - start)
    return float(np.median(samples)) * 1e3


def no_grad_forward():
    with torch.no_grad():
        prepared.forward()


def report(label: str) -> None:
    for _ in range(2):
        prepared.forward_backward()
    frames = counters["frames"]["total"]
    fwd, fwd_bwd, inference = cpu_ms(prepared.forward), cpu_ms(prepared.forward_backward), cpu_ms(no_grad_forward)
    traces.clear()
    prepared.forward_backward()
    print(f"\n{label}: CPU ms per call (median of {REPS}): forward {fwd:.1f}, forward+backward {fwd_bwd:.1f}, "
          f"forward under no_grad {inference:.2f}")
    print(f"  make_fx traces per training step: {sum(traces.values())} {dict(traces)}")
    print(f"  dynamo frames compiled during the timed calls: {counters['frames']['total'] - frames}")


report("torch as installed")
loss0, grads0 = prepared.loss_and_grads()

profile = cProfile.Profile(time.process_time)
profile.enable()
for _ in range(3):
    prepared.forward_backward()
profile.disable()
out = io.StringIO()
stats = pstats.Stats(profile, stream=out).sort_stats("cumulative")
stats.print_stats(r"scan\.py:\d+\((scan|scan_autograd|gen_schema|call_forward|call_backward)\)|"
                  r"create_partitioned_graph|create_hop_joint_graph|min_cut_rematerialization_partition|"
                  r"materialize_as_graph|_drivers/_torch.py|torch_scan.py")
print("\ncProfile of 3 training steps (CPU clock; cumulative seconds, the profiler's own overhead included):")
for line in out.getvalue().splitlines():
    if "(" in line or "ncalls" in line:  # paths from the package roots, no machine paths
        print(re.sub(r"\S*/(site-packages|src)/", "", line))

with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    for _ in range(3):
        prepared.forward_backward()
print("\ntorch.profiler of 3 training steps (aten ops include those run on fake tensors while tracing):")
print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=12))

built = {}
original_partition = partitioner.HopGraphMinCutPartitioner.create_partitioned_graph


def partition_once(*args, **kwargs):
    if "graph" not in built:
        built["graph"] = original_partition(*args, **kwargs)
    return built["graph"]


partitioner.HopGraphMinCutPartitioner.create_partitioned_graph = staticmethod(partition_once)
report("experiment: the partitioned joint graph built once and reused")
loss1, grads1 = prepared.loss_and_grads()
same = loss0 == loss1 and all(np.array_equal(grads0[k], grads1[k]) for k in grads0)
print(f"  loss and gradients bitwise equal to torch as installed: {same}")
