#!/usr/bin/env bash
# Runs on a GPU machine, from the repository root: the suite's PyTorch throughput sweeps (with their env.json from
# NVML), Nsight Compute's metric list for the GPU, and one ncu capture of a ResNet-50 training step
# (scripts/measure_compute_util.sh).
# Usage: bash benchmarks/gpu/collect.sh [OUT_DIR] [STOP_ITERATION]
set -uo pipefail
out="${1:-gpu_results}"
stop="${2:-120}"
mkdir -p "$out"
export PYTHONPATH="$PWD/source${PYTHONPATH:+:$PYTHONPATH}" PYTHON="${PYTHON:-python3}"
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
"$PYTHON" -m pip list 2>/dev/null | grep -E '^(torch|torchvision|nvidia-ml-py|pandas|numpy) ' > "$out/versions.txt"

export BATCH_SIZES="${BATCH_SIZES:-1 2 4 8 16 32 64 96 128 256}"
read -r -a configs <<< "${CONFIGS-fp32: bf16:--channels-last fp16:--channels-last}"
for config in "${configs[@]}"; do
  PRECISION="${config%%:*}" EXTRA_ARGS="${config#*:}" OUTPUT="$out/throughput" FRAMEWORK=torch \
    bash scripts/measure_throughput.sh "$stop" | tail -14
done

if command -v ncu >/dev/null; then
  # The full metric listing, then the suite's own profiling job (metrics chosen for the GPU, one iteration).
  ncu --version > "$out/ncu_version.txt"
  ncu --query-metrics > "$out/ncu_query_metrics.txt" 2>&1
  PRECISION=bf16 EXTRA_ARGS=--channels-last BATCH_SIZES=32 OUTPUT="$out" \
    bash scripts/measure_compute_util.sh ncu 3 1 > "$out/ncu_run.log" 2>&1
  echo "ncu exit $?" >> "$out/ncu_run.log"
  tail -3 "$out/ncu_run.log"
fi
