#!/bin/sh
# The run reports as a user meets them: a short mlp run leaves report.md, report.html and
# report.json in its folder; `trainrun report RUN_DIR` writes the same three files again,
# byte for byte; a failed run is reported as failed; a folder that is not a run is refused
# with status 2.
. "$srcdir/tests/lib.sh"

run "$TRAINRUN" "$srcdir/recipes/mlp.yaml" train.steps=30 train.eval_every=10 report.dir="$scratch/runs" --quiet
expect_rc 0 "a short mlp run"
dir=$(ls -d "$scratch"/runs/mlp/2* | head -n 1)
for f in report.md report.html report.json; do
  checks=$((checks + 1))
  [ -s "$dir/$f" ] || fail "the run wrote no $f"
  cp "$dir/$f" "$scratch/first.$f" 2>/dev/null
done
expect_in "$(cat "$dir/report.json")" '"status": "finished"' "report.json: the status"
expect_in "$(cat "$dir/report.json")" '"exit_code": 0' "report.json: the exit code"
expect_in "$(cat "$dir/report.md")" "| AMP | off (fp32) |" "report.md: the checklist"
expect_in "$(cat "$dir/report.html")" "<svg" "report.html: the plots"
expect_not_in "$(cat "$dir/report.html")" "http" "report.html loads nothing"
checks=$((checks + 1))
ls -a "$dir" | grep -q '\.tmp$' && fail "a temporary report file was left behind"

# The time breakdown, the leak check and the memory over one step, as the run measured them.
md=$(cat "$dir/report.md")
expect_in "$md" "## Time" "report.md: the time breakdown"
expect_in "$md" "| forward |" "report.md: forward time"
expect_in "$md" "| Leak check | constant after warm-up |" "report.md: the leak check"
expect_in "$md" "## Memory over one step" "report.md: the memory timeline"
expect_in "$md" "^ backward from node" "report.md: the timeline's backward mark"
expect_in "$md" "## Environment" "report.md: the environment"
expect_in "$(cat "$dir/log.txt")" "leak check: allocated bytes, heap and resident set constant" "log.txt: the leak check"
expect_in "$(cat "$dir/run.json")" '"verdict": "constant"' "run.json: the leak check"
json=$(tr -d ' \n' <"$dir/report.json")
expect_in "$json" '"schema_version":2' "report.json: version 2"
expect_in "$json" '"key_metric":{"name":"test/accuracy"' "report.json: the key metric"
expect_in "$json" '"series":{"train/loss":[[' "report.json: the series"
# The parts of the time add up: none negative, and they fit in the wall-clock time.
checks=$((checks + 1))
printf '%s' "$json" | grep -o '"time":{[^}]*}' | tr ',{}' '\n\n\n' | awk -F: '
  /"wall"/ { wall = $2 } /"other"/ { other = $2 }
  /"forward"|"backward"|"optimizer"/ { if ($2 + 0 <= 0) bad = bad " " $1 }
  END { if (bad != "" || wall <= 0 || other < 0 || other > wall) { print "bad times:" bad " wall " wall " other " other; exit 1 } }' ||
  fail "report.json's time breakdown does not add up"

run "$TRAINRUN" report "$dir"
expect_rc 0 "trainrun report RUN_DIR"
expect_in "$out" "$dir/report.html" "report names what it wrote"
for f in report.md report.html report.json; do
  checks=$((checks + 1))
  cmp -s "$dir/$f" "$scratch/first.$f" || fail "$f re-rendered differently: $(diff "$scratch/first.$f" "$dir/$f" | head -n 5)"
done

# A failed run has its reports too, with the status it exited with.
run "$TRAINRUN" "$srcdir/recipes/mlp.yaml" 'train.optimizer={name: sgd, lr: 10, momentum: 0.9}' \
  train.grad_clip=null train.steps=200 report.dir="$scratch/diverge" --quiet
expect_rc 5 "a diverging run"
json=$(cat "$scratch"/diverge/mlp/2*/report.json 2>/dev/null)
expect_in "$json" '"status": "failed"' "a failed run's report: the status"
expect_in "$json" '"exit_code": 5' "a failed run's report: the exit code"

mkdir "$scratch/empty"
run "$TRAINRUN" report "$scratch/empty"
expect_rc 2 "a folder that is not a run"
expect_in "$err" "is not a run folder" "the refusal says why"
run "$TRAINRUN" report
expect_rc 2 "no folder given"
expect_in "$err" "report needs a run folder" "the refusal says what is missing"
# The latest link names its run by the folder it points to.
run "$TRAINRUN" report "$scratch/runs/mlp/latest"
expect_rc 0 "trainrun report runs/NAME/latest"
expect_in "$(cat "$scratch/runs/mlp/latest/report.json")" "\"run\": \"${dir##*/}\"" "the run named through latest"
finish
