#!/usr/bin/python3
"""Training throughput of brigade against PyTorch on the same CPU: the same model, batch size,
optimizer and data, run alternately, reported as medians and their ratio.

    /usr/bin/python3 tools/torch/peer_bench.py [--models fashion-mlp,fashion-cnn,gpt-mini]
        [--runs 5] [--threads 2] [--brigade build/brigade] [--lavapipe project,system]
        [--json] [--svg FILE]

Each round runs `brigade train` (a fresh process, device 0: lavapipe on a machine without a
GPU) and then the same training in PyTorch (a fresh process, torch.set_num_threads(THREADS)),
so both see the same machine state in turn. A run's throughput is measured between the end of
its warm-up steps and its last step, by the trainer's own clock: process start, pipeline or
kernel compilation and evaluations are left out on both sides. Per model the script prints the
median samples/s (tokens/s for GPT) of each side over the rounds, the ratio of the medians and
the range of the per-round ratios (brigade / PyTorch; above 1 brigade is faster).
With --lavapipe project,system each round runs brigade once on each lavapipe
(BRIGADE_LAVAPIPE, engine/vk/drivers.h: the newer Mesa tools/install-lavapipe.sh fetched, and
the system's), so both drivers are compared with the same PyTorch rounds; the first listed is
the one the ratios of the SVG use.

What both sides train (brigade's defaults for the preset, tools/brigade/train.cpp):
  fashion-mlp, fashion-cnn  Fashion-MNIST training images (pixels / 255), batch 64, AdamW
  and fashion-cnn-bn        lr 1e-3, betas (0.9, 0.999), eps 1e-8, no weight decay, cosine
                            schedule; random mini-batches.
  gpt-mini                  jargon-text bytes, 16 windows of 128 tokens, AdamW lr 1e-3,
                            betas (0.9, 0.99), weight decay 0.1, global-norm clipping at 1.0,
                            warmup and cosine; nanoGPT's GPT as in gpt_reference.py.
The initial parameters and the sample order differ between the sides; neither affects speed.

Debian's python3-torch does its matrix products through the system BLAS. With only the
reference BLAS (libblas3) installed they run several times slower than with OpenBLAS, which
would make a weak peer: install libopenblas0-pthread (the script says which BLAS it found,
and OPENBLAS_NUM_THREADS is set to THREADS for the PyTorch runs).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FASHION = "/usr/share/datasets/fashion-mnist"

# Steps per run and the warm-up steps left out of the measurement, per model: runs of a few
# seconds on two cores.
# `rows` is the batch size, `per_row` the samples or tokens a row counts for.
PLAN = {
    "fashion-mlp": {"steps": 400, "warmup": 50, "rows": 64, "per_row": 1, "unit": "samples"},
    "fashion-cnn": {"steps": 60, "warmup": 10, "rows": 64, "per_row": 1, "unit": "samples"},
    "fashion-cnn-bn": {"steps": 60, "warmup": 10, "rows": 64, "per_row": 1, "unit": "samples"},
    "gpt-mini": {"steps": 24, "warmup": 4, "rows": 16, "per_row": 128, "unit": "tokens",
                 "gpt": (128, 256, 4, 4, 128)},
    # The larger presets, for a GPU (--device cuda): windows of the whole block.
    "gpt-small": {"steps": 30, "warmup": 5, "rows": 16, "per_row": 256, "unit": "tokens",
                  "gpt": (256, 256, 6, 6, 384)},
    "gpt2-small": {"steps": 8, "warmup": 3, "rows": 16, "per_row": 1024, "unit": "tokens",
                   "gpt": (1024, 256, 12, 12, 768)},
}
TEXT = "/usr/share/doc/jargon-text/jargon.txt.gz"


def brigade_run(binary, model, out, lavapipe, text, precision=""):
    """samples (or tokens) per second of `brigade train` between the warm-up and the last step."""
    p = PLAN[model]
    steps, warmup = p["steps"], p["warmup"]
    cmd = [binary, "train", "--model", model, "-b", str(p["rows"]), "--steps", str(steps),
           "--eval-every", str(steps), "--eval-batches", "1", "--out", out]
    if precision:
        cmd += ["--precision", precision]
    if "gpt" in p:
        cmd += ["--data", text]
    env = dict(os.environ, BRIGADE_LAVAPIPE=lavapipe) if lavapipe else os.environ
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"peer_bench: {' '.join(cmd)} failed with status {done.returncode}: {done.stderr.strip()}")
    records = {}
    with open(os.path.join(out, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("kind") == "train":
                records[int(r["step"])] = r
    seconds = records[steps]["elapsed_s"] - records[warmup]["elapsed_s"]
    return (steps - warmup) * p["rows"] * p["per_row"] / seconds


def brigade_devices(binary, lavapipe=None):
    """`brigade devices --json`, under BRIGADE_LAVAPIPE=lavapipe when given."""
    env = dict(os.environ, BRIGADE_LAVAPIPE=lavapipe) if lavapipe else os.environ
    done = subprocess.run([binary, "devices", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env)
    if done.returncode != 0:
        under = f" under BRIGADE_LAVAPIPE={lavapipe}" if lavapipe else ""
        sys.exit(f"peer_bench: brigade devices{under} failed: {done.stderr.strip()}")
    return json.loads(done.stdout)


def lavapipe_name(binary, lavapipe):
    """The Mesa release of the lavapipe `brigade devices` lists under BRIGADE_LAVAPIPE."""
    for d in brigade_devices(binary, lavapipe):
        if d["name"].startswith("llvmpipe"):
            return d["driver_info"].split(" (")[0]
    return lavapipe


def device_zero(binary):
    """The name of brigade's device 0, the one it trains on by default."""
    return brigade_devices(binary)[0]["name"]


def system_blas():
    """The BLAS library Debian's alternatives system points libblas.so.3 at."""
    return os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")


def torch_run(model, threads, device, text, modes):
    """The same measurement in PyTorch, in a fresh process (this script with --worker): the rate
    of each mode in turn, by mode."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", model, "--threads", str(threads),
           "--device", device, "--text", text, "--modes", ",".join(modes)]
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"peer_bench: the PyTorch worker for {model} failed: {done.stderr.strip()}")
    rates = dict(line.split() for line in done.stdout.strip().splitlines()[-len(modes):])
    return {m: float(rates[m]) for m in modes}


def worker(model, threads, device, text, modes):
    import torch
    sys.path.insert(0, HERE)
    torch.set_num_threads(threads)
    for mode in modes:
        print(mode, worker_mode(model, device, text, mode), flush=True)


def worker_mode(model, device, text, mode):
    """Tokens (or samples) per second of PyTorch in MODE: fp32 (TF32 off, as brigade computes
    fp32), tf32 (TF32 products), bf16 (forwards under torch.autocast(bfloat16))."""
    import torch
    import torch.nn.functional as F
    import gpt_reference
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    torch.backends.cudnn.allow_tf32 = mode == "tf32"
    gpt_reference.AUTOCAST = mode == "bf16"
    gpt_reference.SDPA = device == "cuda"
    torch.manual_seed(0)
    p = PLAN[model]
    steps, warmup, rows, per_step = p["steps"], p["warmup"], p["rows"], p["rows"] * p["per_row"]
    if model.startswith("fashion"):
        from load_checkpoint import idx, module
        net = module(model).to(device)
        x = idx(f"{FASHION}/train-images-idx3-ubyte.gz").float().div(255).unsqueeze(1).to(device)
        y = idx(f"{FASHION}/train-labels-idx1-ubyte.gz").long().to(device)
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0)
        order = torch.randperm(len(y)).to(device)

        def batch(step):
            i = order[(step * rows) % (len(y) - rows):][:rows]
            return x[i], y[i]

        def loss_of(xb, yb):
            return F.cross_entropy(net(xb), yb)
        clip = 0.0
    else:
        from gpt_reference import GPT, TextBytes, loss_of as gpt_loss
        net = GPT(*p["gpt"]).to(device)
        data = TextBytes(text, p["gpt"][0], 0)
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)

        def batch(step):
            return tuple(t.to(device) for t in data.train_batch(step, rows))

        def loss_of(xb, yb):
            return gpt_loss(net, xb, yb)
        clip = 1.0
    net.train()
    start = None
    for step in range(steps):
        if step == warmup:
            start = time.perf_counter()
        for g in opt.param_groups:  # a schedule's cost, as brigade sets lr every step
            g["lr"] = 1e-3 * (1 - step / (2 * steps))
        xb, yb = batch(step)
        opt.zero_grad(set_to_none=True)
        loss = loss_of(xb, yb)
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(net.parameters(), clip)
        opt.step()
        float(loss)  # brigade reads every step's loss back too
    if device == "cuda":
        torch.cuda.synchronize()
    return (steps - warmup) * per_step / (time.perf_counter() - start)


def write_svg(path, results):
    """A bar per model: brigade's throughput over PyTorch's (median), the per-round range as a
    whisker, and the 1.0 line where the two are equally fast."""
    w, h, left, top, bottom, bar = 560, 320, 70, 40, 50, 60
    top_ratio = max(1.2, max(r["ratio_max"] for r in results) * 1.1)
    y = lambda v: top + (h - top - bottom) * (1 - v / top_ratio)  # noqa: E731
    step = (w - left - 20) / len(results)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="22" text-anchor="middle" font-size="14">brigade (lavapipe) / PyTorch (CPU), '
           'training throughput</text>']
    v = 0.0
    while v <= top_ratio + 1e-9:
        out.append(f'<line x1="{left}" x2="{w - 20}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.1f}x</text>')
        v += 0.2 if top_ratio <= 2 else 0.5
    for i, r in enumerate(results):
        x = left + step * i + (step - bar) / 2
        out.append(f'<rect x="{x:.1f}" y="{y(r["ratio"]):.1f}" width="{bar}" height="{y(0) - y(r["ratio"]):.1f}" '
                   'fill="#4878a8"/>')
        cx = x + bar / 2
        out.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(r["ratio_min"]):.1f}" y2="{y(r["ratio_max"]):.1f}" '
                   'stroke="black"/>')
        out.append(f'<text x="{cx:.1f}" y="{y(r["ratio_max"]) - 6:.1f}" text-anchor="middle">{r["ratio"]:.2f}x</text>')
        out.append(f'<text x="{cx:.1f}" y="{h - bottom + 18}" text-anchor="middle">{r["model"]}</text>')
    out.append(f'<line x1="{left}" x2="{w - 20}" y1="{y(1):.1f}" y2="{y(1):.1f}" stroke="#c44" stroke-dasharray="6 4"/>')
    out.append(f'<text x="{w - 22}" y="{y(1) - 5:.1f}" text-anchor="end" fill="#c44">as fast as PyTorch</text>')
    out.append(f'<text x="{w / 2}" y="{h - 12}" text-anchor="middle">median of the rounds; whiskers: per-round '
               'ratios, lowest to highest</text>')
    out.append("</svg>")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(out) + "\n")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="fashion-mlp,fashion-cnn,gpt-mini")
    ap.add_argument("--runs", type=int, default=5, help="rounds of brigade then PyTorch (default 5)")
    ap.add_argument("--threads", type=int, default=2, help="PyTorch CPU threads (default 2)")
    ap.add_argument("--brigade", default=os.path.join(HERE, "..", "..", "build", "brigade"))
    ap.add_argument("--lavapipe", default="project",
                    help="comma-separated BRIGADE_LAVAPIPE values brigade runs under in each round "
                         "(project, system; default project)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="where PyTorch trains: cpu (default), or cuda, where brigade's device 0 "
                         "must be the same GPU (fp32 on both sides: TF32 off)")
    ap.add_argument("--modes", default="fp32",
                    help="comma-separated PyTorch modes, each run in turn in the same worker: fp32 "
                         "(TF32 off), tf32, bf16 (autocast, GPT models); the ratio is against the "
                         "fastest (default fp32)")
    ap.add_argument("--precision", default="",
                    help="comma-separated `brigade train --precision` values, each run in turn "
                         "(default: the trainer's own)")
    ap.add_argument("--text", default=TEXT, help=f"the GPT models' text (default {TEXT})")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--svg", help="also draw the ratios into this SVG file")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.threads, args.device, args.text, args.modes.split(","))
        return
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in PLAN:
            sys.exit(f"peer_bench: no PyTorch peer for model '{m}'; expected one of {', '.join(PLAN)}")
    modes = [x for x in args.modes.split(",") if x]
    if not modes or any(x not in ("fp32", "tf32", "bf16") for x in modes):
        sys.exit("peer_bench: --modes takes fp32, tf32 and bf16, comma-separated")
    precisions = args.precision.split(",")
    if args.runs < 1:
        sys.exit("peer_bench: --runs must be at least 1")
    if not os.access(args.brigade, os.X_OK):
        sys.exit(f"peer_bench: {args.brigade} is not an executable brigade (build it, or pass --brigade)")
    drivers = [d for d in args.lavapipe.split(",") if d]
    if not drivers or any(d not in ("project", "system") for d in drivers):
        sys.exit("peer_bench: --lavapipe takes project, system or both, comma-separated")
    if args.device == "cuda":
        drivers, names = [""], {"": device_zero(args.brigade)}
    else:
        names = {d: lavapipe_name(args.brigade, d) for d in drivers}
    # What brigade runs in each round: each driver in each precision.
    runs = [(d, x) for d in drivers for x in precisions]
    label = {(d, x): names[d] + (f" {x}" if x else "") for d, x in runs}
    blas = system_blas() if args.device == "cpu" else "cuBLAS"
    if args.device == "cpu" and "openblas" not in blas and "blis" not in blas and "mkl" not in blas:
        print(f"peer_bench: warning: PyTorch's BLAS is {blas}, not an optimized one; "
              "install libopenblas0-pthread for a fair peer", file=sys.stderr)
    results = []
    with tempfile.TemporaryDirectory(prefix="peer-bench-") as tmp:
        for m in models:
            p = PLAN[m]
            ours, peer = {k: [] for k in runs}, {x: [] for x in modes}
            for r in range(args.runs):
                for d, x in runs:
                    ours[d, x].append(brigade_run(args.brigade, m, os.path.join(tmp, f"{m}-{r}-{d}-{x}"), d,
                                                  args.text, x))
                for x, rate in torch_run(m, args.threads, args.device, args.text, modes).items():
                    peer[x].append(rate)
                mine = ", ".join(f"brigade on {label[k]} {ours[k][-1]:.0f}" for k in runs)
                theirs = ", ".join(f"PyTorch {x} {peer[x][-1]:.0f}" for x in modes)
                print(f"{m} round {r + 1}/{args.runs}: {mine}, {theirs} {p['unit']}/s", file=sys.stderr)
            # The peer is PyTorch's fastest mode; each round's ratio is against that round's fastest.
            fastest = max(modes, key=lambda x: statistics.median(peer[x]))
            theirs = peer[fastest]
            per_driver = []
            for d, x in runs:
                ratios = [a / b for a, b in zip(ours[d, x], theirs)]
                per_driver.append({"lavapipe": d, "mesa": names[d], "precision": x, "label": label[d, x],
                                   "brigade": statistics.median(ours[d, x]),
                                   "ratio": statistics.median(ours[d, x]) / statistics.median(theirs),
                                   "ratio_min": min(ratios), "ratio_max": max(ratios),
                                   "brigade_runs": ours[d, x]})
            results.append({"model": m, "unit": p["unit"] + "/s", "steps": p["steps"], "warmup": p["warmup"],
                            **per_driver[0], "pytorch": statistics.median(theirs), "pytorch_runs": theirs,
                            "pytorch_mode": fastest,
                            "pytorch_modes": {x: statistics.median(v) for x, v in peer.items()},
                            "drivers": per_driver})
    if args.svg:
        write_svg(args.svg, results)
        print(f"wrote {args.svg}", file=sys.stderr)
    if args.json:
        print(json.dumps({"runs": args.runs, "threads": args.threads, "device": args.device, "blas": blas,
                          "modes": modes, "results": results}, indent=2))
        return
    import torch
    where = f"{args.threads} thread(s)" if args.device == "cpu" else torch.cuda.get_device_name(0)
    print(f"median of {args.runs} alternated runs each; PyTorch {torch.__version__} on {where}, BLAS {blas}; "
          "ratios against PyTorch's fastest mode")
    rows = [["model", "unit"] + [f"PyTorch {x}" for x in modes]]
    for k in runs:
        rows[0] += [f"brigade ({label[k]})", "ratio", "per-round ratios"]
    for r in results:
        rows.append([r["model"], r["unit"]] + [f"{r['pytorch_modes'][x]:.0f}" for x in modes])
        for x in r["drivers"]:
            rows[-1] += [f"{x['brigade']:.0f}", f"{x['ratio']:.2f}", f"{x['ratio_min']:.2f}-{x['ratio_max']:.2f}"]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


if __name__ == "__main__":
    main()
