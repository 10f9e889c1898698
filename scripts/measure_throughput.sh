#!/usr/bin/env bash
# Usage: bash scripts/measure_throughput.sh [stop_iteration]
# Measures ResNet-50 training images/s for each batch size, each in its own process.
# stop_iteration (default 1000, as in the original suite) is the last iteration run per batch size;
# the first WARMUP of them (default: a tenth) are excluded from the timing.
# Environment: FRAMEWORK (torch|tf, default torch), BATCH_SIZES ("1 2 4 ..."; default by device),
#              PRECISION (fp32|fp16|bf16), DATA_DIR (TFRecords folder; default synthetic data),
#              WARMUP, REPEATS (the timed iterations split into this many windows, default 1: the spread of
#              images/s across them),
#              OUTPUT (default ./throughput_data), EXTRA_ARGS (more trainbench throughput options).
set -euo pipefail
# shellcheck source=scripts/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/python.sh"
stop_iteration="${1:-1000}"
if ! [[ "$stop_iteration" =~ ^[0-9]+$ ]]; then
  echo "measure_throughput.sh: stop_iteration must be a whole number, got '$stop_iteration'" >&2
  exit 2
fi
warmup="${WARMUP:-$((stop_iteration / 10))}"
if (( stop_iteration <= warmup )); then
  echo "measure_throughput.sh: stop_iteration ($stop_iteration) must exceed the warm-up ($warmup)" >&2
  exit 2
fi
repeats="${REPEATS:-1}"
if ! [[ "$repeats" =~ ^[1-9][0-9]*$ ]] || (( (stop_iteration - warmup) / repeats < 1 )); then
  echo "measure_throughput.sh: REPEATS must be a whole number from 1 to the timed iterations ($((stop_iteration - warmup))), got '$repeats'" >&2
  exit 2
fi
args=(throughput --framework "${FRAMEWORK:-torch}" --precision "${PRECISION:-fp32}" --warmup "$warmup"
      --steps "$(((stop_iteration - warmup) / repeats))" --repeats "$repeats" --output "${OUTPUT:-throughput_data}")
[[ -n "${BATCH_SIZES:-}" ]] && args+=(--batch-sizes "$BATCH_SIZES")
if [[ -n "${DATA_DIR:-}" ]]; then args+=(--data "$DATA_DIR"); else args+=(--synthetic); fi
read -r -a extra <<< "${EXTRA_ARGS:-}"
exec "$PYTHON" -m trainbench "${args[@]}" "${extra[@]}"
