#!/usr/bin/python3
"""PyTorch's matrix product (torch.mm) on the square sizes `brigade bench kernels` times,
beside brigade's figures for the same sizes: the peer of the matrix kernel on a GPU (cuBLAS)
or on the CPU (PyTorch's BLAS). --dtype fp32 (TF32 off, the default), tf32, or bf16 and fp16
(beside `brigade bench kernels --precision bf16|fp16`, the products on matrix units).

    brigade bench kernels --square 256,1024,4096 --json > kernels.json
    python3 tools/torch/mm_peer.py --device cuda --brigade-json kernels.json [--reps 20] [--dtype bf16]

Inputs are uniform in [-1, 1) (never zeros); each size is timed --reps times after three
warm-up products, by CUDA events on a GPU and the wall clock on the CPU, and the median is
reported. Per size the table gives PyTorch's GFLOPS, brigade's under its default tiling and
under its fastest candidate (from the JSON), and the ratios brigade / PyTorch; on a device
with matrix units also the two measurements `bench kernels` makes there, never counted as the
fastest candidate: the matrix-unit kernel's inner loop alone (one K tile staged: a ceiling,
not a product) and its warps fed straight from memory with no staging.
"""

import argparse
import json
import statistics
import sys
import time


# The measurement rows of `bench kernels` (by how their tiling's name ends), shown apart.
PROBES = [("inner-loop ceiling", "(a ceiling)"), ("fed from memory", "(no staging)")]


def torch_gflops(n, device, reps, dtype):
    import torch
    kind = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype, torch.float32)
    a = (torch.rand(n, n, device=device) * 2 - 1).to(kind)
    b = (torch.rand(n, n, device=device) * 2 - 1).to(kind)
    c = torch.empty(n, n, device=device, dtype=kind)
    times = []
    # On a GPU, `batch` products back to back between one pair of events, queued behind one more
    # that keeps the GPU busy while the host launches them, so that no launch counts (Brigade's
    # are GPU timestamps around each product): one at 4096^3, more below it, each batch about
    # as long as one 4096^3 product.
    batch = max(1, min(200, round(4096 ** 3 / n ** 3)))
    for i in range(reps + 3):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.mm(a, b, out=c)
            start.record()
            for _ in range(batch):
                torch.mm(a, b, out=c)
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end) / batch
        else:
            t = time.perf_counter()
            torch.mm(a, b, out=c)
            ms = (time.perf_counter() - t) * 1e3
        if i >= 3:
            times.append(ms)
    return 2.0 * n ** 3 / (statistics.median(times) * 1e6)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--sizes", help="square sizes n (default: those in --brigade-json)")
    ap.add_argument("--brigade-json", help="`brigade bench kernels --json` output to compare with")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "tf32", "bf16", "fp16"])
    args = ap.parse_args()
    import torch
    torch.backends.cuda.matmul.allow_tf32 = args.dtype == "tf32"
    torch.set_float32_matmul_precision("high" if args.dtype == "tf32" else "highest")
    ours = {}
    device_name = "brigade: none given"
    if args.brigade_json:
        with open(args.brigade_json) as f:
            report = json.load(f)
        device_name = "brigade: " + report["device"]
        for r in report["results"]:
            if r["op"] != "matmul" or not r["valid"]:
                continue
            n = r["M"]
            mine = ours.setdefault(n, {"default": None, "best": 0.0, "best_tiling": ""})
            probe = next((name for name, tail in PROBES if r["tiling"].endswith(tail)), None)
            if probe:
                mine[probe] = r["gflops"]
                continue
            if r["tiling"].startswith("default"):
                mine["default"] = r["gflops"]
            if r["gflops"] > mine["best"]:
                mine["best"], mine["best_tiling"] = r["gflops"], r["tiling"]
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else sorted(ours)
    if not sizes:
        sys.exit("mm_peer: no sizes: give --sizes or a --brigade-json with square products")
    where = torch.cuda.get_device_name(0) if args.device == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    what = "fp32 (TF32 off)" if args.dtype == "fp32" else args.dtype
    print(f"PyTorch {torch.__version__} torch.mm {what} on {where}, median of {args.reps}")
    print(device_name)
    probes = [name for name, _ in PROBES if any(name in m for m in ours.values())]
    rows = [["n", "PyTorch GFLOPS", "brigade default", "ratio", "brigade best", "ratio", "best tiling"]]
    for name in probes:
        rows[0][-1:-1] = [name, "ratio"]
    for n in sizes:
        peer = torch_gflops(n, args.device, args.reps, args.dtype)
        mine = ours.get(n)
        row = [str(n), f"{peer:.0f}"]
        if mine and mine["default"]:
            row += [f"{mine['default']:.0f}", f"{mine['default'] / peer:.2f}"]
        else:
            row += ["-", "-"]
        row += [f"{mine['best']:.0f}", f"{mine['best'] / peer:.2f}"] if mine else ["-", "-"]
        for name in probes:
            row += [f"{mine[name]:.0f}", f"{mine[name] / peer:.2f}"] if mine and mine.get(name) else ["-", "-"]
        row.append(mine["best_tiling"] if mine else "-")
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


if __name__ == "__main__":
    main()
