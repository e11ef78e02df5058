"""The bug x version table's probes that an earlier table does not hold (new entries, new drivers of an entry),
run in the named environments into a new results file: `rnnbench versions` with --resume across record schemas.
Usage: python new_probes.py EARLIER.jsonl ENVIRONMENTS OUT.jsonl"""

import sys
from pathlib import Path

from rnnbench import record, results_file
from rnnbench.planning import bug_versions, plan
from rnnbench.report import bug_table
from rnnbench.rows.runner import Runner

earlier, envs, out = Path(sys.argv[1]), sys.argv[2].split(","), Path(sys.argv[3])
done = {(record.row_key(r), (r.get("settings") or {}).get("order", 1)) for r in results_file.load([earlier])}
jobs = [j for j in bug_versions.probe_jobs(bug_table.probes(), envs) if (j.key(), j.order) not in done]
print(f"{len(jobs)} probe rows the earlier table lacks, in {envs}", flush=True)
for j in jobs:
    print(" ", j.model, j.driver, j.environment, j.dtype, j.loss_form, f"order {j.order}", flush=True)
with results_file.ResultsFile(out, resume=out.exists()) as results:
    skipped, jobs = plan.not_yet_recorded(jobs, out, results) if out.exists() else (0, jobs)
    Runner(
        results,
        900.0,
        on_record=lambda rec: print(rec["model"], rec["driver"], rec["environment_name"], rec["status"], flush=True),
    ).run(jobs)
print(bug_table.format_table(results_file.load([earlier, out])))
