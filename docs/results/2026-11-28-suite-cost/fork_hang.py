"""Is forking the check's process safe for the torch drivers? The parent uses torch's OpenMP pool
(a large matmul) and compiles a function; the forked child runs the same matmul. Prints whether
the child finished within the timeout.

    python fork_hang.py [timeout_s]
"""

import os
import signal
import sys
import time

import torch

timeout = float(sys.argv[1]) if len(sys.argv) > 1 else 60
a = torch.randn(2000, 2000)
for _ in range(3):
    (a @ a).sum()  # the parent's OpenMP threads start
pid = os.fork()
if pid == 0:
    started = time.perf_counter()
    (a @ a).sum()
    print(f"child: matmul done in {time.perf_counter() - started:.2f} s", flush=True)
    os._exit(0)
deadline = time.perf_counter() + timeout
while time.perf_counter() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        print(f"child exited ({status}) after {timeout - (deadline - time.perf_counter()):.1f} s")
        break
    time.sleep(0.5)
else:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    print(f"child made no progress in {timeout:.0f} s (killed): torch after fork hangs here")
print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, load {os.getloadavg()}")
