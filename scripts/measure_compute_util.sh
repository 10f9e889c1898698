#!/usr/bin/env bash
# Usage: CUDA_VISIBLE_DEVICES=0 bash scripts/measure_compute_util.sh PROFILER [start_iteration] [profile_iteration]
# Profiles iterations [start_iteration, start_iteration + profile_iteration) of ResNet-50 training for each batch
# size, each in its own process, under PROFILER:
#   ncu    pipe utilizations (FMA, FP16, Tensor, SFU) -> profiled_data_ncu/batch_<X>.csv and summary.csv
#   nsys   timeline of the window -> profiled_data_nsys/batch_<X>.nsys-rep/.sqlite, GPU busy fraction in summary.csv
#   nvprof GPUs before compute capability 8.0 only -> profiled_data_nvprof/batch_<X>.nvvp and .gputrace.csv
#   torch  torch.profiler (CPU too) -> profiled_data_torch/batch_<X>/trace.json and operators.csv
#   tf     TensorFlow's profiler (CPU too) -> profiled_data_tf/batch_<X>/ (a TensorBoard log folder)
# Defaults: start_iteration 1, profile_iteration 5. An existing profiled_data_* folder is never overwritten: the
# next free name (profiled_data_ncu-1, ...) is used.
# Environment, as scripts/measure_throughput.sh: FRAMEWORK (torch|tf; default: tf for PROFILER tf, else torch),
# BATCH_SIZES ("1 2 4 ..."), PRECISION, DATA_DIR, OUTPUT (where the folder is made; default .), EXTRA_ARGS.
set -euo pipefail
# shellcheck source=scripts/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/python.sh"
if (( $# < 1 )); then
  echo "usage: bash scripts/measure_compute_util.sh ncu|nsys|nvprof|torch|tf [start_iteration] [profile_iteration]" >&2
  exit 2
fi
profiler="$1"
start="${2:-1}"
count="${3:-5}"
for value in "$start" "$count"; do
  if ! [[ "$value" =~ ^[0-9]+$ ]]; then
    echo "measure_compute_util.sh: iterations must be whole numbers, got '$value'" >&2
    exit 2
  fi
done
framework="${FRAMEWORK:-torch}"
[[ "$profiler" == "tf" && -z "${FRAMEWORK:-}" ]] && framework=tf
args=(profile "$profiler" --framework "$framework" --precision "${PRECISION:-fp32}"
      --start-iteration "$start" --iterations "$count" --output "${OUTPUT:-.}")
[[ -n "${BATCH_SIZES:-}" ]] && args+=(--batch-sizes "$BATCH_SIZES")
if [[ -n "${DATA_DIR:-}" ]]; then args+=(--data "$DATA_DIR"); else args+=(--synthetic); fi
read -r -a extra <<< "${EXTRA_ARGS:-}"
exec "$PYTHON" -m trainbench "${args[@]}" "${extra[@]}"
