#!/usr/bin/python3
"""PyTorch's side of bench/run-transformer.sh: the model of bench/transformer.c in PyTorch 1.13 —
BERT-small (4 post-LN layers, hidden 256, 4 heads, FFN 1024, 30,522 tokens, 45 classes) or the
GPT of the same size (50,257 tokens, tied head) — one training step's forward + backward on
random tokens, every token real, dropout 0.1, on the CPU; prints the median time and the
process's peak resident memory.
    bench/transformer.py bert|gpt B S ITERS THREADS [fp32|bf16]
bf16: under torch.autocast("cpu", torch.bfloat16), PyTorch 1.13's CPU mixed precision."""
import math
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

D, H, FF, L, P = 256, 4, 1024, 4, 128


class Block(nn.Module):
    def __init__(self, pre_ln):
        super().__init__()
        self.pre_ln = pre_ln
        self.qkv, self.out = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc1, self.fc2 = nn.Linear(D, FF), nn.Linear(FF, D)
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.drop = nn.Dropout(0.1)

    def attend(self, x, causal):
        B, S, _ = x.shape
        q, k, v = self.qkv(x).view(B, S, 3, H, D // H).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(D // H)
        if causal:
            scores = scores.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
        o = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, S, D)
        return self.drop(self.out(o))

    def forward(self, x):
        if self.pre_ln:   # GPT-2
            x = x + self.attend(self.ln1(x), True)
            return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh")))
        x = self.ln1(x + self.attend(x, False))   # BERT
        return self.ln2(x + self.drop(self.fc2(F.gelu(self.fc1(x)))))


class Model(nn.Module):
    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt
        self.vocab = 50257 if gpt else 30522
        self.tok, self.pos = nn.Embedding(self.vocab, D), nn.Embedding(P, D)
        self.blocks = nn.ModuleList(Block(gpt) for _ in range(L))
        self.ln = nn.LayerNorm(D)
        if not gpt:
            self.seg, self.pool, self.head = nn.Embedding(2, D), nn.Linear(D, D), nn.Linear(D, 45)

    def forward(self, ids, y):
        S = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(S))
        if not self.gpt:
            x = self.ln(x + self.seg(torch.zeros_like(ids)))
        for b in self.blocks:
            x = b(x)
        if self.gpt:
            logits = self.ln(x) @ self.tok.weight.t()
            return F.cross_entropy(logits.reshape(-1, self.vocab), y.reshape(-1))
        return F.cross_entropy(self.head(torch.tanh(self.pool(x[:, 0]))), y)


def main():
    arch, B, S, iters, threads = sys.argv[1], *map(int, sys.argv[2:6])
    amp = sys.argv[6] if len(sys.argv) > 6 else "fp32"
    import contextlib
    context = torch.autocast("cpu", dtype=torch.bfloat16) if amp == "bf16" else contextlib.nullcontext()
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    model = Model(arch == "gpt").train()
    ids = torch.randint(0, model.vocab, (B, S))
    y = torch.randint(0, model.vocab, (B, S)) if arch == "gpt" else torch.randint(0, 45, (B,))
    times = []
    for i in range(iters + 1):   # one warm-up run
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        with context:
            loss = model(ids, y)
        loss.backward()
        if i:
            times.append((time.perf_counter() - t0) * 1e3)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"pytorch {arch} {amp} B={B} S={S} ms={statistics.median(times):.2f} peak_rss_mib={rss:.1f}")


if __name__ == "__main__":
    main()
