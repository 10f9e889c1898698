#!/usr/bin/env bash
# Usage: [CUDA_VISIBLE_DEVICES=0,1,...] bash scripts/measure_variability.sh [trainbench variability run options]
# Runs one throughput configuration on each visible GPU (3 repetitions by default, --parallel for all at once) and
# reports per GPU images/s, SM clock, power and energy per image, and the outliers; see README ("GPU telemetry").
set -euo pipefail
# shellcheck source=scripts/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/python.sh"
exec "$PYTHON" -m trainbench variability run "$@"
