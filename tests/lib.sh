# Helpers for the shell tests, which run the real binary as a user would (sourced, POSIX sh).
# Each test gets a fresh scratch folder, removed on exit, and counts its failed checks.
set -u
: "${TRAINRUN:?set TRAINRUN to the trainrun binary}" "${srcdir:?set srcdir}"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/trainrun-test.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
XDG_CACHE_HOME=$scratch/cache   # trainrun's caches (tokens, prepared data sets): the test's own
export XDG_CACHE_HOME
TRAINRUN_DEVICES=$srcdir/etc/devices.yaml   # the device profiles of this source tree
export TRAINRUN_DEVICES
# The planner's first calibration is cached only when its rounds settle; a loaded test machine's
# would not, and every plan would measure again. Tests plan on whatever this machine measures
# (the forecast's accuracy is bench/'s): any spread is settled enough. tests/plan.sh tries the rule.
TRAINRUN_CALIBRATE_TOLERANCE=${TRAINRUN_CALIBRATE_TOLERANCE:-1000000}
export TRAINRUN_CALIBRATE_TOLERANCE
failures=0
checks=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# run CMD...: runs it, keeping stdout in $out, stderr in $err and the status in $rc.
run() {
  "$@" >"$scratch/.out" 2>"$scratch/.err"
  rc=$?
  out=$(cat "$scratch/.out")
  err=$(cat "$scratch/.err")
}

# expect_rc N WHAT: the last run's status must be N.
expect_rc() {
  checks=$((checks + 1))
  [ "$rc" = "$1" ] || fail "$2: exit status $rc, expected $1; stderr: $err"
}

# expect_in TEXT NEEDLE WHAT: TEXT must contain the fixed string NEEDLE.
expect_in() {
  checks=$((checks + 1))
  case "$1" in *"$2"*) ;; *) fail "$3: missing '$2' in: $1" ;; esac
}

expect_not_in() {
  checks=$((checks + 1))
  case "$1" in *"$2"*) fail "$3: unexpected '$2' in: $1" ;; esac
}

# same_losses A B WHAT TOLERANCE [STEPS]: run folders A and B logged train/loss at the same steps
# (STEPS of them; else at least 10), each within TOLERANCE relative of the other; the worst said.
same_losses() {
  checks=$((checks + 1))
  python3 - "$@" <<'PY' || fail "$3: the losses differ (beyond $4 relative), or at other steps"
import json, sys
def losses(d):
    return {j["step"]: j["train/loss"] for j in map(json.loads, open(d + "/metrics.jsonl")) if "train/loss" in j}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
worst = max(abs(a[s] - b[s]) / abs(a[s]) for s in a)
print("%s: %d steps, worst relative loss difference %.3g" % (sys.argv[3], len(a), worst))
steps = len(a) == int(sys.argv[5]) if len(sys.argv) > 5 else len(a) >= 10
sys.exit(0 if sorted(a) == sorted(b) and steps and worst <= float(sys.argv[4]) else 1)
PY
}

# sigterm_cut LABEL STEP LAUNCH...: LAUNCH (a whole command line: trainrun or mpirun … trainrun, the
# recipe and its keys) into $scratch/LABEL, SIGTERM to its trainrun processes alone once step STEP
# is checkpointed (mpirun, signalled, would end ranks slow to stop); the run folder in $dir, its
# output in $scratch/cut.out.
sigterm_cut() {
  label=$1 at=$2
  shift 2
  rm -rf "${scratch:?}/$label"
  "$@" report.dir="$scratch/$label" --quiet >"$scratch/cut.out" 2>&1 &
  launched=$!
  i=0
  while ! ls "$scratch/$label"/*/latest/checkpoints/step-"$at".safetensors >/dev/null 2>&1 && [ $i -lt 1200 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  pkill -TERM -f "^$TRAINRUN .*report.dir=$scratch/$label" 2>/dev/null
  wait "$launched"
  dir=$(echo "$scratch/$label"/*/latest)
  checks=$((checks + 1))
  grep -q "stopped by SIGTERM after step" "$dir/log.txt" || fail "$label: not stopped by SIGTERM: $(tail -n 3 "$scratch/cut.out")"
}

# signal_rank1 SIGNAL PATTERN: SIGNAL to rank 1's process (OMPI_COMM_WORLD_RANK=1) among those
# PATTERN matches (pgrep -f), then up to 60 s for $launcher (mpirun) to end: the seconds that
# took in $took, its status in $rc, rank 1's pid in $victim. 1, and $launcher killed, when no
# rank 1 runs.
signal_rank1() {
  victim=
  for p in $(pgrep -f "$2"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && victim=$p
  done
  [ -n "$victim" ] || { kill "$launcher"; return 1; }
  began=$(date +%s)
  kill "-$1" "$victim"
  i=0
  while kill -0 "$launcher" 2>/dev/null && [ $i -lt 600 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  took=$(($(date +%s) - began))
  wait "$launcher"
  rc=$?
}

# kill_rank1 WHAT LABEL LAUNCH...: LAUNCH (mpirun … trainrun, a recipe of 1,000,000 steps with
# distributed.timeout=5s and checkpoints every 20) into $scratch/LABEL; once step 20 is
# checkpointed, rank 1 killed (SIGKILL): every rank ends within distributed.timeout + 10 s, none
# left running, mpirun not 0. WHAT names the rank in the sentences ("a killed stage").
kill_rank1() {
  what=$1 label=$2
  shift 2
  rm -rf "${scratch:?}/$label"
  "$@" report.dir="$scratch/$label" --quiet >"$scratch/$label.out" 2>"$scratch/$label.err" &
  launcher=$!
  i=0
  while ! ls "$scratch/$label"/*/latest/checkpoints/step-20.safetensors >/dev/null 2>&1 && [ $i -lt 1200 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  checks=$((checks + 1))
  signal_rank1 KILL "report.dir=$scratch/$label" || { fail "$what: no rank 1 to kill"; return; }
  [ "$took" -le 15 ] || fail "$what: the ranks ended after $took s, more than distributed.timeout + 10"
  checks=$((checks + 1))
  pgrep -f "report.dir=$scratch/$label" >/dev/null && fail "$what: a rank is left running"
  checks=$((checks + 1))
  [ "$rc" -ne 0 ] || fail "$what: mpirun said 0"
  echo "$what: every rank ended after $took s, status $rc"
}

# mpi_ranks: for a test of ranks under mpirun: skips (77) without mpirun or where trainrun was built
# without MPI; one thread a rank, mpirun as root allowed, the data sets the benchmarks use (and
# the CPU tests of ranks) made in the test's own folder.
mpi_ranks() {
  command -v mpirun >/dev/null || { echo "SKIP: no mpirun (scripts/setup installs openmpi-bin)"; exit 77; }
  "$TRAINRUN" --version | grep -q "^Ranks: across processes over MPI" ||
    { echo "SKIP: trainrun was built without MPI"; exit 77; }
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
  export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMP_NUM_THREADS
  TRAINRUN_DATASETS=$scratch/datasets
  export TRAINRUN_DATASETS
  "$srcdir/bench/gpu/datasets" "$TRAINRUN_DATASETS" >/dev/null || { echo "FAIL: bench/gpu/datasets"; exit 1; }
}

# gpu_skip_reason VERSION: why a test that needs a GPU must skip, from `trainrun --version`'s
# text (built without CUDA, or no GPU visible); prints nothing and fails when a GPU is seen.
gpu_skip_reason() {
  case "$1" in
    *"CUDA backend: not built"*) echo "built without CUDA" ;;
    *"GPUs seen: 0"*) echo "no GPU visible" ;;
    *) return 1 ;;
  esac
}

finish() {
  echo "$checks checks, $failures failed"
  [ "$failures" = 0 ]
  exit $?
}
