#!/usr/bin/env bash
# Usage: bash scripts/run_campaign.sh MATRIX.yaml [key=value,... overrides] [trainbench campaign run options]
# Runs (or resumes) every planned run of the matrix into one campaign folder (default ./campaign_data, or
# --output DIR) with one results.csv; see README ("Campaigns") for the matrix format.
set -euo pipefail
# shellcheck source=scripts/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/python.sh"
exec "$PYTHON" -m trainbench campaign run "$@"
