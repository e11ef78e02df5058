#!/usr/bin/env bash
# The default run (`rnnbench run`, main + torch_xla environments), cold then warm, before and after.
# before: commit 9c28b03 (main after the architecture issue, 2026-11-24); after: HEAD.
# cold: empty compile caches (inductor's cache dir, rnnbench's cache root); warm: the same run again.
# Order: before-cold, after-cold, before-warm, after-warm (alternating, one at a time).
set -u
# $1: a label; SCRATCH: where the outputs and caches go (default a fresh temporary directory);
# BEFORE: a checkout of the "before" commit's src/ (git worktree add "$BEFORE_TREE" 9c28b03).
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
SCRATCH=${SCRATCH:-$(mktemp -d)}
BEFORE=${BEFORE:?a checkout of commit 9c28b03, its src/ directory}
OUT=$SCRATCH/$1; mkdir -p $OUT
export RNNBENCH_XLA_PYTHON=$REPO/.venv-xla/bin/python
rm -rf $SCRATCH/cache-before $SCRATCH/cache-after
one() {  # label src cache
  local label=$1 src=$2 cache=$3
  local start=$(date +%s.%N) load0=$(cut -d' ' -f1 /proc/loadavg)
  env PYTHONPATH=$src XDG_CACHE_HOME=$cache/xdg TORCHINDUCTOR_CACHE_DIR=$cache/inductor \
      $REPO/.venv/bin/python -m rnnbench.cli run --out $OUT/$label.jsonl > $OUT/$label.log 2>&1
  local rc=$? end=$(date +%s.%N) load1=$(cut -d' ' -f1 /proc/loadavg)
  printf '%s rc=%s wall_s=%.0f load_start=%s load_end=%s\n' $label $rc $(echo "$end - $start" | bc) $load0 $load1 | tee -a $OUT/summary.txt
}
one before-cold $BEFORE   $SCRATCH/cache-before
one after-cold  $REPO/src $SCRATCH/cache-after
one before-warm $BEFORE   $SCRATCH/cache-before
one after-warm  $REPO/src $SCRATCH/cache-after
