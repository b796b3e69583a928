#!/bin/sh
# A data set's prepare script (trainrun-dataset(5), PREPARE SCRIPTS) as a nightly job meets it:
# the script runs in a process group of its own; past data.prepare_timeout it and every process
# it started are ended (exit 4, naming the script and the limit), SIGTERM first and SIGKILL for
# what ignores it; SIGTERM, SIGINT or SIGHUP to trainrun end the group too (exit 130); a script
# that exits leaving a child behind leaves no process either; one that finishes in time makes
# its files and the run trains on them. After each, pgrep finds nothing of the script's group.
. "$srcdir/tests/lib.sh"
command -v pgrep >/dev/null 2>&1 || { echo "SKIP: pgrep (procps) looks for what a script left"; exit 77; }
TRAINRUN_DATASETS=$scratch/datasets
MARKS=$scratch/marks
export TRAINRUN_DATASETS MARKS
mkdir -p "$MARKS"

# define NAME SCRIPT: datasets/NAME, the iris table made by a prepare script whose body is SCRIPT
# (it may write $MARKS/pgid: its process group, which trainrun made for it).
define() {
  mkdir -p "$scratch/datasets/$1"
  cat >"$scratch/datasets/$1/dataset.yaml" <<YAML
name: $1
prepare: prepare
source: iris.csv
format: csv
header: sklearn
label: last
num_classes: 3
split: {valid: 0.1, test: 0.2, seed: 0}
YAML
  printf '%s\n' "ps -o pgid= \$\$ | tr -d ' ' >\"\$MARKS/pgid\"" "$2" >"$scratch/datasets/$1/prepare"
  rm -f "$MARKS/pgid"
}
train_args() {
  echo "$srcdir/recipes/mlp.yaml data.dataset=$1 train.steps=3 train.eval_every=3 train.checkpoint_every=0 \
data.num_workers=0 report.dir=$scratch/runs"
}
# left: the processes still in the script's group, as "pid command" lines ("" when none).
left() {
  [ -s "$MARKS/pgid" ] || { echo "(the script never wrote its group)"; return; }
  pgrep -a -g "$(cat "$MARKS/pgid")" 2>/dev/null
}
expect_group_gone() {
  checks=$((checks + 1))
  gone=$(left)
  [ -z "$gone" ] || fail "$1: processes of the prepare script's group were left: $gone"
}
wait_for() {   # wait_for FILE: up to 60 s for it to exist
  i=0
  while [ ! -e "$1" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
}

# In time: the files are made and used; the group it left (a background sleep) is ended.
define good "cp \"$srcdir/datasets/iris/iris.csv\" \"\$1/iris.csv.tmp\" && mv \"\$1/iris.csv.tmp\" \"\$1/iris.csv\"
sleep 300 &"
# shellcheck disable=SC2046
run "$TRAINRUN" $(train_args good)
expect_rc 0 "a prepare script that finishes in time"
expect_group_gone "a script that exited with a child in the background"

# Past the limit: exit 4 naming the script and the limit; its child and itself ended.
define slow "sleep 300 &
sleep 300"
started=$(date +%s)
# shellcheck disable=SC2046
run "$TRAINRUN" $(train_args slow) data.prepare_timeout=2s
took=$(($(date +%s) - started))
expect_rc 4 "a prepare script past data.prepare_timeout"
expect_in "$err" "prepare: sh $scratch/datasets/slow/prepare" "the message names the script"
expect_in "$err" "did not finish within 2 s (data.prepare_timeout)" "the message names the limit"
expect_group_gone "a script past its limit"
checks=$((checks + 1))
[ "$took" -lt 60 ] || fail "a 2 s limit took $took s to end the script"
checks=$((checks + 1))
[ "$(ls "$scratch/runs/mlp" | grep -c '^[0-9]')" = 1 ] || fail "a run folder was made for a run without data: $(ls "$scratch/runs/mlp")"

# A child that ignores SIGTERM is killed after the grace period.
define stubborn "(trap '' TERM; sleep 300; sleep 300) &
sleep 300"
# shellcheck disable=SC2046
run "$TRAINRUN" $(train_args stubborn) data.prepare_timeout=1s
expect_rc 4 "a script whose child ignores SIGTERM"
expect_group_gone "a child that ignores SIGTERM"

# A signal to trainrun while the script runs: the group is ended, trainrun exits 130.
for sig in TERM INT HUP; do
  define signalled "sleep 300 &
echo >\"\$MARKS/started\"
sleep 300"
  rm -f "$MARKS/started"
  # shellcheck disable=SC2046
  "$TRAINRUN" $(train_args signalled) >"$scratch/out" 2>"$scratch/err" &
  pid=$!
  wait_for "$MARKS/started"
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  err=$(cat "$scratch/err")
  expect_rc 130 "SIG$sig to trainrun while a prepare script runs"
  expect_in "$err" "prepare: sh $scratch/datasets/signalled/prepare" "SIG$sig: the message names the script"
  expect_in "$err" "was stopped by signal" "SIG$sig: the message says a signal stopped it"
  expect_group_gone "SIG$sig to trainrun"
done

# The default limit is documented and shown.
run "$TRAINRUN" check "$srcdir/recipes/mlp.yaml"
expect_in "$out" "prepare_timeout: 30m" "check shows the default limit"
finish
