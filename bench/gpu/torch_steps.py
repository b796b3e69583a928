#!/usr/bin/env python3
"""PyTorch's side of the GPU benchmark (bench/README.md, "Training steps on a GPU against
PyTorch"): training steps of BERT-base and GPT-2 124M written in plain torch.nn, bf16
autocast, AdamW, gradient clipping at 1.0, on random tokens, the same shapes as
bench/gpu/bert-base.yaml and gpt2-124m.yaml. After --warmup steps it times --steps steps (a synchronize after each) and
prints one JSON line a job: tokens/s from the median step, the allocator's peaks, the device
memory in use (cudaMemGetInfo, as trainrun's plan.json measures it) and MFU.

MFU = (6·N + 12·L·S·D) · tokens/s / peak, the PaLM paper's model FLOPs (appendix B): N the
parameters that multiply activations (the embeddings that are only looked up are left out;
GPT-2's tied token embedding counts once, as the head), 6 for forward + backward; 12·L·S·D
the attention's score and value products, forward + backward, not halved for the causal mask.
peak = 989.5e12: etc/devices.yaml's h200 profile, the H200 datasheet's 1,979 TFLOPS dense-
equivalent bf16 "with sparsity" halved.

  bench/gpu/torch_steps.py [--job bert-base|gpt2-124m|all] [--compile] [--fused]
  bench/gpu/torch_steps.py --device cpu --tiny           # a smoke test on any machine
  bench/gpu/torch_steps.py --describe                    # parameters and FLOPs a token, no run
"""
import argparse, json, math, statistics, sys, time

import torch
import torch.nn as nn
import torch.nn.functional as F

PEAK_BF16 = 989.5e12   # etc/devices.yaml, h200: 1,979 TFLOPS bf16 with sparsity / 2

JOBS = {
    # 6 classes: the novels of bench/gpu/datasets' austen-passages, as trainrun's recipe has.
    "bert-base": dict(arch="bert", layers=12, hidden=768, heads=12, ffn=3072, seq=512, batch=32,
                      vocab=30522, positions=512, types=2, classes=6, dropout=0.1, eps=1e-12),
    # batch 16: 16,384 tokens a step (bench/gpu/gpt2-124m.yaml says why not 32).
    "gpt2-124m": dict(arch="gpt", layers=12, hidden=768, heads=12, ffn=3072, seq=1024, batch=16,
                      vocab=50257, positions=1024, dropout=0.1, eps=1e-5),
}
TINY = dict(layers=2, hidden=64, heads=2, ffn=128, seq=32, batch=2)


def attention(q, k, v, causal):
    """Softmax attention without dropout on the probabilities (trainrun's ATTENTION has none)."""
    if hasattr(F, "scaled_dot_product_attention"):   # PyTorch 2: flash / memory-efficient kernels
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))   # PyTorch 1.x (the CPU smoke test)
    if causal:
        n = s.size(-1)
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return s.softmax(-1) @ v


class Block(nn.Module):
    """A transformer layer: post-LN for BERT, pre-LN and causal for GPT-2."""

    def __init__(self, c):
        super().__init__()
        d, self.heads, self.gpt = c["hidden"], c["heads"], c["arch"] == "gpt"
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, c["ffn"]), nn.Linear(c["ffn"], d)
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=c["eps"]), nn.LayerNorm(d, eps=c["eps"])
        self.drop = nn.Dropout(c["dropout"])

    def attend(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        o = attention(q, k, v, self.gpt).transpose(1, 2).reshape(b, s, d)
        return self.drop(self.proj(o))

    def feed(self, x):
        return self.drop(self.fc2(F.gelu(self.fc1(x), approximate="tanh" if self.gpt else "none")))

    def forward(self, x):
        if self.gpt:
            x = x + self.attend(self.ln1(x))
            return x + self.feed(self.ln2(x))
        x = self.ln1(x + self.attend(x))
        return self.ln2(x + self.feed(x))


class Bert(nn.Module):
    """BertForSequenceClassification's shape: embeddings, post-LN layers, pooler, classifier."""

    def __init__(self, c):
        super().__init__()
        d = c["hidden"]
        self.words, self.positions = nn.Embedding(c["vocab"], d), nn.Embedding(c["positions"], d)
        self.types = nn.Embedding(c["types"], d)
        self.ln, self.drop = nn.LayerNorm(d, eps=c["eps"]), nn.Dropout(c["dropout"])
        self.layers = nn.ModuleList(Block(c) for _ in range(c["layers"]))
        self.pooler, self.classifier = nn.Linear(d, d), nn.Linear(d, c["classes"])

    def forward(self, ids, labels):
        pos = torch.arange(ids.size(1), device=ids.device)
        x = self.drop(self.ln(self.words(ids) + self.positions(pos) + self.types(torch.zeros_like(ids))))
        for layer in self.layers:
            x = layer(x)
        logits = self.classifier(self.drop(torch.tanh(self.pooler(x[:, 0]))))
        return F.cross_entropy(logits.float(), labels)


class Gpt(nn.Module):
    """GPT-2: token + position embeddings, pre-LN causal layers, a final LN, the head tied."""

    def __init__(self, c):
        super().__init__()
        d = c["hidden"]
        self.wte, self.wpe = nn.Embedding(c["vocab"], d), nn.Embedding(c["positions"], d)
        self.drop = nn.Dropout(c["dropout"])
        self.layers = nn.ModuleList(Block(c) for _ in range(c["layers"]))
        self.ln_f = nn.LayerNorm(d, eps=c["eps"])

    def forward(self, ids, targets):
        pos = torch.arange(ids.size(1), device=ids.device)
        x = self.drop(self.wte(ids) + self.wpe(pos))
        for layer in self.layers:
            x = layer(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def init_weights(model):
    """BERT's and GPT-2's initialisation: N(0, 0.02) weights, zero biases, unit LayerNorms."""
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.bias)


def engine(args):
    return ("pytorch-compile" if args.compile else "pytorch-eager") + ("+fused-adamw" if args.fused else "")


def describe(c):
    """Parameters (all, and those that multiply activations) and model FLOPs a token."""
    L, d, f, v = c["layers"], c["hidden"], c["ffn"], c["vocab"]
    layer = 4 * d * d + 4 * d + 2 * d * f + f + d + 4 * d   # qkv, proj, fc1, fc2, two LNs
    if c["arch"] == "bert":
        looked_up = (v + c["positions"] + c["types"]) * d
        matmul = L * layer + d * d + d + d * c["classes"] + c["classes"]
        params = looked_up + 2 * d + matmul
    else:
        looked_up = c["positions"] * d                          # wte is the head too: counted
        matmul = v * d + L * layer + 2 * d
        params = looked_up + matmul
    return dict(params=params, matmul_params=matmul,
                flops_per_token=6 * matmul + 12 * L * c["seq"] * d)


def batches(c, device, n=4):
    """n random batches (ids, labels or next-token targets), made once on the device."""
    g = torch.Generator().manual_seed(1234)
    out = []
    for _ in range(n):
        if c["arch"] == "bert":
            ids = torch.randint(0, c["vocab"], (c["batch"], c["seq"]), generator=g)
            out.append((ids, torch.randint(0, c["classes"], (c["batch"],), generator=g)))
        else:
            ids = torch.randint(0, c["vocab"], (c["batch"], c["seq"] + 1), generator=g)
            out.append((ids[:, :-1].contiguous(), ids[:, 1:].contiguous()))
    return [(a.to(device), b.to(device)) for a, b in out]


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_job(name, c, args, device):
    torch.manual_seed(1234)
    model = Bert(c) if c["arch"] == "bert" else Gpt(c)
    init_weights(model)
    model.to(device)
    info = describe(c)
    counted = sum(p.numel() for p in model.parameters())
    assert counted == info["params"], (name, counted, info["params"])
    kw = {"fused": True} if args.fused else {}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.01, **kw)
    step_fn = torch.compile(model) if args.compile else model
    data = batches(c, device)

    def step(i):
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = step_fn(*data[i % len(data)])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    started, first = time.perf_counter(), None
    for i in range(args.warmup):
        first = step(i).item()
    sync(device)
    warm_s = time.perf_counter() - started
    times = []
    for i in range(args.steps):
        t0 = time.perf_counter()
        loss = step(args.warmup + i)
        sync(device)
        times.append(time.perf_counter() - t0)
    tokens = c["batch"] * c["seq"]
    median = statistics.median(times)
    rec = dict(job=name, engine=engine(args), device=str(device), torch=torch.__version__,
               batch=c["batch"], seq=c["seq"],
               attention="sdpa" if hasattr(F, "scaled_dot_product_attention") else "math", **info,
               warmup=args.warmup, steps=args.steps, warmup_s=warm_s, step_s_median=median,
               step_s_mean=sum(times) / len(times), step_s_min=min(times), step_s_max=max(times),
               tokens_per_s=tokens / median, loss_first=first, loss_last=loss.item())
    peak = args.peak_flops if args.peak_flops is not None else (PEAK_BF16 if device.type == "cuda" else None)
    rec["mfu"] = info["flops_per_token"] * rec["tokens_per_s"] / peak if peak else None
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        rec.update(gpu=torch.cuda.get_device_name(device),
                   max_memory_allocated=torch.cuda.max_memory_allocated(device),
                   max_memory_reserved=torch.cuda.max_memory_reserved(device),
                   device_in_use=total - free)
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--job", choices=[*JOBS, "all"], default="all")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (PyTorch 2)")
    ap.add_argument("--fused", action="store_true", help="AdamW(fused=True) instead of the default")
    ap.add_argument("--tiny", action="store_true", help="2 layers, hidden 64, sequence 32, batch 2")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first (compiling in them)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps (at least 1)")
    ap.add_argument("--peak-flops", type=float, default=None,
                    help="MFU's denominator (default: %g on a GPU, none on the CPU)" % PEAK_BF16)
    ap.add_argument("--describe", action="store_true", help="print each job's parameters and FLOPs")
    args = ap.parse_args()
    names = list(JOBS) if args.job == "all" else [args.job]
    failed = 0
    for name in names:
        c = dict(JOBS[name], **(TINY if args.tiny else {}))
        if args.describe:
            print(json.dumps(dict(job=name, batch=c["batch"], seq=c["seq"], **describe(c))), flush=True)
            continue
        try:
            if args.compile and not hasattr(torch, "compile"):
                raise RuntimeError("torch.compile needs PyTorch 2; this is " + torch.__version__)
            rec = run_job(name, c, args, torch.device(args.device))
        except Exception as e:   # one job's failure (out of memory, say) is a line, not the end
            failed += 1
            rec = dict(job=name, engine=engine(args), error=f"{type(e).__name__}: {e}"[:2000])
        print(json.dumps(rec), flush=True)
        if args.device.startswith("cuda") and torch.cuda.is_available():
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
