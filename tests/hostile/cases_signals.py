"""Hostile signals: SIGINT, SIGTERM and SIGHUP sent to a run in training, to `plan` and to a
run stuck in a download. A run ends the documented way, exit 130 after checkpointing, with
run.json naming the signal; nothing is left half-written."""
import glob
import json
import os
import signal

from common import Case, TINY_FILES

F = "signals"
CASES = []


def run_json_names(sig):
    def check(scratch, res):
        found = glob.glob(os.path.join(scratch, "runs", "tiny", "2*", "run.json"))
        if not found:
            return ["no run.json"]
        text = open(found[0]).read()
        problems = []
        try:
            doc = json.loads(text)
        except ValueError:
            return ["run.json is not JSON"]
        if doc.get("exit_code") != 130:
            problems.append("run.json says exit_code %r" % doc.get("exit_code"))
        if signal.Signals(sig).name not in text and '"signal": %d' % sig not in text:
            problems.append("run.json does not name %s" % signal.Signals(sig).name)
        if not glob.glob(os.path.join(scratch, "runs", "tiny", "2*", "checkpoints", "step-*.safetensors")):
            problems.append("no checkpoint written")
        return problems
    return check


LONG = ["TR", "r.yaml", "--quiet", "train.steps=200000", "train.checkpoint_every=100000"]
# run.json naming the signal comes with the signals branch, as does SIGHUP's checkpoint.
for sig, after in ((signal.SIGINT, "signals"), (signal.SIGTERM, "signals"), (signal.SIGHUP, "signals")):
    for when in (4, 8):
        CASES.append(Case(F, "train/%s-after-%ds" % (signal.Signals(sig).name, when), LONG, 130,
                          files=dict(TINY_FILES), signal=(sig, when), timeout=90, changes=("runs",),
                          check=run_json_names(sig), after=after, quick=when == 4))
# During the final evaluation of a big test split: still 130 with a checkpoint.
big = dict(TINY_FILES)
big["test.csv"] = "".join(TINY_FILES["train.csv"] for _ in range(3000))
# A wide model, so that the evaluation of its 120,000 rows outlasts the signal's 6 s on any host.
CASES.append(Case(F, "evaluate/SIGTERM", ["TR", "r.yaml", "--quiet", "data.test.source=test.csv", "train.steps=5",
                                          "model.hidden=1024", "model.layers=4"],
                  130, files=big, signal=(signal.SIGTERM, 6), timeout=120, changes=("runs",), after="signals",
                  check=run_json_names(signal.SIGTERM), quick=False))
# During a download that stalls.
stall = dict(TINY_FILES)
stall["ds/web/dataset.yaml"] = "name: web\nformat: csv\nheader: none\nlabel: last\ntrain: {source: '$HTTP/stall'}\n"
stall["r.yaml"] = TINY_FILES["r.yaml"].replace("  train: {source: train.csv}\n", "  dataset: web\n")
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    CASES.append(Case(F, "download/" + signal.Signals(sig).name, ["TR", "r.yaml", "--quiet"], 130, files=stall,
                      env={"TRAINRUN_DATASETS": "$SCRATCH/ds", "TRAINRUN_FETCH_TIMEOUT": "30"},
                      signal=(sig, 3), timeout=30, after="signals", changes=(".cache", "runs")))
# plan and check end at once on a signal (no checkpoint to write): 130, or killed by it.
for sig in (signal.SIGINT, signal.SIGTERM):
    CASES.append(Case(F, "plan/" + signal.Signals(sig).name, ["TR", "plan", "r.yaml", "train.batch_size=1"],
                      (0, 130, -sig), files=dict(TINY_FILES), signal=(sig, 0.5), timeout=30))
