#!/usr/bin/env bash
# Usage: install_nsight.sh CUDA_VERSION NSIGHT_PACKAGES LINK_DIR   (run by docker/Dockerfile, as root, apt lists fresh)
# Installs Nsight Compute and Nsight Systems with apt and links the `ncu` and `nsys` of exactly those packages into
# LINK_DIR, which the image puts before /usr/local/cuda/bin on PATH. The CUDA devel base already ships its toolkit's
# Nsight Compute (/usr/local/cuda/bin/ncu), so a newer one asked for in NSIGHT_PACKAGES would otherwise stay hidden
# behind it. NSIGHT_PACKAGES: empty for the toolkit's own releases (cuda-nsight-{compute,systems}-<major>-<minor>
# =<CUDA_VERSION>-1), a list of apt packages (e.g. "nsight-compute-2025.3.1 nsight-systems-2025.5.1"), or "none"
# to build without Nsight (machines that cannot reach NVIDIA's apt repository; the build log says so).
set -euo pipefail
(( $# == 3 )) || { echo "usage: install_nsight.sh CUDA_VERSION NSIGHT_PACKAGES LINK_DIR" >&2; exit 2; }
cuda_version="$1" requested="$2" link_dir="$3"

if [[ "${requested}" == none ]]; then
  echo "install_nsight.sh: NSIGHT_PACKAGES=none: this image has no ncu and no nsys (not for profiling)"
  exit 0
fi
if [[ -z "${requested}" ]]; then
  cuda_mm="$(cut -d. -f1,2 <<< "${cuda_version}" | tr . -)"
  requested="cuda-nsight-compute-${cuda_mm}=${cuda_version}-1 cuda-nsight-systems-${cuda_mm}=${cuda_version}-1"
fi
read -r -a packages <<< "${requested}"
apt-get install -y --no-install-recommends "${packages[@]}"

# The packages a tool may come from: those named for it and their nsight dependencies (the toolkit's cuda-nsight-*
# packages may be thin ones that depend on the versioned nsight-* package holding the binary).
packages_for() {
  local kind="$1" name dep
  for name in "${packages[@]%%=*}"; do
    [[ "${name}" == *"nsight-${kind}"* ]] || continue
    echo "${name}"
    for dep in $(dpkg-query -W -f='${Depends}' "${name}" | sed 's/[,|]/\n/g' | awk '{print $1}'); do
      [[ "${dep}" == *"nsight-${kind}"* ]] && echo "${dep}"
    done
  done | sort -u
}

# The newest executable called TOOL among the files of those packages (sort -V on the path, whose folders carry
# the release); never the nsys inside Nsight Compute's own folder, which cannot import its captures.
newest_tool() {
  local tool="$1" kind="$2" owners path found=()
  mapfile -t owners < <(packages_for "${kind}")
  (( ${#owners[@]} )) || { echo "install_nsight.sh: no nsight-${kind} package among '${requested}'" >&2; return 1; }
  while IFS= read -r path; do
    [[ -f "${path}" && -x "${path}" ]] && found+=("${path}")
  done < <(dpkg -L "${owners[@]}" | grep -E "/${tool}\$")
  (( ${#found[@]} )) || { echo "install_nsight.sh: no executable ${tool} in ${owners[*]}" >&2; return 1; }
  printf '%s\n' "${found[@]}" | sort -V | tail -n 1
}

ncu="$(newest_tool ncu compute)"
nsys="$(newest_tool nsys systems)"
mkdir -p "${link_dir}"
ln -sf "${ncu}" "${link_dir}/ncu"
ln -sf "${nsys}" "${link_dir}/nsys"
"${link_dir}/ncu" --version
"${link_dir}/nsys" --version
