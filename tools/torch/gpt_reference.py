#!/usr/bin/python3
"""PyTorch reference for `brigade train` on GPT models (e.g. gpt-mini).

Trains nanoGPT's GPT (the model in a brigade run's settings) on the same bytes, in the same
order, from the same initial parameters, with the same AdamW (one parameter group: weight decay
on every parameter), warmup-cosine schedule, global-norm clipping and evaluation as a brigade
run, and writes OUT_DIR/metrics.jsonl in brigade's schema, so that both runs plot on one chart.

    brigade train --model gpt-mini --steps 30 --eval-every 10 --eval-batches 2 --out RUN
    brigade init --model gpt-mini --seed 0 --out INIT.safetensors      # the run's --seed
    /usr/bin/python3 tools/torch/gpt_reference.py --run RUN --init INIT.safetensors --out REF
    /usr/bin/python3 tools/torch/compare.py RUN REF
    brigade plot RUN REF --labels brigade,pytorch

Options: --threads N (torch CPU threads, default 2); --steps N stops after N steps without
changing the schedule (a quick check; no "end" record then, as with brigade's --stop-after);
--data PATH reads the text from PATH instead of the run's (same bytes expected); --autocast
bf16 runs every forward (training and evaluation) under torch.autocast("cpu", bfloat16),
PyTorch's mixed precision: products in bf16, parameters, gradients and AdamW in fp32.

The exact definitions reproduced here (engine/io/data.h, engine/optim/*, tools/brigade/train.cpp):
  data   the file's bytes (gunzipped if gzip); val = the last int(len * 0.1) bytes, train = the
         rest. Row r of step s (s from 0) is the window at key(seed, s, r) % (len(train) - T),
         key(seed, a, b) = splitmix64(splitmix64(splitmix64(seed) ^ a) ^ b).
  eval   the (len(val) - 1) // T consecutive windows from the start of val, in
         ceil(n / batch) chunks of near-equal size (the first ones one larger), the first
         eval_batches of them (all when 0); loss = mean over their tokens. At step 0, every
         eval_every steps and at the last step.
  lr     step s uses lr(s): warmup base*(s+1)/warmup, then cosine from base to min_lr over
         [warmup, steps). AdamW's t = s + 1. Clipping: torch.nn.utils.clip_grad_norm_.
Requires PyTorch (Debian's python3-torch); attention is written out (no SDPA in torch 1.13).
"""

import argparse
import gzip
import json
import math
import os
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DEFAULT_TEXT = "/usr/share/doc/jargon-text/jargon.txt.gz"
VAL_FRACTION = 0.1
MASK64 = (1 << 64) - 1


class UserError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Data order (engine/io/data.h)

def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    z = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def order_key(seed, a, b):
    return splitmix64(splitmix64(splitmix64(seed & MASK64) ^ a) ^ b)


def split_rows(rows, parts):
    out = [rows // parts] * parts
    for i in range(rows % parts):
        out[i] += 1
    return out


class TextBytes:
    def __init__(self, path, block, seed):
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise UserError(f"{path}: cannot open ({e.strerror})")
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        val = int(float(len(data)) * VAL_FRACTION)
        train = len(data) - val
        if train < block + 2 or val < block + 1:
            raise UserError(f"{path}: {len(data)} bytes is too short for {block}-token windows")
        self.path, self.block, self.seed = path, block, seed
        self.train = torch.frombuffer(bytearray(data[:train]), dtype=torch.uint8).long()
        self.val = torch.frombuffer(bytearray(data[train:]), dtype=torch.uint8).long()
        self.arange = torch.arange(block + 1)

    def describe(self):
        return (f"{self.path}: {len(self.train)} training and {len(self.val)} validation bytes, "
                f"{self.block}-token windows")

    def steps_per_epoch(self, rows):
        return max(1, len(self.train) // (rows * self.block))

    def _windows(self, text, offsets):
        idx = torch.tensor(offsets, dtype=torch.long)[:, None] + self.arange[None, :]
        w = text[idx]
        return w[:, :-1].contiguous(), w[:, 1:].contiguous()

    def offsets(self, step, rows):
        span = len(self.train) - self.block
        return [order_key(self.seed, step, r) % span for r in range(rows)]

    def train_batch(self, step, rows):
        return self._windows(self.train, self.offsets(step, rows))

    def eval_batches(self, rows, limit):
        count = (len(self.val) - 1) // self.block
        n = (count + rows - 1) // rows
        out, first = [], 0
        if n == 0:
            return out
        for size in split_rows(count, n):
            if limit and len(out) == limit:
                break
            out.append(self._windows(self.val, [(first + r) * self.block for r in range(size)]))
            first += size
        return out


# ---------------------------------------------------------------------------------------------
# nanoGPT's GPT (bias=True, dropout=0, GELU tanh, lm_head tied to transformer.wte)

class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd = n_head, n_embd
        mask = torch.tril(torch.ones(block_size, block_size, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, block_size, block_size), persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        hs = C // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        if SDPA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, block_size, vocab_size, n_layer, n_head, n_embd):
        super().__init__()
        self.block_size = block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head, block_size) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied, as nanoGPT

    def forward(self, idx):
        B, T = idx.size()
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


AUTOCAST = False  # --autocast bf16
SDPA = False  # attention through F.scaled_dot_product_attention (the peer benchmarks on a GPU)


def loss_of(model, x, y):
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=AUTOCAST):
        logits = model(x)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))


# ---------------------------------------------------------------------------------------------
# Files

def read_safetensors(path):
    """(tensors by name, metadata) of a safetensors file: 8-byte LE header length, JSON, data."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise UserError(f"{path}: cannot open ({e.strerror})")
    if len(raw) < 8:
        raise UserError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise UserError(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    dtypes = {"F32": torch.float32, "F64": torch.float64, "I32": torch.int32, "I64": torch.int64,
              "U8": torch.uint8}
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in dtypes:
            raise UserError(f"{path}: {name} has dtype {info['dtype']}, expected one of {list(dtypes)}")
        a, b = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[a:b]), dtype=dtypes[info["dtype"]]) if b > a else \
            torch.empty(0, dtype=dtypes[info["dtype"]])
        tensors[name] = t.reshape(info["shape"]).clone()
    return tensors, header.get("__metadata__", {})


def read_start(run_dir):
    path = os.path.join(run_dir, "metrics.jsonl")
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    rec = json.loads(line)
                    if rec.get("kind") == "start" and "settings" in rec:
                        return rec["settings"]
    except OSError as e:
        raise UserError(f"{path}: cannot open ({e.strerror})")
    raise UserError(f"{path}: no \"start\" record with settings")


def parse_toml(text):
    try:
        import tomllib
        return tomllib.loads(text)
    except ImportError:  # the simple `key = value` lines of a preset
        out = {}
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if "=" in line:
                k, v = (s.strip() for s in line.split("=", 1))
                out[k] = v.strip('"') if v.startswith('"') else int(v)
        return out


# ---------------------------------------------------------------------------------------------
# Training (tools/brigade/train.cpp)

def learning_rate(s, step):
    if s["schedule"] == "constant":
        return s["lr"]
    if s["schedule"] != "cosine":
        raise UserError(f"schedule '{s['schedule']}' is not constant or cosine")
    # The cosine's steps: decay_steps where the settings keep them (an extended run's later
    # steps take min_lr), else steps.
    base, lo, warm, total = s["lr"], s["min_lr"], s["warmup"], s.get("decay_steps", s["steps"])
    if step < warm:
        return base * float(step + 1) / float(warm)
    if step >= total:
        return lo
    p = float(step - warm) / float(total - warm)
    return lo + (base - lo) * (1 + math.cos(math.pi * p)) / 2


def make_optimizer(s, params):
    if s["optimizer"] == "adamw":
        return torch.optim.AdamW(params, lr=s["lr"], betas=(s["beta1"], s["beta2"]), eps=s["eps"],
                                 weight_decay=s["weight_decay"])
    if s["optimizer"] == "sgd":
        return torch.optim.SGD(params, lr=s["lr"], momentum=s["momentum"],
                               weight_decay=s["weight_decay"])
    raise UserError(f"optimizer '{s['optimizer']}' is not adamw or sgd")


class Metrics:
    def __init__(self, path):
        self.f = open(path, "w")

    def write(self, record):
        self.f.write(json.dumps(record, allow_nan=False) + "\n")
        self.f.flush()


def evaluate(model, batches):
    total, count = 0.0, 0
    with torch.no_grad():
        for x, y in batches:
            n = y.numel()
            total += float(loss_of(model, x, y)) * n
            count += n
    return total / count


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, help="brigade run directory (its metrics.jsonl start record)")
    ap.add_argument("--init", required=True, help="brigade init --model ... --seed SEED output")
    ap.add_argument("--out", required=True, help="output directory for metrics.jsonl")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    ap.add_argument("--steps", type=int, default=0, help="stop after N steps (schedule unchanged)")
    ap.add_argument("--data", default="", help="text file (default: the run's, else jargon.txt.gz)")
    ap.add_argument("--log-every", type=int, default=0, help="steps between progress lines")
    ap.add_argument("--autocast", choices=["none", "bf16"], default="none",
                    help="forwards under torch.autocast('cpu', torch.bfloat16)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    global AUTOCAST
    AUTOCAST = args.autocast == "bf16"

    s = read_start(args.run)
    cfg = parse_toml(s["model_toml"])
    if cfg.get("type") != "gpt":
        raise UserError(f"{args.run}: model type '{cfg.get('type')}' is not gpt")
    T, V = int(cfg["block_size"]), int(cfg["vocab_size"])
    L, NH, C = int(cfg["n_layer"]), int(cfg["n_head"]), int(cfg["n_embd"])
    if V != 256:
        raise UserError(f"vocab_size is {V}; text data is bytes, so it must be 256")

    params, meta = read_safetensors(args.init)
    if "seed" in meta and int(meta["seed"]) != int(s["seed"]):
        raise UserError(f"{args.init}: initial parameters of seed {meta['seed']}, the run uses seed "
                        f"{s['seed']} (brigade init --model ... --seed {s['seed']})")
    model = GPT(T, V, L, NH, C)
    sd = model.state_dict()
    missing = sorted(set(sd) - set(params) - {"lm_head.weight"})
    extra = sorted(set(params) - set(sd))
    if missing or extra:
        raise UserError(f"{args.init}: missing {missing}, unexpected {extra}")
    for k in params:
        if tuple(params[k].shape) != tuple(sd[k].shape):
            raise UserError(f"{args.init}: {k} has shape {list(params[k].shape)}, expected {list(sd[k].shape)}")
    params["lm_head.weight"] = params["transformer.wte.weight"]
    model.load_state_dict(params, strict=True)
    assert model.lm_head.weight is model.transformer.wte.weight

    data = TextBytes(args.data or s["data"] or DEFAULT_TEXT, T, int(s["seed"]))
    rows, steps = int(s["batch_size"]), int(s["steps"])
    per_epoch = data.steps_per_epoch(rows)
    per_step = rows * T
    eval_batches = data.eval_batches(rows, int(s["eval_batches"]))
    end = min(steps, args.steps) if args.steps > 0 else steps
    log_every = args.log_every or (1 if steps <= 100 else max(1, steps // 40))

    opt = make_optimizer(s, list(model.parameters()))  # one group; the tied weight once
    clip = float(s["clip"])
    os.makedirs(args.out, exist_ok=True)
    metrics = Metrics(os.path.join(args.out, "metrics.jsonl"))
    nparams = sum(p.numel() for p in model.parameters())
    print(f"{cfg.get('name', 'gpt')}: {nparams} parameters, PyTorch {torch.__version__}, "
          f"{torch.get_num_threads()} thread(s)")
    print(f"data: {data.describe()}")
    print(f"{s['optimizer']}, lr {s['lr']:g} after {s['warmup']} warmup steps, {s['schedule']} to "
          f"{s['min_lr']:g}, batch {rows}, {steps} steps ({steps / per_epoch:.2f} epochs)"
          + (f", stopping after {end}" if end < steps else ""))
    sys.stdout.flush()
    metrics.write({"kind": "start", "step": 0, "implementation": "pytorch",
                   "torch": torch.__version__, "threads": torch.get_num_threads(),
                   "init": os.path.abspath(args.init), "reference_of": os.path.abspath(args.run),
                   "autocast": args.autocast,
                   "settings": s})

    t_start = time.perf_counter()

    def run_eval(at):
        t0 = time.perf_counter()
        loss = evaluate(model, eval_batches)
        metrics.write({"kind": "eval", "step": at, "epoch": at / per_epoch, "split": "val",
                       "loss": loss})
        print(f"eval at step {at}: val loss {loss:.4f} in {time.perf_counter() - t0:.1f}s")
        sys.stdout.flush()
        return loss

    last_eval = run_eval(0)
    for step in range(end):
        x, y = data.train_batch(step, rows)
        lr = learning_rate(s, step)
        for g in opt.param_groups:
            g["lr"] = lr
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_of(model, x, y)
        loss.backward()
        grad_norm = None
        if clip > 0:
            grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), clip))
        opt.step()
        seconds = time.perf_counter() - t0
        loss = float(loss)
        if not math.isfinite(loss):
            raise UserError(f"step {step + 1}: the loss is {loss}; stopped")
        done = step + 1
        rec = {"kind": "train", "step": done, "epoch": done / per_epoch, "loss": loss, "lr": lr,
               "tokens_per_s": per_step / seconds, "elapsed_s": time.perf_counter() - t_start}
        if grad_norm is not None:
            rec["grad_norm"] = grad_norm
        metrics.write(rec)
        if done % log_every == 0 or done == end:
            print(f"step {done}/{steps}  loss {loss:.4f}  lr {lr:.3g}"
                  + (f"  grad_norm {grad_norm:.3f}" if grad_norm is not None else "")
                  + f"  {per_step / seconds:.0f} tokens/s  elapsed {time.perf_counter() - t_start:.1f}s")
            sys.stdout.flush()
        if done % int(s["eval_every"]) == 0 or done == steps:
            last_eval = run_eval(done)
    if end < steps:
        print(f"stopped after step {end} of {steps} (--steps)")
        return
    metrics.write({"kind": "end", "step": steps, "split": "val", "loss": last_eval,
                   "elapsed_s": time.perf_counter() - t_start})
    print(f"final val loss {last_eval:.4f} after {steps} steps; metrics {os.path.join(args.out, 'metrics.jsonl')}")


if __name__ == "__main__":
    try:
        main()
    except UserError as e:
        print(f"gpt_reference.py: {e}", file=sys.stderr)
        sys.exit(2)
