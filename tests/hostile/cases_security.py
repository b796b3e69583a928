"""Hostile inputs aimed at the user: terminal escapes in recipes, overrides and data echoed
back (they must come out escaped), run names that climb out of the runs folder, data set
names that do, prepare scripts from places they may not come from, and secrets in
notification URLs (printed as ***)."""
from common import Case, TINY, TINY_FILES, TRAIN_CSV, tiny_recipe

F = "security"
CASES = []
ESC = "\x1b]0;pwned\x07\x1b[2J"


def case(name, argv, rc, names=(), files=None, env=None, after=None, not_in=(), controls=False, changes=(),
         timeout=60, absent=("runs",)):
    fs = dict(TINY_FILES)
    fs.update(files or {})
    CASES.append(Case(F, name, argv, rc, names=names, files=fs, env=env, after=after, not_in=not_in,
                      controls=controls, changes=changes, timeout=timeout, absent=absent))


# Terminal escapes are never echoed raw.
case("escape/recipe-key", ["TR", "check", "r.yaml"], 2, names=("r.yaml",), files={"r.yaml": TINY + "x%s: 1\n" % ESC},
     controls=True, after="inputs")
case("escape/recipe-value", ["TR", "check", "r.yaml"], 2, names=("r.yaml",),
     files={"r.yaml": TINY.replace("arch: mlp", 'arch: "m%s"' % ESC.replace("\x1b", "\\e").replace("\x07", "\\a"))},
     controls=True, after="inputs")
case("escape/override", ["TR", "check", "r.yaml", "model.arch=" + ESC], 2, names=("model.arch",), controls=True,
     after="inputs")
case("escape/override-key", ["TR", "check", "r.yaml", ESC + "=1"], 2, controls=True, after="inputs")
case("escape/csv-cell", ["TR", "plan", "r.yaml"], 4, names=("train.csv:3:",),
     files={"train.csv": "\n".join(TRAIN_CSV.splitlines()[:2] + ["1.0,%s,3.0,4.0,1" % ESC]) + "\n"}, controls=True,
     after="inputs")
# YAML itself refuses the control character in the override: exit 2, the override escaped.
case("escape/file-name", ["TR", "plan", "r.yaml", "data.train.source=x%s.csv" % ESC], 2, controls=True,
     after="inputs")
case("escape/dataset-yaml", ["TR", "plan", "r.yaml", "~data.train", "data.dataset=mine"], 4, controls=True,
     files={"ds/mine/dataset.yaml": "name: mine\nformat: csv\n%s: 1\ntrain: {source: a.csv}\n" % ESC},
     env={"TRAINRUN_DATASETS": "$SCRATCH/ds"}, after="inputs")
case("escape/recipe-name-run", ["TR", "r.yaml", "--quiet", "name=a" + ESC], (0, 2), controls=True, after="inputs",
     changes=("runs",), absent=())
# Names that would climb out of their folders.
for value in ("../../evil", "/etc", "..", "a/../../b", ".hidden"):
    case("dataset-name/" + value.replace("/", "_"), ["TR", "check", "r.yaml", "~data.train", "data.dataset=" + value],
         2, names=(value,), after="csv")
for value in ("../escaped", "/tmp/abs", "..", "a/b"):
    case("run-name/" + value.replace("/", "_"), ["TR", "r.yaml", "--quiet", "name=" + value], 2, names=("name",),
         timeout=90)
# Prepare scripts only from a definition on this machine, never from the cache or a URL.
case("prepare/url", ["TR", "plan", "r.yaml", "~data.train", "data.dataset=mine"], 4, names=("prepare",),
     files={"ds/mine/dataset.yaml": "name: mine\nformat: csv\nprepare: https://example.org/p.sh\ntrain: {source: a.csv}\n"},
     env={"TRAINRUN_DATASETS": "$SCRATCH/ds"})
case("prepare/in-cache", ["TR", "plan", "r.yaml", "~data.train", "data.dataset=mine"], 4, names=("prepare",),
     files={".cache/trainrun/mine/dataset.yaml": "name: mine\nformat: csv\nprepare: p.sh\ntrain: {source: a.csv}\n",
            ".cache/trainrun/mine/p.sh": "#!/bin/sh\ntouch PWNED\n"},
     env={"TRAINRUN_DATASETS": "$SCRATCH/.cache/trainrun"})
case("prepare/absolute-elsewhere", ["TR", "plan", "r.yaml", "~data.train", "data.dataset=mine"], (2, 4),
     names=("prepare",), files={"ds/mine/dataset.yaml": "name: mine\nformat: csv\nprepare: /bin/true\n"
                                                         "train: {source: a.csv}\n"},
     env={"TRAINRUN_DATASETS": "$SCRATCH/ds"}, absent=("runs", "PWNED"))
# Secrets in notification URLs and headers are not printed.
case("notify/userinfo", ["TR", "plan", "r.yaml", "report.notify.url=https://u:hunter2@127.0.0.1:9/hook"], 0,
     not_in=("hunter2",))
case("notify/token", ["TR", "plan", "r.yaml", "report.notify.url=https://127.0.0.1:9/hook?token=s3cr3t"], 0,
     not_in=("s3cr3t",))
case("notify/bad-scheme", ["TR", "check", "r.yaml", "report.notify.url=file:///etc/passwd"], 2,
     names=("report.notify.url",))
# Conf files that are not conf files at all.
case("conf/etc-passwd", ["TR", "check", "r.yaml"], 2, names=("/etc/passwd",), env={"TRAINRUN_CONF": "/etc/passwd"})
case("conf/binary", ["TR", "check", "r.yaml"], 2, names=("bin.conf",), env={"TRAINRUN_CONF": "$SCRATCH/bin.conf"},
     files={"bin.conf": bytes(range(256)) * 4})
case("recipe/binary", ["TR", "check", "bin.yaml"], 2, names=("bin.yaml",), files={"bin.yaml": bytes(range(256)) * 4})
case("recipe/proc-self-mem", ["TR", "check", "/proc/self/mem"], 2, names=("/proc/self/mem",), timeout=20)
