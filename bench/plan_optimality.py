#!/usr/bin/env python3
# The planner's optimality check (bench/run-plan-optimality.sh calls this): for each (recipe,
# budget) pair, every feasible candidate of `trainrun plan --json` is replayed with
# `trainrun RECIPE --plan FILE` for a few steps, round-robin over the candidates, and the chosen
# plan's measured step time is set against the fastest measured. Standard library only.
import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# (name, recipe, overrides): each recipe at a budget; the tight budgets make the planner split
# batches into micro-batches (their footprints on a 2-thread host, 2026-11-29: bert-small's
# candidates 411–449 MiB, gpt-small's 466–477 MiB, resnet's 598–612 MiB).
PAIRS = [
    ("bert-small@4GiB", "recipes/bert-small.yaml", []),
    ("bert-small@450MiB", "recipes/bert-small.yaml", ["budget.memory=450MiB"]),
    ("gpt-small@480MiB", "recipes/gpt-small.yaml", ["budget.memory=480MiB"]),
    ("resnet@620MiB", "recipes/resnet.yaml", ["budget.memory=620MiB"]),
    ("mlp@512MiB", "recipes/mlp.yaml", []),
]

# A short run of exactly the replayed knobs: no evaluation but a 32-sample one at the end, no
# checkpoints on the way, one metrics line a step.
SHORT_RUN = ["train.epochs=null", "train.eval_every=0", "train.eval_samples=32", "train.checkpoint_every=0",
             "report.tensorboard=false", "report.log_every=1"]

KNOBS = ("precision", "checkpointing", "dynamic_batching", "micro_batch", "micro", "accumulation", "eval_batch")
MAX_CANDIDATES = 12   # above this, only those within CAP_FACTOR of the predicted fastest (+ the choice)
CAP_FACTOR = 3.0
MAX_STEPS = 2000      # --min-seconds' cap on a run's steps
PASS_RATIO = 1.10     # the chosen plan's measured time within 10% of the fastest measured


def knob_key(c):
    return json.dumps({k: c[k] for k in KNOBS}, sort_keys=True)


def describe(c):
    """precision, checkpointing and batching in the words of `trainrun plan`'s table."""
    ck = c["checkpointing"]
    remat = ck["mode"] if ck["mode"] in ("none", "selective") else "%s %d/%d" % (ck["mode"], ck["blocks"], ck["of"])
    if c["dynamic_batching"]:
        batching = "dyn " + "/".join(str(b["rows"]) for b in c["micro_batch"])
    else:
        batching = "%d x %d" % (c["accumulation"], c["micro"])
    return c["precision"], remat, batching


def plan(trainrun, recipe, overrides):
    """The planner's JSON for the pair, or None with the reason when nothing fits."""
    p = subprocess.run([trainrun, "plan", recipe, *overrides, "--json"], capture_output=True, text=True)
    if p.returncode not in (0, 3) or not p.stdout.strip():
        sys.exit("trainrun plan %s %s: exit %d\n%s" % (recipe, " ".join(overrides), p.returncode, p.stderr))
    return json.loads(p.stdout), p.returncode, p.stderr.strip()


def candidates_to_run(doc):
    """The distinct feasible candidates, the chosen one marked; capped when there are many."""
    chosen = knob_key(doc) if doc.get("fits") else None
    seen, feasible = set(), []
    for i, c in enumerate(doc["candidates"], 1):
        key = knob_key(c)
        if c.get("fits") and key not in seen:
            seen.add(key)
            feasible.append({"index": i, "cand": c, "chosen": key == chosen})
    note = ""
    if len(feasible) > MAX_CANDIDATES:
        fastest = min(f["cand"]["predicted_step_seconds"] for f in feasible)
        kept = [f for f in feasible
                if f["chosen"] or f["cand"]["predicted_step_seconds"] <= CAP_FACTOR * fastest]
        note = "capped: %d of %d feasible kept (within %gx of the predicted fastest, and the choice)" % (
            len(kept), len(feasible), CAP_FACTOR)
        feasible = kept
    return feasible, note


def step_seconds(run_dir):
    """Per-step seconds (batch / samples per second of each step's metrics line), the real tokens
    of each step (text; else None), the batch and the mean real tokens a step over the split."""
    log = open(os.path.join(run_dir, "log.txt")).read()
    batch = int(re.search(r" steps of (\d+),", log).group(1))
    text = re.search(r"^text: (\d+) tokens in (\d+) sequences", log, re.M)
    mean_tokens = int(text.group(1)) / int(text.group(2)) * batch if text else None
    secs, tokens = [], []
    for line in open(os.path.join(run_dir, "metrics.jsonl")):
        m = json.loads(line)
        if "train/samples_per_s" not in m:
            continue
        s = batch / m["train/samples_per_s"]
        secs.append(s)
        tokens.append(m["train/tokens_per_s"] * s if "train/tokens_per_s" in m else None)
    return secs, tokens, batch, mean_tokens


def steps_for(args, cand):
    """--steps, or more where the forecast says they would take less than --min-seconds."""
    predicted = cand.get("predicted_step_seconds") or 0
    wanted = math.ceil(args.min_seconds / predicted) + 1 if predicted > 0 else args.steps
    return max(args.steps, min(MAX_STEPS, wanted))


def replay(trainrun, recipe, overrides, cand_file, steps, workdir):
    """One short run of the candidate: (per-step seconds, tokens, batch, mean tokens), or a
    string saying why it did not run."""
    shutil.rmtree(workdir, ignore_errors=True)
    cmd = [trainrun, recipe, "--plan", cand_file, *overrides, "train.steps=%d" % steps, *SHORT_RUN,
           "report.dir=" + workdir]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode == 3:
        return "no longer fits"
    if p.returncode != 0:
        return "exit %d: %s" % (p.returncode, " ".join(p.stderr.strip().splitlines()[-1:]))
    name = [d for d in os.listdir(workdir) if os.path.isdir(os.path.join(workdir, d))][0]   # not runs/index.html
    got = step_seconds(os.path.join(workdir, name, "latest"))
    shutil.rmtree(workdir, ignore_errors=True)   # the final checkpoint alone is 170 MB for bert-small
    return got


def ranks(xs):
    """Ranks from 1, ties sharing their mean rank."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(xs, ys):
    if len(xs) < 3:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return num / den if den else None


def select_pairs(spec):
    if spec.isdigit():
        return PAIRS[:int(spec)]
    names = spec.split(",")
    unknown = [n for n in names if n not in [p[0] for p in PAIRS]]
    if unknown:
        sys.exit("unknown pair %s; the pairs: %s" % (", ".join(unknown), ", ".join(p[0] for p in PAIRS)))
    return [p for p in PAIRS if p[0] in names]


def fmt(x, spec="%.4f"):
    return "-" if x is None else spec % x


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trainrun", default="./trainrun")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=6, help="steps a run; the first is a warm-up, not timed")
    ap.add_argument("--min-seconds", type=float, default=0.5,
                    help="more steps for a fast candidate, so that its run lasts about this long by its "
                         "forecast (at most %d steps): a 0.5 ms step's first few are its warm-up" % MAX_STEPS)
    ap.add_argument("--pairs", default=str(len(PAIRS)), help="the first N pairs, or names joined by commas")
    ap.add_argument("--out", default="bench/plan-optimality.tsv")
    args = ap.parse_args()
    if args.steps < 2:
        sys.exit("--steps must be at least 2: the first step is a warm-up")
    scratch = tempfile.mkdtemp(prefix="plan-optimality.")
    try:
        run(args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run(args, scratch):
    pairs = []
    for name, recipe, overrides in select_pairs(args.pairs):
        doc, rc, why = plan(args.trainrun, recipe, overrides)
        if rc == 3:
            print("# %s: nothing fits (%s); skipped" % (name, why))
            continue
        todo, note = candidates_to_run(doc)
        print("# %s: %d candidates considered, %d feasible and distinct run%s; chosen: %s" % (
            name, len(doc["candidates"]), len(todo), " (" + note + ")" if note else "",
            ", ".join(describe(doc))))
        for t in todo:
            t["file"] = os.path.join(scratch, "%s-%d.json" % (name.replace("@", "-"), t["index"]))
            with open(t["file"], "w") as f:
                json.dump(t["cand"], f)
            t["secs"], t["per_token"], t["failed"] = [], [], None
        pairs.append({"name": name, "recipe": recipe, "overrides": overrides, "todo": todo, "note": note})

    # Round-robin: every candidate of every pair once a round, so drift in the machine's speed
    # lands on all alike; the order within a pair alternates from round to round.
    began = time.time()
    for r in range(args.rounds):
        for p in pairs:
            order = p["todo"] if r % 2 == 0 else p["todo"][::-1]
            for t in order:
                if t["failed"]:
                    continue
                got = replay(args.trainrun, p["recipe"], p["overrides"], t["file"], steps_for(args, t["cand"]),
                             os.path.join(scratch, "run"))
                if isinstance(got, str):
                    t["failed"] = got
                    print("# %s #%d: %s" % (p["name"], t["index"], got))
                    continue
                secs, tokens, batch, mean_tokens = got
                timed = secs[1:]                      # the first step warms up
                t["secs"].append(statistics.median(timed))
                if mean_tokens and all(tokens[1:]):
                    t["per_token"].append(sum(timed) / sum(tokens[1:]) * mean_tokens)
                shown = " ".join("%.4f" % s for s in timed) if len(timed) <= 12 else \
                    "median %.5f of %d" % (statistics.median(timed), len(timed))
                print("# round %d %s #%d %s: %s s/step" % (r + 1, p["name"], t["index"],
                      " ".join(describe(t["cand"])), shown), flush=True)
    print("# %d rounds in %.0f s" % (args.rounds, time.time() - began))
    report(args, pairs)


def report(args, pairs):
    header = ["pair", "candidate", "precision", "checkpointing", "batching", "predicted_s", "measured_s",
              "forecast_error", "measured_min_s", "measured_max_s", "token_normalised_s", "error_vs_median", "runs",
              "chosen"]
    lines = ["\t".join(header)]
    summaries = []
    for p in pairs:
        rows = []
        for t in p["todo"]:
            c = t["cand"]
            med = statistics.median(t["secs"]) if t["secs"] else None
            norm = statistics.median(t["per_token"]) if t["per_token"] else None
            rows.append((t, med, norm))
            lines.append("\t".join([p["name"], str(t["index"]), *describe(c), "%.4f" % c["predicted_step_seconds"],
                                    fmt(med), fmt(forecast_error(c, expected_step(med, norm)), "%+.1f%%"),
                                    fmt(min(t["secs"]) if t["secs"] else None),
                                    fmt(max(t["secs"]) if t["secs"] else None), fmt(norm),
                                    fmt(forecast_error(c, med), "%+.1f%%"),
                                    str(len(t["secs"])) if not t["failed"] else t["failed"],
                                    "yes" if t["chosen"] else "no"]))
        summaries.append(summary(p, rows))
        lines.append(summaries[-1])
    with open(args.out, "w") as f:
        f.write("# %s, OMP_NUM_THREADS=%s, %d rounds of %d steps, or %g s of forecast steps (the first "
                "untimed); %s\n" % (time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()),
                                      os.environ.get("OMP_NUM_THREADS", "?"), args.rounds, args.steps,
                                      args.min_seconds, " ".join(sys.argv)))
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print("# written to %s" % args.out)


def expected_step(median, token_normalised):
    """What the forecast predicts is a step's expected time over the split (plan.c's timing: the
    lengths' distribution, per bucket). A text recipe's few timed steps see whichever lengths
    they drew — with dynamic batching a pool sorted by length hands its steps out short to long —
    so there the measured time per real token times the split's mean real tokens a step is the
    measurement of the same thing; elsewhere (images, features: every step alike) the median."""
    return token_normalised if token_normalised else median


def forecast_error(cand, measured):
    """(predicted − measured) / measured in percent: the time model's miss on this candidate."""
    if not measured:
        return None
    return 100.0 * (cand["predicted_step_seconds"] - measured) / measured


def summary(p, rows):
    """'#summary' line: the chosen plan's median against the fastest median, the verdict, and
    Spearman's rank correlation between predicted and measured (raw and token-normalised)."""
    measured = [(t, m, n) for t, m, n in rows if m is not None]
    chosen = [x for x in measured if x[0]["chosen"]]
    if not measured or not chosen:
        return "#summary\t%s\tno measurement of the chosen plan" % p["name"]
    t_best, best, _ = min(measured, key=lambda x: x[1])
    ratio = chosen[0][1] / best
    fields = ["#summary", p["name"], "chosen/fastest=%.3f" % ratio, "fastest=#%d" % t_best["index"],
              "PASS" if ratio <= PASS_RATIO else "FAIL"]
    normed = [(t, n) for t, m, n in measured if n is not None]
    if normed and chosen[0][2] is not None:
        t_nbest, nbest = min(normed, key=lambda x: x[1])
        nratio = chosen[0][2] / nbest
        fields += ["token_normalised chosen/fastest=%.3f" % nratio, "fastest=#%d" % t_nbest["index"],
                   "PASS" if nratio <= PASS_RATIO else "FAIL"]
    rho = spearman([t["cand"]["predicted_step_seconds"] for t, m, n in measured], [m for t, m, n in measured])
    fields.append("spearman=%s" % fmt(rho, "%.2f"))
    errors = [abs(forecast_error(t["cand"], expected_step(m, n))) for t, m, n in measured]
    fields.append("forecast_error max=%.1f%% median=%.1f%% within_25%%=%d/%d" % (
        max(errors), statistics.median(errors), sum(e <= 25 for e in errors), len(errors)))
    raw = [abs(forecast_error(t["cand"], m)) for t, m, n in measured]
    fields.append("error_vs_median max=%.1f%%" % max(raw))
    if normed:
        rho_n = spearman([t["cand"]["predicted_step_seconds"] for t, n in normed], [n for t, n in normed])
        fields.append("spearman_token_normalised=%s" % fmt(rho_n, "%.2f"))
    if p["note"]:
        fields.append(p["note"])
    return "\t".join(fields)


if __name__ == "__main__":
    main()
