#!/usr/bin/env bash
# The GPU benchmarks in one go (GPU time is scarce): our ViT / CaiT against timm's with MFU, the fused LayerScale
# update, and the depth / batch scaling, all with --device cuda --dtype bf16 (autocast), then the bf16 crossover
# and regional compilation on the GPU. Run from the repository root on a machine with one CUDA device:
#
#   bash benchmarks/gpu_suite.sh [OUT_DIR]        (default OUT_DIR: benchmarks/results/gpu-<UTC date>)
#
# Each benchmark's output goes to OUT_DIR/<name>.txt (and the scaling CSV / plot beside them); a failing benchmark
# is reported and the others still run; the exit status is the number that failed. Wall-clock timing (--clock auto
# means wall on a GPU). Sized to finish in about 10 minutes on one H100/H200-class GPU.
set -u -o pipefail

cd "$(dirname "$0")/.."
OUT="${1:-benchmarks/results/gpu-$(date -u +%Y-%m-%d)}"
if [ -z "${PYTHON:-}" ]; then  # the project's virtual environment when there is one
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python; fi
fi
if ! "$PYTHON" -c "import torch, timm, layerscale" 2>/dev/null; then
    echo "gpu_suite.sh: $PYTHON cannot import torch, timm and layerscale; set PYTHON=/path/to/python" >&2
    exit 2
fi
if ! "$PYTHON" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu_suite.sh: no CUDA device visible to torch; nothing run" >&2
    exit 2
fi
mkdir -p "$OUT"
"$PYTHON" -c "import torch; print(torch.__version__, torch.cuda.get_device_name(0))" | tee "$OUT/device.txt"

failed=0
bench() {  # bench NAME SCRIPT ARGS...
    local name="$1"; shift
    echo "== $name: $*"
    if ! "$PYTHON" "$@" 2>&1 | tee "$OUT/$name.txt"; then
        echo "gpu_suite.sh: $name failed (see $OUT/$name.txt)" >&2
        failed=$((failed + 1))
    fi
}

bench vs_timm_bf16 benchmarks/bench_vs_timm.py --device cuda --dtype bf16 --families vit,cait --depths 12,24 \
    --widths 192,384 --rounds 10 --batch 256 --full-path
bench vs_timm_fp32 benchmarks/bench_vs_timm.py --device cuda --dtype fp32 --families vit,cait --depths 12 \
    --widths 192,384 --rounds 10 --batch 256 --full-path
bench fused_update_bf16 benchmarks/bench_fused_update.py --device cuda --dtype bf16 --rounds 30
bench scaling_bf16 benchmarks/bench_scaling.py --device cuda --dtype bf16 --rounds 5 \
    --depths 12,24,48,96,192,384 --batches 1,8,64,256 --csv "$OUT/scaling.csv" --plot "$OUT/perf_scaling.png"
bench precision benchmarks/bench_precision.py --device cuda --rounds 5 --batch 256
bench compile_gain_w192 benchmarks/bench_compile_gain.py --device cuda --width 192 --depth 12 --img 32 --patch 4 \
    --chans 3 --mlp-ratio 4 --batch 256 --rounds 10

echo "gpu_suite.sh: done, $failed failed; outputs in $OUT"
exit "$failed"
