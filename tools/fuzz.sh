#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz in the sanitized build (tools/sanitize.sh --build:
# clang, AddressSanitizer + UBSan, build-asan/ or $BUILD_DIR) and runs them at once, each for
# SECONDS (default 20), on a copy of its seed corpus in tests/fuzz/corpus. Exits non-zero on
# any finding: a crash, a sanitizer report, an exception other than brigade::UserError, a
# refusal that is not one clear line, a hang (over 10 s on one input) or an allocation past the
# memory limit. The input that caused it is left in build-asan/fuzz/findings/TARGET/.
#   tools/fuzz.sh [SECONDS] [TARGET...]    targets: safetensors idx config (default: all)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build-asan}
seconds=${1:-20}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(safetensors idx config)
case $seconds in '' | *[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, not '$seconds'" >&2; exit 2 ;; esac

BUILD_DIR=$build "$root/tools/sanitize.sh" --build fuzz
runs=$build/fuzz
# A target's run: its corpus, its findings and its log.
paths() { corpus=$runs/corpus/$1 findings=$runs/findings/$1 log=$runs/logs/$1.log; }

# Every target at once, each for SECONDS (on two cores, three share them): their findings and
# summaries are read once all have ended, in the order given.
for t in "${targets[@]}"; do
  [ -x "$build/tests/fuzz/${t}_fuzz" ] && [ -d "$root/tests/fuzz/corpus/$t" ] ||
    { echo "fuzz.sh: unknown target '$t' (expected safetensors, idx or config)" >&2; exit 2; }
done
status=0
pids=()
start=$SECONDS
trap '[ ${#pids[@]} = 0 ] || kill "${pids[@]}" 2>/dev/null || true' EXIT
for t in "${targets[@]}"; do
  exe=$build/tests/fuzz/${t}_fuzz
  seeds=$root/tests/fuzz/corpus/$t
  paths "$t"
  rm -rf "$corpus"
  mkdir -p "$corpus" "$findings" "$(dirname "$log")"
  cp "$seeds"/* "$corpus"/
  dict=()
  [ -f "$root/tests/fuzz/$t.dict" ] && dict=(-dict="$root/tests/fuzz/$t.dict")
  "$exe" "$corpus" "${dict[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$findings/" >"$log" 2>&1 &
  pids+=($!)
done
for i in "${!targets[@]}"; do
  t=${targets[$i]}
  paths "$t"
  rc=0
  wait "${pids[$i]}" || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  echo "fuzz $t: ${execs:-?} executions, corpus $(ls "$corpus" | wc -l) inputs"
  if [ $rc -ne 0 ]; then
    status=1
    echo "fuzz $t: FINDING (exit $rc); input in $findings/, log $log:" >&2
    grep -E 'ERROR|SUMMARY|refusal|broken promise|recorded config|terminate|Test unit written' "$log" | head -20 >&2 || true
  fi
done
trap - EXIT
echo "fuzz: ${#targets[@]} targets at once in $((SECONDS - start)) s"
exit $status
