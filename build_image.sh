#!/usr/bin/env bash
# Usage: bash build_image.sh [-t TAG] [--cuda-version X.Y.Z] [--base-image IMAGE] [--ca-bundle FILE]
#                            [-- more docker build options]
# Builds the trainbench image from docker/Dockerfile with the repository as context, from any working directory.
# --ca-bundle FILE: extra CA certificates (PEM) that every download of the build trusts besides the system's, for
#   TLS-intercepting proxies; handed over as a build secret, so no layer keeps it. --base-image replaces the CUDA base
#   (a mirror, or docker/test_image.sh's stand-in). Build options such as --network host go after --.
# Environment: IMAGE_TAG (default trainbench:latest), CUDA_VERSION (default: the Dockerfile's), BASE_IMAGE, CA_BUNDLE,
#   USER_UID and USER_GID (default: yours, also under sudo; uid 0 becomes 1000, the image user is never root),
#   CONTAINER_ENGINE (docker or podman; default: docker, else podman).
set -euo pipefail
prog=build_image.sh
common="$(dirname "${BASH_SOURCE[0]}")/scripts/container_common.sh"
[[ -f "${common}" ]] || { echo "build_image.sh: ${common} not found (run this script from a full checkout)" >&2; exit 2; }
# shellcheck source=scripts/container_common.sh
source "${common}"

usage="usage: bash build_image.sh [-t TAG] [--cuda-version X.Y.Z] [--base-image IMAGE] [--ca-bundle FILE]"
usage+=" [-- more docker build options]"
tag="${IMAGE_TAG:-trainbench:latest}"
cuda="${CUDA_VERSION:-}"
base="${BASE_IMAGE:-}"
ca_bundle="${CA_BUNDLE:-}"
extra=()
while (( $# )); do
  case "$1" in
    -t|--tag) (( $# >= 2 )) || die "$1 needs a value (${usage})"; tag="$2"; shift ;;
    --tag=*) tag="${1#*=}" ;;
    --cuda-version) (( $# >= 2 )) || die "$1 needs a value (${usage})"; cuda="$2"; shift ;;
    --cuda-version=*) cuda="${1#*=}" ;;
    --base-image) (( $# >= 2 )) || die "$1 needs a value (${usage})"; base="$2"; shift ;;
    --base-image=*) base="${1#*=}" ;;
    --ca-bundle) (( $# >= 2 )) || die "$1 needs a value (${usage})"; ca_bundle="$2"; shift ;;
    --ca-bundle=*) ca_bundle="${1#*=}" ;;
    -h|--help) echo "${usage}"; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) die "unknown argument '$1' (${usage})" ;;
  esac
  shift
done

if [[ -n "${ca_bundle}" ]]; then
  [[ -f "${ca_bundle}" && -r "${ca_bundle}" ]] || die "CA bundle '${ca_bundle}' is not a readable file"
  grep -q -e "-----BEGIN CERTIFICATE-----" "${ca_bundle}" 2> /dev/null \
    || die "CA bundle '${ca_bundle}' holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
  ca_bundle="$(cd -- "$(dirname -- "${ca_bundle}")" && pwd -P)/$(basename -- "${ca_bundle}")"
fi
[[ "${base}" != -* && "${base}" != *[[:space:]]* ]] || die "bad base image '${base}'"

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
cd "${repo}"

choose_engine "install Docker (https://docs.docker.com/engine/install/) or Podman"

dockerfile="${repo}/docker/Dockerfile"
[[ -f "${dockerfile}" ]] || die "${dockerfile} not found (run this script from a full checkout)"
if [[ -z "${cuda}" ]]; then
  while IFS= read -r line; do
    if [[ "${line}" == "ARG CUDA_VERSION="* ]]; then cuda="${line#ARG CUDA_VERSION=}"; break; fi
  done < "${dockerfile}"
fi
[[ "${cuda}" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "CUDA version must look like 13.0.3, got '${cuda}'"
[[ -n "${tag}" && "${tag}" != -* && "${tag}" != *[[:space:]]* ]] || die "bad image tag '${tag}'"

uid="${USER_UID:-${SUDO_UID:-$(id -u)}}"
gid="${USER_GID:-${SUDO_GID:-$(id -g)}}"
[[ "${uid}" =~ ^[0-9]+$ && "${gid}" =~ ^[0-9]+$ ]] || die "USER_UID and USER_GID must be numbers, got '${uid}' '${gid}'"
if (( uid == 0 )); then
  echo "${prog}: building as root; the image user gets uid:gid 1000:1000 (set USER_UID/USER_GID to choose)" >&2
  uid=1000 gid=1000
fi

cmd=("${engine}" build)
# Podman builds OCI images by default, where older releases ignore the Dockerfile's SHELL (bash) for RUN.
if [[ "${engine}" == podman ]]; then cmd+=(--format docker); fi
cmd+=(--file "${dockerfile}" --tag "${tag}" --build-arg "CUDA_VERSION=${cuda}"
      --build-arg "USER_UID=${uid}" --build-arg "USER_GID=${gid}")
if [[ -n "${base}" ]]; then cmd+=(--build-arg "BASE_IMAGE=${base}"); fi
# Docker needs BuildKit for build secrets (its default builder since Docker 23).
if [[ -n "${ca_bundle}" ]]; then cmd+=(--secret "id=ca_bundle,src=${ca_bundle}"); fi
cmd+=(${extra[@]+"${extra[@]}"} "${repo}")
quote_words "${cmd[@]}" >&2
exec "${cmd[@]}"
