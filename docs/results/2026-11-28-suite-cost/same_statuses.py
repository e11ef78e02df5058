"""Every (driver, loss form) row's status and H v status in the given JSON files (phases.py or
compile_profile.py output) against a reference file's: prints each file's row count and the rows
that differ.

    python same_statuses.py REFERENCE.json FILE.json [FILE.json ...]
"""

import json
import sys


def rows(path: str) -> dict:
    return {(r[0], r[1]): (r[2], r[3]) for r in json.load(open(path))["rows"]}


reference = rows(sys.argv[1])
differ = 0
for path in sys.argv[2:]:
    got = rows(path)
    bad = {k: (v, reference.get(k)) for k, v in got.items() if reference.get(k) != v}
    differ += len(bad)
    print(f"{path}: {len(got)} rows, {len(bad)} differ {bad or ''}")
sys.exit(1 if differ else 0)
