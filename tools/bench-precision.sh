#!/usr/bin/env bash
# Convergence per storage precision: the same training from the same initial parameters and
# data in each --precision, and PyTorch's CPU autocast(bfloat16) on gpt-mini from the same
# start (tools/torch/gpt_reference.py --autocast bf16). Prints each run's final validation loss
# (gpt-mini, --gpt-steps steps of the default settings) and test accuracy (fashion-cnn on two
# stages as in the README, --cnn-steps steps) with its difference from fp32's, and each
# precision's planned activation bytes for both. The runs stay in --out.
#   tools/bench-precision.sh [--gpt-steps 1000] [--cnn-steps 938] [--precisions "fp32 bf16 fp16"]
#                            [--out runs/precision]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
exe=$root/build/brigade
gpt_steps=1000 cnn_steps=938 precisions="fp32 bf16 fp16" out=runs/precision
while [ $# -gt 0 ]; do
  case $1 in
    --gpt-steps) gpt_steps=$2; shift 2 ;;
    --cnn-steps) cnn_steps=$2; shift 2 ;;
    --precisions) precisions=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "bench-precision: unknown flag $1" >&2; exit 2 ;;
  esac
done
case " $precisions " in *" fp32 "*) ;; *) echo "bench-precision: --precisions must include fp32, the baseline" >&2; exit 2 ;; esac
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "bench-precision: needs PyTorch (tools/install-deps.sh --reference)" >&2; exit 2; }
mkdir -p "$out"
cnn="--model fashion-cnn --devices 0,0 --micro-batches 4 --remat except-last"

# The "end" record's loss or accuracy of a run's metrics.jsonl.
final() { python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; print([x for x in r if x['kind']=='end'][-1][sys.argv[2]])" "$1/metrics.jsonl" "$2"; }
activations() {  # each stage's planned activation bytes, from the plan's aligned table
  "$exe" plan $1 --precision "$2" | python3 -c "
import sys
lines = sys.stdin.read().splitlines()
at = lines[1].index('activations')
print(' + '.join(l[at:].split('  ')[0].strip() for l in lines[2:] if l[:1].isdigit()))"
}

for p in $precisions; do
  [ -f "$out/gpt-mini-$p/metrics.jsonl" ] && grep -q '"kind":"end"' "$out/gpt-mini-$p/metrics.jsonl" ||
    { rm -rf "$out/gpt-mini-$p"; "$exe" train --model gpt-mini --steps "$gpt_steps" --eval-every "$gpt_steps" --precision "$p" --out "$out/gpt-mini-$p" >"$out/gpt-mini-$p.log" 2>&1; }
  [ -f "$out/fashion-cnn-$p/metrics.jsonl" ] && grep -q '"kind":"end"' "$out/fashion-cnn-$p/metrics.jsonl" ||
    { rm -rf "$out/fashion-cnn-$p"; "$exe" train $cnn --steps "$cnn_steps" --eval-every "$cnn_steps" --precision "$p" --out "$out/fashion-cnn-$p" >"$out/fashion-cnn-$p.log" 2>&1; }
done
if [ ! -f "$out/gpt-mini-torch-bf16/metrics.jsonl" ]; then
  "$exe" init --model gpt-mini --seed 0 --out "$out/gpt-mini-init.safetensors" >/dev/null
  /usr/bin/python3 "$root/tools/torch/gpt_reference.py" --run "$out/gpt-mini-fp32" --init "$out/gpt-mini-init.safetensors" \
    --out "$out/gpt-mini-torch-bf16" --autocast bf16 >"$out/gpt-mini-torch-bf16.log" 2>&1
fi

base_loss=$(final "$out/gpt-mini-fp32" loss) base_acc=$(final "$out/fashion-cnn-fp32" accuracy)
pct() { python3 -c "import sys; print('%+.2f%%' % (100 * (float(sys.argv[1]) / float(sys.argv[2]) - 1)))" "$1" "$2"; }
pts() { python3 -c "import sys; print('%+.2f' % (100 * (float(sys.argv[1]) - float(sys.argv[2]))))" "$1" "$2"; }
printf '%-22s %-14s %-8s %-22s %-13s %-8s %s\n' run "gpt-mini loss" "vs fp32" "gpt-mini activations" "cnn accuracy" "vs fp32" "cnn activations per stage"
for p in $precisions; do
  loss=$(final "$out/gpt-mini-$p" loss) acc=$(final "$out/fashion-cnn-$p" accuracy)
  printf '%-22s %-14.4f %-8s %-22s %-13.4f %-8s %s\n' "brigade $p" "$loss" "$(pct "$loss" "$base_loss")" \
    "$(activations "--model gpt-mini -b 16" "$p")" "$acc" "$(pts "$acc" "$base_acc")" "$(activations "$cnn -b 64" "$p")"
done
loss=$(python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; print([x for x in r if x['kind']=='eval'][-1]['loss'])" "$out/gpt-mini-torch-bf16/metrics.jsonl")
printf '%-22s %-14.4f %-8s\n' "pytorch autocast bf16" "$loss" "$(pct "$loss" "$base_loss")"
echo "(gpt-mini: $gpt_steps steps, one stage, activations planned at its batch of 16; fashion-cnn: $cnn_steps steps on two"
echo " stages as in the README, accuracy differences in points)"
