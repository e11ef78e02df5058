"""The cost of `rnnbench compare` on a long history against `rnnbench table` on the same file.

    .venv/bin/python docs/results/2026-11-28-compare-cost/measure.py OUT_DIR [MB ...] [--before SRC]

Builds a history of MB megabytes (tests/test_compare_inputs.history: many runs of four rows, one
record per row and run) and a new side (one run of the same rows), then times, each in a fresh
process under /usr/bin/time -v: `rnnbench table HISTORY` and `rnnbench compare HISTORY NEW`. With
--before SRC, compare runs from that source tree as well (an older commit's src/, first on
PYTHONPATH). Prints one markdown table row per command: wall seconds, peak RSS (MB), exit code.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))

from test_compare_inputs import ROWS, history  # noqa: E402


def measure(argv: list[str], src: Path | None = None) -> tuple[float, float, int]:
    """(wall s, peak RSS MB, exit code) of `python -m rnnbench.cli ARGV` in a fresh process."""
    env = dict(os.environ, PYTHONPATH=str(src) if src else "")
    proc = subprocess.run(
        ["/usr/bin/time", "-v", sys.executable, "-m", "rnnbench.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
    )
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", proc.stderr)
    hours, minutes, seconds = (float(g) if g else 0.0 for g in wall.groups())
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1))
    return 3600 * hours + 60 * minutes + seconds, rss / 1024, proc.returncode


def main() -> None:
    args = sys.argv[1:]
    before = Path(args.pop(args.index("--before") + 1)) if "--before" in args else None
    if before:
        args.remove("--before")
    out, sizes = Path(args[0]), [float(mb) for mb in args[1:]] or [8.0]
    out.mkdir(parents=True, exist_ok=True)
    probe = history(out / "probe.jsonl", 10)
    per_run = probe.stat().st_size / 10
    new = history(out / "new.jsonl", 1, seed=1)
    print("| history | runs x rows | command | rnnbench | wall s | peak RSS MB | exit |")
    print("|---|---|---|---|---|---|---|")
    for mb in sizes:
        runs = round(mb * 2**20 / per_run)
        path = history(out / f"history-{mb:g}MB.jsonl", runs)
        size = f"{path.stat().st_size / 2**20:.1f} MB"
        commands = [("table", ["table", str(path)], None), ("compare", ["compare", str(path), str(new)], None)]
        if before:
            commands.append(("compare", ["compare", str(path), str(new)], before))
        for name, argv, src in commands:
            wall, rss, code = measure(argv, src)
            tree = "before" if src else "after"
            print(f"| {size} | {runs} x {len(ROWS)} | {name} | {tree} | {wall:.1f} | {rss:.0f} | {code} |")


if __name__ == "__main__":
    main()
