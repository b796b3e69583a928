#!/bin/sh
# Memory limits as batch systems and containers set them. Under RLIMIT_AS or RLIMIT_DATA
# (prlimit, ulimit -v/-d) a run refuses at start — exit 3 in seconds, naming the limit that
# would do, nothing written — and trains under the limit it named; OpenBLAS (and cuBLASLt) are
# loaded at run time, after that check, never by the dynamic loader before main (where
# OpenBLAS spun). A memory cgroup's memory.max or memory.high (here a fake v2 tree,
# TRAINRUN_CGROUP_ROOT) is a ceiling the planner plans within and says so; exit 3 when
# nothing fits under it. tests/limits-cgroup.sh does the same in a real cgroup.
. "$srcdir/tests/lib.sh"
recipes=$srcdir/recipes
command -v prlimit >/dev/null || { echo "SKIP: no prlimit (util-linux)"; exit 77; }

# The libraries the dynamic loader maps before main: not OpenBLAS, not cuBLASLt.
needed=$(readelf -d "$TRAINRUN" | grep NEEDED)
expect_not_in "$needed" "libopenblas" "OpenBLAS is not DT_NEEDED"
expect_not_in "$needed" "libcublasLt" "cuBLASLt is not DT_NEEDED"
run "$TRAINRUN" --version
expect_rc 0 "--version loads OpenBLAS"
expect_in "$out" "CPU backend: OpenBLAS " "--version names the kernels"
expect_not_in "$out" "not loaded" "--version without a limit"

# What this host reserves is measured once, without a limit, into the test's own cache.
run "$TRAINRUN" calibrate
expect_rc 0 "calibrate without a limit"
expect_in "$(cat "$XDG_CACHE_HOME"/trainrun/calibration/*.json)" '"address_space"' "the calibration keeps the address space"

# 200 MB: OpenBLAS's buffers alone do not fit. Refused at start, in seconds, nothing written.
started=$(date +%s)
run timeout 120 prlimit --as=200000000 "$TRAINRUN" "$recipes/mlp.yaml" --quiet report.dir="$scratch/runs"
expect_rc 3 "RLIMIT_AS 200 MB"
expect_in "$err" "RLIMIT_AS is 200 MB; this run reserves about " "the limit and the reservation named"
expect_in "$err" "raise it to at least " "the limit that would do"
expect_in "$err" "(ulimit -v " "the shell's way to set it"
checks=$((checks + 1))
[ $(($(date +%s) - started)) -lt 60 ] || fail "RLIMIT_AS 200 MB took $(($(date +%s) - started)) s"
checks=$((checks + 1))
[ ! -e "$scratch/runs" ] || fail "a refused run left $(ls -R "$scratch/runs")"
need=$(printf '%s\n' "$err" | sed -n 's/.*raise it to at least \([0-9]*\) MB.*/\1/p' | head -n 1)
reserved=$(printf '%s\n' "$err" | sed -n 's/.*this run reserves about \([0-9]*\) MB.*/\1/p' | head -n 1)
checks=$((checks + 1))
[ -n "$need" ] && [ "$need" -gt 200 ] || fail "no limit named above 200 MB: $err"

# 400 MB (where OpenBLAS used to spin in the first GEMM, deaf to SIGTERM): refused alike.
run timeout 120 prlimit --as=400000000 "$TRAINRUN" "$recipes/mlp.yaml" --quiet report.dir="$scratch/runs"
expect_rc 3 "RLIMIT_AS 400 MB"
# the same reservation named (each process's address space differs by a few hundred KB: a
# megabyte either way)
again=$(printf '%s\n' "$err" | sed -n 's/.*RLIMIT_AS is 400 MB; this run reserves about \([0-9]*\) MB.*/\1/p' | head -n 1)
checks=$((checks + 1))
[ -n "$again" ] && [ $((again - reserved)) -le 1 ] && [ $((reserved - again)) -le 1 ] ||
  fail "the same reservation named: $reserved MB under 200 MB, then '$again' under 400 MB: $err"

# RLIMIT_DATA counts VmData: its own figure, and ulimit -d.
run timeout 120 prlimit --data=200000000 "$TRAINRUN" "$recipes/mlp.yaml" --quiet report.dir="$scratch/runs"
expect_rc 3 "RLIMIT_DATA 200 MB"
expect_in "$err" "RLIMIT_DATA is 200 MB; this run reserves about " "RLIMIT_DATA named"
expect_in "$err" "(ulimit -d " "ulimit -d"

# With the limit named, it trains.
run timeout 900 prlimit --as="${need}000000" "$TRAINRUN" "$recipes/mlp.yaml" --quiet train.steps=20 \
  train.eval_every=20 report.dir="$scratch/runs"
expect_rc 0 "RLIMIT_AS of the $need MB named"
expect_in "$out" "mlp: test accuracy" "it trained"

# The planner plans within it and says so; 1 MB less than the whole is refused naming it.
run timeout 300 prlimit --as="${need}000000" "$TRAINRUN" plan "$recipes/mlp.yaml"
expect_rc 0 "plan under the named limit"
expect_in "$out" "RLIMIT_AS is $need MB, and this run reserves about " "plan says it plans within the limit"
expect_in "$out" "below the budget" "and below what the budget"

# A run killed with SIGTERM under the limit ends the documented way (130), never spins.
timeout 900 prlimit --as="$((need + 2))000000" "$TRAINRUN" "$recipes/mlp.yaml" --quiet train.steps=100000 \
  report.dir="$scratch/term" >"$scratch/term.out" 2>&1 &
pid=$!
i=0
while [ $i -lt 600 ] && ! ls "$scratch"/term/mlp/*/run.json >/dev/null 2>&1 && kill -0 $pid 2>/dev/null; do
  sleep 0.5; i=$((i + 1))
done
sleep 2
kill -TERM $pid 2>/dev/null
i=0
while [ $i -lt 120 ] && kill -0 $pid 2>/dev/null; do sleep 0.5; i=$((i + 1)); done
checks=$((checks + 1))
if kill -0 $pid 2>/dev/null; then
  fail "SIGTERM under RLIMIT_AS: still running 60 s later"
  kill -KILL $pid
fi
wait $pid
rc=$?
err=$(cat "$scratch/term.out")
expect_rc 130 "SIGTERM under RLIMIT_AS"

# Commands that do not train work under a small limit; plan says what would do.
run timeout 120 prlimit --as=200000000 "$TRAINRUN" check "$recipes/mlp.yaml"
expect_rc 0 "check under 200 MB"
run timeout 120 prlimit --as=200000000 "$TRAINRUN" --help
expect_rc 0 "--help under 200 MB"
run timeout 120 prlimit --as=200000000 "$TRAINRUN" --version
expect_rc 0 "--version under 200 MB"
expect_in "$out" "not loaded" "--version says OpenBLAS is not loaded"
run timeout 120 prlimit --as=200000000 "$TRAINRUN" plan "$recipes/mlp.yaml"
expect_rc 3 "plan under 200 MB"
expect_in "$out" "no plan: RLIMIT_AS is 200 MB; this run reserves about $reserved MB" "plan names the limit"
run timeout 120 prlimit --as=200000000 "$TRAINRUN" report --help
expect_rc 0 "report under 200 MB"

# calibrate measures unhindered, so it refuses a hard limit rather than spin in OpenBLAS.
run timeout 120 prlimit --as=300000000 "$TRAINRUN" calibrate --force
expect_rc 3 "calibrate under a hard limit"
expect_in "$err" "run \`trainrun calibrate\` once without it" "calibrate says how"
# Nothing measured yet (a fresh cache): refused at start, saying how to measure.
XDG_CACHE_HOME=$scratch/fresh-cache run timeout 120 prlimit --as=200000000 "$TRAINRUN" "$recipes/mlp.yaml" \
  --quiet report.dir="$scratch/runs"
expect_rc 3 "no measurement under a limit"
expect_in "$err" "is not measured" "says the measurement is missing"
expect_in "$err" "run \`trainrun calibrate\` once without the limit" "says how to measure"

# ---- the memory cgroup: a fake v2 tree ----------------------------------------------------------
cg=$scratch/cgroup
mkdir -p "$cg/job/step"
echo "0::/job/step" >"$cg/cgroup.self"
echo max >"$cg/job/step/memory.max"
echo max >"$cg/job/step/memory.high"
echo 536870912 >"$cg/job/memory.max"
echo max >"$cg/job/memory.high"
TRAINRUN_CGROUP_ROOT=$cg run "$TRAINRUN" plan "$recipes/mlp.yaml" budget.memory=2GiB
expect_rc 0 "plan under an ancestor's memory.max"
expect_in "$out" "memory.max of cgroup /job is 512.00 MiB: planning within 512.00 MiB, below the budget 2.00 GiB" \
  "plan says it plans within the ancestor's memory.max"
expect_in "$out" "budget: 512.00 MiB for the footprint" "the budget is the ceiling"
run "$TRAINRUN" plan "$recipes/mlp.yaml" budget.memory=2GiB
expect_not_in "$out" "memory.max" "no ceiling without one"

# memory.high is lower: the throttle, not only the kill, is the ceiling.
echo 314572800 >"$cg/job/step/memory.high"
TRAINRUN_CGROUP_ROOT=$cg run "$TRAINRUN" plan "$recipes/mlp.yaml" budget.memory=2GiB
expect_rc 0 "plan under memory.high"
expect_in "$out" "memory.high of cgroup /job/step is 300.00 MiB" "memory.high named"

# Other processes' anonymous memory in the cgroup is not there for this one.
printf 'anon 4294967296\nfile 1073741824\n' >"$cg/job/step/memory.stat"
TRAINRUN_CGROUP_ROOT=$cg run "$TRAINRUN" plan "$recipes/mlp.yaml" budget.memory=2GiB
expect_rc 3 "others hold the cgroup's memory"
expect_in "$out" "other processes in it hold" "what others hold said"
rm "$cg/job/step/memory.stat"

# Nothing fits: exit 3 naming the cgroup's limit, for plan and for run, nothing written.
echo 16777216 >"$cg/job/memory.max"
TRAINRUN_CGROUP_ROOT=$cg run "$TRAINRUN" plan "$recipes/mlp.yaml"
expect_rc 3 "plan: nothing fits under memory.max"
expect_in "$out" "the memory.max of this process's cgroup" "the cgroup named"
expect_in "$out" "memory.max (16.00 MiB) would have to be at least" "what would do"
TRAINRUN_CGROUP_ROOT=$cg run "$TRAINRUN" "$recipes/mlp.yaml" --quiet report.dir="$scratch/cg-runs"
expect_rc 3 "run: nothing fits under memory.max"
checks=$((checks + 1))
[ ! -e "$scratch/cg-runs/mlp" ] || [ -z "$(ls "$scratch/cg-runs/mlp" 2>/dev/null | grep -v '^\.lock$')" ] ||
  fail "a refused run left $(ls "$scratch/cg-runs/mlp")"
finish
