"""Holistic Trace Analysis reads a run's traces (tests/trace.sh): RUN_FOLDER [--kernels] [--ranks N]

What HTA parses agrees with what the run recorded of them in run.json's "traces": the ranks,
one thread, every op's number of runs, and their summed time within HTA's rounding (it rounds
each event's start up and its end down to whole microseconds: up to 2 µs an event) and 1 %. Exit 0,
or 1 with the disagreements listed.

--kernels (a run on a GPU, tests/gpu_train.sh): each op's cpu_op has its "kernel" event, the
device's time of its kernels, no longer than the host's, and HTA's GPU analyses (the kernel
breakdown, the temporal breakdown) run on them.

--ranks N (tests/ranks.sh): N ranks wrote a trace each; HTA finds ranks 0 … N−1, every rank ran
the same ops as many times (fixed batching shares each step alike), and each traced step of each
rank holds one "all-reduce gradients" span, inside its ProfilerStep, and in it a "gradient bucket"
span a bucket — or, overlapped with the backward (distributed.overlap), the buckets on a thread
of their own, inside the step, each ended by the time the all-reduce span (the wait) ends, and
some begun before it (while the backward ran)."""
import collections
import json
import logging
import os
import sys

logging.disable(logging.WARNING)   # HTA's notes on ijson and its GPU analyses
from hta.trace_analysis import TraceAnalysis  # noqa: E402

run = sys.argv[1]
kernels = "--kernels" in sys.argv[2:]
world = int(sys.argv[sys.argv.index("--ranks") + 1]) if "--ranks" in sys.argv else 1
record = json.load(open(os.path.join(run, "run.json")))["traces"]
analysis = TraceAnalysis(trace_dir=os.path.join(run, "traces"), include_last_profiler_step=True)
problems = []
ranks = sorted(analysis.t.traces)
if ranks != list(range(world)):
    problems.append("ranks %s, want %s" % (ranks, list(range(world))))
names = analysis.t.symbol_table.get_sym_table()
def named(rank):
    t = analysis.t.get_trace(rank)
    return t.assign(op=t["name"].map(lambda i: names[i]), category=t["cat"].map(lambda i: names[i]))
df = named(0)
for rank in ranks[1:] if world > 1 else []:
    other = named(rank)
    mine, theirs = (t[t.category == "cpu_op"].groupby("op").size().to_dict() for t in (df, other))
    if mine != theirs:
        problems.append("rank %d ran %s, rank 0 %s" % (rank, theirs, mine))
early_any, overlapped = 0, False
for rank in ranks if world > 1 else []:
    t = named(rank)
    steps = t[t.op.str.startswith("ProfilerStep#")]
    comm = t[t.op == "all-reduce gradients"]
    inside = sum(((steps.ts <= c.ts) & (c.ts + c.dur <= steps.ts + steps.dur)).any() for c in comm.itertuples())
    if len(comm) != len(steps) or inside != len(comm):
        problems.append("rank %d: %d all-reduce spans, %d inside its %d steps" % (rank, len(comm), inside, len(steps)))
    buckets = t[t.op == "gradient bucket"]
    trainer = set(t[t.category == "cpu_op"].tid)
    apart = buckets[~buckets.tid.isin(trainer)]
    if len(apart) == 0:
        held = sum(((comm.ts <= b.ts) & (b.ts + b.dur <= comm.ts + comm.dur)).any() for b in buckets.itertuples())
        if len(buckets) < len(comm) or held != len(buckets):
            problems.append("rank %d: %d bucket spans, %d inside an all-reduce" % (rank, len(buckets), held))
        else:
            print("HTA: rank %d, %d steps, all-reduce %.0f µs a step" % (rank, len(steps), comm.dur.mean()))
    else:   # overlapped: on their own thread, within the step, done when the wait ends
        held = sum(((steps.ts <= b.ts) & (b.ts + b.dur <= steps.ts + steps.dur)).any() for b in apart.itertuples())
        done = sum(((comm.ts <= b.ts + b.dur) & (b.ts + b.dur <= comm.ts + comm.dur + 1)).any()
                   for b in apart.itertuples())
        # begun before its own step's wait: while the backward ran
        early = sum(bool(b.ts < comm[comm.ts + comm.dur >= b.ts].ts.min()) for b in apart.itertuples())
        early_any = early_any + early   # some bucket of some rank began while the backward ran (under a
                                        # loaded machine one rank's thread may get no core before its wait)
        if len(apart) != len(buckets) or held != len(apart) or apart.tid.nunique() != 1:
            problems.append("rank %d: %d overlapped bucket spans (%d on the trainer's thread), %d inside a step, "
                            "%d begun before the wait" % (rank, len(apart), len(buckets) - len(apart), held, early))
        else:
            overlapped = True
            print("HTA: rank %d, %d steps, %d buckets overlapped (%d begun before the wait, %d ended in it), "
                  "wait %.0f µs a step" % (rank, len(steps), len(apart), early, done, comm.dur.mean()))
if overlapped and early_any == 0:
    problems.append("no rank began a bucket before its wait: nothing overlapped the backward")
ops = df[df.category == "cpu_op"]
if set(df.category) - {"cpu_op", "user_annotation"} - ({"kernel"} if kernels else set()):
    problems.append("categories %s: a CPU trace holds no GPU kernels" % sorted(set(df.category)))
if kernels:
    on_device = df[df.category == "kernel"]
    per_op = on_device.groupby("op")["dur"].agg(["count", "sum"])
    host = ops.groupby("op")["dur"].agg(["count", "sum"])
    for op in host.index:
        if int(per_op["count"].get(op, 0)) != int(host["count"][op]):
            problems.append("%s: %d kernel events for %d cpu_ops" % (op, per_op["count"].get(op, 0), host["count"][op]))
        elif per_op["sum"][op] > host["sum"][op] + 2 * host["count"][op]:
            problems.append("%s: %.1f µs on the device, more than the host's %.1f" % (op, per_op["sum"][op],
                                                                                      host["sum"][op]))
    breakdown = analysis.get_gpu_kernel_breakdown(visualize=False)[0]
    if breakdown.empty:
        problems.append("HTA's kernel breakdown is empty")
    temporal = analysis.get_temporal_breakdown(visualize=False)
    print("HTA on the device: %d kernel events; idle %s %%" % (len(on_device), list(temporal["idle_time_pctg"])))
if ops.tid.nunique() != 1:
    problems.append("%d threads ran the nodes, want 1" % ops.tid.nunique())
written = record[-1]   # one file a cycle; HTA keeps the last of a rank's files
want_count = collections.Counter({op: v["count"] for op, v in written["ops"].items()})
want_us = collections.Counter({op: v["seconds"] * 1e6 for op, v in written["ops"].items()})
steps = [n for n in set(df.op) if n.startswith("ProfilerStep#")]
last = written["steps"]
if len(steps) != last[1] - last[0] + 1:
    problems.append("%d ProfilerStep spans, want %d (steps %d-%d)" % (len(steps), last[1] - last[0] + 1, *last))
got = ops.groupby("op")["dur"].agg(["count", "sum"])
for op in sorted(set(want_count) | set(got.index)):
    n = int(got["count"].get(op, 0))
    us = float(got["sum"].get(op, 0))
    if n != want_count[op]:
        problems.append("%s: %d runs in HTA, %d recorded" % (op, n, want_count[op]))
    elif abs(us - want_us[op]) > n * 2.0 + 0.01 * want_us[op]:
        problems.append("%s: %.1f µs in HTA, %.1f recorded" % (op, us, want_us[op]))
print("HTA: rank %s, %d ops in %d steps, %d op names agree" % (ranks, len(ops), len(steps), len(got)))
for p in problems:
    print("FAIL: " + p)
sys.exit(1 if problems else 0)
