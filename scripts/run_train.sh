#!/usr/bin/env bash
# Usage: bash scripts/run_train.sh [trainbench train options]   (see: bash scripts/run_train.sh --help)
# End-to-end ResNet-50 training with the original suite's defaults: 90 epochs, global batch 384.
# Environment: FRAMEWORK (torch|tf, default torch), DATA_DIR (TFRecords folder; default synthetic data).
set -euo pipefail
# shellcheck source=scripts/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/python.sh"
args=(train --framework "${FRAMEWORK:-torch}")
[[ -n "${DATA_DIR:-}" ]] && args+=(--data "$DATA_DIR")
exec "$PYTHON" -m trainbench "${args[@]}" "$@"
