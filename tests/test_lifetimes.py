"""What rnnbench starts and claims ends with it (docs/reliability.md, "Lifetimes"): `compare
--commits`' runs and checkouts, the GEMM-peak measurement process, and the temporary directories,
whose claim a process in another PID namespace respects.

The `compare --commits` cases run against a small git repository whose one commit holds a stand-in
`rnnbench.cli.main` (it hangs, crashes or writes a record, as FAKE_base / FAKE_new say for the run
of each side), so no real run is timed."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from rnnbench.cli import compare as cli_compare
from rnnbench.processes import owned, tmpdirs

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc: Linux")

FAKE_MAIN = """
import os, sys, time
from pathlib import Path

def main(argv):
    mode = os.environ["FAKE_" + Path.cwd().name.split("-")[0]]
    print("started", flush=True)
    if mode == "hang":
        with open(os.environ["FAKE_PIDS"], "a") as f:
            f.write(f"{os.getpid()}\\n")
        time.sleep(120)
    if mode == "crash":
        print("rnnbench: internal error: RuntimeError: boom (full traceback: /nowhere)", flush=True)
        return 1
    Path(argv[argv.index("--out") + 1]).write_text("{}\\n")
    return 0
"""

COMPARE = """
import sys
from pathlib import Path
from rnnbench.planning import commits
commits.repository = lambda: Path(sys.argv[1])
from rnnbench.cli import main
sys.exit(main(["compare", "--commits", "HEAD", "HEAD", "--rounds", "1", "--out-dir", sys.argv[2]]))
"""


def _gone(pid: int, within_s: float = 10.0) -> bool:
    """Whether process `pid` has ended (a zombie counts as ended) within `within_s`."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def _wait_for_pids(path: Path, within_s: float = 60.0) -> list[int]:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return [int(line) for line in path.read_text().split()]
        time.sleep(0.05)
    raise AssertionError(f"nothing started within {within_s} s")


@pytest.fixture()
def fake(tmp_path: Path) -> Iterator[dict]:
    """A git repository holding the stand-in rnnbench, a private TMPDIR, and the compare's env."""
    repo = tmp_path / "repo"
    package = repo / "src" / "rnnbench" / "cli"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text(FAKE_MAIN)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "stand-in"], check=True)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "FAKE_PIDS": str(tmp_path / "pids"), "FAKE_base": "ok", "FAKE_new": "ok"}
    yield {"repo": repo, "tmp": tmp, "env": env, "out": tmp_path / "out", "pids": tmp_path / "pids"}
    for pid in (tmp_path / "pids").read_text().split() if (tmp_path / "pids").exists() else []:
        with contextlib.suppress(ProcessLookupError):  # a failed check leaves no run behind
            os.kill(int(pid), signal.SIGKILL)


def _compare(fake: dict, **modes: str) -> subprocess.Popen:
    env = {**fake["env"], **{f"FAKE_{side}": mode for side, mode in modes.items()}}
    command = [sys.executable, "-c", COMPARE, str(fake["repo"]), str(fake["out"])]
    return subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _worktrees(repo: Path) -> list[str]:
    listing = subprocess.run(
        ["git", "-C", str(repo), "worktree", "list", "--porcelain"], capture_output=True, text=True
    )
    return [line.split(" ", 1)[1] for line in listing.stdout.splitlines() if line.startswith("worktree ")][1:]


def test_a_crashing_commit_is_exit_1_naming_its_run_and_log(fake: dict) -> None:
    proc = _compare(fake, new="crash")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    last = err.strip().splitlines()[-1]
    match = re.fullmatch(
        r"rnnbench: error: --commits: the run (new-[0-9a-f]{10}-run1) exited 1 .*its output: (\S+)", last
    )
    assert match, last
    assert Path(match.group(2)).name == f"{match.group(1)}.log" and "boom" in Path(match.group(2)).read_text()
    assert "--across-machines" not in err
    assert _worktrees(fake["repo"]) == [] and os.listdir(fake["tmp"]) == []


def test_sigkill_of_compare_takes_its_run_and_the_next_start_prunes_its_checkouts(fake: dict) -> None:
    proc = _compare(fake, base="hang")
    (run,) = _wait_for_pids(fake["pids"])
    left = _worktrees(fake["repo"])
    assert len(left) == 2
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert _gone(run), "the run outlived compare"
    assert all(Path(tree).exists() for tree in left)  # no chance to clean up ...
    again = _compare(fake, new="crash")  # ... the next compare does
    again.communicate(timeout=120)
    assert again.returncode == 1
    assert _worktrees(fake["repo"]) == [] and not any(Path(tree).exists() for tree in left)
    assert os.listdir(fake["tmp"]) == []


def test_sigterm_of_compare_cleans_up_and_a_rerun_keeps_the_earlier_log(fake: dict) -> None:
    proc = _compare(fake, base="hang")
    (run,) = _wait_for_pids(fake["pids"])
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert _gone(run)
    assert os.listdir(fake["tmp"]) == [] and _worktrees(fake["repo"]) == []
    (first_log,) = fake["out"].glob("base-*-run1.log")
    again = _compare(fake, new="crash")
    _, err_again = again.communicate(timeout=120)
    assert first_log.read_text() == "started\n"  # the re-run took new names
    assert len(list(fake["out"].glob("base-*-run1-2.log"))) == 1
    parser = argparse.ArgumentParser()
    cli_compare.add_arguments(parser)
    flags = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", err + err_again))
    assert flags <= set(parser._option_string_actions), flags - set(parser._option_string_actions)


SLEEPER = """
import os, time
open(os.environ["SLEEPER_PID"], "w").write(str(os.getpid()))
time.sleep(120)
"""

MEASURING_PARENT = """
import sys
from rnnbench.machine.roofline import in_worker
in_worker("sleeper", {}, python=sys.executable, timeout_s=300, env={}, what="test")
"""


def test_the_peak_measurement_dies_with_its_parent(tmp_path: Path) -> None:
    """`run` measures the GEMM peak in a child (roofline.in_worker); a SIGKILL of `run` ends it."""
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    pid_file = tmp_path / "pid"
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "SLEEPER_PID": str(pid_file)}
    parent = subprocess.Popen([sys.executable, "-c", MEASURING_PARENT], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(pid_file.read_text())
    finally:
        parent.kill()
        parent.wait(30)
    gone = _gone(child)
    if not gone:
        os.kill(child, signal.SIGKILL)
    assert gone, "the measuring process outlived its parent"


def test_a_temp_dir_whose_lock_is_held_is_kept_whatever_its_pid(tmp_path: Path) -> None:
    """A process in another PID namespace names a pid this one sees as dead (here: none such);
    its lock, held, keeps its directory; once free, the directory goes."""
    live = tmp_path / f"{tmpdirs.TMP_PREFIX}{2**22 + 1}-0-abc"
    owned.make_owned(live, tmpdirs.TMP_KIND, "a test's temporary directory")  # as rnnbench makes one: marked
    (live / "worker-1.stderr").write_text("the worker's last words")
    holder = os.open(live / tmpdirs.LOCK_NAME, os.O_CREAT | os.O_RDWR)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        unclaimed = tmp_path / f"{tmpdirs.TMP_PREFIX}{2**22 + 2}-0-old"  # no lock: not claimed, left alone
        unclaimed.mkdir()
        assert tmpdirs.remove_stale_tmpdirs(str(tmp_path)) == []
        assert (live / "worker-1.stderr").exists() and unclaimed.exists()
    finally:
        os.close(holder)
    assert tmpdirs.remove_stale_tmpdirs(str(tmp_path)) == [live]
    assert not live.exists()


def test_a_temp_dir_is_claimed_before_it_appears(tmp_path: Path, monkeypatch) -> None:
    """This process's own directory holds its lock from the moment it carries its name."""
    monkeypatch.setattr(tmpdirs.tempfile, "tempdir", str(tmp_path))
    made = tmpdirs.short_tmpdir("t", 200)
    assert made.name.startswith(f"{tmpdirs.TMP_PREFIX}{os.getpid()}-") and (made / tmpdirs.LOCK_NAME).exists()
    assert tmpdirs.remove_stale_tmpdirs(str(tmp_path)) == [] and made.is_dir()
    assert [p.name for p in tmp_path.iterdir()] == [made.name]  # the hidden name is gone
