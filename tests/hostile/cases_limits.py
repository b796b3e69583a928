"""Hostile limits: a memory budget nothing fits (exit 3, naming the smallest budget that
would), address-space and data limits (RLIMIT_AS, RLIMIT_DATA: refused at start with exit 3
naming the smallest limit that works, never a spin), budget.time (exit 8 after checkpointing,
evaluating and reporting), a stack or process limit."""
import glob
import json
import os

from common import Case, TINY_FILES

F = "limits"
CASES = []


def limit(name, argv, rc, names=(), shell=None, after=None, timeout=60, quick=True, check=None, changes=("runs",)):
    if shell:
        argv = ["sh", "-c", shell + ' "$0" "$@"'] + argv
    CASES.append(Case(F, name, argv, rc, names=names, files=dict(TINY_FILES), after=after, timeout=timeout,
                      quick=quick, check=check, changes=changes))


for budget in ("1MiB", "16MiB", "24MiB", "32MiB"):   # the tiny recipe's smallest footprint: 34.65 MiB
    limit("budget/plan-" + budget, ["TR", "plan", "r.yaml", "budget.memory=" + budget], 3, names=("budget.memory",),
          changes=())
    limit("budget/run-" + budget, ["TR", "r.yaml", "--quiet", "budget.memory=" + budget], 3,
          names=("budget.memory",), changes=(), quick=budget == "16MiB")
limit("budget/huge-model", ["TR", "plan", "r.yaml", "model.hidden=1000000", "model.layers=64"], 3,
      names=("budget.memory",), changes=())
for mb in (200, 400):
    for sub in (["plan", "r.yaml"], ["r.yaml", "--quiet"]):
        limit("rlimit-as-%dMB/%s" % (mb, sub[0]), ["TR"] + sub, 3, names=("RLIMIT_AS",),
              shell="ulimit -v %d;" % (mb * 1000), after="limits", timeout=30)
limit("rlimit-data-200MB/plan", ["TR", "plan", "r.yaml"], 3, names=("RLIMIT_DATA",), shell="ulimit -d 200000;",
      after="limits", timeout=30)
limit("rlimit-as-8GB/plan", ["TR", "plan", "r.yaml"], 0, shell="ulimit -v 8000000;", changes=())


def stopped_by_clock(scratch, res):
    found = glob.glob(os.path.join(scratch, "runs", "tiny", "2*", "run.json"))
    if not found:
        return ["no run.json"]
    doc = json.load(open(found[0]))
    problems = [] if doc.get("exit_code") == 8 else ["run.json says exit_code %r" % doc.get("exit_code")]
    if not glob.glob(os.path.join(os.path.dirname(found[0]), "checkpoints", "step-*.safetensors")):
        problems.append("no checkpoint")
    if not os.path.exists(os.path.join(os.path.dirname(found[0]), "report.md")):
        problems.append("no report")
    return problems


limit("budget-time/1s", ["TR", "r.yaml", "--quiet", "train.steps=1000000", "budget.time=1s"], 8,
      after="signals", timeout=90, check=stopped_by_clock)
limit("budget-time/3s", ["TR", "r.yaml", "--quiet", "train.steps=1000000", "budget.time=3s"], 8,
      after="signals", timeout=90, check=stopped_by_clock, quick=False)
limit("budget-time/plenty", ["TR", "r.yaml", "--quiet", "budget.time=1h"], 0, timeout=90)
limit("nproc-1/run", ["TR", "r.yaml", "--quiet"], (0, 1), shell="ulimit -u 1 2>/dev/null;", timeout=90)
limit("stack-256k/plan", ["TR", "plan", "r.yaml"], (0, 1), shell="ulimit -s 256;", changes=())
