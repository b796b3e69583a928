"""Reads trainrun's event files with TensorBoard's own loading code (the plugin event
accumulator and multiplexer that `tensorboard --load_fast=false` serves from) and checks
them against what the run wrote elsewhere. Used by tests/tensorboard.sh:

  tensorboard_check.py full RUN_DIR HISTOGRAMS_EVERY RESOLVED_JSON
                                                       scalars = metrics.jsonl exactly, the text,
                                                       hparams start/end (against `trainrun check
                                                       --json`), histograms against the final
                                                       checkpoint, the graph
  tensorboard_check.py cut RUN_DIR                     every truncation of the event file loads
                                                       the records before the cut, no error
  tensorboard_check.py prefix RUN_DIR OTHER_RUN_DIR    a killed run loads, each deterministic curve
                                                       the start of the other (uninterrupted) run's
  tensorboard_check.py same RUN_DIR OTHER_RUN_DIR      one continuous curve per tag, equal to
                                                       the other run's (a resumed run against an
                                                       uninterrupted one)
  tensorboard_check.py once RUN_DIR [full]             after kills and resumes: no (tag, step) twice
                                                       in the event files' raw records, nor in
                                                       metrics.jsonl; with full, the first event
                                                       file holds the recipe, plan, HParams, graph
Exits non-zero with a message on the first mismatch."""
import glob
import json
import math
import os
import shutil
import struct
import sys
import tempfile

import numpy as np
from tensorboard.backend.event_processing import plugin_event_accumulator as pea
from tensorboard.backend.event_processing import plugin_event_multiplexer as pem
from tensorboard.plugins.hparams import plugin_data_pb2
from tensorboard.util import tensor_util

ALL = {"tensors": 0, "graph": 0, "scalars": 0, "histograms": 0}   # 0: keep every record


def load(run_dir):
    acc = pea.EventAccumulator(run_dir, size_guidance=ALL, tensor_size_guidance=ALL)
    acc.Reload()
    return acc


def scalars(acc):
    """{tag: [(step, value)]} for every tag of the scalars plugin."""
    tags = acc.PluginTagToContent("scalars") if "scalars" in acc.ActivePlugins() else {}
    return {tag: [(e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in acc.Tensors(tag)]
            for tag in tags}


def expect(cond, message):
    if not cond:
        sys.exit("FAIL: " + message)


def metrics_lines(run_dir):
    return [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]


def checkpoint_tensors(path):
    """A safetensors file's tensors as float32 arrays (the format is 8 bytes, JSON, data)."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype="<f4")
    return out


def full(run_dir, histograms_every, resolved_json):
    acc = load(run_dir)
    got = scalars(acc)
    # Every metrics.jsonl value is a scalar at its step, as a float32, and nothing else is.
    want = {}
    for line in metrics_lines(run_dir):
        for tag, value in line.items():
            if tag != "step":
                want.setdefault(tag, []).append((line["step"], float(np.float32(value))))
    expect(set(got) == set(want), f"scalar tags {sorted(got)} != metrics.jsonl's {sorted(want)}")
    for tag in want:
        expect(got[tag] == want[tag], f"{tag}: {got[tag][:3]}… != {want[tag][:3]}…")
    for tag in ("train/loss", "train/lr", "train/grad_norm", "train/samples_per_s", "memory/allocated",
                "memory/peak", "memory/predicted_peak", "data/wait_fraction", "eval/loss", "eval/accuracy"):
        expect(tag in got, f"no scalar {tag}")

    # Text: the resolved recipe and the plan, rank-0 strings.
    text = acc.PluginTagToContent("text")
    expect(set(text) >= {"recipe", "plan"}, f"text tags {sorted(text)}")
    recipe = tensor_util.make_ndarray(acc.Tensors("recipe")[0].tensor_proto).item().decode()
    name = open(os.path.join(run_dir, "recipe.yaml")).read().split("name: ")[1].split()[0]
    expect(f"name: {name}" in recipe, "the recipe text does not hold the recipe")
    plan = tensor_util.make_ndarray(acc.Tensors("plan")[0].tensor_proto).item().decode()
    expect("predicted peak" in plan, "the plan text has no predicted peak")

    # HParams: one session, started with the recipe's values and ended as a success.
    hp = acc.PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(hp["_hparams_/session_start_info"]).session_start_info
    end = plugin_data_pb2.HParamsPluginData.FromString(hp["_hparams_/session_end_info"]).session_end_info
    resolved = json.load(open(resolved_json))["recipe"]
    plan = json.load(open(os.path.join(run_dir, "plan.json")))
    ckpt = plan["checkpointing"]
    chosen = {"plan.precision": plan["precision"],
              "plan.checkpointing": ckpt["mode"] if ckpt["mode"] != "full" else f"full {ckpt['blocks']}",
              "plan.batching": "dynamic" if plan["dynamic_batching"] else "fixed",
              "plan.micro_batch": "/".join(str(b["rows"]) for b in plan["micro_batch"]) if plan["dynamic_batching"]
              else float(plan["micro"]),
              "plan.accumulation": "by length" if plan["dynamic_batching"] else float(plan["accumulation"])}
    for key, value in start.hparams.items():
        kind = value.WhichOneof("kind")
        shown = {"number_value": value.number_value, "string_value": value.string_value,
                 "bool_value": value.bool_value}[kind]
        expect(shown != "auto", f"hparam {key} is 'auto', not what the planner chose")
        if key.startswith("plan."):   # what the planner chose, as plan.json says
            expect(shown == chosen.get(key), f"hparam {key}: {shown!r} != plan.json's {chosen.get(key)!r}")
            continue
        at = resolved
        for part in key.split("."):
            at = at[part]
        kind = value.WhichOneof("kind")
        shown = {"number_value": value.number_value, "string_value": value.string_value,
                 "bool_value": value.bool_value}[kind]
        if at is None or isinstance(at, (dict, list)):
            at = json.dumps(at, separators=(",", ":")) if at is not None else "null"
        expect(shown == at, f"hparam {key}: {shown!r} != the recipe's {at!r}")
    expect({"train.batch_size", "train.optimizer.lr", "model.arch"} | set(chosen) <= set(start.hparams),
           f"hparams missing: {sorted({'train.batch_size', 'train.optimizer.lr', 'model.arch'} | set(chosen) - set(start.hparams))}")
    expect(end.status == 1, f"session end status {end.status}, expected SUCCESS (1)")

    # Histograms: every HISTOGRAMS_EVERY steps, each parameter's weights and gradient; the
    # last weights histogram spans the final checkpoint's values and counts them all.
    hist = acc.PluginTagToContent("histograms") if histograms_every else {}
    final = max(glob.glob(os.path.join(run_dir, "checkpoints", "step-*.safetensors")),
                key=lambda p: int(p.split("step-")[1].split(".")[0]))
    weights = {k: v for k, v in checkpoint_tensors(final).items()
               if not k.startswith("optimizer.") and ("weight" in k or "bias" in k)}
    last_step = int(final.split("step-")[1].split(".")[0])
    for name, values in weights.items():
        if "running_" in name:
            continue
        for kind in ("weights", "grads"):
            tag = f"{kind}/{name}"
            expect(tag in hist, f"no histogram {tag}")
            steps = [e.step for e in acc.Tensors(tag)]
            expect(steps == list(range(histograms_every, last_step + 1, histograms_every)),
                   f"{tag} at steps {steps[:4]}…")
        rows = tensor_util.make_ndarray(acc.Tensors(f"weights/{name}")[-1].tensor_proto)
        if last_step % histograms_every == 0:
            expect(rows[:, 2].sum() == values.size, f"weights/{name}: counts {rows[:, 2].sum()} != {values.size}")
            lo, hi = float(values.min()), float(values.max())
            if lo < hi:
                expect(rows[0, 0] == lo and rows[-1, 1] == hi, f"weights/{name}: [{rows[0, 0]}, {rows[-1, 1]}] "
                       f"!= the checkpoint's [{lo}, {hi}]")

    # The graph: every input names a node, the forward ops are there, shapes on the edges.
    graph = acc.Graph()
    names = {n.name for n in graph.node}
    for node in graph.node:
        for src in node.input:
            expect(src.split(":")[0] in names, f"{node.name}: input {src} is no node")
        expect("_output_shapes" in node.attr, f"{node.name} has no _output_shapes")
    ops = {n.op for n in graph.node}
    expect({"Placeholder", "Parameter", "cross_entropy"} <= ops, f"graph ops {sorted(ops)}")
    # The backward is there under gradients/, the loss's scale feeds it, and the whole program is
    # one connected graph: no node (loss/scale was one) stands alone.
    backward = [n for n in graph.node if n.name.startswith("gradients/")]
    expect(backward and all(n.op.endswith("_bwd") or n.op in ops for n in backward), "no backward under gradients/")
    expect(not any(n.op.endswith("_bwd") for n in graph.node if not n.name.startswith("gradients/")),
           "a backward op outside gradients/")
    expect(any("loss/scale" in n.input for n in backward), "loss/scale feeds no backward node")
    link = {n.name: n.name for n in graph.node}
    def root(x):
        while link[x] != x:
            link[x] = link[link[x]]
            x = link[x]
        return x
    for node in graph.node:
        for src in node.input:
            link[root(src.split(":")[0])] = root(node.name)
    parts = {root(n) for n in link}
    expect(len(parts) == 1, f"the graph falls into {len(parts)} parts, e.g. "
           f"{sorted(n for n in link if root(n) != root(graph.node[0].name))[:3]}")
    print(f"{run_dir}: {sum(len(v) for v in got.values())} scalars under {len(got)} tags, "
          f"{len(text)} texts, {len(hp)} hparams records, {len(hist)} histogram tags, {len(graph.node)} graph nodes")


def cut(run_dir):
    """Truncate the event file at many byte offsets: each prefix loads without error and shows
    exactly the records that end before the cut, as a crash mid-write would leave it."""
    files = sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*")))
    expect(len(files) == 1, f"{len(files)} event files")
    data = open(files[0], "rb").read()
    ends, at = [], 0   # where each record ends
    while at < len(data):
        n = struct.unpack("<Q", data[at:at + 8])[0]
        at += 8 + 4 + n + 4
        ends.append(at)
    expect(at == len(data), "the records do not tile the file")
    full_scalars = scalars(load(run_dir))
    with tempfile.TemporaryDirectory() as tmp:
        offsets = sorted(set([1, 8, 12, len(data) - 1] + [e - 3 for e in ends[:: max(1, len(ends) // 25)]]))
        for offset in offsets:
            shutil.rmtree(os.path.join(tmp, "run"), ignore_errors=True)
            os.mkdir(os.path.join(tmp, "run"))
            with open(os.path.join(tmp, "run", os.path.basename(files[0])), "wb") as f:
                f.write(data[:offset])
            got = scalars(load(os.path.join(tmp, "run")))
            for tag, series in got.items():
                expect(series == full_scalars[tag][:len(series)], f"cut at {offset}: {tag} is not a prefix")
            complete = sum(1 for e in ends if e <= offset)
            shown = sum(len(s) for s in got.values())
            expect(shown <= complete, f"cut at {offset}: {shown} scalars from {complete} whole records")
    print(f"{files[0]}: {len(ends)} records, {len(offsets)} truncations all load")


DETERMINISTIC = ("train/loss", "train/lr", "train/grad_norm", "eval/", "test/")


def prefix(run_dir, other_dir):
    """A run killed mid-way: its file loads without error, and each deterministic curve is the
    beginning of the uninterrupted run's."""
    got, want = scalars(load(run_dir)), scalars(load(other_dir))
    expect(got.get("train/loss"), "the killed run shows no train/loss")
    for tag, series in got.items():
        if tag.startswith(DETERMINISTIC):
            expect(series == want[tag][:len(series)], f"{tag}: {series[-2:]} is not where the full run was")
    print(f"{run_dir}: killed at step {got['train/loss'][-1][0]}, {len(got)} tags load")


def same(run_dir, other_dir):
    """A resumed run: several event files, one run to TensorBoard, each tag's steps strictly
    increasing and its values equal to the uninterrupted run's."""
    mux = pem.EventMultiplexer(size_guidance=ALL, tensor_size_guidance=ALL)
    mux.AddRunsFromDirectory(run_dir)
    mux.Reload()
    runs = mux.Runs()
    expect(len(runs) == 1, f"TensorBoard sees runs {sorted(runs)}")
    acc = mux.GetAccumulator(next(iter(runs)))
    files = glob.glob(os.path.join(run_dir, "events.out.tfevents.*"))
    expect(len(files) >= 2, f"{len(files)} event files: the resume did not open a new one")
    got, want = scalars(acc), scalars(load(other_dir))
    expect(set(got) == set(want), f"tags {sorted(set(got) ^ set(want))} differ")
    for tag, series in got.items():
        steps = [s for s, _ in series]
        expect(steps == sorted(set(steps)), f"{tag}: steps not one increasing curve: {steps}")
        if tag.startswith(DETERMINISTIC):
            expect(series == want[tag], f"{tag}: {series} != uninterrupted {want[tag]}")
        else:   # timings and memory differ between runs; the steps may not
            expect(steps == [s for s, _ in want[tag]], f"{tag}: steps {steps} != {[s for s, _ in want[tag]]}")
    print(f"{run_dir}: {len(files)} event files, {len(got)} tags, one continuous curve each")


def once(run_dir, full=None):
    """Every record of every event file, as written (no TensorBoard purge applied), and every
    line of metrics.jsonl: each (tag, step) at most once."""
    from tensorboard.backend.event_processing import event_file_loader
    files = sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*")))
    expect(files, "no event file")
    seen, twice, first = set(), [], set()
    for n, path in enumerate(files):
        for event in event_file_loader.EventFileLoader(path).Load():
            if event.HasField("graph_def") and n == 0:
                first.add("graph")
            for value in event.summary.value:
                if n == 0:
                    first.add(value.tag)
                if event.step == 0:   # the run's texts and HParams: once a session
                    continue
                key = (value.tag, event.step)
                if key in seen:
                    twice.append(key)
                seen.add(key)
    expect(not twice, f"event records logged twice: {sorted(set(twice))[:10]} ({len(twice)} in all)")
    lines, again = set(), []
    for line in metrics_lines(run_dir):
        for tag in line:
            if tag != "step":
                key = (tag, line["step"])
                if key in lines:
                    again.append(key)
                lines.add(key)
    expect(not again, f"metrics.jsonl: logged twice: {sorted(set(again))[:10]} ({len(again)} in all)")
    if full:
        want = {"recipe", "plan", "_hparams_/session_start_info", "graph"}
        expect(want <= first, f"the first event file lacks {sorted(want - first)}")
    print(f"{run_dir}: {len(files)} event files, {len(seen)} (tag, step) records, "
          f"{len(lines)} in metrics.jsonl, each once")


if __name__ == "__main__":
    {"full": lambda a: full(a[0], int(a[1]), a[2]), "cut": lambda a: cut(a[0]),
     "prefix": lambda a: prefix(a[0], a[1]), "same": lambda a: same(a[0], a[1]),
     "once": lambda a: once(*a)}[sys.argv[1]](sys.argv[2:])
