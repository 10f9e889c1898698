# Sourced by build_image.sh and start_container.sh: error exit, command-line quoting, container engine choice.
# shellcheck shell=bash

# One line on stderr, prefixed with the calling script's name (set `prog` first), and exit status 2.
die() { echo "${prog:-$(basename "$0")}: $*" >&2; exit 2; }

# One line a shell reads back as the same words (Python's shlex.join quoting).
quote_words() {
  local word sq="'" escaped="'\"'\"'" out=()
  for word in "$@"; do
    if [[ -n "${word}" && "${word}" != *[!A-Za-z0-9_@%+=:,./-]* ]]; then
      out+=("${word}")
    else
      out+=("'${word//${sq}/${escaped}}'")
    fi
  done
  echo "${out[*]}"
}

# Sets `engine`: CONTAINER_ENGINE if given (it must exist), else docker, else podman; $1 says what to install.
choose_engine() {
  engine="${CONTAINER_ENGINE:-}"
  if [[ -n "${engine}" ]]; then
    command -v "${engine}" > /dev/null || die "CONTAINER_ENGINE=${engine} is not on PATH"
  elif command -v docker > /dev/null; then
    engine=docker
  elif command -v podman > /dev/null; then
    engine=podman
  else
    die "neither docker nor podman is on PATH: $1"
  fi
}
