"""The A/A study with several processes per side: the loaded pairs grouped (runs 1-3, 4-6, 7-9 and
1-5, 6-10), each group's base runs against its new runs (interleaved in time as `compare --commits`
runs them), compared by the tree under study.  python pooled.py RECORDS_DIR NOW_TREE"""

from __future__ import annotations

import sys
from pathlib import Path


def main(folder: str, now: str) -> None:
    sys.path.insert(0, now)
    from rnnbench import record  # noqa: PLC0415 (the tree under study, put on the path above)
    from rnnbench.report.compare_pairs import compare  # noqa: PLC0415

    for condition, groups in (("loaded", ((1, 3), (4, 6), (7, 9), (1, 5), (6, 10))), ("unplanted", ((1, 2), (3, 4)))):
        for first, last in groups:
            sides = [
                record.load([Path(folder) / f"{condition}-{i}-{side}.jsonl" for i in range(first, last + 1)])
                for side in ("base", "new")
            ]
            result = compare(*sides, threshold=0.1, alpha=0.01)
            verdicts = {p.key.driver: p.verdict for p in result.pairs}
            runs = {p.key.driver: p.times["fwd_bwd"].estimate.runs for p in result.pairs if p.times}
            print(
                f"| {condition} {first}-{last} | {runs.get('torch_loop')} | exit {result.exit_code} | "
                + " | ".join(verdicts.get(d, "-") for d in ("torch_loop", "jax_lax_scan", "aa_planted"))
                + " |"
            )


if __name__ == "__main__":
    main(*sys.argv[1:3])
