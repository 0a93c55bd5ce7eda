#!/usr/bin/python3
"""Compares the metrics of two training runs step by step: brigade's and its PyTorch reference
(tools/torch/gpt_reference.py), or any two runs with brigade's metrics.jsonl schema.

    /usr/bin/python3 tools/torch/compare.py RUN_A RUN_B [--tolerance 1e-4]

RUN_A and RUN_B are run directories (holding metrics.jsonl) or .jsonl files. Prints the steps
both runs trained, the max |delta| and max relative delta of the training loss (and of the
gradient norm where both record it), and each evaluation's loss side by side. Exits 1 when
step 1's training losses (same parameters, same batch) differ by more than the tolerance
(relative, default 1e-4) or either run lacks step 1; 2 on unreadable input. Plain Python 3,
no PyTorch needed.
"""

import argparse
import json
import os
import sys


def load(arg):
    path = os.path.join(arg, "metrics.jsonl") if os.path.isdir(arg) else arg
    train, evals = {}, {}
    try:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    print(f"compare.py: {path}:{n}: not valid JSON", file=sys.stderr)
                    sys.exit(2)
                # A resumed run logs some steps twice: the later record wins, as in brigade plot.
                if r.get("kind") == "train":
                    train[int(r["step"])] = r
                elif r.get("kind") == "eval":
                    evals[(r.get("split", "eval"), int(r["step"]))] = r
    except OSError as e:
        print(f"compare.py: {path}: cannot open ({e.strerror})", file=sys.stderr)
        sys.exit(2)
    return path, train, evals


def rel(a, b):
    return abs(a - b) / max(abs(a), abs(b), 1e-30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_a")
    ap.add_argument("run_b")
    ap.add_argument("--tolerance", type=float, default=1e-4,
                    help="relative tolerance of step 1's training loss (default 1e-4)")
    args = ap.parse_args()
    pa, ta, ea = load(args.run_a)
    pb, tb, eb = load(args.run_b)
    print(f"A: {pa}\nB: {pb}")

    steps = sorted(set(ta) & set(tb))
    print(f"training steps compared: {len(steps)}"
          + (f" ({steps[0]}..{steps[-1]})" if steps else "")
          + f"; A has {len(ta)}, B has {len(tb)}")
    if steps:
        worst = max(steps, key=lambda s: rel(ta[s]["loss"], tb[s]["loss"]))
        dabs = max(abs(ta[s]["loss"] - tb[s]["loss"]) for s in steps)
        print(f"training loss: max |delta| {dabs:.3e}, max relative delta "
              f"{rel(ta[worst]['loss'], tb[worst]['loss']):.3e} (at step {worst})")
        gn = [s for s in steps if ta[s].get("grad_norm") is not None and tb[s].get("grad_norm") is not None]
        if gn:
            w = max(gn, key=lambda s: rel(ta[s]["grad_norm"], tb[s]["grad_norm"]))
            print(f"gradient norm: max relative delta {rel(ta[w]['grad_norm'], tb[w]['grad_norm']):.3e} "
                  f"(at step {w})")
        lr = [s for s in steps if "lr" in ta[s] and "lr" in tb[s]]
        if lr:
            print(f"learning rate: max relative delta {max(rel(ta[s]['lr'], tb[s]['lr']) for s in lr):.3e}")

    keys = sorted(set(ea) & set(eb), key=lambda k: (k[0], k[1]))
    if keys:
        print(f"\n{'split':>6} {'step':>6} {'loss A':>12} {'loss B':>12} {'|delta|':>10} {'relative':>10}")
        for k in keys:
            a, b = ea[k]["loss"], eb[k]["loss"]
            print(f"{k[0]:>6} {k[1]:>6} {a:12.6f} {b:12.6f} {abs(a - b):10.3e} {rel(a, b):10.3e}")
    only = sorted(set(ea) ^ set(eb))
    if only:
        print(f"evaluations in one run only: {', '.join(f'{s} step {n}' for s, n in only)}")

    if 1 not in ta or 1 not in tb:
        print("\nFAIL: step 1 is missing from " + ("A" if 1 not in ta else "B"))
        return 1
    r1 = rel(ta[1]["loss"], tb[1]["loss"])
    ok = r1 <= args.tolerance
    print(f"\nstep 1 loss: A {ta[1]['loss']:.7f}, B {tb[1]['loss']:.7f}, relative delta {r1:.3e} "
          f"-> {'OK' if ok else 'FAIL'} (tolerance {args.tolerance:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
