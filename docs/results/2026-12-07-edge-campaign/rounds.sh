#!/bin/sh
# One campaign of run.sh, grown in resumed rounds of ROUND bodies up to MAX (a round is complete on every
# driver before the next starts), one records file per campaign, its console beside it.
# Usage: rounds.sh OUT NAME MAX ROUND [rnnbench fuzz flags...]; RNNBENCH names the command.
set -u
out=$1 name=$2 max=$3 round=$4
shift 4
cases=$round
resume=""
while [ "$cases" -le "$max" ]; do
    echo "== round $cases bodies, $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/console-$name.txt"
    /usr/bin/time -f "round $cases: %e s wall, %U s user, %S s sys" \
        nice -n 10 ${RNNBENCH:-rnnbench} fuzz --cases "$cases" --out "$out/fuzz-$name.jsonl" $resume "$@" \
        >> "$out/console-$name.txt" 2>&1
    resume="--resume"
    cases=$((cases + round))
done
echo "== done $(date -u +%H:%M:%S) UTC, load $(cut -d" " -f1-3 /proc/loadavg)" >> "$out/console-$name.txt"
