#!/usr/bin/env bash
# Runs on a GPU machine, from the repository root: the suite's PyTorch throughput sweeps (with their env.json from
# NVML), Nsight Compute's metric list for the GPU, and one ncu capture of a ResNet-50 training step.
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
  ncu --version > "$out/ncu_version.txt"
  ncu --query-metrics > "$out/ncu_query_metrics.txt" 2>&1
  metrics="gpc__cycles_elapsed.max,sm__cycles_elapsed.avg,gpu__time_duration.sum"
  for base in sm__inst_executed_pipe_fma sm__pipe_fma_cycles_active sm__inst_executed_pipe_fp16 \
      sm__inst_executed_pipe_fma_type_fp16 sm__pipe_fp16_cycles_active sm__inst_executed_pipe_tensor \
      sm__pipe_tensor_cycles_active sm__pipe_tensor_op_hmma_cycles_active sm__inst_executed_pipe_tensor_op_hmma \
      sm__inst_executed_pipe_tensor_op_gmma sm__pipe_tensor_op_gmma_cycles_active sm__inst_executed_pipe_xu \
      sm__pipe_xu_cycles_active; do
    if grep -qE "^${base}[[:space:]]" "$out/ncu_query_metrics.txt"; then
      metrics+=",${base}.avg.pct_of_peak_sustained_elapsed"
    else
      echo "absent: $base" >> "$out/ncu_absent_metrics.txt"
    fi
  done
  echo "$metrics" > "$out/ncu_metrics_used.txt"
  ncu --profile-from-start off --target-processes all --csv --print-units base --metrics "$metrics" \
    --log-file "$out/ncu_resnet50_torch_b32_bf16_cl.csv" \
    "$PYTHON" benchmarks/gpu/resnet50_steps.py 32 --precision bf16 --channels-last > "$out/ncu_run.log" 2>&1
  echo "ncu exit $?" >> "$out/ncu_run.log"
  tail -3 "$out/ncu_run.log"
fi
