#!/usr/bin/env bash
# The GPU benchmarks in one go (GPU time is scarce): our ViT / CaiT against timm's with MFU, the fused LayerScale
# update, and the depth / batch scaling, all with --device cuda --dtype bf16 (autocast), then the bf16 crossover
# and regional compilation on the GPU. Run from the repository root on a machine with one CUDA device:
#
#   bash benchmarks/gpu_suite.sh [OUT_DIR]        (default OUT_DIR: benchmarks/results/gpu-<UTC date>)
#
# Each benchmark's output goes to OUT_DIR/<name>.txt (and the scaling CSV / plot beside them); a failing benchmark
# is reported and the others still run; the exit status is the number that failed. Wall-clock timing (--clock auto
# means wall on a GPU). Each benchmark is stopped after BENCH_TIMEOUT seconds (default 150) so that the suite ends
# in about 8 minutes on one H100/H200-class GPU whatever happens. Last, a study-throughput probe: the `lm` preset's
# depth-96 model for STUDY_STEPS steps (default 150), one run alone and eight at once on the one GPU, timed by
# `layerscale study` itself (needs the preset's text, or STUDY_DATA=<glob of text files>).
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
    if ! timeout "${BENCH_TIMEOUT:-150}" "$PYTHON" "$@" 2>&1 | tee "$OUT/$name.txt"; then
        echo "gpu_suite.sh: $name failed (see $OUT/$name.txt)" >&2
        failed=$((failed + 1))
    fi
}

# Study throughput on the GPU: wall time of whole study runs (start-up, training, evaluation) alone and 8 at a time.
study_probe() {  # study_probe NAME JOBS METHODS SEEDS
    local name="$1" jobs="$2" methods="$3" seeds="$4" start end
    start=$(date +%s.%N)
    if timeout "${BENCH_TIMEOUT:-150}" "$PYTHON" -m layerscale study --preset lm --depths 96 --methods "$methods" \
        --seeds "$seeds" --lrs 1e-3 --no-shared-table --steps "${STUDY_STEPS:-150}" --jobs "$jobs" --no-report \
        ${STUDY_DATA:+--data-path "$STUDY_DATA"} --set run.device=cuda --out "$OUT/$name" >"$OUT/$name.txt" 2>&1; then
        end=$(date +%s.%N)
        echo "$name: $jobs job(s), methods $methods, $seeds seed(s), ${STUDY_STEPS:-150} steps at depth 96:" \
             "$("$PYTHON" -c "print(round($end - $start, 1))") s wall" | tee -a "$OUT/study_probe.txt"
    else
        echo "gpu_suite.sh: $name failed (see $OUT/$name.txt)" >&2; tail -5 "$OUT/$name.txt"
        failed=$((failed + 1))
    fi
}
bench vs_timm_bf16 benchmarks/bench_vs_timm.py --device cuda --dtype bf16 --families vit,cait --depths 12,24 \
    --widths 192,384 --rounds 10 --batch 256 --full-path
bench precision benchmarks/bench_precision.py --device cuda --rounds 5 --batch 256
study_probe study_1job 1 prenorm 1
study_probe study_8jobs 8 prenorm,layerscale,deepnorm,lns 2
bench vs_timm_fp32 benchmarks/bench_vs_timm.py --device cuda --dtype fp32 --families vit,cait --depths 12 \
    --widths 192,384 --rounds 10 --batch 256 --full-path
bench scaling_bf16 benchmarks/bench_scaling.py --device cuda --dtype bf16 --rounds 5 \
    --depths 12,24,48,96,192,384 --batches 1,8,64,256 --csv "$OUT/scaling.csv" --plot "$OUT/perf_scaling.png"
bench fused_update_bf16 benchmarks/bench_fused_update.py --device cuda --dtype bf16 --rounds 30
bench hc_fp32 benchmarks/bench_hc.py --device cuda --width 192 --depth 12 --batch 256 --rounds 10
bench compile_gain_w192 benchmarks/bench_compile_gain.py --device cuda --width 192 --depth 12 --img 32 --patch 4 \
    --chans 3 --mlp-ratio 4 --batch 256 --rounds 10

echo "gpu_suite.sh: done, $failed failed; outputs in $OUT"
exit "$failed"
