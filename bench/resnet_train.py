#!/usr/bin/python3
"""PyTorch's side of bench/run-resnet-train.sh: recipes/resnet.yaml's job — the ResNet of
bench/resnet.py (widths 16/32/64, 2 basic blocks a stage) on Fashion-MNIST (Debian's
dataset-fashion-mnist; 55,000 train after a random 5,000 for validation, the 10,000 test
images), grey levels / 255, SGD lr 0.1 Nesterov momentum 0.9, weight decay 5e-4 on the
convolution and head weights, gradient norm clipped at 1.0, cosine schedule after a 2% linear warm-up (per step, as
trainrun's), batch 128 reshuffled each epoch, 4 epochs. Prints the seconds each epoch's
training took and the test accuracy (batch norm in eval mode).
    bench/resnet_train.py THREADS [EPOCHS]"""
import gzip
import math
import os
import struct
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resnet import ResNet  # noqa: E402  (the network of bench/resnet.py)

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 4
torch.set_num_threads(threads)
torch.manual_seed(1234)

FOLDER = "/usr/share/datasets/fashion-mnist"


def idx(name):
    data = gzip.open(os.path.join(FOLDER, name)).read()
    dims = data[3]
    shape = struct.unpack(f">{dims}I", data[4:4 + 4 * dims])
    return torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


x = idx("train-images-idx3-ubyte.gz").float().div(255).unsqueeze(1)
y = idx("train-labels-idx1-ubyte.gz").long()
tx = idx("t10k-images-idx3-ubyte.gz").float().div(255).unsqueeze(1)
ty = idx("t10k-labels-idx1-ubyte.gz").long()
train = torch.randperm(len(x))[5000:]
model = ResNet().train()
decay = [p for n, p in model.named_parameters() if p.dim() > 1]   # conv kernels, head matrix
rest = [p for n, p in model.named_parameters() if p.dim() <= 1]   # batch norm, biases
opt = torch.optim.SGD([{"params": decay, "weight_decay": 5e-4}, {"params": rest, "weight_decay": 0}],
                      lr=0.1, momentum=0.9, nesterov=True)
batch = 128
steps = epochs * math.ceil(len(train) / batch)
warm = int(0.02 * steps)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: (t + 1) / warm if t + 1 <= warm else
                                          0.5 * (1 + math.cos(math.pi * (t + 1 - warm) / (steps - warm))))
for epoch in range(epochs):
    model.train()
    order = train[torch.randperm(len(train))]
    start = time.perf_counter()
    for i in range(0, len(order), batch):
        idx_ = order[i:i + batch]
        loss = F.cross_entropy(model(x[idx_]), y[idx_])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)   # train.grad_clip's default
        opt.step()
        sched.step()
    print(f"pytorch resnet epoch {epoch + 1} seconds={time.perf_counter() - start:.1f} loss={loss.item():.4f}",
          flush=True)
model.eval()
with torch.no_grad():
    correct = sum((model(tx[i:i + 1000]).argmax(1) == ty[i:i + 1000]).sum().item() for i in range(0, len(tx), 1000))
print(f"pytorch resnet test_accuracy={correct / len(tx):.4f}")
