"""One selection run at two commits on this machine, interleaved, for `rnnbench compare --commits`
(what `asv continuous` does for asv).

Each commit is installed apart: `git worktree add --detach` checks it out into a temporary
directory, and its runs import rnnbench from there (its `src` first on PYTHONPATH, ahead of the
checkout's own install, for the run and for every worker it starts), with the main environment's
packages; each records its own commit (rnnbench.record.rnnbench_version reads it from the
worktree). The runs alternate A B B A A B ...: a load that drifts during the comparison weighs
both commits alike, and each run is a separate `rnnbench run` whose rows run in separate worker
processes, so the rounds also sample the process-to-process spread. The records and each run's
output stay in the output directory (a re-run into it takes new names); the checkouts live in
this process's temporary directory (rnnbench.processes.tmpdirs), removed however the runs end: a run
dies with compare, a SIGKILL included (descendants.dies_with_me), and the checkouts of a killed
compare are removed, and git's record of them pruned, by the next compare.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from rnnbench.errors import InputError
from rnnbench.processes import descendants, tmpdirs
from rnnbench.suites import CURATED

# The curated selection (rnnbench.suites.CURATED), one thread per row: the default of --commits.
# Named, not as a suite: a run at an older commit knows the names, not necessarily the suite.
DEFAULTS = {
    "models": ",".join(CURATED.models),
    "drivers": ",".join(CURATED.drivers),
    "environments": ",".join(CURATED.environments),
    "threads": "1",
}

# How a run is started in the commit's tree: its own cli.main, whatever its layout.
LAUNCH = "import sys; from rnnbench.cli import main; sys.exit(main(sys.argv[1:]))"
STOP_WAIT_S = 10.0  # an interrupted compare gives its run this long to end itself (its workers, its files)


class RunFailed(RuntimeError):
    """A commit's `rnnbench run` ended without results: not the user's bad input, exit 1 (cli.compare)."""


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise InputError(f"git {' '.join(args)}: {(proc.stderr.strip().splitlines() or ['failed'])[-1]}")
    return proc.stdout.strip()


def repository(path: Path | None = None, *, what: str = "--commits") -> Path:
    """The git checkout at `path` (None: the one this rnnbench runs from); `what` needs one."""
    here = Path(__file__).resolve().parents[3] if path is None else Path(path)
    if shutil.which("git") is None:  # not the checkout's fault: say what is missing
        raise InputError(f"{what} needs git, and there is none on PATH")
    try:
        return Path(git(here, "rev-parse", "--show-toplevel"))
    except (InputError, OSError):
        if path is None:
            raise InputError(f"{what} needs rnnbench run from a git checkout ({here} is not one)") from None
        raise InputError(f"{what}: {here} is not a git checkout") from None


def resolve(repo: Path, revision: str, *, what: str = "--commits") -> str:
    """The full hash of a commit (HEAD~1, a branch, a hash); bad input when git knows no such commit."""
    if revision.startswith("-"):
        raise InputError(f"{what}: {revision!r} is not a commit")
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    except InputError:  # --quiet: git says nothing, so say what it means
        raise InputError(f"{what}: {revision!r} is not a commit of {repo}") from None


def run_arguments(options: Mapping[str, str | bool]) -> list[str]:
    """`rnnbench run` arguments: the curated selection at one thread (DEFAULTS) unless options
    select otherwise (a --suite replaces the curated models, drivers and environment)."""
    chosen = dict(DEFAULTS)
    if "suite" in options:
        for name in ("models", "drivers", "environments"):
            chosen.pop(name)
    chosen.update(options)
    # a flag (True) goes alone, as `--profile`
    return [
        arg
        for name, value in chosen.items()
        for arg in ((f"--{name}",) if value is True else (f"--{name}", str(value)))
    ]


def run_once(tree: Path, arguments: list[str], out: Path, log: Path, *, what: str = "--commits") -> int:
    """One `rnnbench run` of the commit checked out at `tree`, records to `out`, its output to
    `log`. Returns its exit code: 0, or 1 for failing rows (a result); RunFailed when it ended
    otherwise, wrote no record, or ended with an error line (`rnnbench: ...error: ...`)."""
    path = [str(tree / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    command = [sys.executable, "-c", LAUNCH, "run", *arguments, "--out", str(out)]
    with (
        open(log, "w") as f,
        subprocess.Popen(
            descendants.dies_with_me(command), cwd=tree, env=env, stdout=f, stderr=subprocess.STDOUT
        ) as proc,
    ):
        try:
            code = proc.wait()
        except BaseException:  # compare interrupted: the run ends itself (workers, its temp dir) or is killed
            proc.terminate()
            try:
                proc.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()  # waited for on leaving the block; its temp dir is removed by the next rnnbench
            raise
    last = (log.read_text(errors="replace").strip().splitlines() or [""])[-1]  # its exit line, if any
    failed = last.startswith("rnnbench:") and "error: " in last  # an internal error or a refused write
    if code not in (0, 1) or failed or not (out.exists() and out.stat().st_size):
        raise RunFailed(f"{what}: the run {out.stem} exited {code} without results; its output: {log}")
    return code


def fresh_tag(out_dir: Path) -> str:
    """ "" or "-N": what this run's file names end in, so a re-run into `out_dir` keeps the earlier files."""
    tags = itertools.chain([""], (f"-{n}" for n in itertools.count(2)))
    return next(tag for tag in tags if not any(out_dir.glob(f"*-run[0-9]*{tag}.log")))


@contextlib.contextmanager
def checked_out(repo: Path, shas: Sequence[str], names: Sequence[str]) -> Iterator[list[Path]]:
    """Each commit of `shas` checked out (`git worktree add --detach`) into this process's temporary
    directory as `names[i]`; removed, and git's record of them pruned, on leaving however it is left.
    A killed process's checkouts are removed, and pruned, by the next one's entry (module docstring)."""
    tmpdirs.remove_stale_tmpdirs()  # a killed compare's checkouts among them; git forgets them:
    subprocess.run(["git", "-C", str(repo), "worktree", "prune"], capture_output=True, timeout=300)
    trees = [tmpdirs.run_tmpdir() / name for name in names]
    try:
        for tree, sha in zip(trees, shas, strict=True):
            git(repo, "worktree", "add", "--detach", "--quiet", str(tree), sha)
        yield trees
    finally:  # the checkouts, then git's record of them
        for tree in trees:
            # not routed through rnnbench.processes.owned: `git worktree add` made this path, inside this
            # process's own run directory (an owned folder), and refuses to make it where anything is
            shutil.rmtree(tree, ignore_errors=True)
        subprocess.run(["git", "-C", str(repo), "worktree", "prune"], capture_output=True, timeout=300)


def run_commits(
    base: str,
    new: str,
    options: Mapping[str, str | bool],
    *,
    rounds: int,
    out_dir: Path,
    say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> tuple[list[Path], list[Path], tuple[str, str]]:
    """Run the selection at `base` and `new` in `rounds` alternating rounds (module docstring).
    Returns the base's results files, the new side's, and the two sides' labels."""
    repo = repository()
    shas = resolve(repo, base), resolve(repo, new)
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    arguments = run_arguments(options)
    files: tuple[list[Path], list[Path]] = ([], [])
    started = time.perf_counter()
    again = fresh_tag(out_dir)
    names = [f"{side}-{sha[:10]}" for side, sha in zip(("base", "new"), shas)]
    with checked_out(repo, shas, names) as trees:
        for r in range(rounds):
            for side in (0, 1) if r % 2 == 0 else (1, 0):
                name, t0 = f"{('base', 'new')[side]}-{shas[side][:10]}-run{r + 1}{again}", time.perf_counter()
                code = run_once(trees[side], arguments, out_dir / f"{name}.jsonl", out_dir / f"{name}.log")
                files[side].append(out_dir / f"{name}.jsonl")
                say(f"rnnbench compare: {name}: {time.perf_counter() - t0:.0f} s (exit {code})")
    say(f"rnnbench compare: {2 * rounds} runs in {time.perf_counter() - started:.0f} s; records and logs in {out_dir}")
    labels = tuple(f"{rev} ({sha[:10]}, {rounds} run{'s' * (rounds > 1)})" for rev, sha in zip((base, new), shas))
    return files[0], files[1], labels  # type: ignore[return-value]
