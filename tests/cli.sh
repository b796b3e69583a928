#!/bin/sh
# The command line as a user meets it: help, version, check with overrides, a misspelt key,
# JSON for machines, and exit statuses. Runs the real binary.
. "$srcdir/tests/lib.sh"
recipes="$srcdir/recipes"

run "$TRAINRUN" --version
expect_rc 0 "--version"
expect_in "$out" "trainrun 0.1" "--version names the version"
expect_in "$out" "CUDA backend:" "--version says whether CUDA is built"
expect_in "$out" "CPU backend: OpenBLAS " "--version names the BLAS kernels"
# On a CPU with AVX2 and FMA, the kernels run use them, whatever OpenBLAS took the CPU for;
# a kernel named in OPENBLAS_CORETYPE is kept.
if grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo; then
  env -u OPENBLAS_CORETYPE "$TRAINRUN" --version >"$scratch/v" 2>&1
  kernels=$(sed -n 's/^CPU backend: OpenBLAS \(.*\) kernels.*/\1/p' "$scratch/v")
  checks=$((checks + 1))
  case "$kernels" in
    Haswell | SkylakeX | Cooperlake | SapphireRapids | Zen) ;;
    *) fail "an AVX2 CPU runs OpenBLAS's '$kernels' kernels" ;;
  esac
fi
OPENBLAS_CORETYPE=Haswell run "$TRAINRUN" --version
expect_in "$out" "CPU backend: OpenBLAS Haswell kernels" "OPENBLAS_CORETYPE is respected"

run "$TRAINRUN" --help
expect_rc 0 "--help"
expect_in "$out" "check" "--help lists check"
expect_in "$out" "  plan " "--help lists plan"
expect_in "$out" "  calibrate " "--help lists calibrate"
for unbuilt in data; do   # land with their issues
  expect_not_in "$out" "  $unbuilt " "--help lists only what works"
done

for sub in check run resume sample; do
  run "$TRAINRUN" $sub --help
  expect_rc 0 "$sub --help"
  expect_in "$out" "usage: trainrun" "$sub --help prints its usage"
done

run "$TRAINRUN"
expect_rc 2 "no arguments"
expect_in "$err" "usage:" "no arguments prints the usage"

run "$TRAINRUN" --frobnicate
expect_rc 2 "unknown option"
expect_in "$err" "unknown option '--frobnicate'" "unknown option is named"

run "$TRAINRUN" check "$recipes/mlp.yaml" --frobnicate
expect_rc 2 "unknown option after check"
expect_in "$err" "unknown option '--frobnicate'" "check names an unknown option"

run "$TRAINRUN" frobnicate
expect_rc 2 "unknown subcommand"
expect_in "$err" "unknown subcommand 'frobnicate'" "unknown subcommand is named"

run "$TRAINRUN" "$scratch/missing.yaml"
expect_rc 2 "missing recipe file"
expect_in "$err" "no such file" "a missing recipe is reported"

run "$TRAINRUN" check
expect_rc 2 "check without a recipe"
expect_in "$err" "no recipe file given" "check needs a recipe"

run "$TRAINRUN" check "$recipes/mlp.yaml" stray
expect_rc 2 "a stray word"
expect_in "$err" "unexpected argument 'stray'" "stray words are named"

# Every shipped recipe is valid.
for r in "$recipes"/*.yaml; do
  run "$TRAINRUN" check "$r"
  expect_rc 0 "check $(basename "$r")"
done

# An override shows with origin "override"; the recipe's own values with file:line:col.
run "$TRAINRUN" check "$recipes/mlp.yaml" train.batch_size=64 optimize.amp=bf16
expect_rc 0 "check with overrides"
line=$(echo "$out" | grep '^  batch_size:')
expect_in "$line" "batch_size: 64" "the override's value"
expect_in "$line" "# override" "the override's origin"
expect_in "$(echo "$out" | grep '^  amp:')" "amp: bf16" "a second override"
expect_in "$(echo "$out" | grep '^  hidden:')" "mlp.yaml:9:11" "a recipe value's file:line:col"
expect_in "$(echo "$out" | grep '^  heads:')" "# default" "a default's origin"

# The output of check is itself a recipe that resolves to the same values.
"$TRAINRUN" check "$recipes/bert.yaml" train.optimizer.betas=[0.9,0.95] >"$scratch/resolved.yaml"
run "$TRAINRUN" check "$scratch/resolved.yaml"
expect_rc 0 "check of check's output"
strip() { sed -e 's/ *#.*$//' -e '/^$/d'; }
a=$("$TRAINRUN" check "$recipes/bert.yaml" train.optimizer.betas=[0.9,0.95] | strip)
b=$(echo "$out" | strip)
checks=$((checks + 1))
[ "$a" = "$b" ] || fail "check's output does not resolve to the same recipe: $(echo "$a" > "$scratch/a"; echo "$b" > "$scratch/b"; diff "$scratch/a" "$scratch/b")"

# A misspelt key: exit 2, with the suggestion and the place.
cat >"$scratch/typo.yaml" <<'YAML'
model: {arch: mlp}
data: {dataset: digits}
train:
  batchsize: 64
YAML
run "$TRAINRUN" check "$scratch/typo.yaml"
expect_rc 2 "a misspelt key"
expect_in "$err" "typo.yaml:4:3: unknown key 'train.batchsize'; did you mean 'train.batch_size'?" "the suggestion"
expect_in "$err" "1 error; nothing was run" "the summary"
run "$TRAINRUN" check "$scratch/typo.yaml" optimize.ampp=bf16
expect_rc 2 "two errors"
expect_in "$err" "override 'optimize.ampp=bf16': unknown key 'optimize.ampp'; did you mean 'optimize.amp'?" "override suggestion"
expect_in "$err" "2 errors" "errors are collected"

# JSON for machines.
if command -v python3 >/dev/null; then
  run "$TRAINRUN" check "$recipes/mlp.yaml" train.batch_size=64 --json
  expect_rc 0 "check --json"
  echo "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["ok"] is True
assert d["recipe"]["train"]["batch_size"] == 64
assert d["origins"]["train.batch_size"] == {"kind": "override", "argument": "train.batch_size=64"}, d["origins"]["train.batch_size"]
assert d["origins"]["model.hidden"]["line"] == 9
assert d["recipe"]["budget"]["memory"] == 512 * 2**20
assert d["recipe"]["train"]["steps"] is None
' || fail "check --json content"
  checks=$((checks + 1))
  run "$TRAINRUN" check "$scratch/typo.yaml" --json
  expect_rc 2 "check --json with an error"
  echo "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["ok"] is False
e = d["errors"][0]
assert (e["line"], e["col"]) == (4, 3), e
assert "did you mean" in e["message"]
' || fail "check --json error content"
  checks=$((checks + 1))
fi

# The default subcommand trains, into a run folder under report.dir.
run "$TRAINRUN" "$recipes/mlp.yaml" train.steps=40 report.dir="$scratch/runs" --quiet
expect_rc 0 "a short training run"
expect_in "$out" "mlp: test accuracy" "run --quiet prints the result"
dir="$scratch/runs/mlp/latest"
for f in recipe.yaml log.txt metrics.jsonl checkpoints/step-40.safetensors; do
  checks=$((checks + 1))
  [ -s "$dir/$f" ] || fail "the run folder has no $f"
done
expect_in "$(cat "$dir/log.txt")" "step 40/40" "log.txt has the progress lines"
if command -v python3 >/dev/null; then
  python3 - "$dir/metrics.jsonl" <<'PY' || fail "metrics.jsonl content"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
steps = [l["step"] for l in lines if "train/loss" in l]
assert steps == sorted(steps) and steps[-1] == 40, steps
assert any("eval/accuracy" in l for l in lines) and "memory/measured_footprint" in lines[-2]
assert "time/wall" in lines[-1] and "time/checkpointing" in lines[-1], lines[-1]   # what followed the loop
last = next(l for l in reversed(lines) if "test/accuracy" in l)
assert last["test/accuracy"] <= last["test/top5_accuracy"] <= 1, last
PY
  checks=$((checks + 1))
fi
# A model that cannot read the data set's kind of data is a usage error, named, before any work.
run "$TRAINRUN" "$recipes/bert-small.yaml" data.dataset=digits report.dir="$scratch/mismatch"
expect_rc 2 "bert on a table of features"
expect_in "$err" "model.arch bert reads labelled texts (tsv, jsonl); data set digits holds feature vectors" \
  "the mismatch is named"
checks=$((checks + 1))
[ ! -e "$scratch/mismatch" ] || fail "a refused run left a run folder"
# Inline splits next to a named data set would be ignored: refused instead.
run "$TRAINRUN" check "$recipes/mlp.yaml" data.valid=/nonexistent.csv
expect_rc 2 "data.valid next to data.dataset"
expect_in "$err" "data.valid.source next to data.dataset" "the refusal names the key"
# A warm start from a run that is not there is a data error, named (nightly.sh tests the rest).
run "$TRAINRUN" "$recipes/mlp.yaml" model.init.from_run=latest report.dir="$scratch/fromrun"
expect_rc 4 "model.init.from_run without a latest run"
expect_in "$err" "model.init.from_run: $scratch/fromrun/mlp/latest does not point to a run folder" "from_run says so"
# A data set without a test split says so, rather than printing a test score of 0.
mkdir -p "$scratch/sets/notest"
sed 's/test: 0.2, //; s/^name: digits/name: notest/' "$srcdir/datasets/digits/dataset.yaml" \
  >"$scratch/sets/notest/dataset.yaml"
cp "$srcdir/datasets/digits/digits.csv.gz" "$scratch/sets/notest/"
TRAINRUN_DATASETS="$scratch/sets" run "$TRAINRUN" "$recipes/mlp.yaml" data.dataset=notest train.steps=5 \
  report.dir="$scratch/notest" --quiet
expect_rc 0 "a data set without a test split"
expect_in "$out" "mlp: no test split" "--quiet says there is no test split"
expect_in "$(cat "$scratch/notest/mlp/latest/log.txt")" "; no test split" "the log says so"
expect_not_in "$(cat "$scratch/notest/mlp/latest/metrics.jsonl")" "test/" "no test metrics are logged"
# Early stopping ends a run after `patience` evaluations without improvement; resume leaves it so.
run "$TRAINRUN" "$recipes/mlp.yaml" train.early_stop=eval.loss train.early_stop.patience=1 \
  train.early_stop.min_delta=10 train.eval_every=50 report.dir="$scratch/early"
expect_rc 0 "early stopping"
expect_in "$out" "early stop at step 100: eval/loss has not improved for 1 evaluations (best" "the stop is explained"
expect_in "$out" "done: 100 steps" "the run ends at the stop"
run "$TRAINRUN" resume "$scratch/early/mlp/latest"
expect_rc 0 "resume of an early-stopped run"
expect_in "$out" "done: 100 steps" "resume does not train past an early stop"
run "$TRAINRUN" check "$recipes/mlp.yaml" train.early_stop=eval.accuracy train.eval_every=0
expect_rc 2 "early stopping without evaluations"
expect_in "$err" "train.early_stop needs evaluations to compare" "the rule is explained"
# A diverging run stops with status 5 and says at which step and what to try.
run "$TRAINRUN" "$recipes/mlp.yaml" 'train.optimizer={name: sgd, lr: 10, momentum: 0.9}' \
  train.grad_clip=null train.steps=200 report.dir="$scratch/diverge" --quiet
expect_rc 5 "a diverging run"
expect_in "$err" "the loss is NaN; lower train.optimizer.lr or set train.grad_clip" "divergence is explained"

# On a terminal a progress bar is redrawn in place; log.txt keeps only the plain lines.
if command -v script >/dev/null; then
  script -q -c "'$TRAINRUN' '$recipes/mlp.yaml' train.steps=40 report.dir='$scratch/tty'" "$scratch/tty.out" >/dev/null
  expect_in "$(cat "$scratch/tty.out")" "step 40/40 [####################]" "the progress bar on a terminal"
  expect_in "$(cat "$scratch/tty.out")" "ETA 0:00" "the bar's time left"
  expect_not_in "$(cat "$scratch/tty/mlp/latest/log.txt")" "ETA" "log.txt has no progress bar"
fi
# (its own report.dir: two steps beside the 40 above would be a regression, exit 6)
run "$TRAINRUN" run "$recipes/mlp.yaml" train.steps=2 report.dir="$scratch/explicit" --quiet
expect_rc 0 "run named explicitly"
run "$TRAINRUN" "$recipes/mlp.yaml" --json
expect_rc 2 "run has no --json"
expect_in "$err" "usage: trainrun [run] RECIPE" "run prints its own usage"
run "$TRAINRUN" "$recipes/mlp.yaml" data.dataset=no-such-set report.dir="$scratch/runs"
expect_rc 4 "a missing data set is a data error"
expect_in "$err" "no-such-set" "the data error names the data set"

# Output that cannot be written is an error, not a silent truncation.
if [ -w /dev/full ]; then
  for opt in --help --version; do
    "$TRAINRUN" $opt >/dev/full 2>/dev/null
    rc=$?; err=
    expect_rc 1 "$opt to a full device"
  done
  "$TRAINRUN" check "$recipes/mlp.yaml" >/dev/full 2>"$scratch/full.err"
  rc=$?; err=$(cat "$scratch/full.err")
  expect_rc 1 "writing to a full device"
  expect_in "$err" "writing the output" "the write error is reported"
fi
# data.num_workers: auto is half the cores (at least 1): the plan sizes the loader with it, the
# report's loader row names the number (trainrun-recipe(5)).
run "$TRAINRUN" check "$srcdir/recipes/mlp.yaml" data.num_workers=auto
expect_rc 0 "data.num_workers=auto"
run "$TRAINRUN" "$srcdir/recipes/mlp.yaml" data.num_workers=auto train.steps=20 report.dir="$scratch/nw" --quiet
expect_rc 0 "a run with data.num_workers=auto"
cores=$(getconf _NPROCESSORS_ONLN)
workers=$((cores / 2)); [ "$workers" -ge 1 ] || workers=1
expect_in "$(cat "$scratch"/nw/mlp/2*/report.md)" "| $workers worker" "auto: half of the $cores cores in the loader row"
expect_in "$(cat "$scratch"/nw/mlp/2*/report.md)" "(auto: half the cores)" "the row says the number came from auto"
finish
