#!/usr/bin/env python3
"""The GPU benchmark's table (bench/gpu/run's last step): PyTorch's lines from
bench/gpu/torch_steps.py and trainrun's runs of bench/gpu/*.yaml side by side, as OUT/results.tsv
and OUT/results.md. trainrun's tokens/s is the median of train/tokens_per_s over the logged steps
from --skip + 1 on (the first steps warm up); its device memory is plan.json's
measured_footprint_bytes (cudaMemGetInfo's memory in use after the run: the regions never grow,
so it is the peak), PyTorch's the same measure (device_in_use) beside its allocator's peaks. MFU
for both from torch_steps.py's FLOPs a token (its docstring gives the formula).

  results.py TORCH_JSONL RUNS_DIR OUT_DIR [--skip N]
"""
import argparse, json, math, os, statistics, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_steps import JOBS, PEAK_BF16, describe  # noqa: E402  (needs torch importable)

GIB = 2 ** 30


def torch_rows(path):
    rows = []
    if not os.path.exists(path):
        return rows
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        row = dict(job=r["job"], engine=r["engine"])
        if "error" in r:
            row["note"] = "failed: " + r["error"].splitlines()[0][:160]
        else:
            row.update(tokens_per_s=r["tokens_per_s"], step_s=r["step_s_median"], mfu=r["mfu"],
                       device_bytes=r.get("device_in_use"),
                       note="allocator peak %s, reserved %s; %d timed steps, %s attention" % (
                           gib(r.get("max_memory_allocated")), gib(r.get("max_memory_reserved")),
                           r["steps"], r["attention"]))
        rows.append(row)
    return rows


def trainrun_row(job, runs, skip):
    row = dict(job=job, engine="trainrun")
    run = os.path.join(runs, job, "latest")
    metrics = os.path.join(run, "metrics.jsonl")
    if not os.path.exists(metrics):
        row["note"] = "no run (failed to start or timed out before its folder: see log.txt)"
        return row
    lines = [json.loads(l) for l in open(metrics) if l.strip()]
    steps = [l for l in lines if "train/tokens_per_s" in l]
    timed = [l for l in steps if l["step"] > skip] or steps[1:] or steps
    if not timed:
        row["note"] = "no step logged (see log.txt)"
        return row
    c = JOBS[job]
    plan_path = os.path.join(run, "plan.json")
    plan = json.load(open(plan_path)) if os.path.exists(plan_path) else None
    batch = plan["micro"] * plan["accumulation"] if plan else c["batch"]
    tps = statistics.median(l["train/tokens_per_s"] for l in timed)
    row.update(tokens_per_s=tps, step_s=statistics.median(batch / l["train/samples_per_s"] for l in timed),
               mfu=describe(c)["flops_per_token"] * tps / PEAK_BF16)
    notes = ["median of %d steps (%d logged)" % (len(timed), len(steps))]
    if plan:
        row["device_bytes"] = plan.get("measured_footprint_bytes")
        if row["device_bytes"] is None:   # the run did not end: the metrics' own peak
            row["device_bytes"] = max((l.get("memory/peak", 0) for l in lines), default=None)
            notes.append("run unfinished: memory/peak")
        notes.append("regions %s (predicted %s), footprint predicted %s" % (
            gib(plan.get("measured_peak_bytes")), gib(plan.get("predicted_peak_bytes")),
            gib(plan.get("predicted_footprint_bytes"))))
        if plan.get("data", {}).get("mean_len") not in (None, c["seq"]):
            notes.append("mean sequence %.1f, not %d" % (plan["data"]["mean_len"], c["seq"]))
    row["note"] = "; ".join(notes)
    return row


def gib(n):
    return "—" if n is None else "%.2f GiB" % (n / GIB)


def fmt(v, spec):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    return spec.format(v) if "{" in spec else spec % v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("torch_jsonl")
    ap.add_argument("runs_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--skip", type=int, default=2, help="trainrun's first steps left out (warm-up)")
    args = ap.parse_args()
    rows = torch_rows(args.torch_jsonl) + [trainrun_row(j, args.runs_dir, args.skip) for j in JOBS]
    rows.sort(key=lambda r: (list(JOBS).index(r["job"]), r["engine"] != "pytorch-eager"))
    for r in rows:
        eager = [e for e in rows
                 if e["job"] == r["job"] and e["engine"] == "pytorch-eager" and e.get("tokens_per_s")]
        r["ratio"] = r["tokens_per_s"] / eager[0]["tokens_per_s"] if eager and r.get("tokens_per_s") else None
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "results.tsv"), "w") as f:
        f.write("job\tengine\ttokens_per_s\tratio_to_pytorch_eager\tstep_s\tdevice_memory_bytes\tmfu\tnote\n")
        for r in rows:
            f.write("\t".join([r["job"], r["engine"], fmt(r.get("tokens_per_s"), "%.1f"),
                               fmt(r.get("ratio"), "%.4f"), fmt(r.get("step_s"), "%.5f"),
                               fmt(r.get("device_bytes"), "%d"), fmt(r.get("mfu"), "%.4f"),
                               r.get("note", "")]) + "\n")
    with open(os.path.join(args.out_dir, "results.md"), "w") as f:
        f.write("| job | engine | tokens/s | ratio to PyTorch eager | step ms | peak device memory | MFU | note |\n")
        f.write("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
        for r in rows:
            step_ms = r["step_s"] * 1e3 if r.get("step_s") else None
            f.write("| %s | %s | %s | %s | %s | %s | %s | %s |\n" % (
                r["job"], r["engine"], fmt(r.get("tokens_per_s"), "{:,.0f}"),
                fmt(r.get("ratio"), "%.2f"),
                fmt(step_ms, "%.1f"), gib(r.get("device_bytes")), fmt(r.get("mfu"), "{:.1%}"),
                r.get("note", "")))
        f.write("\nMFU = (6·N + 12·L·S·D) · tokens/s / %.1f TFLOP/s (bench/gpu/torch_steps.py). Peak device "
                "memory: cudaMemGetInfo's memory in use, the CUDA context included.\n" % (PEAK_BF16 / 1e12))


if __name__ == "__main__":
    main()
