"""Does any C++ compiler option that leaves inductor's generated code alone make a kernel's compile
cheaper? Compiles the README example's compiled loop (one loss form) in a fresh cache directory,
keeps the last kernel's g++ command as inductor ran it, and replays it with variants, twice each.

    python compiler_flags.py OUT.txt
"""

import os
import subprocess
import sys
import tempfile
import time

os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp()
from torch._inductor import cpp_builder  # noqa: E402

COMMANDS: list = []
_run = cpp_builder.run_compile_cmd


def run_compile_cmd(cmd_line, cwd):
    COMMANDS.append(cmd_line)
    return _run(cmd_line, cwd)


cpp_builder.run_compile_cmd = run_compile_cmd
import numpy as np  # noqa: E402

import rnnbench  # noqa: E402


def step(ops, params, carry, x):
    (h,) = carry
    h = ops.tanh(params["w"] * h + x)
    return (h,), h


rnnbench.check_recurrence(
    step,
    params={"w": np.array([0.5, -0.3])},
    carry0=(np.zeros(2),),
    xs=np.ones((6, 2)),
    drivers=["torch_loop_compiled"],
    losses=["weighted"],
    order=1,
)
kernel = [c for c in COMMANDS if " -shared " in c and " -include " in c][-1]
variants = {
    "as inductor runs it": kernel,
    "-g0 (no debug line tables)": kernel.replace(" -g1 ", " -g0 "),
    "compile only, no link (-c)": kernel.replace(" -shared ", " -c ")
    .replace(".main.so", ".main.o")
    .split(" -ltorch")[0],
    "gold linker": kernel + " -fuse-ld=gold",
    "-O1 (changes the code)": kernel.replace(" -O3 ", " -O1 "),
    "without the precompiled header": " ".join(
        kernel.split(" -include ")[0:1] + kernel.split(" -include ")[1].split(" ")[1:]
    ),
}
lines = [f"load before {os.getloadavg()}"]
for label, cmd in variants.items():
    seconds = []
    for i in range(2):
        out_dir = tempfile.mkdtemp()
        cmd_i = cmd.replace(".main.so", f".v{i}.so")
        started = time.perf_counter()
        done = subprocess.run(cmd_i, shell=True, cwd=out_dir, capture_output=True)
        seconds.append(time.perf_counter() - started)
        if done.returncode:
            seconds[-1] = float("nan")
    lines.append(f"{label:40s} {min(seconds):6.2f} s {max(seconds):6.2f} s")
lines.append(f"load after {os.getloadavg()}")
ftime = subprocess.run(
    kernel.replace(" -shared ", " -c ").replace(".main.so", ".t.o").split(" -ltorch")[0] + " -ftime-report",
    shell=True,
    cwd=tempfile.mkdtemp(),
    capture_output=True,
    text=True,
)
lines += ["", "-ftime-report (compile only):"] + [
    ln for ln in ftime.stderr.splitlines() if "TOTAL" in ln or "template instantiation" in ln or "phase parsing" in ln
]
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
