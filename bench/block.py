#!/usr/bin/python3
"""PyTorch's side of bench/run-block.sh: the same BERT-style block as tests/models.h
(post-LN, GELU, a key padding mask, dropout off), forward + backward of Σ y ⊙ w, on the CPU.
    bench/block.py D H F B S ITERS THREADS  → "pytorch block D=… ms=<median>" """
import statistics
import sys
import time

import torch
import torch.nn.functional as F

D, H, Fd, B, S, iters, threads = map(int, sys.argv[1:8])
torch.set_num_threads(threads)
torch.manual_seed(1)


def p(*shape):
    return (0.2 * (torch.rand(*shape) - 0.5)).requires_grad_(True)


w = {n: (p(D, D), p(D)) for n in ("q", "k", "v", "o")}
w["ffn1"], w["ffn2"] = (p(Fd, D), p(Fd)), (p(D, Fd), p(D))
ln = [(p(D), p(D)) for _ in range(2)]
x, weights = 0.2 * (torch.rand(B, S, D) - 0.5), torch.rand(B, S, D)
mask = torch.ones(B, S, dtype=torch.bool)


def block(x):
    lin = lambda n, t: F.linear(t, *w[n])
    heads = lambda t: t.reshape(B, S, H, D // H).permute(0, 2, 1, 3)
    q, k, v = heads(lin("q", x)), heads(lin("k", x)), heads(lin("v", x))
    scores = (q @ k.transpose(-1, -2)) / (D // H) ** 0.5
    scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
    o = (F.softmax(scores, -1) @ v).permute(0, 2, 1, 3).reshape(B, S, D)
    h = F.layer_norm(x + lin("o", o), (D,), *ln[0], 1e-12)
    return F.layer_norm(h + lin("ffn2", F.gelu(lin("ffn1", h))), (D,), *ln[1], 1e-12)


times = []
for i in range(iters + 1):
    t0 = time.perf_counter()
    (block(x) * weights).sum().backward()
    if i:
        times.append((time.perf_counter() - t0) * 1e3)
print(f"pytorch block D={D} H={H} F={Fd} B={B} S={S} ms={statistics.median(times):.2f}")
