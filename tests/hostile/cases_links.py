"""Hostile links: symbolic links where trainrun reads (followed when they lead to a regular
file, refused when they lead to a device, a FIFO or round in a loop) and where it writes (the
lock, the run folder's files, the runs folder's index): a link there is refused with exit 1
naming the path, and its target is never touched."""
import os

from common import Case, TINY, TRAIN_CSV, TINY_FILES

F = "links"
CASES = []
VICTIM = "victim.txt"
VICTIM_TEXT = "precious data that must survive\n"

reads = {
    "recipe-to-file": ({"real.yaml": TINY, "l.yaml": ("link", "real.yaml")}, ["TR", "check", "l.yaml"], 0, []),
    "recipe-loop": ({"a.yaml": ("link", "b.yaml"), "b.yaml": ("link", "a.yaml")}, ["TR", "check", "a.yaml"], 2,
                    ["a.yaml"]),
    "recipe-to-dir": ({"d": ("dir",), "l.yaml": ("link", "d")}, ["TR", "check", "l.yaml"], 2, ["l.yaml"]),
    "recipe-to-dev-zero": ({"l.yaml": ("link", "/dev/zero")}, ["TR", "check", "l.yaml"], 2, ["l.yaml"]),
    "recipe-to-fifo": ({"p": ("fifo",), "l.yaml": ("link", "p")}, ["TR", "check", "l.yaml"], 2, ["l.yaml"]),
    "recipe-dangling": ({"l.yaml": ("link", "nowhere.yaml")}, ["TR", "check", "l.yaml"], 2, ["l.yaml"]),
    "extends-loop": ({"r.yaml": "extends: l.yaml\n", "l.yaml": ("link", "l.yaml")}, ["TR", "check", "r.yaml"], 2,
                     ["l.yaml"]),
    "extends-to-dev-urandom": ({"r.yaml": "extends: l.yaml\n", "l.yaml": ("link", "/dev/urandom")},
                               ["TR", "check", "r.yaml"], 2, ["l.yaml"]),
    "data-to-file": ({"real.csv": TRAIN_CSV, "l.csv": ("link", "real.csv")},
                     ["TR", "plan", "r.yaml", "data.train.source=l.csv"], 0, []),
    "data-loop": ({"l.csv": ("link", "l.csv")}, ["TR", "plan", "r.yaml", "data.train.source=l.csv"], 4, ["l.csv"]),
    "data-to-dev-urandom": ({"l.csv": ("link", "/dev/urandom")}, ["TR", "plan", "r.yaml", "data.train.source=l.csv"],
                            4, ["l.csv"]),
    "data-to-proc": ({"l.csv": ("link", "/proc/self/status")}, ["TR", "plan", "r.yaml", "data.train.source=l.csv"],
                     4, ["l.csv"]),
    "conf-to-dev-zero": ({"l.conf": ("link", "/dev/zero")}, ["TR", "check", "r.yaml"], 2, ["l.conf"]),
}
after = {"recipe-to-dev-zero": "inputs", "recipe-to-fifo": "inputs", "extends-to-dev-urandom": "inputs",
         "data-to-dev-urandom": "inputs", "data-to-proc": "inputs", "conf-to-dev-zero": "inputs"}
for name, (files, argv, rc, needles) in reads.items():
    fs = dict(TINY_FILES)
    fs.update(files)
    env = {"TRAINRUN_CONF": "$SCRATCH/l.conf"} if name.startswith("conf") else None
    CASES.append(Case(F, "read/" + name, argv, rc, names=needles, files=fs, env=env, timeout=20,
                      after=after.get(name), absent=("runs",)))

# Where a run writes: a link planted there, pointing at a file that must survive.
writes = {
    "lock": "runs/tiny/.lock",
    "latest": "runs/tiny/latest",
    "index-html": "runs/index.html",
    "index-md": "runs/index.md",
}
for name, path in writes.items():
    fs = dict(TINY_FILES)
    fs.update({VICTIM: VICTIM_TEXT, path: ("link", "../" * path.count("/") + VICTIM)})
    # The lock is opened in place: a link there must be refused. latest is trainrun's own link,
    # and the indexes are written whole and renamed: the link itself may be replaced; the victim
    # it points at never changes.
    if name == "lock":
        CASES.append(Case(F, "write/" + name, ["TR", "r.yaml", "--quiet"], 1, names=(path,), files=fs, timeout=120,
                          after="inputs"))
    else:
        CASES.append(Case(F, "write/" + name, ["TR", "r.yaml", "--quiet"], (0, 1), files=fs, timeout=120,
                          changes=("runs",)))
# The runs folder itself a link to elsewhere: followed (a user's choice), nothing outside touched.
fs = dict(TINY_FILES)
fs.update({VICTIM: VICTIM_TEXT, "elsewhere": ("dir",), "runs": ("link", "elsewhere")})
CASES.append(Case(F, "write/runs-folder-link", ["TR", "r.yaml", "--quiet"], 0, files=fs, timeout=120,
                  changes=("elsewhere",)))
