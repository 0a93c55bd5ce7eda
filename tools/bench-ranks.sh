#!/usr/bin/env bash
# GPipe's speed-up across processes, measured: one rank against K=2 pipelined ranks at each
# M, and one rank against 2 data-parallel replicas, each rank a one-core device (lavapipe
# with LP_NUM_THREADS=1, the ranks bound to their own cores). Every configuration runs
# `brigade step --repeat` (its median step time after the first); the one-rank baseline and
# the configuration alternate, --rounds times, and the table shows the medians over rounds,
# the speed-up with its range over rounds, and GPipe's ideal K*M/(M+K-1). The two stages are
# balanced on measured layer times (--partition profile). From the last round's run (its
# trace of the last step, every rank's merged): the bytes the boundary moved in the step, and
# the MPI sends' time in flight (from MPI_Isend to its completion, summed; it overlaps compute)
# as a share of the step. --schedules runs the two stages under each schedule named (interleaved
# with two cells per rank); the ideal is then K(1 - bubble) with that schedule's bubble.
#   tools/bench-ranks.sh [--models "fashion-cnn gpt-mini"] [--micro-batches "1 2 4 8 16"]
#                        [--schedules "gpipe 1f1b zb interleaved"] [--rounds 3] [--repeat 6]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
exe=$root/build/brigade
models="fashion-cnn gpt-mini" micro="1 2 4 8 16" schedules=gpipe rounds=3 repeat=6
while [ $# -gt 0 ]; do
  case $1 in
    --models) models=$2; shift 2 ;;
    --micro-batches) micro=$2; shift 2 ;;
    --schedules) schedules=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-ranks: unknown flag $1 (--help lists them)" >&2; exit 2 ;;
  esac
done
[ "$(nproc)" -ge 2 ] || { echo "bench-ranks: needs 2 cores" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LP_NUM_THREADS=1
root_flag=$([ "$(id -u)" -eq 0 ] && echo --allow-run-as-root || true)

# A fixed random batch: 64 images for the image models, 16 windows of 128 tokens for GPTs.
batch() {
  python3 - "$1" "$2" <<'PY'
import json, random, struct, sys
path, model = sys.argv[1], sys.argv[2]
random.seed(7)
if model.startswith("gpt"):
    rows, T = 16, 128
    x = [random.randrange(256) for _ in range(rows * T)]; y = [random.randrange(256) for _ in range(rows * T)]
    a, b = struct.pack("<%di" % len(x), *x), struct.pack("<%di" % len(y), *y)
    head = {"input": {"dtype": "I32", "shape": [rows, T]}, "target": {"dtype": "I32", "shape": [rows, T]}}
else:
    rows = 64
    x = [random.random() for _ in range(rows * 784)]; y = [random.randrange(10) for _ in range(rows)]
    a, b = struct.pack("<%df" % len(x), *x), struct.pack("<%di" % len(y), *y)
    head = {"input": {"dtype": "F32", "shape": [rows, 1, 28, 28]}, "target": {"dtype": "I32", "shape": [rows]}}
head["input"]["data_offsets"] = [0, len(a)]
head["target"]["data_offsets"] = [len(a), len(a) + len(b)]
h = json.dumps(head).encode(); h += b" " * (-len(h) % 8)
open(path, "wb").write(struct.pack("<Q", len(h)) + h + a + b)
PY
}

# The median step time in ms of one run: $1 = ranks (0: one process, no mpirun), rest: flags.
# The run's whole output is left in $work/out.
step_ms() {
  local ranks=$1; shift
  local cmd=("$exe" step --model "$model" --params "$work/$model.p" --batch "$work/$model.b" --out "$work/g"
             --repeat "$repeat" "$@")
  if [ "$ranks" -eq 0 ]; then
    taskset -c 0 "${cmd[@]}"
  else
    mpirun $root_flag --bind-to core --map-by core -np "$ranks" "${cmd[@]}"
  fi > "$work/out"
  sed -n 's/^step time: median \([0-9.]*\) ms.*/\1/p' "$work/out"
}

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

printf "%-12s %-22s %4s %11s %11s %9s %15s %7s %10s %10s\n" model config M "1 rank ms" "ranks ms" speed-up "range" ideal moved "in flight"
for model in $models; do
  "$exe" init --model "$model" --seed 1 --out "$work/$model.p" >/dev/null
  batch "$work/$model.b" "$model"
  configs=()
  for s in $schedules; do
    for M in $micro; do configs+=("K=2:$M:$s"); done
  done
  configs+=("R=2:1:-")
  for c in "${configs[@]}"; do
    kind=${c%%:*} rest=${c#*:}
    M=${rest%%:*} sched=${rest#*:}
    if [ "$kind" = K=2 ]; then
      flags=(-m "$M" --partition profile --schedule "$sched")
      # The schedule's bubble with equal cells, K = 2 (DESIGN.md): V = 2 cells per rank interleaved.
      case $sched in
        zb) bubble="1 / (3 * M + 1)" ;;
        interleaved) bubble="1 / (2 * M + 1)"; flags+=(--virtual-stages 2) ;;
        *) bubble="1 / (M + 1)" ;;
      esac
      ideal=$(awk -v M="$M" "BEGIN {printf \"%.2f\", 2 * (1 - $bubble)}")
      config="2 stages, $sched"
    else
      flags=(-m 1 --replicas 2); ideal=2.00 config="2 replicas"
    fi
    one=() two=() ratios=()
    for ((r = 0; r < rounds; r++)); do
      a=$(step_ms 0 -m "$M") b=$(step_ms 2 "${flags[@]}")
      one+=("$a") two+=("$b") ratios+=("$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", a / b}')")
    done
    lo=$(printf "%s\n" "${ratios[@]}" | sort -g | head -1) hi=$(printf "%s\n" "${ratios[@]}" | sort -g | tail -1)
    moved=$(sed -n 's/^transfers: \(.*\) across boundaries.*/\1/p' "$work/out" | tr -d ' ')
    flight=$(sed -n 's/^transfers: .*relays \([0-9.]*\) ms.*/\1/p' "$work/out")
    share=$(awk -v f="${flight:-0}" -v s="$b" 'BEGIN {printf "%.1f%%", 100 * f / s}')
    printf "%-12s %-22s %4s %11.2f %11.2f %8.2fx %15s %7s %10s %10s\n" "$model" "$config" "$M" \
      "$(echo "${one[@]}" | median)" "$(echo "${two[@]}" | median)" "$(echo "${ratios[@]}" | median)" "${lo}-${hi}x" "$ideal" \
      "${moved:--}" "$([ "$kind" = K=2 ] && echo "$share" || echo -)"
  done
done
