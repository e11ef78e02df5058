"""`rnnbench versions` for the probe rows of some registered issues only (the full table's other rows
are unchanged): each probe of rnnbench.report.bug_table whose bug is named, in each named environment,
through the same runner. Usage: python probe_versions.py OUT.jsonl ENVIRONMENTS ISSUE_ID [ISSUE_ID ...]"""

from __future__ import annotations

import sys
from pathlib import Path

from rnnbench import record
from rnnbench.report import bug_table
from rnnbench.report.progress import Progress
from rnnbench.run import bug_versions, executors
from rnnbench.run.runner import Runner


def main(out: str, envs: str, ids: list[str]) -> None:
    probes = [p for p in bug_table.probes() if p.bug in ids]
    jobs = bug_versions.probe_jobs(probes, envs.split(","))
    print(f"{len(jobs)} rows -> {out}", flush=True)
    with executors.executor("local", None) as executor, record.ResultsFile(Path(out), resume=False) as results:
        progress = Progress(len(jobs))
        Runner(results, 900.0, on_start=progress.start, on_record=progress.done, executor=executor).run(jobs)
        progress.close()
    print(bug_table.format_table(record.load([Path(out)])))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
