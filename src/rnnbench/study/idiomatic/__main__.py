"""`python -m rnnbench.study.idiomatic`: the idiomatic comparison's command line (rnnbench.study.idiomatic)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from rnnbench.status import Status
from rnnbench.study import idiomatic
from rnnbench.study.idiomatic.plan import Plan, plan_for
from rnnbench.study.idiomatic.run import families, pin_cpus, run_family, run_worker
from rnnbench.study.idiomatic.tables import comparison_records, ratio_table, sweep_records, write_jsonl


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rnnbench.study.idiomatic", description=idiomatic.__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--out", help="output prefix: writes <out>.jsonl, <out>.md, <out>-tgrowth.jsonl, <out>-tgrowth.png"
    )
    parser.add_argument("--quick", action="store_true", help="one tiny size, T in (4, 8), 3 rounds: for a test")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--plan", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        plan = Plan.from_json(Path(args.plan).read_text())
        pin_cpus(plan.threads)
        rows = run_worker(args.worker, plan, lambda line: print(f"[{args.worker}] {line}", file=sys.stderr, flush=True))
        Path(args.result).write_text(json.dumps(rows, default=str))
        return 0
    if not args.out:
        parser.error("--out is required")
    if not 1 <= args.threads <= len(os.sched_getaffinity(0)):
        parser.error(f"--threads must be between 1 and {len(os.sched_getaffinity(0))}")
    plan = plan_for(args.quick, args.threads)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    command = "python -m rnnbench.study.idiomatic " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    rows: list[dict[str, Any]] = []
    for family in families(plan):  # one after the other: the workers never share the cores
        rows += run_family(family, plan)
    comparison, sweep = comparison_records(rows, plan), sweep_records(rows, plan)
    write_jsonl(Path(f"{out}.jsonl"), comparison)
    write_jsonl(Path(f"{out}-tgrowth.jsonl"), sweep)
    Path(f"{out}.md").write_text(ratio_table(comparison, sweep, rows, command=command, plan=plan))
    # The chart is drawn from the records file by the report floor's own command line.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "rnnbench.report.charts",
            "idiomatic-tgrowth",
            f"{out}-tgrowth.jsonl",
            f"{out}-tgrowth.png",
        ],
        check=True,
    )
    print(
        f"wrote {out}.jsonl ({len(comparison)} records), {out}.md, {out}-tgrowth.jsonl ({len(sweep)} records), "
        f"{out}-tgrowth.png"
    )
    failed = [r for r in rows if r["status"] not in (Status.OK, Status.SKIPPED)]
    for row in failed:
        print(f"not ok: {row['point']} {row['candidate']}: {row['status']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
