#!/bin/bash
# Two asv runs of the curated set on one tree, one after the other: HEAD~1 and an empty commit on
# top of it, each built and installed by asv (a wheel in asv's own virtualenv), then asv compare.
# Usage, from the repository root:
#   git clone -q . $TMPDIR/rerun && git -C $TMPDIR/rerun commit -q --allow-empty -m "same tree, second run"
#   ASV=$PWD/.venv/bin/asv docs/results/2026-11-25-asv-history/rerun-same-tree.sh $TMPDIR/rerun
set -u
cd "${1:?a scratch clone whose HEAD is an empty commit on the tree to measure}"
ASV=${ASV:-asv}
A=$(git rev-parse HEAD~1); B=$(git rev-parse HEAD)
$ASV machine --machine xeon-2core --os "Linux (Debian VM)" --arch x86_64 --cpu "Intel Xeon, 2 vCPUs shared" --num_cpu 2 --ram 24GB --yes
for c in $A $B; do
  echo "run $c start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  s=$(date +%s)
  $ASV run --machine xeon-2core --show-stderr -b Curated $c^! > run-$c.log 2>&1
  echo "run $c rc $? end $(date -u +%T) seconds $(( $(date +%s) - s )) load $(cut -d' ' -f1-3 /proc/loadavg)"
done
$ASV compare --machine xeon-2core $A $B > compare.txt 2>&1
echo done
