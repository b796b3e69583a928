#!/bin/sh
# Unattended nightly retraining, as cron meets it: one run per recipe at a time (a second start
# exits 75 naming the holder), --resume auto after crashes ends bit for bit where an
# uninterrupted run does and starts afresh after a finished run, warm starts from the latest or
# the promoted run, the promotion gate (exit 6 on a regression), retention (report.keep), a
# full disk while checkpointing, a damaged newest checkpoint.
. "$srcdir/tests/lib.sh"
recipe="$srcdir/recipes/mlp.yaml"
set -- data.num_workers=1 --quiet

newest() { ls -d "$1"/2* 2>/dev/null | tail -n 1; }
# The last value metrics.jsonl of run folder $1 logged for metric $2, as written.
metric() { grep -o "\"$2\":[^,}]*" "$1/metrics.jsonl" | tail -n 1 | cut -d: -f2; }
record() { tr -d ' \n' <"$1/run.json"; }
folders() { ls -d "$1"/2* 2>/dev/null | wc -l | tr -d ' '; }

# ---- the lock: a second start of the same recipe exits 75 and names the first -------------------
"$TRAINRUN" "$recipe" report.dir="$scratch/lock" train.steps=1000000 train.checkpoint_every=0 "$@" \
  >/dev/null 2>&1 &
slow=$!
for i in $(seq 1000); do   # until the first holds the lock and has made its run folder
  grep -q "pid $slow" "$scratch/lock/mlp/.lock" 2>/dev/null && [ -n "$(newest "$scratch/lock/mlp")" ] && break
  sleep 0.01
done
run "$TRAINRUN" "$recipe" report.dir="$scratch/lock" train.steps=5 "$@"
expect_rc 75 "a second run of the same recipe"
expect_in "$err" "pid $slow" "the refusal names the holder's pid"
expect_in "$err" "another run of this recipe is in progress" "the refusal says why"
run "$TRAINRUN" resume "$(newest "$scratch/lock/mlp")" --quiet
expect_rc 75 "resume of a run of a locked recipe"
mkdir "$scratch/lock/mlp/20000101-000000" && cp "$recipe" "$scratch/lock/mlp/20000101-000000/recipe.yaml"
run "$TRAINRUN" resume "$scratch/lock/mlp/20000101-000000" --quiet   # no run.json yet: still being set up
expect_rc 75 "resume of a locked recipe's run not yet started"
rm -r "$scratch/lock/mlp/20000101-000000"
run "$TRAINRUN" "$recipe" report.dir="$scratch/lock-other" train.steps=5 "$@"
expect_rc 0 "another report.dir is another lock"
run "$TRAINRUN" report "$(newest "$scratch/lock/mlp")"
expect_rc 0 "the report of a run in progress"
expect_in "$(cat "$(newest "$scratch/lock/mlp")/report.md")" "# mlp: running" "a run in progress is reported running"
kill -KILL "$slow"
wait "$slow" 2>/dev/null
run "$TRAINRUN" report "$(newest "$scratch/lock/mlp")"
expect_in "$(cat "$(newest "$scratch/lock/mlp")/report.md")" "# mlp: killed" "a killed run is reported killed"
# The killed holder's pid given to a process begun after the lock was written: not the run.
sleep 60 &
sleeper=$!
printf 'pid %s, started 2001-01-01T00:00:00Z on %s\n' "$sleeper" "$(hostname)" >"$scratch/lock/mlp/.lock"
run "$TRAINRUN" report "$(newest "$scratch/lock/mlp")"
expect_in "$(cat "$(newest "$scratch/lock/mlp")/report.md")" "# mlp: killed" "a pid used again is not the run's"
printf 'pid %s, started 2999-01-01T00:00:00Z on %s\n' "$sleeper" "$(hostname)" >"$scratch/lock/mlp/.lock"
run "$TRAINRUN" report "$(newest "$scratch/lock/mlp")"
expect_in "$(cat "$(newest "$scratch/lock/mlp")/report.md")" "# mlp: running" "a holder begun before its lock's stamp"
kill "$sleeper"
wait "$sleeper" 2>/dev/null
run "$TRAINRUN" "$recipe" report.dir="$scratch/lock" train.steps=5 "$@"
expect_rc 0 "the lock of a killed run is free"
run "$TRAINRUN" "$recipe" report.dir="$scratch/lock" --resume yesterday "$@"
expect_rc 2 "--resume takes only auto"

# ---- --resume auto: SIGKILL at 5 random moments, the same weights as a run never interrupted -----
set -- train.steps=600 train.checkpoint_every=20 "$@"
"$TRAINRUN" "$recipe" report.dir="$scratch/a" "$@" >/dev/null || fail "the uninterrupted run"
reference=$(newest "$scratch/a/mlp")/checkpoints/step-600.safetensors
delay() { awk -v seed="$(od -An -N4 -tu4 /dev/urandom)" 'BEGIN { srand(seed); printf "%.2f", 0.05 + rand() * 0.75 }'; }
# Processes that got as far as training: each says so once in its run folder's log.
begun() { cat "$scratch"/b/mlp/2*/log.txt 2>/dev/null | grep -c '^mlp: mlp on'; }
kills=0
while [ "$kills" -lt 5 ]; do
  before=$(begun)
  "$TRAINRUN" "$recipe" report.dir="$scratch/b" "$@" --resume auto >/dev/null 2>&1 &
  pid=$!
  for i in $(seq 1000); do   # a kill during start-up (loading, planning) is not this test's
    [ "$(begun)" -gt "$before" ] || ! kill -0 "$pid" 2>/dev/null && break
    sleep 0.01
  done
  sleep "$(delay)"
  if kill -KILL "$pid" 2>/dev/null; then kills=$((kills + 1)); fi
  wait "$pid" 2>/dev/null
done
run "$TRAINRUN" "$recipe" report.dir="$scratch/b" "$@" --resume auto
expect_rc 0 "the last --resume auto"
last=$(newest "$scratch/b/mlp")
checks=$((checks + 1))
cmp -s "$reference" "$last/checkpoints/step-600.safetensors" ||
  fail "after $kills kills and --resume auto the final checkpoint differs from the uninterrupted run's"
resumes=$(cat "$scratch"/b/mlp/2*/log.txt | grep -c '^resuming')
echo "killed $kills times; $resumes resumes logged in $(folders "$scratch/b/mlp") run folders"
checks=$((checks + 1))
[ "$resumes" -ge 1 ] || fail "--resume auto never continued an interrupted run"
# A finished newest run: --resume auto starts a new run folder.
before=$(folders "$scratch/b/mlp")
run "$TRAINRUN" "$recipe" report.dir="$scratch/b" "$@" train.steps=20 --resume auto
expect_rc 0 "--resume auto after a finished run: a new run"
checks=$((checks + 1))
[ "$(folders "$scratch/b/mlp")" = $((before + 1)) ] || fail "--resume auto after a finished run made no new folder"
expect_not_in "$(cat "$(newest "$scratch/b/mlp")/log.txt")" "resuming" "a finished run is not resumed"
# A failed newest run (exit 5, diverged) is left as it is.
printf '{"segments": [{"exit_code": 5}]}\n' >"$(newest "$scratch/b/mlp")/run.json"
before=$(folders "$scratch/b/mlp")
run "$TRAINRUN" "$recipe" report.dir="$scratch/b" train.steps=5 data.num_workers=1 --resume auto
expect_in "$out" "failed (a failed run is not resumed); starting a new run" "--resume auto after a failed run"
checks=$((checks + 1))
[ "$(folders "$scratch/b/mlp")" = $((before + 1)) ] || fail "--resume auto after a failed run made no new folder"

# ---- promotion: the first run, a better one, a worse one (exit 6), a tolerated one ---------------
# Without report.promote.metric there is no gate: a worse run is just a run.
run "$TRAINRUN" "$recipe" report.dir="$scratch/nogate" train.steps=40 data.num_workers=1 --quiet
run "$TRAINRUN" "$recipe" report.dir="$scratch/nogate" train.steps=2 data.num_workers=1 --quiet
expect_rc 0 "a worse run without a gate"
checks=$((checks + 1))
[ ! -e "$scratch/nogate/mlp/promoted" ] || fail "a promoted link without report.promote"
set -- data.num_workers=1 train.checkpoint_every=0 report.promote.metric=key --quiet
p=$scratch/p/mlp
run "$TRAINRUN" "$recipe" report.dir="$scratch/p" train.steps=40 "$@"
expect_rc 0 "the first run"
first=$(newest "$p")
expect_in "$(record "$first")" '"decision":"first"' "the first finished run is promoted"
expect_in "$(record "$first")" '"metric":"test/accuracy","mode":"max"' "the key metric, higher is better"
checks=$((checks + 1))
[ "$(readlink "$p/promoted")" = "${first##*/}" ] || fail "promoted does not point at the first run"
run "$TRAINRUN" "$recipe" report.dir="$scratch/p" train.steps=120 "$@"
expect_rc 0 "a better run"
better=$(newest "$p")
expect_in "$(record "$better")" "\"promoted_run\":\"${first##*/}\"" "the better run was compared with the first"
expect_in "$(record "$better")" '"decision":"promoted"' "the better run is promoted"
checks=$((checks + 1))
[ "$(readlink "$p/promoted")" = "${better##*/}" ] || fail "promoted does not point at the better run"
run "$TRAINRUN" "$recipe" report.dir="$scratch/p" train.steps=2 "$@"
expect_rc 6 "a worse run"
worse=$(newest "$p")
expect_in "$err" "regression: test/accuracy" "the regression in one line"
expect_in "$(record "$worse")" '"decision":"regression"' "run.json records the regression"
expect_in "$(tr -d ' \n' <"$worse/report.json")" '"exit_code":6' "report.json records exit 6"
checks=$((checks + 1))
[ "$(readlink "$p/promoted")" = "${better##*/}" ] || fail "a worse run moved promoted"
[ "$(readlink "$p/latest")" = "${worse##*/}" ] || fail "latest is not the worse run"
run "$TRAINRUN" "$recipe" report.dir="$scratch/p" "$@" train.steps=2 report.promote.metric=eval.loss \
  report.promote.min_delta=100
expect_rc 0 "a worse run within report.promote.min_delta"
expect_in "$(record "$(newest "$p")")" '"metric":"eval/loss","mode":"min","min_delta":100' "the metric and mode given"
tolerated=$(newest "$p")

# ---- warm starts: from promoted and from latest (a learning rate too small to move a weight) -----
# A run scored the other way round (report.promote.mode=min) on more steps is a regression: it
# becomes latest but not promoted.
regress="train.steps=40 report.promote.mode=min"
warm="train.steps=3 train.optimizer.lr=1e-20 report.promote.min_delta=100"
run "$TRAINRUN" "$recipe" report.dir="$scratch/p" $regress "$@"
expect_rc 6 "a regression, so that latest and promoted differ"
run "$TRAINRUN" "$recipe" report.dir="$scratch/p" model.init.from_run=promoted $warm "$@"
expect_rc 0 "warm start from promoted"
w=$(newest "$p")
expect_in "$(cat "$w/log.txt")" "model.init: warm start from the promoted run ${tolerated##*/}" "the log names the run"
expect_in "$(record "$w")" "\"warm_start\":{\"from_run\":\"promoted\",\"run\":\"${tolerated##*/}\"" "run.json records it"
checks=$((checks + 1))
[ "$(metric "$w" test/loss)" = "$(metric "$tolerated" test/loss)" ] ||
  fail "warm start from promoted: test loss $(metric "$w" test/loss), the promoted run's $(metric "$tolerated" test/loss)"
run "$TRAINRUN" "$recipe" report.dir="$scratch/p" $regress "$@"
expect_rc 6 "another regression"
l=$(newest "$p")
run "$TRAINRUN" "$recipe" report.dir="$scratch/p" model.init.from_run=latest $warm "$@"
expect_rc 0 "warm start from latest"
w=$(newest "$p")
expect_in "$(cat "$w/log.txt")" "model.init: warm start from the latest run ${l##*/}" "the log names the run"
checks=$((checks + 1))
[ "$(metric "$w" test/loss)" = "$(metric "$l" test/loss)" ] ||
  fail "warm start from latest: test loss $(metric "$w" test/loss), the latest run's $(metric "$l" test/loss)"
run "$TRAINRUN" "$recipe" report.dir="$scratch/none" model.init.from_run=promoted "$@"
expect_rc 4 "warm start without a promoted run"
expect_in "$err" "this recipe has no promoted run yet" "the error says so"

# ---- retention: report.keep=1 keeps the newest run, and the promoted one however old -------------
promoted=$(readlink "$p/promoted")
n=$(folders "$p")
run "$TRAINRUN" "$recipe" report.dir="$scratch/p" train.steps=120 report.promote.mode=min report.keep=1 "$@"
expect_rc 6 "a regression that keeps 1"
kept=$(newest "$p")
expect_in "$(cat "$kept/log.txt")" "report.keep 1: deleted $((n - 1)) old run folders" "the log says what went"
checks=$((checks + 2))
[ "$(folders "$p")" = 2 ] || fail "report.keep=1 left $(ls "$p")"
[ "$(readlink "$p/promoted")" = "$promoted" ] && [ -d "$p/$promoted" ] && [ "$(readlink "$p/latest")" = "${kept##*/}" ] ||
  fail "retention deleted the promoted or the latest run: $(ls -l "$p")"

# ---- a full disk while checkpointing: the previous checkpoint stays, exit 1 ----------------------
set -- data.num_workers=1 train.steps=60 train.checkpoint_every=20 --quiet
"$TRAINRUN" "$recipe" report.dir="$scratch/d" "$@" >/dev/null || fail "the run to checkpoint"
dir=$(newest "$scratch/d/mlp")
mv "$dir/checkpoints/step-60.safetensors" "$scratch/step-60"
cp "$dir/checkpoints/step-40.safetensors" "$scratch/step-40"
# A file size limit well under a checkpoint (1 MB) and over the logs and reports: 512 blocks.
(ulimit -f 512 && exec "$TRAINRUN" resume "$dir" --quiet) >"$scratch/.out" 2>"$scratch/.err"
rc=$?
err=$(cat "$scratch/.err")
expect_rc 1 "a checkpoint that does not fit"
expect_in "$err" "step-60.safetensors" "the message names the file"
expect_in "$err" "File too large" "the message names the error"
checks=$((checks + 3))
cmp -s "$scratch/step-40" "$dir/checkpoints/step-40.safetensors" || fail "the previous checkpoint changed"
[ ! -e "$dir/checkpoints/step-60.safetensors" ] || fail "a partial checkpoint was left"
[ -z "$(ls "$dir/checkpoints" | grep tmp)" ] || fail "a temporary file was left: $(ls "$dir/checkpoints")"
run "$TRAINRUN" resume "$dir" --quiet
expect_rc 0 "resume once the disk has room"
checks=$((checks + 1))
cmp -s "$scratch/step-60" "$dir/checkpoints/step-60.safetensors" || fail "the resumed run ended elsewhere"

# ---- a damaged newest checkpoint: the one before it is used --------------------------------------
head -c 3000 "$scratch/step-60" >"$dir/checkpoints/step-60.safetensors"
rm "$dir/checkpoints/step-20.safetensors"
run "$TRAINRUN" resume "$dir"
expect_rc 0 "resume past a truncated checkpoint"
expect_in "$out" "skipped damaged checkpoints" "the damaged file is reported"
expect_in "$out" "resuming $dir at step 40" "the previous checkpoint is used"
checks=$((checks + 1))
cmp -s "$scratch/step-60" "$dir/checkpoints/step-60.safetensors" || fail "resuming from step 40 changed the result"
finish
