"""python -m rnnbench.report.charts idiomatic-tgrowth RECORDS.jsonl OUT.png: the idiomatic study's T-growth chart."""

import sys
from pathlib import Path

from rnnbench import results_file
from rnnbench.report.charts.growth import idiomatic_t_growth_chart

if len(sys.argv) != 4 or sys.argv[1] != "idiomatic-tgrowth":
    sys.exit("usage: python -m rnnbench.report.charts idiomatic-tgrowth RECORDS.jsonl OUT.png")
idiomatic_t_growth_chart(results_file.load([Path(sys.argv[2])]), Path(sys.argv[3]))
