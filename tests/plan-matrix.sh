#!/bin/sh
# The planner's promise, kept on this machine: for each recipe, budgets from the smallest that
# fits to the unconstrained footprint; each run trains two steps under an OS memory limit equal
# to its budget and must end well (never killed), with regions exactly as predicted and a peak
# resident set within the budget and the prediction, having chosen what `trainrun plan` chose.
# A saved plan one byte over its budget is refused, by `trainrun plan` and by the trainer.
. "$srcdir/tests/lib.sh"
steps="train.steps=2 train.epochs=null train.eval_every=0 train.eval_samples=64 train.checkpoint_every=0
       report.log_every=1 report.tensorboard=false"
# The planner's base is this process's own resident set (rounded up to 8 MiB), which address-space
# randomisation moves by up to ~250 KB between identical runs; without it, a run lands on the
# same side of a rounding every time, so the checks repeat (setarch -R: ADDR_NO_RANDOMIZE).
grain=8388608   # what the base is rounded up to: two processes may land a grain apart
fixed=
setarch "$(uname -m)" -R true 2>/dev/null && fixed="setarch $(uname -m) -R"

# ---- the hard limit: a memory cgroup, else RLIMIT_AS ------------------------------------------
cgroup_parent=
cgroup=
if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  cgroup_kind=v2
  cgroup_parent=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
elif [ -w /sys/fs/cgroup/memory ] && [ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
  cgroup_kind=v1
  cgroup_parent=/sys/fs/cgroup/memory$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
fi
[ "$cgroup_parent" = /sys/fs/cgroup/memory/ ] && cgroup_parent=/sys/fs/cgroup/memory
cleanup() {
  [ -n "$cgroup" ] && rmdir "$cgroup" 2>/dev/null
  rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

# cgroup_make BYTES: a fresh memory cgroup limited to BYTES, swap included, in $cgroup; 1 if none.
cgroup_make() {
  [ -n "$cgroup_parent" ] || return 1
  cgroup=$cgroup_parent/trainrun-plan-matrix.$$
  mkdir "$cgroup" 2>/dev/null || { cgroup=; return 1; }
  if [ "$cgroup_kind" = v2 ]; then
    echo "$1" >"$cgroup/memory.max" && { [ ! -f "$cgroup/memory.swap.max" ] || echo 0 >"$cgroup/memory.swap.max"; }
  else   # memsw (memory + swap) may not be below the memory limit: set after it
    echo "$1" >"$cgroup/memory.limit_in_bytes" &&
      { [ ! -f "$cgroup/memory.memsw.limit_in_bytes" ] || echo "$1" >"$cgroup/memory.memsw.limit_in_bytes"; }
  fi || { rmdir "$cgroup"; cgroup=; return 1; }
}
# RLIMIT_AS counts address space, not memory: here VmPeak runs 0.6-0.85 GiB above VmHWM (malloc's
# 64 MiB arenas a thread, 8 MiB thread stacks, OpenBLAS's buffers), so the fallback allows 1 GiB
# over the budget and only stops a run gone far astray; the resident-set check does the rest.
as_margin=1073741824
if cgroup_make 1073741824; then
  rmdir "$cgroup"
  cgroup=
  echo "limit: a cgroup $cgroup_kind memory cgroup under $cgroup_parent, limit = budget, no swap"
  limit_kind=cgroup
elif command -v prlimit >/dev/null; then
  echo "limit: no memory cgroup can be made here; prlimit --as = budget + 1 GiB (address space, loose)"
  limit_kind=prlimit
else
  echo "limit: no memory cgroup can be made here; ulimit -v = budget + 1 GiB (address space, loose)"
  limit_kind=ulimit
fi

# limited BYTES CMD...: run CMD under a hard limit of BYTES (see above); $rc, $out, $err as run's.
limited() {
  bytes=$1
  shift
  case $limit_kind in
    cgroup)   # the kernel keeps a limit in whole pages, rounded down: round up to keep the budget
      if cgroup_make $(((bytes + 4095) / 4096 * 4096)); then
        run sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cgroup" "$@"
        rmdir "$cgroup" || fail "the cgroup $cgroup outlived its run"
        cgroup=
      else
        rc=1 out= err="no cgroup for $bytes bytes"
      fi ;;
    prlimit) run prlimit --as=$((bytes + as_margin)) "$@" ;;
    ulimit) run sh -c 'ulimit -v "$0" && exec "$@"' $(((bytes + as_margin) / 1024)) "$@" ;;
  esac
}

# ---- reading plan JSON (pretty-printed: the plan's own fields at two spaces of indent) --------
# field FILE NAME: the plan's top-level number NAME; the first `"NAME":` at any depth with deep.
field() { sed -n "s/^  \"$2\": \([-0-9.a-z]*\),\{0,1\}\$/\1/p" "$1" | head -n 1; }
deep() { sed -n "s/^ *\"$2\": \([-0-9.a-z]*\),\{0,1\}\$/\1/p" "$1" | head -n 1; }
# knobs FILE: the chosen knobs in one line (precision up to eval_batch, before the predictions).
knobs() { sed -n '2,/"predicted_peak_bytes"/p' "$1" | sed '$d' | tr -d ' \n'; }
# words KNOBS: the knobs for the table: "fp32 full 2/4 8x1" (accumulation × micro-batch rows),
# "bf16 none dyn 16/8/4/2" (rows of each length bucket)
words() {
  echo "$1" | sed -e 's/^"precision":"\([a-z0-9]*\)","checkpointing":{"mode":"\([a-z]*\)","blocks":\([0-9]*\),"of":\([0-9]*\)}/\1 \2 \3\/\4 /' \
    -e 's/ none [0-9]*\/[0-9]* / none /; s/ selective [0-9]*\/[0-9]* / selective /' \
    -e 's/ ,"dynamic_batching":true,"micro_batch":\[\(.*\)\],"micro".*/ dyn \1/' \
    -e 's/ ,"dynamic_batching":false,.*"micro":\([0-9]*\),"accumulation":\([0-9]*\),.*/ \2x\1/' \
    -e 's/{"max_len":[0-9]*,"rows":\([0-9]*\)},\{0,1\}/\1\//g; s/\/$//'
}
mib() { awk -v b="$1" 'BEGIN { printf "%.2f MiB", b / 1048576 }'; }

# ---- the matrix --------------------------------------------------------------------------------
# Recipes as they are, but for speed: GPT-2's 50257-token head makes a gpt-small step of 8 rows
# take 4 s here, so 2 rows and 4 evaluation samples; amp auto on two of them lets bf16 be chosen.
# ResNet's batch is 512: at 128 the process's peak while loading Fashion-MNIST (552 MiB) is above
# every plan's footprint, so every budget would be the same.
recipes="mlp: resnet:optimize.amp=auto,train.batch_size=512 bert-small:optimize.amp=auto
         gpt-small:train.batch_size=2,train.eval_samples=4"
printf '%-10s %10s  %-28s %12s %12s  %s\n' recipe budget knobs predicted measured result
pairs=0
boundary=
for entry in $recipes; do
  recipe=${entry%%:*}
  extra=$(echo "${entry#*:}" | tr , ' ')
  yaml=$srcdir/recipes/$recipe.yaml
  # shellcheck disable=SC2086
  set -- $steps $extra
  run $fixed "$TRAINRUN" plan "$yaml" "$@" budget.memory=1MiB --json
  expect_rc 3 "$recipe: nothing fits in 1 MiB"
  echo "$out" >"$scratch/min.json"
  min=$(field "$scratch/min.json" minimum_budget_bytes)
  run $fixed "$TRAINRUN" plan "$yaml" "$@" budget.memory=16GiB --json
  expect_rc 0 "$recipe: 16 GiB fits"
  echo "$out" >"$scratch/max.json"
  max=$(field "$scratch/max.json" predicted_footprint_bytes)
  if [ -z "$min" ] || [ -z "$max" ] || [ "$min" -gt "$max" ]; then
    fail "$recipe: no range of budgets (minimum '$min', unconstrained '$max')"
    continue
  fi
  budgets="$min $((min + min / 100)) $(awk -v a="$min" -v b="$max" \
    'BEGIN { for (k = 1; k <= 5; k++) printf "%.0f ", a + k * (b - a) / 6 }') $max"
  n=0
  for budget in $budgets; do
    n=$((n + 1))
    pairs=$((pairs + 1))
    run $fixed "$TRAINRUN" plan "$yaml" "$@" budget.memory="$budget" --json
    echo "$out" >"$scratch/predicted.json"
    predicted=$(knobs "$scratch/predicted.json")
    dir=$scratch/runs/$recipe-$n
    limited "$budget" $fixed "$TRAINRUN" "$yaml" "$@" budget.memory="$budget" report.dir="$dir" --quiet
    plan=$dir/$recipe/latest/plan.json
    checks=$((checks + 1))
    if [ "$rc" = 3 ]; then   # refused where `trainrun plan` fitted: only by one grain of the base
      need=$(echo "$err" | sed -n 's/.*budget.memory=\([0-9]*\) or more would fit.*/\1/p')
      printf '%-10s %10s  %-28s %12s %12s  %s\n' "$recipe" "$budget" "$(words "$predicted")" \
        "$(field "$scratch/predicted.json" predicted_footprint_bytes)" - \
        "refused: the trainer needs ${need:-?} (+$((${need:-0} - budget)) B)"
      [ -n "$need" ] && [ "$need" -gt "$budget" ] && [ $((need - budget)) -le $grain ] ||
        fail "$recipe at $budget: refused beyond one grain of the planner's minimum: $err"
      continue
    fi
    if [ "$rc" != 0 ] || [ ! -f "$plan" ]; then
      case $rc in 137 | 9) why="killed by the $limit_kind limit" ;; *) why="exit status $rc" ;; esac
      printf '%-10s %10s  %-28s %12s %12s  %s\n' "$recipe" "$budget" "$(words "$predicted")" - - "FAIL: $why"
      fail "$recipe at budget.memory=$budget ($extra): $why; stderr: $err"
      continue
    fi
    chosen=$(knobs "$plan")
    peak=$(field "$plan" predicted_peak_bytes) measured_peak=$(field "$plan" measured_peak_bytes)
    footprint=$(field "$plan" predicted_footprint_bytes) measured=$(field "$plan" measured_footprint_bytes)
    result=ok
    checks=$((checks + 3))
    [ "$peak" = "$measured_peak" ] || { result="FAIL regions"; fail "$recipe at $budget: regions peaked at $measured_peak, predicted $peak"; }
    [ "$measured" -le "$budget" ] || { result="FAIL budget"; fail "$recipe at $budget: peak resident set $measured over the budget"; }
    [ "$measured" -le "$footprint" ] || { result="FAIL footprint"; fail "$recipe at $budget: peak resident set $measured over the predicted $footprint"; }
    [ "$result" = ok ] && result="ok, $(((footprint - measured) / 1024)) KiB below"
    if [ "$chosen" != "$predicted" ]; then   # `trainrun plan` and the run plan alike, unless
      base_run=$(deep "$plan" base) base_plan=$(deep "$scratch/predicted.json" base)   # bases a grain apart
      if [ "$base_run" != "$base_plan" ]; then
        result="$result; plan chose $(words "$predicted") (its base $((base_plan - base_run)) B apart)"
      else
        result="$result; FAIL knobs"
        fail "$recipe at $budget: trained with $chosen, plan chose $predicted, on the same base"
      fi
    fi
    checks=$((checks + 1))
    printf '%-10s %10s  %-28s %12s %12s  %s\n' "$recipe" "$budget" "$(words "$chosen")" "$footprint" "$measured" "$result"
    [ "$n" = 2 ] && boundary="$boundary $recipe:$dir:$(echo "$extra" | tr ' ' ,)"
  done
done
checks=$((checks + 1))
[ "$pairs" -ge 30 ] || fail "only $pairs pairs of recipe and budget"

# ---- one byte over: a saved plan at its own footprint fits, a byte less does not ---------------
# Each process plans with its own base, which a page more or less of stack moves (argv's length
# included): `trainrun plan` is asked for its footprint first with arguments of the same length;
# the trainer replays at the footprint its run recorded.
for entry in $boundary; do
  recipe=${entry%%:*}
  rest=${entry#*:}
  dir=${rest%%:*}
  extra=$(echo "${rest#*:}" | tr , ' ')
  yaml=$srcdir/recipes/$recipe.yaml
  saved=$dir/$recipe/latest/plan.json
  footprint=$(field "$saved" predicted_footprint_bytes)
  # shellcheck disable=SC2086
  set -- $steps $extra --plan "$saved"
  run $fixed "$TRAINRUN" plan "$yaml" "$@" --json budget.memory="$footprint"
  expect_rc 0 "$recipe: the saved plan replays at the trainer's footprint $footprint"
  echo "$out" >"$scratch/replayed.json"
  replayed=$(field "$scratch/replayed.json" predicted_footprint_bytes)
  run $fixed "$TRAINRUN" plan "$yaml" "$@" --json budget.memory=$((replayed - 1))
  rc_under=$rc
  expect_rc 3 "$recipe: plan --plan one byte under its footprint $replayed"
  expect_in "$err" "no longer fits: its footprint is $(mib "$replayed"), over the budget of $(mib $((replayed - 1))) by 1 bytes" \
    "$recipe: plan --plan names the footprint"
  run $fixed "$TRAINRUN" plan "$yaml" "$@" --json budget.memory="$replayed"
  rc_at=$rc
  expect_rc 0 "$recipe: plan --plan at its footprint $replayed"
  run $fixed "$TRAINRUN" "$yaml" "$@" budget.memory=$((footprint - 1)) report.dir="$dir" --quiet
  expect_rc 3 "$recipe: the trainer with --plan one byte under its footprint $footprint"
  expect_in "$err" "no longer fits: its footprint is $(mib "$footprint"), over the budget of $(mib $((footprint - 1))) by " \
    "$recipe: the trainer names the footprint"
  echo "one byte under: $recipe: plan --plan at $replayed - 1 exit $rc_under, at $replayed exit $rc_at;" \
    "trainer --plan at $footprint - 1: $(echo "$err" | sed -n 's/.*\(over the budget.*bytes\).*/\1/p' | head -n 1)"
done
finish
