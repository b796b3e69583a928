#!/usr/bin/python3
"""PyTorch's side of bench/run-mlp.sh: recipes/mlp.yaml's job (digits, 64 → 256 → 256 → 10
ReLU MLP, dropout 0.1, AdamW lr 1e-3 wd 0.01 on weights, cosine schedule with 5% warm-up,
batch 64, 30 epochs, gradient clipping at 1.0) on the same 1,258/180/359 split sizes (its own
random split: the accuracy is comparable, not identical). Prints seconds per epoch and the
test accuracy.   bench/mlp.py THREADS"""
import gzip
import math
import sys
import time

import torch
import torch.nn.functional as F

torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
torch.manual_seed(1234)
rows = [list(map(float, l.split(","))) for l in gzip.open(sys.argv[2] if len(sys.argv) > 2 else
        "datasets/digits/digits.csv.gz", "rt") if l.strip()]
data = torch.tensor(rows)
x, y = data[:, :64] / 16, data[:, 64].long()
perm = torch.randperm(len(x))
test, valid, train = perm[:359], perm[359:539], perm[539:]
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                            torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                            torch.nn.Linear(256, 10))
decay = [p for n, p in model.named_parameters() if n.endswith("weight")]
rest = [p for n, p in model.named_parameters() if not n.endswith("weight")]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0}], lr=1e-3)
epochs, batch = 30, 64
steps = epochs * math.ceil(len(train) / batch)
warm = int(0.05 * steps)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: (t + 1) / warm if t + 1 <= warm else
                                          0.5 * (1 + math.cos(math.pi * (t + 1 - warm) / (steps - warm))))
start = time.perf_counter()
for epoch in range(epochs):
    model.train()
    order = train[torch.randperm(len(train))]
    for i in range(0, len(order), batch):
        idx = order[i:i + batch]
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
seconds = time.perf_counter() - start
model.eval()
with torch.no_grad():
    accuracy = (model(x[test]).argmax(1) == y[test]).float().mean().item()
print(f"pytorch mlp seconds_per_epoch={seconds / epochs:.4f} test_accuracy={accuracy:.4f}")
