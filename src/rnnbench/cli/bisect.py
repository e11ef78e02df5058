"""`rnnbench bisect`: from a red row to its cause, the commit that broke it or the compiler layer.

    rnnbench bisect GOOD BAD [run options] [--repo PATH] [--rounds 3] [--threshold 10%] [--format text|json]
    rnnbench bisect --layers MODEL/DRIVER[/DTYPE] [--format text|json]

GOOD BAD: the first commit after GOOD where the rows got worse by `compare`'s rule (a status
regression or a decided slowdown), each probed commit checked out apart and its rows run there
(rnnbench.planning.commit_bisect; the run options select the rows as for `compare --commits`).
--layers: the pair checked at each of its framework's compile layers, here, and the first that
breaks its gradient (rnnbench.rows.layers). Exit codes: 0 the answer printed, 1 GOOD's or BAD's
runs failed (one line naming the kept log), 2 bad input (an unknown commit or row, GOOD not an
ancestor of BAD, BAD not worse than GOOD, a driver that does not compile).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from rnnbench.cli import compare as cli_compare
from rnnbench.errors import InputError
from rnnbench.report.escape import terminal

NAME = "bisect"
HELP = "the first commit between GOOD and BAD where rows got worse, or (--layers) the compile layer breaking a gradient"
FORMATS = ("text", "json")
LAYERS_DTYPE = "float32"  # a row's default dtype (rnnbench.rows.row.Job)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("good", nargs="?", metavar="GOOD", help="a commit where the rows are as expected")
    p.add_argument("bad", nargs="?", metavar="BAD", help="a later commit (GOOD is its ancestor) where they are worse")
    p.add_argument(
        "--layers",
        metavar="MODEL/DRIVER[/DTYPE]",
        help="instead of commits: check this row at each compile layer of its framework (torch.compile's "
        f"eager, aot_eager, inductor; jax without and with jit), here; DTYPE defaults to {LAYERS_DTYPE}",
    )
    p.add_argument("--repo", help="the git checkout whose commits are bisected (default: rnnbench's own)")
    p.add_argument("--rounds", type=int, default=3, help="runs of the rows per probed commit (default 3)")
    p.add_argument("--out-dir", help="where the runs' records and logs go (default results/bisect-<time>)")
    p.add_argument("--threshold", action="append", help="as `rnnbench compare --threshold` (default 10%%)")
    p.add_argument("--alpha", default="0.01", help="as `rnnbench compare --alpha` (default 0.01: 99 %% intervals)")
    p.add_argument("--format", choices=FORMATS, default="text", help="text (default) or json")
    run = p.add_argument_group("run options (default: compare --commits' curated selection, 1 thread)")
    for name in cli_compare.RUN_OPTIONS:
        run.add_argument(f"--{name}", help=f"as `rnnbench run --{name}`")


def run(args: argparse.Namespace) -> int:
    if args.layers:
        if args.good or args.bad:
            raise InputError("--layers checks one row here: give no commits")
        return _layers(args)
    if not (args.good and args.bad):
        raise InputError("bisect needs GOOD BAD (two commits), or --layers MODEL/DRIVER[/DTYPE]")
    return _commits(args)


def _commits(args: argparse.Namespace) -> int:
    # lazy: cli: --help and bad input answer without importing the run machinery
    from rnnbench.planning import commit_bisect, commits

    level, patterns = cli_compare.thresholds(list(args.threshold or []))
    judgement = commit_bisect.Judgement(level, alpha=cli_compare.alpha(args.alpha), patterns=patterns)
    if not 1 <= args.rounds <= 20:
        raise InputError(f"--rounds must be 1 to 20, got {args.rounds}")
    given = {name: getattr(args, name) for name in cli_compare.RUN_OPTIONS if getattr(args, name) is not None}
    out_dir = Path(args.out_dir or time.strftime("results/bisect-%Y%m%d-%H%M%S"))
    say = lambda line: print(terminal(line), file=sys.stderr, flush=True)  # noqa: E731
    try:
        found = commit_bisect.bisect_commits(
            args.good,
            args.bad,
            given,
            judgement=judgement,
            rounds=args.rounds,
            out_dir=out_dir,
            repo=Path(args.repo) if args.repo else None,
            say=say,
        )
    except commits.RunFailed as exc:  # ours failed, not the user's input: exit 1
        print(terminal(f"rnnbench: error: {exc}"), file=sys.stderr)
        return 1
    print(json.dumps(as_dict(found), indent=1) if args.format == "json" else "\n".join(map(terminal, lines(found))))
    return 0


def _subject(commit) -> str:
    return f'{commit.short} "{commit.subject}"'


def headline(found) -> str:
    """The one line: the first bad commit (or the range where skips left one) and what changed there."""
    result = found.result
    step = result.step_of(result.first_bad)
    what = step.evidence.summary() if step is not None else ""
    n = len(result.candidates) - 1
    if result.exact:
        where = f"commit {result.first_bad} of {n} after GOOD"
        return f"first bad commit: {_subject(found.first_bad)} ({where}): {what}"
    suspects = ", ".join(c.short for c in result.suspects)
    return (
        f"first bad commit: one of {suspects} (after {_subject(found.last_good)}, the last good; "
        f"{len(result.skipped)} skipped between): at {found.first_bad.short}: {what}"
    )


def lines(found) -> list[str]:
    """The headline, each step (GOOD, BAD, then the probes in order), and the cost."""
    result = found.result
    out = [headline(found)]
    for k, step in enumerate(result.steps):
        label = ("GOOD", "BAD")[k] if k < 2 else f"step {k - 1}"
        out.append(f"  {label:<7} {_subject(step.candidate)}: {step.verdict}: {step.evidence.summary()}")
    n = len(result.candidates) - 1
    probes = len(result.steps) - 2
    out.append(
        f"{probes} probe(s) after BAD for {n} commits after GOOD (log2 {n} = {math.log2(n):.1f}); "
        f"{len(result.steps)} commits run in {found.elapsed_s:.0f} s; records and logs in {found.out_dir}"
    )
    return out


def as_dict(found) -> dict:
    # lazy: cli: --help and bad input answer without importing the run machinery
    from rnnbench.planning.commit_bisect import row_name

    result = found.result
    return {
        "first_bad": None if not result.exact else {"sha": found.first_bad.sha, "subject": found.first_bad.subject},
        "suspects": [{"sha": c.sha, "subject": c.subject} for c in result.suspects],
        "last_good": {"sha": found.last_good.sha, "subject": found.last_good.subject},
        "line": headline(found),
        "rows": {row_name(key): kind for key, kind in found.tracked.items()},
        "commits_after_good": len(result.candidates) - 1,
        "steps": [
            {
                "sha": s.candidate.sha,
                "subject": s.candidate.subject,
                "position": s.index,
                "verdict": str(s.verdict),
                "rows": s.evidence.changes,
                "why": s.evidence.why,
                "files": list(s.evidence.files),
            }
            for s in result.steps
        ],
        "out_dir": str(found.out_dir),
        "elapsed_s": found.elapsed_s,
    }


def _layers(args: argparse.Namespace) -> int:
    # lazy: cli: --help and bad input answer without importing the checking machinery
    from rnnbench import registry
    from rnnbench.losses import with_loss
    from rnnbench.model import DTYPES
    from rnnbench.rows.layers import attribute
    from rnnbench.rows.pair import unavailable_reason

    parts = args.layers.split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise InputError(
            f"--layers {args.layers!r}: give MODEL/DRIVER or MODEL/DRIVER/DTYPE (e.g. rnn/torch_loop_compiled)"
        )
    model, driver = registry.get_model(parts[0]), registry.get_driver(parts[1])
    dtype = parts[2] if len(parts) == 3 else LAYERS_DTYPE
    if dtype not in DTYPES:
        raise InputError(f"--layers: unknown dtype {dtype!r} (one of {', '.join(DTYPES)})")
    reason = unavailable_reason(model, driver, dtype=dtype)
    if reason is not None:
        raise InputError(f"--layers: {model.name}/{driver.name}/{dtype} cannot run here: {reason}")
    model, case = with_loss(model, model.make_case(model.sizes_with_defaults({}), 0), "model")
    found = attribute(model, driver, case.rounded_to(dtype), dtype=dtype)
    if args.format == "json":
        print(json.dumps(found.to_dict(), indent=1))
    else:
        print("\n".join(terminal(line) for line in [found.line(), *(f"  {c.evidence()}" for c in found.layers)]))
    return 0
