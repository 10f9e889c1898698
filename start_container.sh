#!/usr/bin/env bash
# Usage: bash start_container.sh <dataset dir> [--profile] [--gpus all|none|LIST] [--shm-size SIZE] [-- command ...]
# Starts the trainbench image with the dataset folder at /app/data and a results folder at /app/results, all GPUs
# (or the comma-separated LIST of indices or UUIDs), a large /dev/shm and your uid:gid; an interactive shell, or the
# command given after --. --profile adds the one capability GPU performance counters need (SYS_ADMIN, for ncu),
# never --privileged. The docker (or podman) command is printed to stderr before it runs.
# Environment: RESULTS_DIR (default ./results, created), IMAGE_TAG (default trainbench:latest), SHM_SIZE (default
#   16g), GPUS (default all), CONTAINER_ENGINE (docker or podman; default: docker, else podman).
set -euo pipefail
prog=start_container.sh
usage="usage: bash start_container.sh <dataset dir> [--profile] [--gpus all|none|LIST] [--shm-size SIZE]"
usage+=" [-- command ...]"
common="$(dirname "${BASH_SOURCE[0]}")/scripts/container_common.sh"
[[ -f "${common}" ]] || { echo "start_container.sh: ${common} not found (run this script from a full checkout)" >&2; exit 2; }
# shellcheck source=scripts/container_common.sh
source "${common}"

profile=0
gpus="${GPUS:-all}"
shm="${SHM_SIZE:-16g}"
image="${IMAGE_TAG:-trainbench:latest}"
data=""
user_command=()
while (( $# )); do
  case "$1" in
    --profile) profile=1 ;;
    --gpus) (( $# >= 2 )) || die "--gpus needs a value (${usage})"; gpus="$2"; shift ;;
    --gpus=*) gpus="${1#*=}" ;;
    --shm-size) (( $# >= 2 )) || die "--shm-size needs a value (${usage})"; shm="$2"; shift ;;
    --shm-size=*) shm="${1#*=}" ;;
    -h|--help) echo "${usage}"; exit 0 ;;
    --) shift; user_command=("$@"); break ;;
    -*) die "unknown option '$1' (${usage})" ;;
    *) [[ -z "${data}" ]] || die "one dataset folder only, got '${data}' and '$1' (${usage})"; data="$1" ;;
  esac
  shift
done

[[ -n "${data}" ]] || die "the dataset folder is missing (${usage})"
[[ -d "${data}" ]] || die "dataset folder '${data}' does not exist or is not a folder"
data_abs="$(cd -- "${data}" 2> /dev/null && pwd -P)" || die "cannot enter dataset folder '${data}'"
[[ "${gpus}" =~ ^(all|none|[A-Za-z0-9:-]+(,[A-Za-z0-9:-]+)*)$ ]] \
  || die "--gpus takes all, none or a comma-separated list of GPU indices or UUIDs, got '${gpus}'"
[[ "${shm}" =~ ^[0-9]+[bkmgBKMG]?$ ]] || die "--shm-size takes a size such as 16g, got '${shm}'"

choose_engine "install Docker with the NVIDIA Container Toolkit, or Podman with CDI"

uid="${SUDO_UID:-$(id -u)}"
gid="${SUDO_GID:-$(id -g)}"
results="${RESULTS_DIR:-results}"
if [[ ! -d "${results}" ]]; then
  mkdir -p -- "${results}" 2> /dev/null || die "cannot create the results folder '${results}'"
  # Under sudo the folder would belong to root and the container user could not write to it.
  if (( EUID == 0 )) && [[ -n "${SUDO_UID:-}" ]]; then chown "${uid}:${gid}" "${results}"; fi
fi
results_abs="$(cd -- "${results}" 2> /dev/null && pwd -P)" || die "cannot enter the results folder '${results}'"
for path in "${data_abs}" "${results_abs}"; do
  [[ "${path}" != *:* ]] || die "'${path}' contains ':', which a volume mount cannot name; use another path"
done

cmd=("${engine}" run --rm)
if [[ -t 0 ]]; then
  cmd+=(-it)
elif (( ${#user_command[@]} == 0 )); then
  cmd+=(-i)  # a shell reading commands from a pipe
fi
if [[ "${engine}" == podman ]]; then
  # Podman reaches GPUs through CDI (on the host: nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml), not --gpus.
  if [[ "${gpus}" == all ]]; then
    cmd+=(--device nvidia.com/gpu=all)
  elif [[ "${gpus}" != none ]]; then
    IFS=, read -r -a gpu_list <<< "${gpus}"
    for gpu in "${gpu_list[@]}"; do cmd+=(--device "nvidia.com/gpu=${gpu}"); done
  fi
  cmd+=(--security-opt label=disable)  # SELinux hosts: let the container use the bind mounts and GPU devices
  # Rootless podman: map your uid to the same uid inside, so the mounted folders stay yours.
  if (( EUID != 0 )); then cmd+=(--userns=keep-id); fi
else
  if [[ "${gpus}" == all ]]; then
    cmd+=(--gpus all)
  elif [[ "${gpus}" != none ]]; then
    cmd+=(--gpus "\"device=${gpus}\"")  # the quotes keep docker's CSV parser from splitting the list at commas
  fi
fi
cmd+=(--shm-size "${shm}" --volume "${data_abs}:/app/data" --volume "${results_abs}:/app/results")

if (( profile )); then
  # Docker gives a non-root --user no effective capabilities (only the bounding set), so the container starts as
  # root with SYS_ADMIN added, and setpriv switches to your uid:gid at once, keeping SYS_ADMIN as its only capability
  # (ambient, so ncu and the program it profiles inherit it).
  cmd+=(--user 0:0 --cap-add SYS_ADMIN "${image}"
        setpriv "--reuid=${uid}" "--regid=${gid}" --clear-groups "--bounding-set=-all,+sys_admin"
        "--inh-caps=-all,+sys_admin" "--ambient-caps=-all,+sys_admin" --)
  if (( ${#user_command[@]} )); then cmd+=("${user_command[@]}"); else cmd+=(bash); fi
else
  cmd+=(--user "${uid}:${gid}" "${image}")
  if (( ${#user_command[@]} )); then cmd+=("${user_command[@]}"); fi
fi

quote_words "${cmd[@]}" >&2
exec "${cmd[@]}"
