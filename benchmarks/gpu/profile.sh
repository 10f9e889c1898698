#!/usr/bin/env bash
# Runs on a GPU machine, from the repository root: the suite's profiling path for real, under Nsight Compute and
# Nsight Systems, then packs each profiler's folder (PACK, default OUT_DIR) as it finishes.
# Usage: bash benchmarks/gpu/profile.sh OUT_DIR [BATCH_SIZES]    (NSYS_BATCH_SIZES: default the same)
set -uo pipefail
out="${1:?usage: bash benchmarks/gpu/profile.sh OUT_DIR [BATCH_SIZES]}"
pack="${PACK:-$out}"
mkdir -p "$out" "$pack"
export PYTHONPATH="$PWD/source${PYTHONPATH:+:$PYTHONPATH}" PYTHON="${PYTHON:-python3}" PYTHONUNBUFFERED=1
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" OUTPUT="$out"
batches="${2:-16 32}"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv > "$out/gpu.txt" 2>&1
ncu --version >> "$out/gpu.txt" 2>&1
# One iteration after one unprofiled one: ncu replays every kernel once per metric pass.
BATCH_SIZES="$batches" timeout "${NCU_TIMEOUT:-240}" bash scripts/measure_compute_util.sh ncu 1 1 \
  > "$out/ncu_run.log" 2>&1
echo "exit $?" >> "$out/ncu_run.log"
tar -czf "$pack/ncu.tar.gz" -C "$out" .
if ! command -v nsys >/dev/null; then
  # Some images carry nsys only inside Nsight Compute's folder.
  for candidate in /opt/nvidia/nsight-compute/*/host/target-linux-x64; do
    [[ -x "$candidate/nsys" ]] && export PATH="$PATH:$candidate"
  done
fi
BATCH_SIZES="${NSYS_BATCH_SIZES:-$batches}" timeout "${NSYS_TIMEOUT:-120}" \
  bash scripts/measure_compute_util.sh nsys 1 3 > "$out/nsys_run.log" 2>&1
echo "exit $?" >> "$out/nsys_run.log"
tar -czf "$pack/all.tar.gz" -C "$out" .
tail -n 12 "$out"/*_run.log
