#!/usr/bin/python3
"""PyTorch's side of bench/run-resnet.sh: the same small ResNet as src/models/resnet.c (a 3×3
stem, three stages of 2 basic blocks, widths 16/32/64, stride 2 opening stages 2 and 3, 1×1
projection shortcuts, global average pool, linear head), one training step's forward +
backward of the mean cross-entropy on 28×28 grey images, on the CPU.
    bench/resnet.py B ITERS THREADS  → "pytorch resnet B=… ms=<median>" """
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

def conv(cin, cout, k, stride):
    return nn.Conv2d(cin, cout, k, stride, k // 2, bias=False)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.bn1 = conv(cin, cout, 3, stride), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = conv(cout, cout, 3, 1), nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(conv(cin, cout, 1, stride), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    def __init__(self, width=16, layers=2, classes=10):
        super().__init__()
        self.stem = nn.Sequential(conv(1, width, 3, 1), nn.BatchNorm2d(width), nn.ReLU())
        blocks, cin = [], width
        for stage in range(3):
            for b in range(layers):
                blocks.append(BasicBlock(cin, width << stage, 2 if stage > 0 and b == 0 else 1))
                cin = width << stage
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(cin, classes)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


def main():
    B, iters, threads = map(int, sys.argv[1:4])
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    model = ResNet().train()
    x, y = torch.rand(B, 1, 28, 28) * 2 - 1, torch.randint(0, 10, (B,))
    times = []
    for i in range(iters + 1):   # one warm-up run
        t0 = time.perf_counter()
        F.cross_entropy(model(x), y).backward()
        if i:
            times.append((time.perf_counter() - t0) * 1e3)
    print(f"pytorch resnet B={B} ms={statistics.median(times):.2f}")


if __name__ == "__main__":
    main()
