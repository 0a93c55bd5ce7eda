#!/usr/bin/env bash
# Installs what is missing, then configures and builds Brigade into build/ (or $BUILD_DIR):
# everything, or only the targets named. A new build directory takes clang (as the sanitized
# build does; CC and CXX choose another): from empty, the targets tools/test.sh
# builds took 185 s on two cores against g++'s 250 s (docs/TESTING.md). One already made keeps
# the compiler it was made with.
#   tools/build.sh [--target NAME]... [extra cmake -D options]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build}
targets=()
while [ "${1:-}" = "--target" ]; do
  [ $# -ge 2 ] || { echo "build.sh: --target needs a target's name" >&2; exit 2; }
  targets+=(--target "$2"); shift 2
done
"$root/tools/install-deps.sh"
CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$build" --parallel "$(nproc)" "${targets[@]}"
