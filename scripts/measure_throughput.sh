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
# whole_number NAME VALUE: prints VALUE in base 10 (a leading 0 is not octal), or one line and exit 2 when it is not a
# whole number up to the CLI's bound on counts (10^9; also keeps bash's 64-bit arithmetic from overflowing).
whole_number() {
  if ! [[ "$2" =~ ^[0-9]+$ ]]; then
    echo "measure_throughput.sh: $1 must be a whole number, got '$2'" >&2
    exit 2
  fi
  if (( ${#2} > 10 )) || (( 10#$2 > 1000000000 )); then
    echo "measure_throughput.sh: $1 must be at most 1000000000, got '$2'" >&2
    exit 2
  fi
  echo $(( 10#$2 ))
}
stop_iteration="$(whole_number stop_iteration "${1:-1000}")" || exit 2
warmup="$(whole_number WARMUP "${WARMUP:-$((stop_iteration / 10))}")" || exit 2
if (( stop_iteration <= warmup )); then
  echo "measure_throughput.sh: stop_iteration ($stop_iteration) must exceed the warm-up ($warmup)" >&2
  exit 2
fi
repeats="$(whole_number REPEATS "${REPEATS:-1}")" || exit 2
if (( repeats < 1 || (stop_iteration - warmup) / repeats < 1 )); then
  echo "measure_throughput.sh: REPEATS must be a whole number from 1 to the timed iterations ($((stop_iteration - warmup))), got '${REPEATS:-1}'" >&2
  exit 2
fi
args=(throughput --framework "${FRAMEWORK:-torch}" --precision "${PRECISION:-fp32}" --warmup "$warmup"
      --steps "$(((stop_iteration - warmup) / repeats))" --windows "$repeats" --output "${OUTPUT:-throughput_data}")
[[ -n "${BATCH_SIZES:-}" ]] && args+=(--batch-sizes "$BATCH_SIZES")
if [[ -n "${DATA_DIR:-}" ]]; then args+=(--data "$DATA_DIR"); else args+=(--synthetic); fi
read -r -a extra <<< "${EXTRA_ARGS:-}"
exec "$PYTHON" -m trainbench "${args[@]}" "${extra[@]}"
