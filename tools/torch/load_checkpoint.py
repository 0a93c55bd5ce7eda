"""Loads a brigade checkpoint of a Fashion-MNIST preset into the equivalent PyTorch module with
load_state_dict(strict=True), and reports the test accuracy PyTorch computes with it.

    /usr/bin/python3 tools/torch/load_checkpoint.py runs/fashion-cnn/checkpoint.safetensors

The checkpoint's optimizer state ("optimizer.*") is dropped first; everything else, BatchNorm's
running statistics and num_batches_tracked included, must match the module's state_dict.
"""
import gzip
import json
import sys

import torch
import torch.nn as nn

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from gpt_reference import read_safetensors  # noqa: E402


def module(name):
    def conv(i, o, bn):
        return [nn.Conv2d(i, o, 3, padding=1, bias=not bn)] + ([nn.BatchNorm2d(o)] if bn else [])
    if name == "fashion-mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                             nn.Linear(128, 10))
    if name in ("fashion-cnn", "fashion-cnn-bn"):
        bn = name.endswith("-bn")
        return nn.Sequential(*conv(1, 32, bn), nn.ReLU(), nn.MaxPool2d(2), *conv(32, 64, bn), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
    sys.exit(f"load_checkpoint: no PyTorch module here for model {name!r}")


def idx(path):
    raw = gzip.open(path).read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return torch.frombuffer(bytearray(raw[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


def main():
    tensors, meta = read_safetensors(sys.argv[1])
    state = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
    m = module(meta["model"])
    print(m.load_state_dict(state, strict=True))
    data = json.loads(meta["config"]).get("data") or "/usr/share/datasets/fashion-mnist"
    x = idx(f"{data}/t10k-images-idx3-ubyte.gz").float().div(255).unsqueeze(1)
    y = idx(f"{data}/t10k-labels-idx1-ubyte.gz").long()
    m.eval()
    with torch.no_grad():
        logits = m(x)
    print(f"PyTorch: test loss {nn.functional.cross_entropy(logits, y).item():.4f}, "
          f"accuracy {(logits.argmax(1) == y).float().mean().item():.4f} ({(logits.argmax(1) == y).sum().item()}/{len(y)})")


if __name__ == "__main__":
    main()
