"""Where the slow tier's minutes go: pytest --durations=0 lines summed by test, and for the gradient matrix by
driver (variants apart). Usage: python categories.py slow-workers-durations.txt"""

import collections
import re
import sys

DRIVERS = [  # longest names first: a prefix must not claim a longer driver's rows
    "torch_scan_compiled_clone_y_only", "torch_scan_compiled_default_config", "torch_loop_setitem_compiled",
    "torch_loop_index_put_compiled", "torch_associative_scan_compiled", "torch_scan_compiled", "torch_loop_compiled",
    "jax_lax_scan_unroll8", "jax_loop_buffer", "jax_lax_scan", "jax_loop", "flax_scan", "torch_loop_setitem",
    "torch_loop_index_put", "torch_scan", "torch_loop",
]
total, count = collections.Counter(), collections.Counter()
for line in open(sys.argv[1]):
    seconds, _, node = line.split()[:3]
    test = node.split("[")[0]
    params = re.search(r"\[(.*)\]", node)
    if params and test.endswith("test_gradients_match_oracle"):
        driver = next((d for d in DRIVERS if f"-{d}-" in params.group(1)), "other")
        test += f" {driver}" + (" (variants)" if "@" in params.group(1) else "")
    total[test] += float(seconds.rstrip("s"))
    count[test] += 1
print(f"{'seconds':>8} {'rows':>5}  test (gradient matrix: by driver)")
for test, seconds in total.most_common(30):
    print(f"{seconds:8.1f} {count[test]:5d}  {test}")
print(f"{sum(total.values()):8.1f} {sum(count.values()):5d}  all")
