#!/usr/bin/python3
"""PyTorch's side of bench/run-remat.sh: bench/remat.c's BERT-base-shaped classifier in PyTorch
1.13 — 12 post-LN layers, hidden 768, 12 heads, FFN 3072, 30,522 tokens, 2 classes, dropout 0.1,
every token real — one training step's forward + backward on the CPU, with each layer either kept
(none) or wrapped in torch.utils.checkpoint (full: the layer's input kept, its forward run again
in the backward, dropout's RNG state restored so the masks are the same); prints the median time
and the process's peak resident memory (and the resident memory before the first step: the
parameters).
    bench/remat.py none|full B S ITERS THREADS"""
import math
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

D, H, FF, L, P, VOCAB, CLASSES = 768, 12, 3072, 12, 512, 30522, 2


def rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.out = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc1, self.fc2 = nn.Linear(D, FF), nn.Linear(FF, D)
        self.ln1, self.ln2 = nn.LayerNorm(D, eps=1e-12), nn.LayerNorm(D, eps=1e-12)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        B, S, _ = x.shape
        q, k, v = self.qkv(x).view(B, S, 3, H, D // H).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(D // H)
        o = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, S, D)
        x = self.ln1(x + self.drop(self.out(o)))
        return self.ln2(x + self.drop(self.fc2(F.gelu(self.fc1(x)))))


class Model(nn.Module):
    def __init__(self, checkpointed):
        super().__init__()
        self.checkpointed = checkpointed
        self.tok, self.pos, self.seg = nn.Embedding(VOCAB, D), nn.Embedding(P, D), nn.Embedding(2, D)
        self.ln = nn.LayerNorm(D, eps=1e-12)
        self.drop = nn.Dropout(0.1)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.pool, self.head = nn.Linear(D, D), nn.Linear(D, CLASSES)

    def forward(self, ids, y):
        S = ids.shape[1]
        x = self.drop(self.ln(self.tok(ids) + self.pos(torch.arange(S)) + self.seg(torch.zeros_like(ids))))
        for b in self.blocks:
            x = torch.utils.checkpoint.checkpoint(b, x) if self.checkpointed else b(x)
        return F.cross_entropy(self.head(self.drop(torch.tanh(self.pool(x[:, 0])))), y)


def main():
    mode, (B, S, iters, threads) = sys.argv[1], map(int, sys.argv[2:6])
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    model = Model(mode == "full").train()
    ids = torch.randint(0, VOCAB, (B, S))
    y = torch.randint(0, CLASSES, (B,))
    before = rss_mib()
    times = []
    for i in range(iters + 1):   # one warm-up run
        model.zero_grad(set_to_none=False)
        t0 = time.perf_counter()
        loss = model(ids, y)
        loss.backward()
        if i:
            times.append((time.perf_counter() - t0) * 1e3)
    print(f"pytorch remat={mode} B={B} S={S} ms={statistics.median(times):.1f} loss={loss.item():.6f} "
          f"peak_rss_mib={rss_mib():.1f} rss_before_mib={before:.1f}")


if __name__ == "__main__":
    main()
