#!/usr/bin/env bash
# Usage: bash dataset_util/convert_imagenet.sh <data dir> [options]
# Converts <data dir>/train/<synset>/* and <data dir>/val/<synset>/* (boxes from <data dir>/Annotation/ if present)
# into TFRecord shards in <data dir>/TFRecords/: train-00000-of-01024 ... and validation-00000-of-00128 ...
# Options (see --help): --train-shards N, --validation-shards N, --workers N (default: all cores), --output DIR,
# --synset-names FILE, --seed N, --overwrite. Rerunning after an interruption resumes where it stopped.
# Sort a flat val/ first with: trainbench data valprep <data dir>/val --solution LOC_val_solution.csv
set -euo pipefail
# shellcheck source=scripts/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/python.sh"
exec "$PYTHON" -m trainbench data convert "$@"
