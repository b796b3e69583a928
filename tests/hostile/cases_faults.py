"""Hostile faults: output that cannot be written (stdout a full device), files that may not
grow (RLIMIT_FSIZE), too few file descriptors, a report.dir that is a file. Each ends with the
documented status (1 for a system failure) naming what failed, and leaves no half-written
file; a run that could not start leaves nothing that looks like a run."""
from common import Case, TINY, TINY_FILES

F = "faults"
CASES = []


def fault(name, argv, rc, names=(), files=None, shell=None, after=None, changes=(), quick=True, timeout=120,
          absent=()):
    fs = dict(TINY_FILES)
    fs.update(files or {})
    if shell:
        argv = ["sh", "-c", shell + ' "$0" "$@"'] + argv
    CASES.append(Case(F, name, argv, rc, names=names, files=fs, after=after, changes=changes, quick=quick,
                      timeout=timeout, absent=absent))


for sub in (["check", "r.yaml"], ["plan", "r.yaml"], ["plan", "r.yaml", "--json"], ["check", "r.yaml", "--json"],
            ["--help"], ["--version"]):
    fault("stdout-full/" + "-".join(a.strip("-") for a in sub if a != "r.yaml"), ["TR"] + sub, 1,
          shell="exec >/dev/full;")
fault("stdout-closed/check", ["TR", "check", "r.yaml"], 1, shell="exec >&-;")
fault("fsize-0/run", ["TR", "r.yaml", "--quiet"], 1, shell="ulimit -f 0;", changes=("runs",), after="ckpt")
fault("fsize-1/run", ["TR", "r.yaml", "--quiet"], 1, shell="ulimit -f 1;", changes=("runs",), after="ckpt")
fault("nofile-6/run", ["TR", "r.yaml", "--quiet"], (0, 1), shell="ulimit -n 6;", changes=("runs",))
fault("nofile-8/plan", ["TR", "plan", "r.yaml"], (0, 1), shell="ulimit -n 8;")
fault("report-dir-is-file", ["TR", "r.yaml", "--quiet", "report.dir=afile"], 1, names=("afile",),
      files={"afile": "not a folder\n"})
fault("report-dir-in-file", ["TR", "r.yaml", "--quiet", "report.dir=afile/runs"], 1, names=("afile",),
      files={"afile": "not a folder\n"})
fault("report-dir-dev-null", ["TR", "r.yaml", "--quiet", "report.dir=/dev/null"], 1, names=("/dev/null",))
fault("calibrate-unwritable-cache", ["TR", "calibrate", "--force"], 1, names=("cache",),
      shell="rm -rf .cache/trainrun && : > .cache/trainrun;", changes=(".cache",), after="docs", timeout=180)
fault("cpu-seconds-1/run", ["TR", "r.yaml", "--quiet", "train.steps=100000"], (1, 130, 137, 152),
      shell="ulimit -t 1;", changes=("runs",), quick=False)
