#!/bin/sh
# The Prometheus textfile (src/report/prometheus.c): a run's end rewrites trainrun.prom beside the
# recipe's run folders (or where report.prometheus says), and node_exporter's textfile collector
# (Debian's prometheus-node-exporter, on loopback) serves its metrics without a scrape error: a
# finished run and then a failed one, each as it ended.
. "$srcdir/tests/lib.sh"
exporter=$(command -v prometheus-node-exporter || command -v node_exporter || true)
[ -n "$exporter" ] || { echo "SKIP: no prometheus-node-exporter (scripts/setup installs it)"; exit 77; }
recipe="$srcdir/recipes/mlp.yaml"
short="train.eval_every=0 train.eval_samples=8 report.tensorboard=false --quiet"

# metrics PROM_DIR: what node_exporter serves from the textfiles in PROM_DIR, into $scratch/metrics.
metrics() {
  port=$((20000 + $$ % 20000))
  "$exporter" --collector.disable-defaults --collector.textfile --collector.textfile.directory="$1" \
    --web.listen-address=127.0.0.1:$port >"$scratch/exporter.log" 2>&1 &
  pid=$!
  python3 - "$port" >"$scratch/metrics" <<'PY'
import sys, time, urllib.request
for _ in range(100):   # until it listens: 10 s at most
    try:
        print(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=2).read().decode())
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit("node_exporter did not answer")
PY
  status=$?
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  [ "$status" = 0 ] || fail "node_exporter: $(cat "$scratch/exporter.log")"
}

run "$TRAINRUN" "$recipe" train.steps=20 report.dir="$scratch/runs" $short
expect_rc 0 "a finished run"
prom="$scratch/runs/mlp/trainrun.prom"
[ -f "$prom" ] || fail "no $prom"
checks=$((checks + 1))
metrics "$scratch/runs/mlp"
m=$(cat "$scratch/metrics")
expect_in "$m" 'node_textfile_scrape_error 0' "the textfile parses"
expect_in "$m" 'trainrun_last_run_success{recipe="mlp"} 1' "success"
expect_in "$m" 'trainrun_last_run_status{recipe="mlp",status="finished"} 1' "status"
expect_in "$m" 'trainrun_last_run_exit_code{recipe="mlp"} 0' "exit code"
expect_in "$m" 'trainrun_last_run_steps{recipe="mlp"} 20' "steps"
expect_in "$m" 'trainrun_last_run_key_metric{metric="test/accuracy",recipe="mlp"}' "the key metric"
for g in duration_seconds samples_per_second footprint_bytes predicted_footprint_bytes budget_bytes \
  end_timestamp_seconds; do
  expect_in "$m" "trainrun_last_run_$g{recipe=\"mlp\"}" "$g"
done

# A run that diverges: the same file rewritten, the failure in it; nothing half-written behind.
run "$TRAINRUN" "$recipe" 'train.optimizer={name: sgd, lr: 10, momentum: 0.9}' train.grad_clip=null \
  train.steps=200 report.dir="$scratch/runs" $short
expect_rc 5 "a diverging run"
metrics "$scratch/runs/mlp"
m=$(cat "$scratch/metrics")
expect_in "$m" 'trainrun_last_run_success{recipe="mlp"} 0' "a failure"
expect_in "$m" 'trainrun_last_run_status{recipe="mlp",status="failed"} 1' "failed"
expect_in "$m" "trainrun_last_run_exit_code{recipe=\"mlp\"} $rc" "its exit code"
ls "$scratch/runs/mlp" | grep -q '\.tmp' && fail "a temporary file left beside trainrun.prom"
checks=$((checks + 1))

# report.prometheus: elsewhere; a folder that is not there is a warning, not a failure.
mkdir -p "$scratch/textfiles"
run "$TRAINRUN" "$recipe" train.steps=5 report.dir="$scratch/runs2" report.prometheus="$scratch/textfiles/mlp.prom" $short
expect_rc 0 "report.prometheus"
[ -f "$scratch/textfiles/mlp.prom" ] && [ ! -e "$scratch/runs2/mlp/trainrun.prom" ] || fail "report.prometheus's place"
checks=$((checks + 1))
run "$TRAINRUN" "$recipe" train.steps=5 report.dir="$scratch/runs3" report.prometheus="$scratch/none/mlp.prom"
expect_rc 0 "a textfile that cannot be written"
expect_in "$out" "warning: Prometheus textfile:" "its warning"
finish
