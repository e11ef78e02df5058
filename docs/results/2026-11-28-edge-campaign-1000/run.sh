#!/bin/sh
# One campaign of docs/results/2026-11-28-edge-campaign-1000.md, grown in resumed rounds of ROUND bodies
# up to MAX (a round is complete on every driver before the next starts), one records file per
# campaign. Usage: run.sh NAME MAX ROUND [rnnbench fuzz flags...]; RNNBENCH names the command.
set -u
name=$1 max=$2 round=$3
shift 3
here=$(dirname "$0")
cases=$round
resume=""
while [ "$cases" -le "$max" ]; do
    echo "== round $cases bodies, $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$here/console-$name.txt"
    /usr/bin/time -f "round $cases: %e s wall, %U s user, %S s sys" \
        nice -n 10 ${RNNBENCH:-rnnbench} fuzz --cases "$cases" --out "$here/fuzz-$name.jsonl" $resume "$@" \
        >> "$here/console-$name.txt" 2>&1
    resume="--resume"
    cases=$((cases + round))
done
echo "== done $(date -u +%H:%M:%S) UTC, load $(cut -d" " -f1-3 /proc/loadavg)" >> "$here/console-$name.txt"
