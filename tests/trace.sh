#!/bin/sh
# Traces (the recipe's profile: section; src/report/trace.c): the schedule picks the steps, each
# cycle one file in the run folder's traces/, PyTorch's header; a run that ends inside a cycle
# writes what it kept; off, no traces/ at all; the ops' times agree with TR_PROFILE's over the
# same steps; and Holistic Trace Analysis (tests/trace_check.py, in the virtual environment
# scripts/setup makes) reads a trace and finds what run.json says is in it.
. "$srcdir/tests/lib.sh"
recipe="$srcdir/recipes/mlp.yaml"
short="train.eval_every=0 train.eval_samples=8 report.tensorboard=false --quiet"
expect_eq() { checks=$((checks + 1)); [ "$1" = "$2" ] || fail "$3: got '$1', expected '$2'"; }
traces() { ls "$1"/mlp/latest/traces 2>/dev/null | grep -c '\.pt\.trace\.json$'; }
field() {   # field RUN_DIR PYTHON_EXPRESSION_OF_j: a value of run.json's "traces"
  python3 -c "import json,sys; j=json.load(open(sys.argv[1]+'/run.json'))['traces']; print($2)" "$1/mlp/latest"
}

# Off by default: no traces/.
run "$TRAINRUN" "$recipe" train.steps=4 report.dir="$scratch/off" $short
expect_rc 0 "a run without profile:"
[ -e "$scratch/off/mlp/latest/traces" ] && fail "traces/ without profile:"
checks=$((checks + 1))

# skip_first 2, warmup 1, active 3: steps 4-6 in one file, its header PyTorch's.
run "$TRAINRUN" "$recipe" train.steps=12 profile.skip_first=2 profile.warmup=1 profile.active=3 \
  report.dir="$scratch/one" $short
expect_rc 0 "a traced run"
expect_eq "$(traces "$scratch/one")" 1 "one cycle, one file"
expect_eq "$(field "$scratch/one" "j[0]['steps']")" "[4, 6]" "the active steps"
file=$(ls "$scratch"/one/mlp/latest/traces/*.pt.trace.json)
case "$(basename "$file")" in
  *_[0-9]*.[0-9]*.pt.trace.json) ;;
  *) fail "trace name $(basename "$file"): not HOST_PID.MS.pt.trace.json" ;;
esac
checks=$((checks + 1))
expect_in "$(cat "$file")" '"distributedInfo": {"backend": "none", "rank": 0, "world_size": 1}' "distributedInfo"
python3 - "$file" "$scratch/one/mlp/latest/plan.json" <<'PY' || fail "the trace's events"
import json, sys
j = json.load(open(sys.argv[1]))
arena = json.load(open(sys.argv[2]))["regions"]["arena"]
live = [e["args"]["bytes"] for e in j["traceEvents"] if e["ph"] == "C" and e["name"] == "arena live bytes"]
assert live and 0 < max(live) <= arena, (max(live), arena)   # the memory plan's, within its arena
rss = [e for e in j["traceEvents"] if e["ph"] == "C" and e["name"] == "resident set bytes"]
assert len(rss) == 3 and all(e["args"]["bytes"] > 0 for e in rss), rss   # one a step
assert j["schemaVersion"] == 1 and isinstance(j["deviceProperties"], list), "header"
ev = [e for e in j["traceEvents"] if e["ph"] == "X"]
steps = [e for e in ev if e["name"].startswith("ProfilerStep#")]
assert [e["name"] for e in steps] == ["ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6"], steps
ops = [e for e in ev if e["cat"] == "cpu_op"]
assert ops and all(any(s["ts"] <= o["ts"] and o["ts"] + o["dur"] <= s["ts"] + s["dur"] + 1e-3 for s in steps)
                   for o in ops), "an op outside every step"
assert {"forward", "backward"} <= {o["args"]["phase"] for o in ops}, "phases"
assert {"data wait", "optimizer"} <= {e["name"] for e in ev}, "the trainer's spans"
starts = [e["ts"] for e in ev]
assert starts == sorted(starts), "events not by start"
PY
checks=$((checks + 1))

# The report's profile: the top ops of the last trace, their rates against the calibrated ones.
expect_in "$(cat "$scratch/one/mlp/latest/report.md")" "## Profile" "report.md's profile"
expect_in "$(cat "$scratch/one/mlp/latest/report.html")" "<h2>Profile</h2>" "report.html's profile"
python3 - "$scratch/one/mlp/latest" <<'PY' || fail "report.json's profile"
import json, sys
rep = json.load(open(sys.argv[1] + "/report.json"))["profile"]
assert rep == json.load(open(sys.argv[1] + "/run.json"))["traces"][-1], "not the last trace"
mm, relu = rep["ops"]["matmul"], rep["ops"]["relu"]
assert mm["work_unit"] == "flop" and relu["work_unit"] == "byte", (mm, relu)
assert mm["work"] > 0 and mm["calibrated_rate"] > 0, mm   # the planner calibrated before the run
PY
checks=$((checks + 1))

# Two cycles (wait 1, active 2, repeat 2): two files; a run that ends inside a cycle writes it.
run "$TRAINRUN" "$recipe" train.steps=10 profile.wait=1 profile.active=2 profile.repeat=2 \
  report.dir="$scratch/two" $short
expect_eq "$(traces "$scratch/two")" 2 "two cycles, two files"
expect_eq "$(field "$scratch/two" "[w['steps'] for w in j]")" "[[2, 3], [5, 6]]" "each cycle's steps"
run "$TRAINRUN" "$recipe" train.steps=3 profile.active=5 report.dir="$scratch/cut" $short
expect_eq "$(field "$scratch/cut" "j[0]['steps']")" "[1, 3]" "a cycle the run's end cut short"

# Every step traced, beside TR_PROFILE: the same time per op within 10 % (its printout is in
# hundredths of a millisecond a step).
TR_PROFILE=1 "$TRAINRUN" "$recipe" train.steps=200 profile.active=200 report.dir="$scratch/all" $short \
  >/dev/null 2>"$scratch/profile.txt" || fail "TR_PROFILE run"
checks=$((checks + 1))
python3 - "$scratch/all/mlp/latest/run.json" "$scratch/profile.txt" <<'PY' || fail "trace against TR_PROFILE"
import json, re, sys
traced = json.load(open(sys.argv[1]))["traces"][0]["ops"]
for line in open(sys.argv[2]):
    m = re.match(r"\s+(\w+)\s+([\d.]+) ms per step", line)
    if m and float(m.group(2)) >= 0.1:
        ms = traced[m.group(1)]["seconds"] * 1e3 / 200
        assert abs(ms - float(m.group(2))) <= 0.1 * float(m.group(2)), (m.group(1), ms, m.group(2))
        print("%s: traced %.3f ms a step, TR_PROFILE %s" % (m.group(1), ms, m.group(2)))
PY

python=${TRAINRUN_TEST_PYTHON:-$srcdir/.venv/bin/python}
if "$python" -c 'import hta' 2>/dev/null; then
  checks=$((checks + 1))
  "$python" "$srcdir/tests/trace_check.py" "$scratch/one/mlp/latest" || fail "Holistic Trace Analysis"
  finish
fi
echo "SKIP: no Python with HolisticTraceAnalysis at $python (scripts/setup installs it in .venv); the rest passed"
[ "$failures" -eq 0 ] || finish
exit 77
