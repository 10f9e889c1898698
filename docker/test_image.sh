#!/usr/bin/env bash
# Usage: bash docker/test_image.sh   (or: make image-test)
# The image built and run for real, on a machine with no container registry and no NVIDIA apt repository: podman
# builds the project's own docker/Dockerfile through build_image.sh on a stand-in for the CUDA base (a debootstrapped
# Ubuntu 24.04, docker/standin-base/), then the suite runs inside the container as the image's user and as another
# uid. What differs from a real build is printed: the base image's name and NSIGHT_PACKAGES=none (no ncu, no nsys).
# It downloads several GB (the pip layers) on a first run; later runs reuse podman's layer cache unless NO_CACHE=1.
# Needs root (apt-get, debootstrap, rootful podman). Installs podman, buildah, runc and debootstrap if absent.
# Environment: IMAGE_TEST_DIR (default /var/tmp/trainbench-image-test: podman settings, root file system, outputs),
#   IMAGE_TAG (default trainbench:image-test), CA_BUNDLE (default the host's /etc/ssl/certs/ca-certificates.crt when
#   present), NO_CACHE=1 (build every layer again), SHARED_FIXTURES (default ../shared/fixtures/ncu).
# The commands in single quotes are for the container's shell: $HOME and the like expand there.
# shellcheck disable=SC2016
set -euo pipefail
prog=test_image.sh
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
# shellcheck source=scripts/container_common.sh
source "${repo}/scripts/container_common.sh"
cd "${repo}"

state="${IMAGE_TEST_DIR:-/var/tmp/trainbench-image-test}"
tag="${IMAGE_TAG:-trainbench:image-test}"
standin="localhost/trainbench-standin-cuda:13.0.3-cudnn-devel-ubuntu24.04"
rootfs_image="localhost/trainbench-noble-rootfs:24.04"
ca_bundle="${CA_BUNDLE-/etc/ssl/certs/ca-certificates.crt}"
[[ -f "${ca_bundle}" ]] || ca_bundle=""
fixtures="${SHARED_FIXTURES:-${repo}/../shared/fixtures/ncu}"
other_uid=4321
skipped=("base image: ${standin} (debootstrapped Ubuntu 24.04, no CUDA) instead of nvidia/cuda"
         "Nsight Compute and Nsight Systems: NSIGHT_PACKAGES=none (NVIDIA's apt repository cannot be reached)"
         "GPUs: start_container.sh --gpus none")
ran=()

step() { echo; echo "== $*"; }
# Runs a command inside the built image as USER (uid[:gid]), echoing it first and keeping it for the summary.
in_image() {
  local user="$1"; shift
  ran+=("[uid ${user}] $*")
  echo "+ [uid ${user}] $*"
  podman run --rm --network none --user "${user}" "${tag}" bash -c "$*"
}

(( EUID == 0 )) || die "run as root: it installs packages, debootstraps a root file system and runs rootful podman"
mkdir -p "${state}"

step "tools"
missing=()
for tool in podman buildah runc debootstrap; do command -v "${tool}" > /dev/null || missing+=("${tool}"); done
if (( ${#missing[@]} )); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman buildah runc debootstrap uidmap
fi
podman --version
# The two settings that let podman run here (nested in a container, cgroups v1 hybrid), in a file of our own:
# CONTAINERS_CONF makes podman read only it, so the machine's /etc/containers stays untouched.
cat > "${state}/containers.conf" << 'EOF'
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF="${state}/containers.conf"

step "stand-in base ${standin}"
if ! podman image exists "${standin}"; then
  rootfs="${state}/rootfs"
  rm -rf "${rootfs}"
  # Debian's debootstrap has no script for noble; gutsy's is the one every later Ubuntu release links to.
  debootstrap --no-check-gpg --variant=minbase noble "${rootfs}" http://archive.ubuntu.com/ubuntu/ \
    /usr/share/debootstrap/scripts/gutsy > "${state}/debootstrap.log" 2>&1 \
    || die "debootstrap failed: see ${state}/debootstrap.log"
  tar -C "${rootfs}" -c . | podman import - "${rootfs_image}"
  rm -rf "${rootfs}"
  podman build --format docker --network host --build-arg "ROOTFS_IMAGE=${rootfs_image}" --tag "${standin}" \
    "${repo}/docker/standin-base"
fi
echo "using ${standin} ($(podman image inspect --format '{{.Size}}' "${standin}") bytes)"

step "build (build_image.sh, podman)"
build_options=(--network host --build-arg NSIGHT_PACKAGES=none)
if [[ "${NO_CACHE:-0}" == 1 ]]; then build_options+=(--no-cache); fi
started=${SECONDS}
CONTAINER_ENGINE=podman CA_BUNDLE="${ca_bundle}" bash "${repo}/build_image.sh" --tag "${tag}" \
  --base-image "${standin}" -- "${build_options[@]}"
build_seconds=$(( SECONDS - started ))

step "layers (podman image history)"
podman image history --no-trunc --format '{{.Size}}\t{{.CreatedBy}}' "${tag}" | grep -v $'^0 B\t' | cut -c 1-150
image_bytes="$(podman image inspect --format '{{.Size}}' "${tag}")"

step "inside the image, as its own user"
image_user="$(podman image inspect --format '{{.Config.User}}' "${tag}")"
in_image "${image_user}" 'python --version && trainbench --help | head -n 3'
in_image "${image_user}" 'touch /app/written-by-image-user && test -w "$HOME" && echo "/app and HOME writable"'
in_image "${image_user}" 'cd /app && python -m trainbench.demo > /tmp/demo.log 2>&1 || { tail -n 30 /tmp/demo.log; exit 1; }
  tail -n 12 /tmp/demo.log; ls -d /app/demo_output/*_demo/report.txt'
in_image "${image_user}" 'python -c "import torch, torchvision; print(\"torch\", torch.__version__, torch.version.cuda)"'
in_image "${image_user}" 'python -c "import tensorflow as tf; print(\"tensorflow\", tf.__version__, tf.sysconfig.get_build_info()[\"cuda_version\"])" 2>&1 | tail -n 1'
# The Apptainer definition's %test line, exactly as written there (both frameworks in one process, torch first).
apptainer_test="$(sed -n '/^%test/,/^%/p' docker/trainbench.def | grep -m 1 'python -c')"
in_image "${image_user}" "${apptainer_test} 2>&1 | tail -n 1"
in_image "${image_user}" 'ptxas="${XLA_FLAGS#*=}/bin/ptxas"; echo "XLA ptxas: ${ptxas}"; "${ptxas}" --version | tail -n 2
  ls "${XLA_FLAGS#*=}/nvvm/libdevice/"'
in_image "${image_user}" 'python Core-Utilization-Analyzer/coreutil.py benchmarks/results/h100_profile/ncu_batch_16_partial.csv.gz | tail -n 6'

step "every pin of constraints.txt, installed and imported in the image and in the Makefile's environment"
in_image "${image_user}" 'python docker/check_pins.py check constraints.txt 2> /dev/null' > "${state}/pins_image.json"
make --no-print-directory install > /dev/null
.venv/bin/python docker/check_pins.py check constraints.txt 2> /dev/null > "${state}/pins_host.json"
.venv/bin/python docker/check_pins.py compare "${state}/pins_image.json" "${state}/pins_host.json"

step "inside the image, as uid ${other_uid} (not the build's user)"
in_image "${other_uid}:${other_uid}" 'id && touch /app/x && mkdir -p /app/throughput_data && test -w "$HOME" \
  && python -c "import matplotlib, matplotlib.pyplot; print(\"matplotlib cache\", matplotlib.get_cachedir())" \
  && trainbench --help > /dev/null && echo "uid $(id -u): /app, HOME and caches writable"'

step "start_container.sh: a dataset folder at /app/data, results into the mounted folder"
results="${state}/results"
rm -rf "${results}"
data="${state}/dataset"
if [[ -d "${fixtures}" ]]; then data="${fixtures}"; else mkdir -p "${data}"; fi
csv="ncu_raw_b200_2025_prof_prefix_meinie_flashinfer_decode_2kernels.csv"
command=(bash -c "ls /app/data | head -n 3; if [[ -f /app/data/${csv} ]]; then
  python Core-Utilization-Analyzer/coreutil.py /app/data/${csv} | tail -n 6; fi
  python -m trainbench.demo --output /app/results > /tmp/demo.log 2>&1 || { tail -n 30 /tmp/demo.log; exit 1; }
  tail -n 4 /tmp/demo.log")
ran+=("[start_container.sh, uid 1000 via SUDO_UID] ${command[*]}")
SUDO_UID=1000 SUDO_GID=1000 CONTAINER_ENGINE=podman IMAGE_TAG="${tag}" RESULTS_DIR="${results}" \
  bash "${repo}/start_container.sh" "${data}" --gpus none -- "${command[@]}" < /dev/null
report="$(find "${results}" -name report.txt | head -n 1)"
[[ -n "${report}" ]] || die "the demo left no report.txt in the mounted results folder ${results}"
echo "on the host: ${report} (owner $(stat -c %u:%g "${report}"))"
[[ "$(stat -c %u "${report}")" == 1000 ]] || die "${report} does not belong to uid 1000"

step "summary"
echo "build: ${build_seconds} s (NO_CACHE=${NO_CACHE:-0}); image ${tag}: $(( image_bytes / 1000000 )) MB"
echo "differences from a real build:"
printf '  - %s\n' "${skipped[@]}"
echo "commands run inside the container:"
printf '  %s\n' "${ran[@]}"
echo "image test passed"
