#!/usr/bin/env bash
# The quick default (`rnnbench run`, --suite quick: 5 models x the core drivers, main environment),
# cold then warm, twice: cold1, warm1, cold2, warm2, one at a time, nothing else running.
# cold: empty compile caches (inductor's cache dir, rnnbench's cache root: jax's persistent cache,
# the GEMM peak); warm: the same run again with those caches.
set -u
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
OUT=${1:-$(mktemp -d -t quick-cost-XXXX)}; mkdir -p "$OUT"
one() {  # label cache
  local label=$1 cache=$2
  local start=$(date +%s.%N) load0=$(cut -d' ' -f1 /proc/loadavg)
  env XDG_CACHE_HOME=$cache/xdg TORCHINDUCTOR_CACHE_DIR=$cache/inductor \
      "$REPO/.venv/bin/rnnbench" run --out "$OUT/$label.jsonl" > "$OUT/$label.log" 2>&1
  local rc=$? end=$(date +%s.%N) load1=$(cut -d' ' -f1 /proc/loadavg)
  printf '%s rc=%s wall_s=%.0f load_start=%s load_end=%s\n' $label $rc $(echo "$end - $start" | bc) $load0 $load1 \
    | tee -a "$OUT/summary.txt"
}
for i in 1 2; do
  rm -rf "$OUT/cache"
  one quick-cold-$i "$OUT/cache"
  one quick-warm-$i "$OUT/cache"
done
