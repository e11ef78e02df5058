"""No path of the machine a file was written on is in the repository: not in the source, the
docs, the scripts, nor the committed records and consoles of docs/results (docs/results/README.md
names the placeholders used there instead: <checkout>, <scratch>, <tmp>, ~).

The rule: a tracked text file holds no absolute path under a home directory (/home/<user>,
/Users/<user>, /root/), under /work/, or under /tmp/ with a concrete name (/tmp/x: a file one run
made). A template with a placeholder (/tmp/torchinductor_<user>) names no machine and passes; so do
system paths that are the same everywhere (/proc/stat, /dev/null, /etc/...)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MACHINE_PATH = re.compile(r"/(?:home|Users)/[A-Za-z0-9_.-]+|/root/|/wor[k]/|/tmp/[A-Za-z0-9_.-]+(?![A-Za-z0-9_.<-])")


def _tracked() -> list[Path]:
    proc = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True)
    if proc.returncode != 0:
        pytest.skip("not a git checkout")
    return [REPO / name for name in proc.stdout.decode().split("\0") if name]


def test_no_tracked_file_holds_a_machine_path() -> None:
    found = []
    for path in _tracked():
        if path == Path(__file__).resolve():  # the rule's own examples
            continue
        try:
            text = path.read_bytes().decode("utf-8")
        except (UnicodeDecodeError, OSError):  # binary (PNG) or absent from the work tree
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for m in MACHINE_PATH.finditer(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {m.group(0)}")
    assert not found, f"{len(found)} machine path(s), e.g.:\n" + "\n".join(found[:20])


@pytest.mark.parametrize(
    "line, machine",
    [
        ("records in /work/dr/quick/q.jsonl", True),
        ("REPO=/home/alice/rnnbench", True),
        ("/Users/bob/x", True),
        ("~ is /root/.cache", True),
        ("--out /tmp/readme-run.jsonl", True),
        ("mktemp -d /tmp/rb-XXXX", True),
        ("# /tmp/torchinductor_<user>), so", False),
        ("/proc/stat", False),
        ("/dev/null", False),
        ("<checkout>/.venv/bin/python", False),
        ("$TMPDIR/idiomatic", False),
        ("a/tmp/ directory", False),
    ],
)
def test_the_rule(line: str, machine: bool) -> None:
    assert bool(MACHINE_PATH.search(line)) == machine
