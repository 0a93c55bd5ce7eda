#!/usr/bin/env bash
# Builds Brigade with clang's AddressSanitizer and UndefinedBehaviorSanitizer into build-asan/ (or
# $BUILD_DIR) and runs the test suites of Brigade's host code under them: the test programs
# and every brigade program the CLI tests start. The kernel and two-vendor suites, which check
# the drivers' arithmetic and whose launchers every model and pipeline test drives too, are
# not built (BRIGADE_DRIVER_SUITES=OFF). Any report aborts its process, which fails its test
# (a brigade killed by a signal fails the CLI test that ran it: tests/cli/run.h).
# The build holds the fuzzers too (tests/fuzz, tools/fuzz.sh), on the same engine.
#   tools/sanitize.sh [extra ctest arguments, e.g. -R 'cli:']
#   tools/sanitize.sh --build [TARGET...]    only configure and build (every target, or these)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build-asan}
build_only=0
targets=()
if [ "${1:-}" = --build ]; then
  build_only=1
  shift
  for t in "$@"; do targets+=(--target "$t"); done
fi
"$root/tools/install-deps.sh"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRIGADE_SANITIZE=ON \
  -DBRIGADE_DRIVER_SUITES=OFF -DBRIGADE_FUZZ=ON >/dev/null
cmake --build "$build" --parallel "$(nproc)" "${targets[@]}"
[ $build_only = 0 ] || exit 0

# A quarantine of 32 MB, not 256: freed memory stays poisoned until 32 MB more has been freed.
# The drivers and the validation layer allocate and free constantly through ASan's allocator,
# and the whole default quarantine made each process touch fresh pages: a bf16 pipeline case
# took 8 % more CPU time and 1.6 GiB against 1.0 (docs/BENCHMARKS.md).
export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:quarantine_size_mb=32
export UBSAN_OPTIONS=abort_on_error=1:halt_on_error=1:print_stacktrace=1
ctest --test-dir "$build" --output-on-failure --no-tests=error -j2 "$@"
