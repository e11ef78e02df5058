#!/usr/bin/env bash
# Before and after, interleaved, cold (a fresh TORCHINDUCTOR_CACHE_DIR) then warm (the same directory again):
#   bash run.sh PYTHON BEFORE_SRC AFTER_SRC OUT_DIR readme|gru
# BEFORE_SRC / AFTER_SRC: the src/ directories of the two checkouts. Every run under /usr/bin/time, `uptime` around it.
set -euo pipefail
python=$1 before=$2 after=$3 out=$4 what=$5
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
declare -A cache
for label in before after; do cache[$label]=$(mktemp -d "$out/inductor-$label-XXXX"); done
for temp in cold warm; do
  for label in after before; do
    src=${!label}
    uptime | tee -a "$out/$what-$label-$temp.txt"
    TORCHINDUCTOR_CACHE_DIR=${cache[$label]} PYTHONPATH=$src /usr/bin/time -f "%e s wall %U s user %S s sys" \
      "$python" "$here/check_seconds.py" "$what" "$out/$what-$label-$temp.json" 2>&1 | grep -v Warning | tee -a "$out/$what-$label-$temp.txt"
    uptime | tee -a "$out/$what-$label-$temp.txt"
  done
done
