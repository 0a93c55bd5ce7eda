#!/usr/bin/env bash
# The whole test suite, every case once, in the build that checks it best: the suites of
# Brigade's host code (vk, io, model, pipeline, cli) under AddressSanitizer and UBSan
# (tools/sanitize.sh, into build-asan/), and in the optimized build (tools/build.sh, build/)
# the suites that check the drivers' arithmetic and the processes (kernels, the SwiftShader
# copy of the kernels, vendors, ranks, mpi) and the host-suite cases left out of the
# sanitized run: those whose host paths other sanitized cases take (`not_sanitized` below).
# `ctest --test-dir build -j2` alone runs every case in the optimized build.
#   tools/test.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# The fashion-cnn and gpt-mini pipeline equivalence cases (fashion-mlp's takes the same
# executor paths on smaller layers), the other schedules on those presets, fashion-mlp's 1f1b
# case (its actions are a subset of zb's) and interleaved case (`brigade step` runs
# interleaved in the cli suite), the schedules' memory test (the gpipe memory test's
# accounting), the evaluation case (every cli training run evaluates), the kernel and
# pipeline benchmarks of the cli suite (driver arithmetic and timing; `bench profile` runs),
# the three-vendor recovery case and the losses in a forward, a backward or a step (the
# other two-stage ones take their paths), and gpt-mini's 16-bit
# pipeline cases (fashion-mlp's and fashion-cnn-bn's take the executor's 16-bit paths, and the
# cli suite's fp16 run of a small GPT its 16-bit layers, tied embedding and loss scaling) and
# its bf16 case at odd sizes (where the fp32 copies' views start in device memory: no host
# memory for AddressSanitizer to watch; its pipelines, of shapes no other case has, took 175 s
# to build under it with Mesa's shader cache cold, against 65 in the optimized build),
# the two cases of 16-bit numerics over every preset (the rounded weight copies' bits,
# the 2 L u bound on gradients: the drivers' arithmetic, on the paths those cases take), and
# the gpipe case of replayed steps (the zero-bubble case takes the replay's paths), and the
# evaluation case again on memory the host does not map (its host paths are sanitized in the
# other cases run so).
not_sanitized='pipeline:(bf16 |fp16 )?(fashion-cnn|gpt-mini)( \(two blocks\)| at odd sizes)? pipelined equals|products read its weights rounded|within 2 L u of their largest|pipeline:fashion-mlp pipelined equals one device under the (1f1b|interleaved)|measured memory is the plan|pipeline:evaluation pipelined|unmapped memory: pipeline: evaluation|cli:brigade bench (kernels|pipeline)|cli:three stages on two vendors|cli:a device lost in a forward, a backward or an optimizer step|pipeline:replayed steps .*: gpipe'

# The optimized build makes only the programs of what runs in it (the vk, io and model suites
# run sanitized only).
BUILD_DIR=$root/build "$root/tools/build.sh" --target brigade --target test_kernels --target test_vendors --target test_ranks \
  --target test_mpi --target test_pipeline --target test_cli
# BESIDE_TESTS: a command run beside both runs, from the start of the optimized one, whose
# failure fails this script (CI: the cooperative-matrix cases, one process on about one core).
# The optimized run leaves a core idle at times (the ranks suite's cases wait on processes and
# timeouts, one case at a time), where the sanitized build and run keep both busy.
beside=
if [ -n "${BESIDE_TESTS:-}" ]; then
  setsid bash -c "$BESIDE_TESTS" >"$root/build/beside.log" 2>&1 &
  beside=$!
  trap 'kill -- -$beside 2>/dev/null || true' EXIT
fi
status=0
# One run of both sets, the longest cases first (their suites' COST, tests/CMakeLists.txt).
ctest --test-dir "$root/build" --output-on-failure --no-tests=error -j2 -R "^(kernels|kernels on swiftshader|kernels in 2 workgroups|vendors|ranks|mpi|unmapped memory: ranks):|$not_sanitized"
BUILD_DIR=$root/build-asan "$root/tools/sanitize.sh" -E "$not_sanitized" || status=$?
if [ -n "$beside" ]; then
  wait $beside || { echo "test.sh: '$BESIDE_TESTS' failed:" >&2; status=1; }
  trap - EXIT
  cat "$root/build/beside.log"
fi
exit $status
