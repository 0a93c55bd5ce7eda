#!/usr/bin/env bash
# The checks of docs/BENCHMARKS.md "On a GPU", in one run on a machine with a GPU (and PyTorch
# with CUDA for the peers):
#   tools/gpu-check.sh OUTDIR [PARTS]
# PARTS (comma-separated, default all), run in this order: devices, products, tuned, kernels,
# matrix, tilings, suite, gpt, profile, replay, attention, flash, split, drivers, stages,
# planner, precision. On an H200, devices,products,tuned,gpt,profile,attention,split with
# GPT_PRECISIONS=auto PROFILE_PRECISIONS=auto took about six minutes (products 141 s, tuned
# about 45 s, gpt 70 s for the three presets, profile 10 s, attention 43 s, split 47 s).
#   kernels  `bench kernels` up to 4096^3 beside torch.mm fp32 (TF32 off) and TF32 on the same GPU
#   matrix   `bench kernels --precision bf16` and `fp16` (the products on the matrix units where
#            the GPU lists the type, each candidate warp tiling) at 1024^3 and 4096^3 and the
#            presets' shapes, beside torch.mm in the same type
#   tilings  every candidate tiling on the presets' Linear shapes (`bench kernels --compare`):
#            what choosing the GPU default by measurement needs (about 300 cases; on a GPU
#            each shape's tilings warmed for a second together, then timed in turn)
#   suite    the test suites on the GPU under the validation layer (synchronization validation
#            on): vk, kernels (each subgroup size), pipeline, model, io, cli; the ranks and mpi
#            suites need mpirun and the vendors suite two CPU drivers, so they are not run. The
#            cli suite runs the brigade binary at the path it was built at (BUILD there), and a
#            validation layer older than the cooperative-matrix extension (Debian 12's 1.3.239)
#            fails every case that makes a device that enables it
#   gpt      training throughput, brigade fp32 and --precision auto, against PyTorch eager fp32
#            (TF32 off), TF32 and autocast(bfloat16) with SDPA attention on the same GPU
#            (peer_bench.py)
#   profile  where a gpt2-small and a gpt-mini step go (`bench profile`): kernels, GPU idle, host,
#            in each of PROFILE_PRECISIONS (default "fp32 auto")
#   products every product of a micro-batch of 16 windows of PRODUCTS_MODEL (default gpt2-small;
#            `bench products`) timed
#            alone under its default tiling and, for the PRODUCTS_TOP (default 8) shapes that take
#            the most of it, under every other tiling the GPU has (matrix-unit blocks, shared
#            tiles, K split in 1 to 16 parts), in each of PRODUCTS_PRECISIONS (default "auto"):
#            which shapes' defaults to change, and what the step's products would gain; with
#            --save, so every later part takes the tilings it found 3 % faster or more
#   tuned    a step of PRODUCTS_MODEL in each of PRODUCTS_PRECISIONS (`bench profile`'s step
#            wall time) with the tuned tilings the products part kept and with the defaults
#            (--tilings default), in turn, 3 rounds
#   replay   a gpt-mini step with --precision auto (`bench profile`'s step wall time and host
#            line), its actions' recordings replayed and with --record-each-step, in turn, 3 rounds
#   attention a gpt-small and a gpt2-small step (`bench profile`'s step wall time) with
#            attention in each form (BRIGADE_ATTENTION=matrix, fused: products and softmax
#            passes, or flash attention: in 16-bit stages on matrix tiles, in fp32 the staged
#            row kernels), in turn, 2 rounds in each of ATTENTION_PRECISIONS (default "auto";
#            the fp32 pair was measured on an H200 before: BENCHMARKS, "The H200 again")
#   flash    flash attention's blocks (`bench attention`) on FLASH_SHAPES (default gpt2-small's
#            and gpt-small's at -b 16, "16x1024x768x12 16x256x384x6") in FLASH_TYPE (default
#            bf16): each pass's warps and the other side's blocks, checked against the default,
#            then timed in turn, each pass apart (flash-SHAPE.json); then the first shape's
#            fastest blocks (one tiling for all passes, and each pass's fastest) on a step of
#            FLASH_MODEL (default gpt2-small) with --precision auto (BRIGADE_ATTENTION_BLOCKS), in
#            turn with the default's, 2 rounds
#   split    a gpt-small and a gpt2-small step with --precision auto (`bench profile`'s step
#            wall time) with the weight gradients' K split (the default) and not
#            (BRIGADE_SPLIT_K=off), in turn, 2 rounds
#   drivers  gpt-mini trained on the GPU alone, then pipelined over the GPU and SwiftShader and
#            the GPU and lavapipe (--partition profile: each layer timed on each device), the
#            losses compared step by step, and the plan of the second
#   stages   K logical devices on the one GPU against one (`bench pipeline`)
#   planner  --plan auto on the GPU alone, for each of PLANNER_MODELS (default "gpt-small
#            gpt2-small"), batch 16: planned with an empty profile cache (the layer timing runs and
#            their seconds: a GPT timed as one block), then again from the cache; the choice and
#            its predicted step. Then `bench planner` on the last: the choice against a grid of 4
#            configurations measured, 3 rounds
#   precision a GPT step per --precision (`bench profile`'s step wall time; the precisions in
#            turn, ROUNDS rounds, default 3), then gpt-mini trained GPT_STEPS steps (default
#            1000; 0: none) in each precision from the same start (seed 0), its final validation loss
# Environment: BUILD (default build), MATRIX_TYPES (the matrix part's types, default
# "bf16 fp16"), MATRIX_SQUARES (its sizes, default 1024,4096), GPT_PRECISIONS (the gpt part's
# brigade precisions, default fp32,auto), GPT_MODELS (its presets, each with its limit in seconds,
# default "gpt-mini:60 gpt-small:70 gpt2-small:90"), SUITES (the suite part's, default "pipeline,kernels,cli,model,io,vk"), GPU (the GPU's device spec, default 0), TEXT (the GPT
# models' text, default jargon-text's), and the Vulkan loader's own variables choose what runs;
# for the drivers part, MIXED_DRIVER_FILES (VK_DRIVER_FILES listing the GPU's driver, lavapipe's
# and SwiftShader's) and LVP_LIBS (prepended to LD_LIBRARY_PATH: lavapipe's libraries; default
# BRIGADE_LVP_LIBS, from gpu-carry.sh --lavapipe), if set; neither gpu-pack.sh nor gpu-carry.sh
# carries lavapipe's or SwiftShader's driver, so the drivers part needs them carried by hand.
# Each part has a time limit (a GPT step of `bench profile` STEP_LIMIT seconds, default 30),
# and with DEADLINE (seconds from the start) a part whose limit would end past it is skipped.
# Written to OUTDIR: summary.txt (a line per part, the suite's failures, the
# peers' tables), log.txt (every part's output), suite.txt, kernels.json, and cache/ (the
# BRIGADE_CACHE_DIR of every part but the planner's, unless set: the tuned tilings).
set -uo pipefail
out=${1:?usage: tools/gpu-check.sh OUTDIR [PARTS]}
parts=${2:-devices,kernels,matrix,tilings,suite,gpt,profile,products,tuned,replay,attention,flash,split,drivers,stages,planner,precision}
build=${BUILD:-build}
b=$build/brigade
gpu=${GPU:-0}
text=${TEXT:-/usr/share/doc/jargon-text/jargon.txt.gz}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
export BRIGADE_CACHE_DIR=${BRIGADE_CACHE_DIR:-$out/cache}
py=$(command -v python3)

say() { echo "$*" | tee -a "$out/summary.txt"; }
want() { [[ ",$parts," == *",$1,"* ]]; }
# part NAME SECONDS COMMAND...: runs COMMAND with a limit, its output to OUTDIR/log.txt
part() {
  local name=$1 limit=$2
  shift 2
  # DEADLINE (seconds from the start): a part whose limit would end past it is skipped, so that
  # the time a lease has left goes to the parts that fit in it.
  if [ -n "${DEADLINE:-}" ] && [ $((SECONDS + limit)) -gt "$DEADLINE" ]; then
    say "$name: skipped: its ${limit} s limit would end past DEADLINE=$DEADLINE s"
    return 125
  fi
  local t0=$SECONDS
  echo "== $name: $*" >>"$out/log.txt"
  timeout -k 5 "$limit" "$@" >>"$out/log.txt" 2>&1
  local rc=$?
  say "$name: exit $rc in $((SECONDS - t0)) s$([ $rc = 124 ] && echo " (stopped at its ${limit} s limit)")"
  return $rc
}

if want devices && ! part devices 30 "$b" devices; then
  tail -20 "$out/log.txt"
  exit 1
fi

# First the tilings (with --save), so that every part after them takes what they kept.
if want products; then
  for prec in ${PRODUCTS_PRECISIONS:-auto}; do
    part products 180 "$b" bench products --model "${PRODUCTS_MODEL:-gpt2-small}" -b 16 --reps 5 --top "${PRODUCTS_TOP:-8}" \
      --devices "$gpu" --precision "$prec" --save
    # What it measured, stopped at its limit or not: a line per shape tried, then the table.
    awk '/^== /{keep = /^== products:/; if (keep) buf = ""; on = 0; next}
         keep && / products of one micro-batch /{on = 1}
         keep && (on || /^  [0-9]+\/[0-9]+ / || /^    disagrees with/ || /^    differs from/){buf = buf $0 "\n"}
         /^the micro-batch.s products:/{on = 0}
         /^saved [0-9]+ tuned tiling/{buf = buf $0 "\n"}
         END{printf "%s", buf}' "$out/log.txt" >>"$out/summary.txt"
  done
fi

# step_ms MODEL [FLAGS]: a step's wall time from `bench profile`, its output to the log
step_ms() {
  local m=$1
  shift
  [ -n "${DEADLINE:-}" ] && [ $((SECONDS + ${STEP_LIMIT:-30})) -gt "$DEADLINE" ] && return 0
  timeout -k 5 "${STEP_LIMIT:-30}" "$b" bench profile --model "$m" -b 16 --reps 3 --devices "$gpu" "$@" 2>>"$out/log.txt" |
    tee -a "$out/log.txt" | sed -n 's/^training step.*: \([0-9.]*\) ms wall$/\1/p'
}

if want tuned; then
  for prec in ${PRODUCTS_PRECISIONS:-auto}; do
    for r in 1 2 3; do
      line="tuned: ${PRODUCTS_MODEL:-gpt2-small} $prec round $r:"
      for tilings in tuned default; do
        echo "== tuned: $prec $tilings round $r" >>"$out/log.txt"
        ms=$(step_ms "${PRODUCTS_MODEL:-gpt2-small}" --precision "$prec" --tilings $tilings)
        line+=" $tilings ${ms:-failed} ms"
      done
      say "$line"
    done
  done
fi

# kernels_json JSON PRECISION SQUARES LIMIT: `bench kernels --json` one square at a time, each
# within LIMIT seconds (a square stopped at its limit loses itself alone: the JSON is written at
# the end of a run), the results merged into JSON.
kernels_json() {
  local json=$1 prec=$2 squares=$3 limit=$4 t0 rc files=()
  for sq in ${squares//,/ }; do
    t0=$SECONDS
    timeout -k 5 "$limit" "$b" bench kernels --device "$gpu" --precision "$prec" --square "$sq" --reps 9 --json \
      >"$json.$sq" 2>>"$out/log.txt"
    rc=$?
    say "kernels $prec $sq^3: exit $rc in $((SECONDS - t0)) s"
    [ -s "$json.$sq" ] && files+=("$json.$sq")
  done
  "$py" - "$json" "${files[@]}" <<'MERGE'
import json, sys
merged = None
for path in sys.argv[2:]:
    try:
        with open(path) as f:
            j = json.load(f)
    except (OSError, ValueError):
        continue
    if merged is None:
        merged = j
    else:
        merged["results"] += j["results"]
with open(sys.argv[1], "w") as f:
    json.dump(merged or {"results": []}, f)
MERGE
  rm -f "${files[@]}"
}

if want kernels; then
  # Each square is checked against the CPU's product too: 4096^3 alone took about 45 s on the H200's host.
  kernels_json "$out/kernels.json" fp32 256,1024,2048,4096 90
  part kernels 40 "$py" "$here/torch/mm_peer.py" --device cuda --brigade-json "$out/kernels.json"
  part kernels-tf32 40 "$py" "$here/torch/mm_peer.py" --device cuda --dtype tf32 --brigade-json "$out/kernels.json"
  sed -n '/^== kernels: .*mm_peer/,$p' "$out/log.txt" | grep -v '^== ' >>"$out/summary.txt"
fi

if want matrix; then
  for p in ${MATRIX_TYPES:-bf16 fp16}; do
    kernels_json "$out/kernels-$p.json" "$p" "${MATRIX_SQUARES:-1024,4096}" 120
    part "matrix-$p" 40 "$py" "$here/torch/mm_peer.py" --device cuda --dtype $p --brigade-json "$out/kernels-$p.json"
    sed -n "/^== matrix-$p: /,\$p" "$out/log.txt" | tail -n +2 >>"$out/summary.txt"
  done
fi

if want tilings; then
  part tilings 120 "$b" bench kernels --device "$gpu" --square 1024 --reps 9 --compare
  sed -n '/all the presets/,$p' "$out/log.txt" >>"$out/summary.txt"
fi

if want suite; then
  # Every suite at once, the long ones in shards (doctest's --first/--last over its cases).
  export BRIGADE_TEST_DEVICE=$gpu
  run_suite() {  # SUITE SHARDS [ARGS]
    local s=$1 k=$2
    shift 2
    local n
    n=$(timeout 60 "$build/tests/test_$s" --count "$@" 2>/dev/null | grep -o '[0-9]\+' | tail -1)
    # No count (doctest's --first=1 --last=0 would run every case in every shard): said, skipped.
    if ! [[ $n =~ ^[0-9]+$ ]]; then
      echo "test_$s: no case count: exit 1" >"$out/suite-$s-0.log"
      return
    fi
    for ((i = 0; i < k; ++i)); do
      local first=$((i * n / k + 1)) last=$(((i + 1) * n / k))
      (timeout -k 5 "${SUITE_LIMIT:-150}" "$build/tests/test_$s" "$@" --first=$first --last=$last \
         >"$out/suite-$s-$i.log" 2>&1; echo "test_$s [$first..$last of $n]: exit $?" >>"$out/suite-$s-$i.log") &
    done
  }
  t0=$SECONDS
  suites=,${SUITES:-pipeline,kernels,cli,model,io,vk},
  [[ $suites == *,pipeline,* ]] && run_suite pipeline 6
  [[ $suites == *,kernels,* ]] && run_suite kernels 3 --each-subgroup-size --device="$gpu"
  [[ $suites == *,cli,* ]] && run_suite cli 3
  for s in model io vk; do [[ $suites == *,$s,* ]] && run_suite $s 1; done
  wait
  cat "$out"/suite-*.log >"$out/suite.txt"
  rm -f "$out"/suite-*.log
  # Exit 77: no case failed and some said they cannot run here (tests/main.cpp lists them).
  say "suite: $((SECONDS - t0)) s; $(grep -c ': exit 0$' "$out/suite.txt") shards passed, $(grep -Ec ': exit ([1-9]|[1-68-9][0-9]|7[0-68-9]|[0-9]{3,})$' "$out/suite.txt") failed, $(grep -c ': exit 77$' "$out/suite.txt") with cases not run here"
  grep -E '^\[doctest\] (test cases|assertions)|: exit [0-9]+$' "$out/suite.txt" | tee -a "$out/summary.txt"
  grep -E 'ERROR: |TEST CASE:' "$out/suite.txt" | sort | uniq -c | head -40 | tee -a "$out/summary.txt"
  # The validation layer's messages, each kind once with its count (the test harness fails a
  # case on any of them).
  grep -E '^validation (error|warning)' "$out/suite.txt" | cut -c1-400 | sort | uniq -c | sort -rn | head -30 |
    tee -a "$out/summary.txt"
fi

if want gpt; then
  for m in ${GPT_MODELS:-gpt-mini:60 gpt-small:70 gpt2-small:90}; do
    [[ $m == *:* ]] || m+=:90  # a model without its limit: 90 s
    part gpt "${m#*:}" "$py" "$here/torch/peer_bench.py" --device cuda --runs 1 --models "${m%:*}" \
      --modes fp32,tf32,bf16 --precision "${GPT_PRECISIONS:-fp32,auto}" --brigade "$b" --text "$text" &&
      tail -3 "$out/log.txt" >>"$out/summary.txt"
  done
fi

if want profile; then
  # gpt-mini too: how much of its step the GPU idles, and the host's recording (whether
  # recording a step once and replaying it would pay there); in each of PROFILE_PRECISIONS.
  for prec in ${PROFILE_PRECISIONS:-fp32 auto}; do
    for m in gpt2-small gpt-mini; do
      part "profile $m $prec" 45 "$b" bench profile --model "$m" -b 16 --reps 3 --devices "$gpu" --precision "$prec" &&
        grep -A2 '^training step' "$out/log.txt" | tail -3 >>"$out/summary.txt" &&
        grep '^host:' "$out/log.txt" | tail -1 >>"$out/summary.txt"
    done
  done
fi

if want replay; then
  for r in 1 2 3; do
    line="replay: gpt-mini auto round $r:"
    for form in replayed each-step; do
      flag=()
      [ "$form" = each-step ] && flag=(--record-each-step)
      echo "== replay: gpt-mini $form round $r" >>"$out/log.txt"
      ms=$(step_ms gpt-mini --precision auto "${flag[@]}")
      host=$(grep '^host:' "$out/log.txt" | tail -1 | sed -n 's/.*recording took \([0-9.]*\) ms, \([0-9.]*\) ms of CPU.*/\1 \2/p')
      line+=" $form ${ms:-failed} ms (recording ms, CPU ms: ${host:-?})"
    done
    say "$line"
  done
fi

if want attention; then
  t0=$SECONDS
  for prec in ${ATTENTION_PRECISIONS:-auto}; do
  for m in gpt-small gpt2-small; do
    for r in 1 2; do
      line="attention: $m $prec round $r:"
      for form in matrix fused; do
        echo "== attention: $m $prec $form round $r" >>"$out/log.txt"
        ms=$(BRIGADE_ATTENTION=$form step_ms "$m" --precision "$prec")
        line+=" $form ${ms:-failed} ms"
      done
      say "$line"
    done
  done
  done
  say "attention: $((SECONDS - t0)) s"
fi

if want flash; then
  first=
  for shape in ${FLASH_SHAPES:-16x1024x768x12 16x256x384x6}; do
    echo "== flash: $shape" >>"$out/log.txt"
    t0=$SECONDS
    timeout -k 5 120 "$b" bench attention --device "$gpu" --shape "$shape" --precision "${FLASH_TYPE:-bf16}" \
      --reps 5 --json >"$out/flash-$shape.json" 2>>"$out/log.txt"
    say "flash: $shape exit $? in $((SECONDS - t0)) s"
    first=${first:-$out/flash-$shape.json}
    # Each tiling's times, the default first, and whether it agreed with the default.
    "$py" - "$out/flash-$shape.json" <<'PY' 2>>"$out/log.txt" | tee -a "$out/summary.txt"
import json, sys
for s in json.load(open(sys.argv[1]))["shapes"]:
    d = s["tilings"][0]
    step = d["forward_ms"] + d["backward_ms"]
    for t in s["tilings"]:
        ms = t["forward_ms"] + t["backward_ms"]
        print("  %-62s forward %7.3f ms  queries' %7.3f ms  keys' %7.3f ms  %.2fx%s" % (t["tiling"], t["forward_ms"],
              t["query_ms"], t["key_value_ms"], ms / step, "" if t["disagreement"] <= 1 else "  DISAGREES (%.2fx)" % t["disagreement"]))
    ok = [t for t in s["tilings"] if t["disagreement"] <= 1]
    each = [min(ok, key=lambda t: t[k]) for k in ("forward_ms", "query_ms", "key_value_ms")]
    total = each[0]["forward_ms"] + each[1]["query_ms"] + each[2]["key_value_ms"]
    print("  fastest of each pass: %s; together %.3f ms, %.2fx the default's" %
          ("; ".join(t["tiling"] for t in each), total, total / step))
PY
  done
  # The first shape's fastest agreeing blocks, one tiling for every pass and each pass's own, on
  # a whole step of FLASH_MODEL (gpt2-small), in turn with the default's
  # (BRIGADE_ATTENTION_BLOCKS), 2 rounds.
  tries=$("$py" - "$first" <<'PY' 2>>"$out/log.txt"
import json, sys
t = json.load(open(sys.argv[1]))["shapes"][0]["tilings"]
ok = [x for x in t if x["disagreement"] <= 1]
one = min(ok, key=lambda x: x["forward_ms"] + x["backward_ms"])
each = [min(ok, key=lambda x: x[k]) for k in ("forward_ms", "query_ms", "key_value_ms")]
tries = []
if not one["default"]:
    tries.append("%d,%d" % (one["up_to_warps"][0], one["blocks"][0]))
per_pass = ";".join("%d,%d" % (x["up_to_warps"][i], x["blocks"][i]) for i, x in enumerate(each))
if any(x is not each[0] for x in each):
    tries.append(per_pass)
print(" ".join(tries))
PY
)
  if [ -n "$tries" ]; then
    for r in 1 2; do
      line="flash: ${FLASH_MODEL:-gpt2-small} auto round $r:"
      for blocks in $tries default; do
        echo "== flash: step, blocks $blocks, round $r" >>"$out/log.txt"
        if [ "$blocks" = default ]; then
          ms=$(step_ms "${FLASH_MODEL:-gpt2-small}" --precision auto)
        else
          ms=$(BRIGADE_ATTENTION_BLOCKS="$blocks" step_ms "${FLASH_MODEL:-gpt2-small}" --precision auto)
        fi
        line+=" $([ "$blocks" = default ] || echo "blocks ")$blocks ${ms:-failed} ms"
      done
      say "$line"
    done
  else
    say "flash: the default blocks are the fastest that agree (or the part did not finish)"
  fi
fi

if want split; then
  t0=$SECONDS
  for m in gpt-small gpt2-small; do
    for r in 1 2; do
      line="split: $m auto round $r:"
      for mode in auto off; do
        echo "== split: $m $mode round $r" >>"$out/log.txt"
        ms=$(BRIGADE_SPLIT_K=$mode step_ms "$m" --precision auto)
        line+=" $mode ${ms:-failed} ms"
      done
      say "$line"
    done
  done
  say "split: $((SECONDS - t0)) s"
fi

if want drivers; then
  # lavapipe's libraries: LVP_LIBS, or what gpu-carry.sh --lavapipe's setup.sh exports.
  lvp_libs=${LVP_LIBS:-${BRIGADE_LVP_LIBS:-}}
  run_train() {  # NAME DEVICES [FLAGS]
    local name=$1 devices=$2
    shift 2
    rm -rf "$out/run-$name"
    LD_LIBRARY_PATH=${lvp_libs}${lvp_libs:+${LD_LIBRARY_PATH:+:}}${LD_LIBRARY_PATH:-} \
      VK_DRIVER_FILES=${MIXED_DRIVER_FILES:-${VK_DRIVER_FILES:-}} part "drivers $name" 35 "$b" train --model gpt-mini --steps 5 --eval-every 5 --eval-batches 1 --data "$text" \
      --devices "$devices" -m 4 --out "$out/run-$name" "$@"
  }
  run_train one "$gpu"
  run_train swiftshader "$gpu,swiftshader" --partition profile
  run_train lavapipe "$gpu,llvmpipe" --partition profile
  LD_LIBRARY_PATH=${lvp_libs}${lvp_libs:+${LD_LIBRARY_PATH:+:}}${LD_LIBRARY_PATH:-} \
    VK_DRIVER_FILES=${MIXED_DRIVER_FILES:-${VK_DRIVER_FILES:-}} part "drivers plan" 35 "$b" plan --model gpt-mini \
    --devices "$gpu,llvmpipe" -m 4 --partition profile
  for r in swiftshader lavapipe; do
    "$py" "$here/torch/compare.py" "$out/run-one" "$out/run-$r" --tolerance 1e-4 >>"$out/log.txt" 2>&1
    say "drivers: $r pipeline against the GPU alone: compare exit $?"
  done
  rm -rf "$out"/run-*
fi

want stages && part stages 45 "$b" bench pipeline --model gpt-small -b 16 --stages 1 2 4 -m 1 4 \
  --remat never --device "$gpu" --reps 3

if want planner; then
  models=(${PLANNER_MODELS:-gpt-small gpt2-small})
  for m in "${models[@]}"; do
    rm -rf "$out/plan-cache"
    for pass in cold warm; do
      BRIGADE_CACHE_DIR="$out/plan-cache" part "planner $m $pass" 150 "$b" plan --model "$m" -b 16 --plan auto --devices "$gpu"
      sed -n "/^== planner $m $pass: /,\$p" "$out/log.txt" | grep -E '^(profiled |layer times from|plan auto: devices)' |
        sed "s/^/planner $m $pass: /" >>"$out/summary.txt"
    done
  done
  BRIGADE_CACHE_DIR="$out/plan-cache" part "planner grid" 180 "$b" bench planner --model "${models[-1]}" -b 16 \
    --devices "$gpu" --grid 4 --rounds 3
  sed -n '/^== planner grid: /,$p' "$out/log.txt" | grep -E '^choice: ' | sed 's/^/planner grid: /' >>"$out/summary.txt"
  rm -rf "$out/plan-cache"
fi

if want precision; then
  t0=$SECONDS
  for m in gpt-mini gpt-small gpt2-small; do
    for ((r = 1; r <= ${ROUNDS:-3}; ++r)); do
      line="precision: $m round $r:"
      for p in fp32 bf16 fp16; do
        echo "== precision: $m $p round $r" >>"$out/log.txt"
        ms=$(step_ms "$m" --precision "$p")
        line+=" $p ${ms:-failed} ms"
      done
      say "$line"
    done
  done
  for p in $([ "${GPT_STEPS:-1000}" -gt 0 ] && echo fp32 bf16 fp16); do
    rm -rf "$out/run-$p"
    part precision 120 "$b" train --model gpt-mini --steps "${GPT_STEPS:-1000}" --eval-every "${GPT_STEPS:-1000}" \
      --data "$text" --devices "$gpu" --precision "$p" --out "$out/run-$p"
    say "precision: gpt-mini $p after ${GPT_STEPS:-1000} steps: $(grep '"kind":"end"' "$out/run-$p/metrics.jsonl" | tail -1)"
  done
  rm -rf "$out"/run-*
  say "precision: $((SECONDS - t0)) s"
fi
exit 0
