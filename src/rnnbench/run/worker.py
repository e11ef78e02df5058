"""Worker process: reads a JSON list of jobs on stdin, runs them in order, and writes one JSON line
per event on its original stdout: {"event": "start", "index": i} before a row, {"event":
"record", "index": i, "record": {...}} after it. Anything the frameworks print goes to stderr, so
the protocol stream stays clean. A crash or hang costs only the row that was started last: the
parent sees "start" without "record" and restarts a worker for the rest."""

from __future__ import annotations

import json
import os
import sys
import traceback


def _set_threads(threads: int, drivers: set[str]) -> None:
    from rnnbench import registry

    for framework in {registry.get_driver(d).framework.name: registry.get_driver(d).framework for d in drivers}.values():
        framework.set_threads(threads)


def main() -> int:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # framework chatter on stdout would corrupt the protocol
    jobs = json.load(sys.stdin)
    from rnnbench.run.row import Job, run_row
    from rnnbench.status import Status

    if jobs:
        _set_threads(jobs[0].get("threads", 1), {j["driver"] for j in jobs})
    for i, spec in enumerate(jobs):
        protocol.write(json.dumps({"event": "start", "index": i}) + "\n")
        try:
            rec = run_row(Job.from_dict(spec))
        except Exception as exc:  # an error outside the driver (bad job): still one record
            rec = {**spec, "status": Status.ERROR, "report": "".join(traceback.format_exception(exc)[-6:])}
        protocol.write(json.dumps({"event": "record", "index": i, "record": rec}, allow_nan=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
