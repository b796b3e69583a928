"""Hostile checkpoints and run folders: `trainrun resume` on a run whose newest checkpoint is
truncated, garbled, lies in its metadata, or is not a file; on a run whose recipe was edited;
on folders that are not runs. A damaged checkpoint is skipped (the run goes on from the one
before), a resume that cannot be right refuses (exit 2), and no checkpoint the resume did not
write is changed."""
import json
import os
import shutil
import struct
import subprocess
import threading

from common import Case, TINY, TRAIN_CSV

F = "checkpoints"
CASES = []
_base = {}
_lock = threading.Lock()
RUN = "runs/tiny/base"


def base_run(binary, env):
    """A 30-step run with checkpoints at 10, 20 and 30, made once, as if killed after step 20:
    step-30 removed."""
    with _lock:
        if "dir" not in _base:
            import tempfile
            d = tempfile.mkdtemp(prefix="hostile-base-")
            with open(os.path.join(d, "r.yaml"), "w") as f:
                f.write(TINY)
            with open(os.path.join(d, "train.csv"), "w") as f:
                f.write(TRAIN_CSV)
            subprocess.run([binary, "r.yaml", "train.steps=30", "train.checkpoint_every=10", "--quiet"], cwd=d,
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
            run = [p for p in os.listdir(os.path.join(d, "runs", "tiny")) if p[0].isdigit()][0]
            os.rename(os.path.join(d, "runs", "tiny", run), os.path.join(d, RUN))
            os.unlink(os.path.join(d, RUN, "checkpoints", "step-30.safetensors"))
            _base["dir"] = d
        return _base["dir"]


def with_run(change=None):
    def setup(scratch, env, binary):
        base = base_run(binary, env)
        for name in ("r.yaml", "train.csv"):
            shutil.copy(os.path.join(base, name), os.path.join(scratch, name))
        shutil.copytree(os.path.join(base, RUN), os.path.join(scratch, RUN), symlinks=True)
        if change:
            change(os.path.join(scratch, RUN))
    return setup


def ckpt(run, step):
    return os.path.join(run, "checkpoints", "step-%d.safetensors" % step)


def truncate(step, size):
    def change(run):
        with open(ckpt(run, step), "r+b") as f:
            f.truncate(size)
    return change


def garble(step, offset, data):
    def change(run):
        with open(ckpt(run, step), "r+b") as f:
            f.seek(offset)
            f.write(data)
    return change


def metadata(step, key, value):
    """Rewrites one __metadata__ entry of the checkpoint, the header's length kept valid."""
    def change(run):
        path = ckpt(run, step)
        with open(path, "rb") as f:
            blob = f.read()
        n = struct.unpack("<Q", blob[:8])[0]
        header = json.loads(blob[8:8 + n])
        header.setdefault("__metadata__", {})[key] = value
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * ((8 - len(text) % 8) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + blob[8 + n:])
    return change


def replace_with(step, kind):
    def change(run):
        path = ckpt(run, step)
        os.unlink(path)
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "dir":
            os.mkdir(path)
        elif kind == "dev-zero":
            os.symlink("/dev/zero", path)
        elif kind == "empty":
            open(path, "wb").close()
    return change


def reached(step):
    def check(scratch, res):
        return [] if os.path.exists(ckpt(os.path.join(scratch, RUN), step)) else \
            ["the resumed run did not reach step %d" % step]
    return check


def resume(name, change, rc=0, names=(), after=None, changes=None, check=None, quick=True, timeout=120):
    # What a resume may write: the checkpoints after the one it starts from, and the run's own
    # records; step-10 (and what it names in changes) must stay as it was.
    allowed = changes if changes is not None else [RUN + "/checkpoints/step-20.safetensors",
                                                   RUN + "/checkpoints/step-30.safetensors"]
    allowed = allowed + [RUN + "/" + f for f in ("run.json", "plan.json", "metrics.jsonl", "log.txt", "report.md", "report.html",
                                                 "report.json", "data-sources.json")] + ["runs/tiny/latest",
                                                                                         "runs/index.html",
                                                                                         "runs/index.md"]
    allowed += [RUN + "/" + f for f in ("events.out.tfevents",)]
    CASES.append(Case(F, name, ["TR", "resume", RUN, "--quiet"], rc, names=names, setup=with_run(change),
                      after=after, changes=tuple(allowed) + (RUN + "/events",), check=check, quick=quick,
                      timeout=timeout))


resume("intact", None, check=reached(30))
resume("truncated-to-0", truncate(20, 0), check=reached(30))
resume("truncated-header", truncate(20, 5), check=reached(30))
resume("truncated-data", truncate(20, 2000), check=reached(30))
resume("header-garbled", garble(20, 8, b"\xff\xfe{{{{"), check=reached(30))
resume("header-length-huge", garble(20, 0, struct.pack("<Q", 1 << 62)), check=reached(30))
resume("data-bit-flip", garble(20, 4000, b"\x7f\x7f\x7f\x7f"), check=reached(30))
resume("empty-file", replace_with(20, "empty"), check=reached(30))
# A folder where step-20 goes: read as damaged, then not written over (exit 1, naming it).
resume("directory", replace_with(20, "dir"), rc=1, names=("step-20.safetensors",))
resume("fifo", replace_with(20, "fifo"), check=reached(30), after="inputs", timeout=60)
resume("dev-zero", replace_with(20, "dev-zero"), check=reached(30), after="ckpt", timeout=60)
for value in (99999, "abc", -5):
    resume("metadata-step-%s" % value, metadata(20, "trainrun.step", value if isinstance(value, str) else str(value)),
           check=reached(30), after="ckpt")
resume("metadata-stopped", metadata(20, "trainrun.stopped", "1"), check=reached(30), after="ckpt")
resume("metadata-unknown-key", metadata(20, "x.y", "z"), check=reached(30), after="ckpt")


def edit_recipe(run):
    with open(os.path.join(run, "recipe.yaml")) as f:
        text = f.read()
    with open(os.path.join(run, "recipe.yaml"), "w") as f:
        f.write(text.replace("hidden: 8", "hidden: 16"))


resume("recipe-edited", edit_recipe, rc=2, names=("model.hidden",), after="ckpt", changes=[RUN + "/recipe.yaml"])
resume("recipe-removed", lambda run: os.unlink(os.path.join(run, "recipe.yaml")), rc=2, names=(RUN,), changes=[])
resume("recipe-broken", lambda run: open(os.path.join(run, "recipe.yaml"), "a").write("model: [\n"), rc=2,
       names=("recipe.yaml",), changes=[])
resume("plan-garbled", lambda run: open(os.path.join(run, "plan.json"), "w").write("{not json"), rc=2,
       names=("plan.json",), changes=[])
resume("plan-not-a-plan", lambda run: open(os.path.join(run, "plan.json"), "w").write('{"precision": 7}'), rc=2,
       names=("plan.json",), changes=[])
resume("run-json-garbled", lambda run: open(os.path.join(run, "run.json"), "w").write("[[["), rc=(0, 2),
       check=None, changes=None)
for name, path in (("not-a-folder", "r.yaml"), ("missing", "nosuch/run"), ("empty-folder", "emptydir"),
                   ("dev-null", "/dev/null")):
    CASES.append(Case(F, "resume-" + name, ["TR", "resume", path], 2, names=(path,),
                      files={"r.yaml": TINY, "emptydir": ("dir",)}))
# Many checkpoints: every entry of the folder is read, not the first 4,096.
def many(run):
    for step in range(1, 5002):
        if step % 10:
            os.link(ckpt(run, 10), ckpt(run, step)) if step < 20 else None
    for step in range(21, 5002):
        open(ckpt(run, step), "wb").close()   # damaged: skipped, never the newest good one


resume("5001-entries", many, check=reached(30), after="ckpt", quick=False, changes=None, timeout=300)
