#!/usr/bin/python3
"""PyTorch's side of bench/run-steps.sh: a shipped recipe's training step in PyTorch 1.13 —
forward, backward, gradient clipping, the optimizer step and the schedule's step, as trainrun's
step is — on the model the recipe names, read from the recipe's YAML with the same key=value
overrides trainrun gets, so both sides build one model (its parameters are counted and printed;
bench/run-steps.sh compares them with trainrun's). PyTorch at its best: foreach AdamW (or SGD),
channels_last for the ResNet, batches made once in memory (no loader), the median step after
the warm-up steps; bf16 under torch.autocast("cpu", torch.bfloat16), PyTorch's CPU AMP.

    bench/steps.py RECIPE [key=value …] [--dtype fp32|bf16] [--threads N] [--warmup W]
                   [--steps N] [--profile [TOP]]
prints "pytorch RECIPE DTYPE params=… batch=… seq=… step_ms=<median> items_per_s=… unit=…
peak_rss_mib=… steps_ms=[…]"; --profile adds torch.profiler's top ops by self CPU time over
the timed steps and the share of them in GEMM and convolution kernels.

The models mirror src/models/: the MLP (linear, activation, dropout per hidden layer, a linear
head), the ResNet of bench/resnet.py (src/models/resnet.c), BERT as src/models/bert.c (separate
query/key/value projections as Hugging Face's, post-LN, GELU (erf), no dropout on the attention
probabilities — trainrun's ATTENTION has none — dropout on the embeddings, after each sublayer
and on the pooled [CLS]), GPT-2 as src/models/gpt.c (fused c_attn, pre-LN, tanh GELU, final LN,
head tied to the token embedding). Weight decay applies where trainrun applies it: matrices and
convolution kernels, not biases, norms or embeddings."""
import argparse
import contextlib
import math
import os
import resource
import statistics
import sys
import time


def run_limited(limit, argv):
    """bench/run-steps.sh's runner (steps.py --exec SECONDS CMD…), before torch is imported:
    runs CMD in a session of its own for at most SECONDS; its output passes through, then
    "exec: rc=… peak_rss_mib=… wall_s=…" ("exec: timeout …" when killed, status 124). The peak
    resident set is the child's own (wait4): posix_spawn shares no pages with this process."""
    import signal
    t0 = time.perf_counter()
    pid = os.posix_spawnp(argv[0], argv, os.environ, setsid=True)
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            rc, what = os.waitstatus_to_exitcode(status), ""
            break
        if time.perf_counter() - t0 > limit:
            os.killpg(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            rc, what = 124, f"timeout after {limit:g} s "
            break
        time.sleep(0.05)
    print(f"exec: {what or 'rc=%d ' % rc}peak_rss_mib={usage.ru_maxrss / 1024:.1f} wall_s={time.perf_counter() - t0:.1f}",
          flush=True)
    return rc


if __name__ == "__main__" and len(sys.argv) > 3 and sys.argv[1] == "--exec":
    sys.exit(run_limited(float(sys.argv[2]), sys.argv[3:]))

import torch
import torch.nn as nn
import torch.nn.functional as F
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resnet import ResNet  # noqa: E402  (src/models/resnet.c's network, bench/resnet.py)

# What the recipes' data sets give the model: sample shape or tokenizer, classes (datasets/*/dataset.yaml).
DATASETS = {
    "digits": dict(shape=(64,), classes=10),
    "fashion-mnist": dict(shape=(1, 28, 28), classes=10),
    "wordnet-senses": dict(classes=45),
    "austen-passages": dict(classes=6),   # bench/make-austen-passages.py: one class a novel
    "austen": dict(),                     # language modelling
}
VOCAB = {"wordpiece": 30522, "gpt2-bpe": 50257}   # bert-base-uncased's and GPT-2's vocabularies
DEFAULTS = {   # man/trainrun-recipe.5's defaults of the keys the step depends on
    "model": dict(layers=12, hidden=768, heads=12, ffn=3072, max_len=128, dropout=0.1, activation="auto"),
    "train": dict(batch_size=32, grad_clip=1.0, schedule=dict(name="constant", warmup=0.0)),
    "optimizer": dict(name="adamw", lr=5e-5, weight_decay=0.01, betas=[0.9, 0.999], eps=1e-8,
                      momentum=0.9, nesterov=False),
}
GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::linear",
            "aten::matmul", "aten::convolution", "aten::_convolution", "aten::convolution_backward",
            "aten::_slow_conv2d_forward", "aten::_slow_conv2d_backward", "aten::thnn_conv2d")


def load_recipe(path, overrides):
    """The recipe as a dict with key=value overrides applied (values parsed as YAML, as trainrun does)."""
    with open(path) as f:
        r = yaml.safe_load(f)
    for o in overrides:
        key, _, value = o.partition("=")
        node, parts = r, key.split(".")
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                node[p] = {} if node.get(p) is None else {"name": node[p]}
            node = node[p]
        node[parts[-1]] = yaml.safe_load(value)
    return r


def section(r, name, defaults):
    s = dict(defaults)
    s.update(r.get(name) or {})
    return s


class Mlp(nn.Module):
    def __init__(self, m, features, classes):
        super().__init__()
        act = {"gelu": nn.GELU(), "gelu_tanh": nn.GELU(approximate="tanh"), "tanh": nn.Tanh()}
        layers, width = [], features
        for _ in range(m["layers"]):
            layers += [nn.Linear(width, m["hidden"]), act.get(m["activation"], nn.ReLU())]
            if m["dropout"] > 0:
                layers.append(nn.Dropout(m["dropout"]))
            width = m["hidden"]
        self.body, self.head = nn.Sequential(*layers), nn.Linear(width, classes)

    def forward(self, x, y):
        return F.cross_entropy(self.head(self.body(x)), y)


class Image(nn.Module):
    def __init__(self, m, shape, classes):
        super().__init__()
        assert shape[0] == 1, "bench/resnet.py's stem takes one channel"
        self.net = ResNet(m["hidden"], m["layers"], classes)

    def forward(self, x, y):
        return F.cross_entropy(self.net(x), y)


def gelu(m, tanh_default):
    a = m["activation"]
    if a == "relu":
        return F.relu
    if a == "tanh":
        return torch.tanh
    tanh = a == "gelu_tanh" or (a == "auto" and tanh_default)
    return lambda x: F.gelu(x, approximate="tanh" if tanh else "none")


def attention(q, k, v, causal):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if causal:
        n = s.size(-1)
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return s.softmax(-1) @ v


class BertLayer(nn.Module):
    def __init__(self, m):
        super().__init__()
        d, f = m["hidden"], m["ffn"]
        self.heads, self.act = m["heads"], gelu(m, False)
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.out, self.fc1, self.fc2 = nn.Linear(d, d), nn.Linear(d, f), nn.Linear(f, d)
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)
        self.drop = nn.Dropout(m["dropout"])

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = (p(x).view(b, s, self.heads, d // self.heads).transpose(1, 2)
                   for p in (self.query, self.key, self.value))
        o = attention(q, k, v, False).transpose(1, 2).reshape(b, s, d)
        h = self.ln1(x + self.drop(self.out(o)))
        return self.ln2(h + self.drop(self.fc2(self.act(self.fc1(h)))))


class Bert(nn.Module):
    def __init__(self, m, vocab, classes):
        super().__init__()
        d = m["hidden"]
        self.words, self.positions, self.types = nn.Embedding(vocab, d), nn.Embedding(m["max_len"], d), nn.Embedding(2, d)
        self.ln, self.drop = nn.LayerNorm(d, eps=1e-12), nn.Dropout(m["dropout"])
        self.layers = nn.ModuleList(BertLayer(m) for _ in range(m["layers"]))
        self.pooler, self.classifier = nn.Linear(d, d), nn.Linear(d, classes)

    def forward(self, ids, y):
        x = self.words(ids) + self.positions(torch.arange(ids.size(1))) + self.types(torch.zeros_like(ids))
        x = self.drop(self.ln(x))
        for layer in self.layers:
            x = layer(x)
        return F.cross_entropy(self.classifier(self.drop(torch.tanh(self.pooler(x[:, 0])))).float(), y)


class GptLayer(nn.Module):
    def __init__(self, m):
        super().__init__()
        d, f = m["hidden"], m["ffn"]
        self.heads, self.act = m["heads"], gelu(m, True)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.c_fc, self.c_fc_proj = nn.Linear(d, f), nn.Linear(f, d)
        self.ln_1, self.ln_2 = nn.LayerNorm(d, eps=1e-5), nn.LayerNorm(d, eps=1e-5)
        self.drop = nn.Dropout(m["dropout"])

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        x = x + self.drop(self.c_proj(attention(q, k, v, True).transpose(1, 2).reshape(b, s, d)))
        return x + self.drop(self.c_fc_proj(self.act(self.c_fc(self.ln_2(x)))))


class Gpt(nn.Module):
    def __init__(self, m, vocab):
        super().__init__()
        d = m["hidden"]
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(m["max_len"], d)
        self.drop = nn.Dropout(m["dropout"])
        self.layers = nn.ModuleList(GptLayer(m) for _ in range(m["layers"]))
        self.ln_f = nn.LayerNorm(d, eps=1e-5)

    def forward(self, ids, y):
        x = self.drop(self.wte(ids) + self.wpe(torch.arange(ids.size(1))))
        for layer in self.layers:
            x = layer(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)   # tied head
        return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))


def init_transformer(model):
    """BERT's and GPT-2's initialisation, as trainrun's (src/models/bert.c, gpt.c): N(0, 0.02)
    weights and embeddings, zero biases, unit norms (PyTorch's own N(0, 1) embeddings give the
    tied GPT head logits in the hundreds)."""
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.bias)
    return model


def build(r):
    """The model, its batches (4, made once) and what a step's items are."""
    m = section(r, "model", DEFAULTS["model"])
    t = section(r, "train", DEFAULTS["train"])
    data = r["data"]
    ds = DATASETS[data["dataset"]]
    arch, batch = m["arch"], t["batch_size"]
    g = torch.Generator().manual_seed(1234)
    if arch == "mlp":
        model = Mlp(m, ds["shape"][0], ds["classes"])
        batches = [(torch.rand(batch, *ds["shape"], generator=g), torch.randint(0, ds["classes"], (batch,), generator=g))
                   for _ in range(4)]
        return model, batches, batch, 1, "samples"
    if arch == "resnet":
        model = Image(m, ds["shape"], ds["classes"]).to(memory_format=torch.channels_last)
        batches = [(torch.rand(batch, *ds["shape"], generator=g).to(memory_format=torch.channels_last),
                    torch.randint(0, ds["classes"], (batch,), generator=g)) for _ in range(4)]
        return model, batches, batch, 1, "images"
    vocab = VOCAB[(data.get("tokenizer") or {}).get("kind", "wordpiece")]
    seq = m["max_len"]
    if arch == "gpt":
        model = init_transformer(Gpt(m, vocab))
        batches = []
        for _ in range(4):
            ids = torch.randint(0, vocab, (batch, seq + 1), generator=g)
            batches.append((ids[:, :-1].contiguous(), ids[:, 1:].contiguous()))
    else:
        model = init_transformer(Bert(m, vocab, ds["classes"]))
        batches = [(torch.randint(0, vocab, (batch, seq), generator=g), torch.randint(0, ds["classes"], (batch,), generator=g))
                   for _ in range(4)]
    return model, batches, batch, seq, "tokens"


def optimizer(r, model, total_steps):
    t = section(r, "train", DEFAULTS["train"])
    o = dict(DEFAULTS["optimizer"])
    o.update(t.get("optimizer") if isinstance(t.get("optimizer"), dict) else {"name": t.get("optimizer", "adamw")})
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and not n.endswith(("wte.weight", "wpe.weight"))
             and not any(n.endswith(e) for e in ("words.weight", "positions.weight", "types.weight"))]
    ids = {id(p) for p in decay}
    rest = [p for p in model.parameters() if id(p) not in ids]
    groups = [{"params": decay, "weight_decay": o["weight_decay"]}, {"params": rest, "weight_decay": 0.0}]
    if o["name"] == "sgd":
        opt = torch.optim.SGD(groups, lr=o["lr"], momentum=o["momentum"], nesterov=o["nesterov"], foreach=True)
    elif o["name"] == "adamw":
        opt = torch.optim.AdamW(groups, lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"], foreach=True)
    else:
        raise SystemExit(f"steps.py: optimizer {o['name']} is not benchmarked")
    s = t.get("schedule") or {}
    s = {"name": s} if isinstance(s, str) else s
    name, warm = s.get("name", "constant"), int(s.get("warmup", 0.0) * total_steps)

    def factor(k):   # the step's learning-rate factor (trainrun's schedules, per step)
        if k + 1 <= warm:
            return (k + 1) / warm
        frac = (k + 1 - warm) / max(1, total_steps - warm)
        return 0.5 * (1 + math.cos(math.pi * frac)) if name == "cosine" else max(0.0, 1 - frac) if name == "linear" else 1.0
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, factor), t["grad_clip"]


def profile_report(prof, wall_s, top):
    rows = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    rows.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in rows)
    gemm = sum(e.self_cpu_time_total for e in rows if e.key in GEMM_OPS or e.key.startswith("aten::mkldnn_"))
    print(f"profile: top {top} ops by self CPU time over the timed steps")
    print(f"  {'op':<44} {'self ms':>10} {'share':>7} {'calls':>7}")
    for e in rows[:top]:
        print(f"  {e.key[:44]:<44} {e.self_cpu_time_total / 1e3:10.1f} {e.self_cpu_time_total / total:7.1%} {e.count:7d}")
    print(f"profile: GEMM/convolution kernels ({', '.join(GEMM_OPS[:4])}, …, aten::mkldnn_*) "
          f"{gemm / total:.1%} of the ops' self time, {gemm / 1e6 / wall_s:.1%} of the profiled steps' wall time "
          f"({total / 1e6:.2f} s in ops of {wall_s:.2f} s)")


def checkpoint_shapes(path):
    """The parameters of a trainrun checkpoint (its safetensors header): optimizer state and
    batch norm's running statistics left out, as PyTorch's parameters() leaves its buffers."""
    import json
    import struct
    with open(path, "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    return [tuple(v["shape"]) for k, v in header.items() if k != "__metadata__" and not k.startswith("optimizer.")
            and not k.endswith(("running_mean", "running_var"))]


def compare_params(model, path):
    """One line: both sides' parameter counts and whether the shapes agree (each shape's dims
    sorted: GPT-2's Conv1D stores [in, out] where nn.Linear has [out, in])."""
    ours = sorted(tuple(sorted(s)) for s in checkpoint_shapes(path))
    theirs = sorted(tuple(sorted(p.shape)) for p in model.parameters())
    count = lambda shapes: sum(math.prod(s) for s in shapes)
    same = "the same shapes" if ours == theirs else "DIFFERENT shapes: trainrun %s, pytorch %s" % (
        sorted(set(ours) - set(theirs)), sorted(set(theirs) - set(ours)))
    print(f"params: trainrun {count(ours)} in {len(ours)} tensors, pytorch {count(theirs)} in {len(theirs)}: {same}")


def trainrun_metrics(folder, warmup):
    """trainrun's side, from its run folder: the median of the per-step wall times
    (metrics.jsonl's time/wall with report.log_every=1: data, feeding, forward, backward, the
    optimizer, the record itself) past the warm-up steps, leaving out steps with evaluation or
    a checkpoint (the last step's record holds the test pass), and the items a step (tokens for
    text, samples otherwise: the record's rate times its wall time)."""
    import json
    times, items = [], []
    for line in open(os.path.join(folder, "metrics.jsonl")):
        r = json.loads(line)
        rate = r.get("train/tokens_per_s") or r.get("train/samples_per_s")
        if r.get("time/wall") is None or not rate or r["step"] <= warmup or r.get("time/evaluation") \
                or r.get("time/checkpointing"):
            continue
        times.append(r["time/wall"])
        items.append(rate * r["time/wall"])
    if not times:
        raise SystemExit(f"steps.py: no steps past {warmup} in {folder}/metrics.jsonl")
    step, n = statistics.median(times), statistics.median(items)
    print(f"step_ms={step * 1e3:.2f} items_per_s={n / step:.1f} items={n:.0f} "
          f"steps_ms=[{' '.join('%.1f' % (t * 1e3) for t in times)}]")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--metrics":   # --metrics RUN_FOLDER WARMUP
        return trainrun_metrics(sys.argv[2], int(sys.argv[3]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recipe")
    ap.add_argument("overrides", nargs="*", help="key=value, as trainrun takes them")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--checkpoint", metavar="FILE", help="a trainrun checkpoint of the same recipe: compare parameters")
    ap.add_argument("--profile", type=int, nargs="?", const=15, default=0, metavar="TOP",
                    help="profile the timed steps; print the TOP ops (default 15)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1234)
    r = load_recipe(args.recipe, args.overrides)
    model, batches, batch, seq, unit = build(r)
    model.train()
    params = sum(p.numel() for p in model.parameters())
    if args.checkpoint:
        compare_params(model, args.checkpoint)
    opt, sched, clip = optimizer(r, model, args.warmup + args.steps)
    amp = torch.autocast("cpu", dtype=torch.bfloat16) if args.dtype == "bf16" else contextlib.nullcontext()

    def step(i):
        with amp:
            loss = model(*batches[i % len(batches)])
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for i in range(args.warmup):
        step(i)
    prof = None
    if args.profile:
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        prof.__enter__()
    times, started = [], time.perf_counter()
    for i in range(args.steps):
        t0 = time.perf_counter()
        loss = step(args.warmup + i)
        times.append(time.perf_counter() - t0)
    wall = time.perf_counter() - started
    if prof is not None:
        prof.__exit__(None, None, None)
    median = statistics.median(times)
    name = os.path.splitext(os.path.basename(args.recipe))[0]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"pytorch {name} {args.dtype} params={params} batch={batch} seq={seq} step_ms={median * 1e3:.2f} "
          f"items_per_s={batch * seq / median:.1f} unit={unit} peak_rss_mib={rss:.1f} loss={loss.item():.4f} "
          f"steps_ms=[{' '.join('%.1f' % (t * 1e3) for t in times)}]", flush=True)
    if prof is not None:
        profile_report(prof, wall, args.profile)


if __name__ == "__main__":
    main()
