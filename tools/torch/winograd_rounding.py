#!/usr/bin/python3
"""How far a 3x3 convolution's output moves when its products read 16-bit operands, in the
two forms Brigade has for it: the matrix form (im2col: the products read x, already 16-bit
in a 16-bit stage, and the weight rounded to 16 bits) and Winograd's F(m x m, 3x3) (the
products read the transformed filters U = G g G^T and input tiles V = B^T d B, each rounded
to 16 bits, as matrix units would need them). Each against the same convolution in float64
on the same 16-bit x and unrounded weight; the products and sums in float64, so the figures
are the roundings' alone.

    /usr/bin/python3 tools/torch/winograd_rounding.py [--samples 8] [--seed 1]

Shapes: fashion-cnn's second convolution (32 to 64 channels, 14 x 14, padding 1) and a wider
one (64 to 64, 28 x 28). x is a ReLU's output (uniform in [0, 1), half of it zero), the
weight Kaiming-uniform, as at initialization. Prints, per shape, form and 16-bit type, the
error's RMS and largest magnitude over the output's RMS.
"""

import argparse

import torch

F64 = torch.float64

# Lavin and Gray's matrices, as shaders/winograd.glsl has them.
MATRICES = {
    2: ([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
        [[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]],
        [[1, 1, 1, 0], [0, 1, -1, -1]]),
    4: ([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
         [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]],
        [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
         [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]],
        [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]),
}


def rounded(t, dtype):
    return t.to(dtype).to(F64)


def winograd(x, w, m, dtype):
    """Padding-1 3x3 convolution by F(m x m, 3x3), U and V rounded to `dtype`."""
    bt, g, at = (torch.tensor(a, dtype=F64) for a in MATRICES[m])
    n, c, h, wd = x.shape
    th, tw = -(-h // m), -(-wd // m)
    alpha = m + 2
    # Pad: 1 on the top and left, enough on the bottom and right for whole tiles.
    xp = torch.nn.functional.pad(x, (1, tw * m + 2 - wd - 1, 1, th * m + 2 - h - 1))
    d = xp.unfold(2, alpha, m).unfold(3, alpha, m)  # n, c, th, tw, alpha, alpha
    v = rounded(bt @ d @ bt.T, dtype)
    u = rounded(g @ w @ g.T, dtype)  # oc, c, alpha, alpha
    prod = torch.einsum("ncyxij,ocij->noyxij", v, u)
    y = at @ prod @ at.T  # n, oc, th, tw, m, m
    return y.permute(0, 1, 2, 4, 3, 5).reshape(n, -1, th * m, tw * m)[:, :, :h, :wd]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    print("| shape | 16-bit type | form | RMS error / RMS output | largest error / RMS output |")
    print("|---|---|---|---|---|")
    for ic, oc, side in [(32, 64, 14), (64, 64, 28)]:
        x0 = torch.relu(torch.rand(args.samples, ic, side, side, dtype=F64) * 2 - 1)
        bound = (6 / (ic * 9)) ** 0.5 / 2 ** 0.5  # Kaiming-uniform, a = sqrt(5): PyTorch's default
        w = (torch.rand(oc, ic, 3, 3, dtype=F64) * 2 - 1) * bound
        for name, dtype in [("bf16", torch.bfloat16), ("fp16", torch.float16)]:
            x = rounded(x0, dtype)
            want = torch.nn.functional.conv2d(x, w, padding=1)
            scale = want.pow(2).mean().sqrt().item()
            forms = [("matrix (weight rounded)", torch.nn.functional.conv2d(x, rounded(w, dtype), padding=1))]
            forms += [(f"Winograd F({m}x{m}) (U, V rounded)", winograd(x, w, m, dtype)) for m in (2, 4)]
            for form, got in forms:
                err = got - want
                print(f"| {ic} to {oc}, {side}x{side} | {name} | {form} | "
                      f"{err.pow(2).mean().sqrt().item() / scale:.2e} | {err.abs().max().item() / scale:.2e} |")


if __name__ == "__main__":
    main()
