#!/bin/sh
# The GPU campaign (docs/gpu.md): `rnnbench run --suite gpu --device cuda`, cold then warm, on one
# CUDA machine. Usage, from anywhere: sh docs/gpu-campaign.sh [OUT_DIR] [LIMIT_S]
# Each call is stopped with SIGINT after LIMIT_S seconds (default 540: a 10-minute slot with room
# for the install); rnnbench keeps every record written as its row ended, and says so.
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=${1:-results/gpu-$(date +%Y%m%d-%H%M%S)}
LIMIT=${2:-540}
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)

python -m pip install --no-deps -e . > "$OUT/pip-install.txt" 2>&1 || { tail -5 "$OUT/pip-install.txt"; exit 1; }
{ git rev-parse HEAD; git status --short; } > "$OUT/commit.txt" 2>&1
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
python -c "import torch, jax; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', \
torch.backends.cudnn.version()); print('jax', jax.__version__, jax.devices())" > "$OUT/versions.txt" 2>&1

# Cold: fresh inductor and jax compile caches and a fresh GPU peak cache, all kept under OUT;
# warm: the same directories again, so every compile of the cold call is a cache hit.
export XDG_CACHE_HOME="$OUT/cache" TORCHINDUCTOR_CACHE_DIR="$OUT/cache/inductor"

for phase in cold warm; do
    cat /proc/loadavg > "$OUT/$phase-loadavg-before.txt"
    timeout --signal=INT --kill-after=60 "$LIMIT" \
        rnnbench run --suite gpu --device cuda --out "$OUT/$phase.jsonl" > "$OUT/$phase-console.txt" 2>&1
    echo "exit $?" >> "$OUT/$phase-console.txt"
    cat /proc/loadavg > "$OUT/$phase-loadavg-after.txt"
    tail -3 "$OUT/$phase-console.txt"
done
rm -rf "$OUT/cache"  # compiled kernels: not results
for phase in cold warm; do rnnbench table "$OUT/$phase.jsonl" > "$OUT/$phase-table.txt" 2>&1; done
echo "records, consoles and table in $OUT"
