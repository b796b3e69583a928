#!/bin/sh
# Notifications as a nightly job meets them, against tests/webhook.py on loopback: a finished
# run, the same resumed, a diverged one and one whose data could not be read each POST their
# summary when listed in report.notify.on, and nothing when not; a webhook that hangs holds the
# run for the timeout, no longer; a webhook that fails twice is tried again; the header secret
# from the environment reaches the webhook and nothing else; a URL's token never shows.
. "$srcdir/tests/lib.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 runs the test webhook"; exit 77; }
unset http_proxy HTTP_PROXY https_proxy HTTPS_PROXY all_proxy ALL_PROXY   # loopback, directly
cd "$scratch"

hooks=
trap 'for p in $hooks; do kill "$p" 2>/dev/null; done; rm -rf "$scratch"' EXIT

# start_hook NAME [webhook.py options]: a webhook logging to $scratch/NAME.jsonl; sets $port.
start_hook() {
  name=$1
  shift
  python3 "$srcdir/tests/webhook.py" "$scratch/$name.port" "$scratch/$name.jsonl" --lifetime 60 "$@" &
  hooks="$hooks $!"
  i=0
  while [ ! -s "$scratch/$name.port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
  port=$(cat "$scratch/$name.port")
  : >>"$scratch/$name.jsonl"
}

# field NAME EXPR: EXPR (Python, over the last POST as `p`, its body as `b`) in NAME's log.
field() {
  python3 -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
p = json.loads(lines[-1]) if lines else {}
b = p.get("body", {})
print(eval(sys.argv[2]))' "$scratch/$1.jsonl" "$2"
}

posts() { wc -l <"$scratch/$1.jsonl" | tr -d ' '; }

now_ms() { python3 -c 'import time; print(int(time.monotonic() * 1000))'; }

mlp() { run "$TRAINRUN" "$srcdir/recipes/mlp.yaml" train.steps=20 --quiet "$@"; }

# 1. A finished run, listed: the summary, its header from the environment, and no trace of
#    that header's secret anywhere else.
secret="notify-secret-$$"
HOOK_AUTH="Authorization: Bearer $secret"
export HOOK_AUTH
start_hook ok
mlp report.dir="$scratch/ok" "report.notify={url: 'http://127.0.0.1:$port/hook', on: [success], headers_from_env: [HOOK_AUTH]}"
expect_rc 0 "a run that notifies"
dir=$(ls -d "$scratch"/ok/mlp/2* | head -n 1)
expect_in "$(posts ok)" 1 "one POST for one run"
expect_in "$(field ok 'p["path"]')" "/hook" "the POST's path"
expect_in "$(field ok 'p["headers"].get("Content-Type")')" "application/json" "the POST's content type"
expect_in "$(field ok 'p["headers"].get("Authorization")')" "Bearer $secret" "the header from the environment"
expect_in "$(field ok 'b["outcome"], b["status"], b["exit_code"], b["recipe"]')" "('success', 'finished', 0, 'mlp')" \
  "the body: outcome, status, exit code, recipe"
expect_in "$(field ok 'b["run"] == "'"${dir##*/}"'", b["run_dir"].endswith("'"${dir#"$scratch"}"'")')" "(True, True)" \
  "the body: run and run_dir"
expect_in "$(field ok 'b["report"].endswith("/report.html"), b["key_metric"]["name"], type(b["warnings"]).__name__')" \
  "(True, 'test/accuracy', 'list')" "the body: report, key metric, warnings"
expect_in "$(field ok 'type(b["duration_seconds"]).__name__, bool(b["host"])')" "('float', True)" \
  "the body: duration and host"
expect_in "$(cat "$dir/log.txt")" "notified http://127.0.0.1:$port/… of the success (HTTP 200, 1 attempt" \
  "log.txt: the delivery"
checks=$((checks + 1))
if grep -rl "$secret" "$scratch/ok" >/dev/null || printf '%s\n%s' "$out" "$err" | grep -q "$secret"; then
  fail "the header's secret left the request: $(grep -rl "$secret" "$scratch/ok") $out $err"
fi

# A resumed run notifies as well, named by its folder even when reached through its link.
run "$TRAINRUN" resume "$scratch/ok/mlp/latest" --quiet
expect_rc 0 "a resumed run that notifies"
expect_in "$(posts ok)" 2 "a POST for the resumed run"
expect_in "$(field ok 'b["run"], b["outcome"]')" "('${dir##*/}', 'success')" "the resumed run's body"

# 2. Only outcomes listed notify: on: [failure] stays silent after a finished run.
start_hook quiet
mlp report.dir="$scratch/quiet" "report.notify={url: 'http://127.0.0.1:$port/', on: [failure]}"
expect_rc 0 "a finished run, notifying only failures"
expect_in "$(posts quiet)" 0 "nothing posted for an outcome not listed"

# 3. A diverging run notifies with the default on: [failure, regression]; its status stays 5.
start_hook fail
run "$TRAINRUN" "$srcdir/recipes/mlp.yaml" 'train.optimizer={name: sgd, lr: 10, momentum: 0.9}' \
  train.grad_clip=null train.steps=200 report.dir="$scratch/fail" --quiet "report.notify=http://127.0.0.1:$port/"
expect_rc 5 "a diverging run, notifying"
expect_in "$(field fail 'b["outcome"], b["status"], b["exit_code"]')" "('failure', 'failed', 5)" \
  "a diverged run's body"

# 3b. A regression (the promotion gate: a worse run than the promoted one exits 6) notifies with
#     the default on: [failure, regression], and the body says so.
mlp report.dir="$scratch/regress" report.promote.metric=key train.steps=40
expect_rc 0 "the run that is promoted"
mlp report.dir="$scratch/regress" report.promote.metric=key train.steps=2 "report.notify=http://127.0.0.1:$port/"
expect_rc 6 "a worse run: a regression"
expect_in "$(field fail 'b["outcome"], b["status"], b["exit_code"]')" "('regression', 'regression', 6)" \
  "a regression's body"

# 4. A run that failed before its folder existed (no such data set) notifies all the same.
mlp data.dataset=no-such-data report.dir="$scratch/nodata" "report.notify=http://127.0.0.1:$port/"
expect_rc 4 "a run without its data"
expect_in "$(field fail 'b["outcome"], b["exit_code"], b["run_dir"], b["recipe"]')" "('failure', 4, None, 'mlp')" \
  "the body of a run that had no folder"

# 5. A webhook that never answers holds the run for report.notify.timeout, not longer, and
#    leaves its status alone.
start_hook hang --mode hang
#    The wait is timed from the result line (the run is done; only the webhook is left) to the
#    exit, so the training's own time, noisy on a loaded machine, is not in it.
"$TRAINRUN" "$srcdir/recipes/mlp.yaml" train.steps=20 --quiet report.dir="$scratch/hang" \
  "report.notify={url: 'http://127.0.0.1:$port/', on: [success], timeout: 2s}" >"$scratch/hang.out" 2>"$scratch/hang.err" &
pid=$!
i=0
while [ ! -s "$scratch/hang.out" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
t1=$(now_ms)
wait "$pid"
rc=$?
waited=$(($(now_ms) - t1))
err=$(cat "$scratch/hang.err")
expect_rc 0 "a run whose webhook hangs"
echo "a webhook that hangs, timeout 2s: the run ended $waited ms after its result line"
checks=$((checks + 1))
[ "$waited" -ge 1300 ] && [ "$waited" -le 4000 ] ||
  fail "a 2 s timeout held the run $waited ms after its result line"
expect_in "$err" "trainrun: warning: could not notify http://127.0.0.1:$port of the success: Timeout was reached" \
  "the hang is a warning"
expect_in "$(cat "$scratch"/hang/mlp/2*/log.txt)" "warning: could not notify" "log.txt: the hang"

# 5b. A signal while the webhook hangs ends the wait at once: exit 130, said in log.txt, not a
#     silent death by the signal (143) after run.json said 0.
for sig in TERM HUP; do
  rm -rf "$scratch/cut"
  "$TRAINRUN" "$srcdir/recipes/mlp.yaml" train.steps=20 --quiet report.dir="$scratch/cut" \
    "report.notify={url: 'http://127.0.0.1:$port/', on: [success], timeout: 60s}" >"$scratch/cut.out" 2>"$scratch/cut.err" &
  pid=$!
  i=0   # the run is done once its result line is out; the webhook then hangs
  while [ ! -s "$scratch/cut.out" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
  sleep 0.5
  t0=$(now_ms)
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  waited=$(($(now_ms) - t0))
  err=$(cat "$scratch/cut.err")
  expect_rc 130 "SIG$sig while the webhook hangs"
  checks=$((checks + 1))
  [ "$waited" -le 5000 ] || fail "SIG$sig while the webhook hangs: trainrun took $waited ms to end"
  expect_in "$err" "notifying http://127.0.0.1:$port of the success: stopped by signal" "SIG$sig: the message"
  expect_in "$(cat "$scratch"/cut/mlp/2*/log.txt)" "stopped by signal" "SIG$sig: log.txt says the webhook was cut"
  record=$(tr -d ' \n' <"$(ls -d "$scratch"/cut/mlp/2*/)run.json")
  expect_in "$record" "\"exit_code\":130,\"outcome\":\"interrupted\",\"signal\":\"SIG$sig\"" \
    "SIG$sig: run.json ends as the process did"
  expect_in "$record" "\"notification\":\"cutbySIG$sig\"" "SIG$sig: run.json says the notification was cut"
done

# 6. 500, 500, then 200: tried again, delivered.
start_hook flaky --mode fail-first --failures 2
mlp report.dir="$scratch/flaky" "report.notify={url: 'http://127.0.0.1:$port/', on: [success]}"
expect_rc 0 "a run whose webhook fails twice"
expect_in "$(posts flaky)" 3 "three attempts"
expect_in "$(field flaky 'b["outcome"]')" "success" "the third attempt's body"
expect_in "$(cat "$scratch"/flaky/mlp/2*/log.txt)" "(HTTP 200, 3 attempts in" "log.txt: delivered on the third"
expect_not_in "$err" "warning" "a delivered notification warns of nothing"

# 7. Nobody listening, and a token in the URL: the message shows neither it nor the path.
down=$port
kill ${hooks##* } 2>/dev/null
wait ${hooks##* } 2>/dev/null
mlp report.dir="$scratch/down" \
  "report.notify={url: 'http://127.0.0.1:$down/hooks/T0/B0/PATHSECRET?token=URLSECRET', on: [success], timeout: 3s}"
expect_rc 0 "a run whose webhook is down"
expect_in "$err" "warning: could not notify http://127.0.0.1:$down/…?*** of the success:" "the redacted URL"
log=$(cat "$scratch"/down/mlp/2*/log.txt)
for word in URLSECRET PATHSECRET; do
  expect_not_in "$out$err" "$word" "the URL's secrets on the terminal"
  expect_not_in "$log" "$word" "the URL's secrets in log.txt"
done
finish
