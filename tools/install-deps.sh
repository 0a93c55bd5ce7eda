#!/usr/bin/env bash
# Installs Brigade's build and test dependencies from Debian 12's packages, only those that
# are missing, a second Vulkan vendor for the tests (tools/install-swiftshader.sh: Google's
# SwiftShader into .drivers/, at a pinned version) and Mesa 25's faster lavapipe from Debian's
# bookworm-backports (tools/install-lavapipe.sh: into .drivers/, with no change to the
# system's packages or apt sources), and a shader compiler that knows cooperative matrices
# from Debian unstable (tools/install-glslang.sh: into .toolchain/). Non-interactive and safe
# to re-run.
#   tools/install-deps.sh              what building, testing and training need
#   tools/install-deps.sh --reference  also Debian's CPU PyTorch and OpenBLAS (its matrix
#                                      products), for tools/torch/ (comparison curves,
#                                      benchmarks)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libvulkan-dev libvulkan-volk-dev glslc glslang-tools spirv-tools
  vulkan-validationlayers vulkan-tools mesa-vulkan-drivers
  doctest-dev libcli11-dev libtomlplusplus-dev nlohmann-json3-dev zlib1g-dev
  openmpi-bin libopenmpi-dev  # ranks: mpirun -np N brigade ...
  iproute2 util-linux  # tools/hosts.sh: two hosts as network namespaces (ip, unshare, nsenter)
  clang libclang-rt-14-dev  # tools/fuzz.sh: libFuzzer and the sanitizers
  dataset-fashion-mnist jargon-text
)
[ "${1:-}" = "--reference" ] && packages+=(python3-torch libopenblas0-pthread)
command -v npm >/dev/null || packages+=(npm)  # fetches SwiftShader (install-swiftshader.sh)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
"$(dirname "${BASH_SOURCE[0]}")/install-swiftshader.sh"
"$(dirname "${BASH_SOURCE[0]}")/install-lavapipe.sh"
"$(dirname "${BASH_SOURCE[0]}")/install-glslang.sh"
