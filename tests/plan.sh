#!/bin/sh
# The planner as a user meets it: `trainrun plan` prints the candidates and the decision, --json
# holds what scripts read, --explain the memory timeline and the largest tensors; a budget too
# small exits 3 naming the minimum, which then fits; a saved plan replays, and one byte below
# its footprint is refused by plan and by run; a run writes plan.json with what it measured;
# profiles plan machines this host is not; the host's calibration is measured once and cached;
# planning a BERT-base recipe takes under a second.
. "$srcdir/tests/lib.sh"
recipes=$srcdir/recipes
json() {   # json FILE EXPR: a Python expression over the JSON in FILE (as j)
  python3 -c "import json, sys; j = json.load(open(sys.argv[1])); print($2)" "$1"
}

# The table and the decision.
run "$TRAINRUN" plan "$recipes/mlp.yaml"
expect_rc 0 "plan mlp"
expect_in "$out" "precision checkpointing" "the table's header"
expect_in "$out" "<- chosen" "the choice marked"
expect_in "$out" "decision: fp32, checkpointing none, 1 × 64: the fastest of the" "the decision in a sentence"
expect_in "$out" "regions (exact): params" "the regions"
expect_in "$out" "outside (modelled): process" "what lives outside them"

# --json: the keys scripts read.
run "$TRAINRUN" plan "$recipes/bert-small.yaml" --json
expect_rc 0 "plan --json"
printf '%s\n' "$out" >"$scratch/plan.json"
keys=$(json "$scratch/plan.json" "' '.join(k for k in ['precision', 'checkpointing', 'micro_batch', 'accumulation',
  'predicted_peak_bytes', 'predicted_footprint_bytes', 'budget_bytes', 'fits', 'predicted_step_seconds', 'regions',
  'candidates'] if k not in j)")
expect_rc 0 "plan.json reads as JSON"
[ -z "$keys" ] || fail "plan --json lacks: $keys"
checks=$((checks + 1))
peak=$(json "$scratch/plan.json" "j['predicted_peak_bytes'] == sum(j['regions'].values()) and j['fits']")
expect_in "$peak" "True" "the peak is the regions' sum"

# --explain: the timeline of a step and the largest tensors at its peak.
run "$TRAINRUN" plan "$recipes/bert-small.yaml" --explain
expect_rc 0 "plan --explain"
expect_in "$out" "activations live over one micro-step" "the timeline"
expect_in "$out" "largest tensors live at the peak" "the largest tensors"
expect_in "$out" "from gelu (forward, block" "a named tensor"

# Too small: exit 3, the minimum named; that minimum fits.
run "$TRAINRUN" plan "$recipes/bert-small.yaml" budget.memory=64MiB
expect_rc 3 "a budget too small"
expect_in "$err" "nothing fits in 64.00 MiB: the smallest footprint is" "the refusal"
minimum=$(printf '%s\n' "$err" | sed -n 's/.*budget.memory=\([0-9]*\) or more.*/\1/p')
[ -n "$minimum" ] || fail "no minimum named in: $err"
checks=$((checks + 1))
run "$TRAINRUN" plan "$recipes/bert-small.yaml" budget.memory="$minimum"
expect_rc 0 "the minimum named fits"
run "$TRAINRUN" plan "$recipes/bert-small.yaml" budget.memory=$((minimum - 1))
expect_rc 3 "one byte less does not"
run "$TRAINRUN" "$recipes/bert-small.yaml" budget.memory=64MiB report.dir="$scratch/runs" --quiet
expect_rc 3 "a run that cannot fit does not start"
expect_in "$err" "memory budget: nothing fits in 64.00 MiB" "the run names why"

# A saved plan: replayed by plan and run; one byte below its footprint, refused by both.
overrides="train.steps=2 train.epochs=null train.eval_every=0 train.eval_samples=32 report.tensorboard=false"
# shellcheck disable=SC2086
run "$TRAINRUN" plan "$recipes/mlp.yaml" $overrides --json
printf '%s\n' "$out" >"$scratch/mlp-plan.json"
footprint=$(json "$scratch/mlp-plan.json" "j['predicted_footprint_bytes']")
# shellcheck disable=SC2086
run "$TRAINRUN" plan "$recipes/mlp.yaml" $overrides --plan "$scratch/mlp-plan.json" budget.memory="$footprint"
expect_rc 0 "a saved plan at its footprint"
expect_in "$out" "replayed from the saved plan" "replayed"
# shellcheck disable=SC2086
run "$TRAINRUN" plan "$recipes/mlp.yaml" $overrides --plan "$scratch/mlp-plan.json" budget.memory=$((footprint - 1))
expect_rc 3 "plan: one byte below the saved plan's footprint"
expect_in "$err" "no longer fits" "plan says why"
expect_in "$err" "by 1 bytes" "plan says by how much"
# shellcheck disable=SC2086
run "$TRAINRUN" "$recipes/mlp.yaml" $overrides --plan "$scratch/mlp-plan.json" budget.memory=$((footprint - 1)) \
  report.dir="$scratch/runs" --quiet
expect_rc 3 "run: one byte below the saved plan's footprint"
[ ! -e "$scratch/runs/mlp" ] || fail "a refused run left a run folder"
checks=$((checks + 1))
# shellcheck disable=SC2086
run "$TRAINRUN" "$recipes/mlp.yaml" $overrides --plan "$scratch/mlp-plan.json" report.dir="$scratch/runs" --quiet
expect_rc 0 "run the saved plan"
saved=$scratch/runs/mlp/latest/plan.json
expect_in "$(json "$saved" "j['replayed'], j['measured_peak_bytes'] == j['predicted_peak_bytes']")" "True True" \
  "the run's plan.json: replayed, regions as predicted"
expect_in "$(json "$saved" "0 < j['measured_footprint_bytes'] <= j['predicted_footprint_bytes']")" "True" \
  "the run's plan.json: the footprint measured within its prediction"
expect_in "$(cat "$scratch/runs/mlp/latest/log.txt")" "memory: regions peaked at" "the log compares"
run "$TRAINRUN" plan "$recipes/mlp.yaml" --plan "$scratch/nowhere.json"
expect_rc 2 "a saved plan that is not there"
echo '{"precision": "fp8"}' >"$scratch/bad.json"
run "$TRAINRUN" plan "$recipes/mlp.yaml" --plan "$scratch/bad.json"
expect_rc 2 "a file that is not a plan"
expect_in "$err" "not a plan" "the reason"

# Profiles: machines this host is not.
run "$TRAINRUN" plan "$recipes/bert-small.yaml" optimize.amp=auto --device-profile rtx3090
expect_rc 0 "plan for an RTX 3090"
expect_in "$out" "device: NVIDIA GeForce RTX 3090" "the profile named"
expect_in "$out" "bf16" "16-bit candidates on a GPU"
run "$TRAINRUN" plan "$recipes/bert-small.yaml" --device-profile a800
expect_rc 2 "an unknown profile"
expect_in "$err" "there are: a100-40gb" "the profiles listed"

# The calibration: measured once, then read from the cache.
run "$TRAINRUN" calibrate
expect_rc 0 "calibrate"
expect_in "$out" "cached in $XDG_CACHE_HOME/trainrun/calibration/" "cached in XDG_CACHE_HOME"
run "$TRAINRUN" calibrate --json
expect_in "$out" '"gemm_flops"' "calibrate --json"
# A cache that cannot be written is calibrate's failure (exit 1, naming it), not a silent 0;
# a regular file where the cache folder would be stops even root.
: >"$scratch/not-a-folder"
run env XDG_CACHE_HOME="$scratch/not-a-folder" "$TRAINRUN" calibrate --force
expect_rc 1 "calibrate: an unwritable cache"
expect_in "$err" "could not be cached: $scratch/not-a-folder/trainrun/calibration: Not a directory" \
  "calibrate: the message names the cache"
run "$TRAINRUN" calibrate --bogus
expect_rc 2 "calibrate: an unknown option"
run "$TRAINRUN" calibrate --tolerance
expect_rc 2 "calibrate: --tolerance without its percentage"
run "$TRAINRUN" calibrate --rounds 2
expect_rc 2 "calibrate: fewer rounds than the stability window"

# Each kernel class is measured (version 10: every probe once a round, settled around the median), and the plan reads it: a predicted step time.
cache=$(ls "$XDG_CACHE_HOME"/trainrun/calibration/*.json)
expect_in "$(cat "$cache")" '"version": 10' "the cache is version 10"
expect_in "$(cat "$cache")" '"matmul.nt.' "the cache holds the GEMMs' curves"
expect_in "$(cat "$cache")" '"layernorm.bf16"' "… and the other kernels', per precision"
expect_in "$(cat "$cache")" '"linear_cross_entropy_bwd.bf16"' "… a loss's backward by its 16-bit input, not its f32 dloss"
expect_in "$(cat "$cache")" '"optimizer_byte_seconds"' "… and the optimizer's pass"
run "$TRAINRUN" plan "$recipes/mlp.yaml" --json
expect_rc 0 "plan on the calibration"
predicted=$(printf '%s\n' "$out" | sed -n 's/^  "predicted_step_seconds": \([0-9.e-]*\),*$/\1/p' | head -1)
case $predicted in [0-9]*) ;; *) fail "plan --json predicts a step time (got '$predicted')" ;; esac
checks=$((checks + 1))
# A measurement whose rounds never settle is refused (exit 9), and the cache stays as it was.
# Three rounds agreeing within a millionth of a percent: no machine does that.
cp "$cache" "$scratch/cache-before.json"
run "$TRAINRUN" calibrate --force --tolerance 0.000001 --rounds 3
expect_rc 9 "calibrate: an unsettled measurement"
expect_in "$err" "not cached: the measurement did not settle" "calibrate says it did not settle"
cmp -s "$cache" "$scratch/cache-before.json" || fail "an unsettled measurement left the cache as it was"
checks=$((checks + 1))
# A cache of an older version is measured again and rewritten.
sed 's/"version": 10/"version": 9/' "$scratch/cache-before.json" >"$cache"
run "$TRAINRUN" plan "$recipes/mlp.yaml"
expect_rc 0 "plan on a stale calibration"
expect_in "$(cat "$cache")" '"version": 10' "a stale calibration is measured again"

# BERT-base (the seed's recipe): planned under a second.
if [ -s "$srcdir/datasets/wordnet-senses/train.tsv" ] || [ -d "$XDG_CACHE_HOME" ]; then
  run "$TRAINRUN" plan "$recipes/bert.yaml"
  if [ "$rc" = 0 ]; then
    # CPU time: what planning costs, whatever else the machine runs meanwhile
    took=$(printf '%s\n' "$out" | sed -n 's/^planned [0-9]* candidates in [0-9.]* s (\([0-9.]*\) s of CPU)$/\1/p')
    expect_in "$(awk -v t="$took" 'BEGIN { print (t != "" && t < 1.0) ? "fast" : "slow " t }')" "fast" \
      "BERT-base planned under a second"
  else
    echo "skip: wordnet-senses is not prepared here ($err)"
  fi
fi
# Out of memory while reading the data is the host's failure, exit 1 as trainrun(1) says, not
# the data's 4. A preloaded allocator refuses any block of 32 MiB or more (an allocation limit
# that never reaches the start-up's own small blocks), and a gzip of 64 MiB of zeros (two
# members, 130 KB on disk) makes the reader grow its buffer past that.
shim_cc=${CC:-cc}
cat >"$scratch/small_heap.c" <<'C'
#include <errno.h>
#include <stddef.h>
extern void *__libc_malloc(size_t), *__libc_realloc(void *, size_t), *__libc_calloc(size_t, size_t);
static const size_t limit = (size_t)32 << 20;
void *malloc(size_t n) { if (n >= limit) { errno = ENOMEM; return NULL; } return __libc_malloc(n); }
void *realloc(void *p, size_t n) { if (n >= limit) { errno = ENOMEM; return NULL; } return __libc_realloc(p, n); }
void *calloc(size_t k, size_t n) {
    if (n && k >= limit / n) { errno = ENOMEM; return NULL; }
    return __libc_calloc(k, n);
}
C
if ! command -v "$shim_cc" >/dev/null || ! "$shim_cc" -shared -fPIC -o "$scratch/small_heap.so" "$scratch/small_heap.c"; then
  echo "skipped: out of memory reading data (no C compiler for the allocator shim)"
else
  python3 -c '
import sys, zlib
member = zlib.compressobj(9, zlib.DEFLATED, 31)
member = member.compress(bytes(32 << 20)) + member.flush()
open(sys.argv[1], "wb").write(member * 2)' "$scratch/zeros.csv.gz"
  printf 'model: {arch: mlp}\ndata:\n  train: {source: %s}\n' "$scratch/zeros.csv.gz" >"$scratch/zeros.yaml"
  run env LD_PRELOAD="$scratch/small_heap.so" "$TRAINRUN" plan "$scratch/zeros.yaml"
  expect_rc 1 "plan: out of memory reading the data"
  expect_in "$err" "zeros.csv.gz: out of memory reading the data" "plan: the message names the file"
  run env LD_PRELOAD="$scratch/small_heap.so" "$TRAINRUN" "$scratch/zeros.yaml" --quiet report.dir="$scratch/oom-runs"
  expect_rc 1 "run: out of memory reading the data"
  expect_in "$err" "zeros.csv.gz: out of memory reading the data" "run: the message names the file"
  [ ! -e "$scratch/oom-runs" ] || fail "run: out of memory reading the data left a run folder: $(ls -R "$scratch/oom-runs")"
fi

# The examples of README.md and trainrun(1) are the program's output today: README's rtx3090
# table is shown whole but cut (each row it keeps is the program's row, in order); the man
# page's narrowed tables are not compared, its decisions and refusals are (joined from their
# wrapped lines), and each example's exit status. A change to the planner must update them.
cat >"$scratch/examples.py" <<'PY'
import os, re, subprocess, sys
srcdir, trainrun = os.environ["srcdir"], os.environ["TRAINRUN"]
failures = []
def program(command):
    command = re.sub(r"^\$ trainrun ", '"$TRAINRUN" ', command)
    p = subprocess.run(command, shell=True, cwd=srcdir, capture_output=True, text=True)
    return p.stdout + p.stderr, p.returncode
# README: the fenced block that starts with a `$ trainrun plan` command.
readme = open(os.path.join(srcdir, "README.md")).read()
for block in re.findall(r"```\n(\$ trainrun plan [^\n]*)\n(.*?)```", readme, re.S):
    out, _ = program(block[0])
    lines, at = out.splitlines(), 0
    for shown in block[1].splitlines():
        if shown.strip() in ("", "..."):
            continue
        try:
            at = lines.index(shown, at) + 1
        except ValueError:
            failures.append("README.md: `%s` no longer prints, in this order:\n  %s" % (block[0], shown))
checked = len(failures)
# trainrun(1): literal blocks of EXAMPLES; a command may continue over lines ending in \e.
page = open(os.path.join(srcdir, "man/trainrun.1")).read()
examples = page[page.index(".Sh EXAMPLES"):page.index(".Sh SEE ALSO")]
def words(text):
    return " ".join(text.replace("\\(mu", "×").replace("\\&", "").split())
compared = 0
for block in re.findall(r"^\.Bd -literal[^\n]*\n(.*?)^\.Ed", examples, re.S | re.M):
    lines = block.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ trainrun plan"):
            i += 1
            continue
        command = lines[i]
        while command.endswith("\\e"):
            i += 1
            command = command[:-2] + lines[i].strip()
        i += 1
        shown = []
        while i < len(lines) and not lines[i].startswith("$ "):
            shown.append(lines[i])
            i += 1
        status = None
        if i < len(lines) and lines[i] == "$ echo $?":
            status, i = int(lines[i + 1]), i + 2
        if not any(l.strip() for l in shown) and status is None:
            continue   # no output shown to compare (and it may write files: --json >plan.json)
        out, rc = program(command)
        said = [words(l) for l in out.splitlines()]
        text = "\n".join(shown)
        for start in ("decision:", "trainrun: nothing fits"):
            for m in re.finditer(r"^%s.*?(?=\n\n|\n\$|\Z|\n[a-z ]*:)" % re.escape(start), text, re.S | re.M):
                compared += 1
                if words(m.group(0)) not in said:
                    failures.append("trainrun(1): `%s` prints %s, not:\n  %s" % (command,
                        [l for l in said if l.startswith(start)], words(m.group(0))))
        if status is not None and rc != status:
            failures.append("trainrun(1): `%s` exits %d, not %d" % (command, rc, status))
print("examples: README's plan blocks, and %d decisions of trainrun(1)" % compared)
if compared == 0:
    failures.append("trainrun(1): no decision found in EXAMPLES: the test reads nothing")
for f in failures:
    print("FAIL: " + f)
sys.exit(1 if failures else 0)
PY
run python3 "$scratch/examples.py"
expect_rc 0 "the examples of README.md and trainrun(1): $out"
printf '%s\n' "$out" | head -1

finish
