# Sourced by the suite's scripts: picks the Python that has trainbench installed.
# PYTHON wins; then the repository's .venv (made by `make`); then python3 (inside the container).
# shellcheck shell=bash
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$repo_root/.venv/bin/python" ]]; then PYTHON="$repo_root/.venv/bin/python"; else PYTHON=python3; fi
fi
export PYTHON
