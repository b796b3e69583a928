#!/bin/sh
# The sampler (report.monitor_every; src/report/monitor.c): a run sampled every 50 ms has the
# host's CPU utilisation and frequency, the cores it used and its resident set in metrics.jsonl
# (monitor/…) and a summary in run.json with what a sample cost; without NVML (no GPU driver
# here) the GPUs are skipped with a note; 0 turns it off.
. "$srcdir/tests/lib.sh"
recipe="$srcdir/recipes/mlp.yaml"
cores=$(nproc)
run "$TRAINRUN" "$recipe" train.steps=1500 train.eval_every=0 train.eval_samples=8 report.log_every=300 \
  report.monitor_every=0.05s report.dir="$scratch/on" --quiet
expect_rc 0 "a monitored run"
checks=$((checks + 1))
python3 - "$scratch/on/mlp/latest" "$cores" <<'PY' || fail "the sampler's readings"
import json, sys
run, cores = sys.argv[1], int(sys.argv[2])
lines = [json.loads(l) for l in open(run + "/metrics.jsonl")]
seen = [l for l in lines if "monitor/cpu_utilization" in l]
assert len(seen) >= 2, "monitor/ metrics on %d lines" % len(seen)
for l in seen:
    assert 0 <= l["monitor/cpu_utilization"] <= 100.5, l
    assert 0 < l["monitor/process_cores"] <= cores + 0.5, l
    assert l["monitor/rss"] > 1 << 20, l
    if "monitor/cpu_mhz" in l:
        assert 100 < l["monitor/cpu_mhz"] < 10000, l
m = json.load(open(run + "/run.json"))["monitor"]
assert m["interval_seconds"] == 0.05 and m["samples"] >= 5, m
assert 0 < m["sample_seconds"] < 0.01, m   # a sample costs well under its interval
gpus = m["gpus"]
if not gpus:
    assert "GPU monitoring skipped" in m["note"], m["note"]
print("%d samples, %.0f µs each; %s" % (m["samples"], m["sample_seconds"] * 1e6, m["note"]))
PY
run "$TRAINRUN" "$recipe" train.steps=50 report.monitor_every=0 report.dir="$scratch/off" --quiet
expect_rc 0 "monitoring off"
checks=$((checks + 1))
grep -q monitor/ "$scratch"/off/mlp/latest/metrics.jsonl && fail "monitor/ metrics with monitor_every 0"
python3 -c "import json,sys; sys.exit('monitor' in json.load(open(sys.argv[1])))" "$scratch/off/mlp/latest/run.json" ||
  fail "run.json's monitor with monitor_every 0"
finish
