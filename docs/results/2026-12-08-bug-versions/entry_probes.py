"""The bug x version table's probe rows in the named environments, fewer of them than `rnnbench versions` runs:
the registered entries' probe rows (the first CAP of each with --cap=CAP; only the entries --only names), then,
on a jax environment without --cap (or on any with --classes), the bug classes' rows. Rows an --earlier file
holds are left out. An environment named `torch-X.Y.Z` that no environments.toml entry defines gets the definition
`rnnbench versions --bisect` builds for that release (planning.release_probe.release_spec) and is created.

Usage: python entry_probes.py ENV[,ENV...] OUT.jsonl [--cap=N] [--only=ID,...] [--classes] [--earlier=FILE ...]
(2026-12-08-bug-versions.md, 2026-12-08-bug-versions-bisect.md)"""

import sys
from pathlib import Path

from rnnbench import record, results_file
from rnnbench.check import known_issues
from rnnbench.machine import env_create, environments
from rnnbench.planning import bug_versions, plan, release_probe
from rnnbench.planning.release_bisect import Release
from rnnbench.report import bug_table
from rnnbench.rows.runner import Runner

envs, out = sys.argv[1].split(","), Path(sys.argv[2])
options = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "") for a in sys.argv[3:] if a.startswith("--"))
earlier = [Path(a.split("=", 1)[1]) for a in sys.argv[3:] if a.startswith("--earlier=")]
cap = int(options.get("cap", 0))
done = {(record.row_key(r), (r.get("settings") or {}).get("order", 1)) for r in results_file.load(earlier)}

for env in envs:  # a release no environments.toml entry pins: the definition `versions --bisect` builds
    if env not in environments.environments():
        package, version = env.rsplit("-", 1)
        known = environments.environments()
        templates = [e for e in known.values() if e.on_demand and release_probe._pinned(e, package)]
        template = max(templates, key=lambda e: release_probe.release_key(release_probe._pinned(e, package) or "0"))
        name, spec = release_probe.release_spec(package, Release(version), template, known)
        environments.add_definitions({name: spec}, "entry_probes")
        if environments.get(env).missing_reason():
            env_create.create(env)

registered = {i.id for i in known_issues.registry()}
wanted = set(options["only"].split(",")) if options.get("only") else registered
probes = bug_table.probes()
mine = [p for p in probes if p.bug in registered & wanted]
if cap:  # the first `cap` probe rows of each entry
    mine = [p for p in mine if [q for q in mine if q.bug == p.bug].index(p) < cap]
jobs = [j for env in envs for j in bug_versions.probe_jobs(mine, [env])]
for env in envs:
    if "classes" in options or (env.startswith("jax") and not cap):
        jobs += bug_versions.probe_jobs([p for p in probes if p.bug not in registered], [env])
jobs = [j for j in jobs if (j.key(), j.order) not in done]
print(f"{len(jobs)} probe rows in {envs} ({len(done)} done earlier)", flush=True)
with results_file.ResultsFile(out, resume=out.exists()) as results:
    skipped, jobs = plan.not_yet_recorded(jobs, out, results) if out.exists() else (0, jobs)
    Runner(
        results,
        900.0,
        on_record=lambda rec: print(rec["model"], rec["driver"], rec["environment_name"], rec["status"], flush=True),
    ).run(jobs)
print(bug_table.format_table(results_file.load([out])))
