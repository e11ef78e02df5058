"""Records made fit to publish: every absolute path of the machine that wrote them (its interpreter,
compile-cache directories, tracebacks' file names) is shortened to what says something without
naming that machine's layout. Everything else, numbers included, is left as written.

    python -m rnnbench.report.site.scrub IN.jsonl OUT.jsonl

A path under site-packages keeps its package-relative part ("<site-packages>/torch/_dynamo/x.py"),
one inside a checkout of this repository keeps its repository-relative part ("src/rnnbench/x.py"),
any other keeps its last component ("<path>/python3"). Kernel interfaces (/proc, /sys, /dev) are
not the machine's layout and stay; so do URLs.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

# An absolute path: a "/" not preceded by a word character, ":" or "/" (so not "1/5/15-minute" nor
# the "//host/..." of a URL), then at least two components.
_PATH = re.compile(r"(?<![\w:/.~-])/(?:[\w.+@-]+/)+[\w.+@-]*")
_KEEP = ("/proc/", "/sys/", "/dev/")
_REPO_DIRS = ("src/rnnbench/", "models/", "benchmarks/", "tests/")


def short_path(path: str) -> str:
    """What a published record says instead of the absolute `path`."""
    if path.startswith(_KEEP):
        return path
    if "site-packages/" in path:
        return "<site-packages>/" + path.split("site-packages/", 1)[1]
    for repo_dir in _REPO_DIRS:
        if "/" + repo_dir in path:
            return repo_dir + path.split("/" + repo_dir, 1)[1]
    return "<path>/" + path.rstrip("/").rsplit("/", 1)[-1]


def scrub_text(text: str) -> str:
    return _PATH.sub(lambda m: short_path(m.group(0)), text)


def scrub(value: Any) -> Any:
    """`value` (a decoded record, or any part of one) with every string scrubbed, keys included."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):
        return {scrub_text(k): scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def scrub_file(src: Path, dst: Path) -> int:
    """Write `src`'s records, scrubbed, to `dst` (one JSON object a line, keys in their order);
    returns how many records."""
    lines = [line for line in src.read_text().splitlines() if line.strip()]
    dst.write_text("".join(json.dumps(scrub(json.loads(line))) + "\n" for line in lines))
    return len(lines)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m rnnbench.report.site.scrub IN.jsonl OUT.jsonl")
    print(f"{scrub_file(Path(sys.argv[1]), Path(sys.argv[2]))} records -> {sys.argv[2]}")
