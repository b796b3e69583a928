#!/bin/sh
# The planner's own time: BERT-base (recipes/bert.yaml) planned for the rtx3090 profile at
# several budgets, the CPU seconds `trainrun plan` reports ("planned N candidates in … s (… s of
# CPU)"), each budget REPS times, interleaved with a second binary when one is given (an A/B on
# the same noisy machine: OLD then NEW, then again). Prints one line a binary and budget: the
# candidates and the median, least and most CPU seconds.
#
#   bench/run-plan-time.sh [REPS] [OLD_TRAINRUN]
#
# e.g. an older checkout built in /tmp/old:  bench/run-plan-time.sh 5 /tmp/old/trainrun
set -eu
reps=${1:-3}
old=${2:-}
new=${TRAINRUN:-./trainrun}
budgets=${BUDGETS:-"22GiB 2500MiB 2GiB 1536MiB 1GiB"}
export TRAINRUN_SYSTEM_CONF= TRAINRUN_CONF=
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# once BIN BUDGET FILE: one plan's line appended to FILE ("N SECONDS")
once() {
  "$1" plan recipes/bert.yaml --device-profile rtx3090 budget.memory="$2" 2>/dev/null |
    sed -n 's/^planned \([0-9]*\) candidates in [0-9.]* s (\([0-9.]*\) s of CPU)$/\1 \2/p' >>"$3"
}

i=0
while [ "$i" -lt "$reps" ]; do
  for b in $budgets; do
    [ -z "$old" ] || once "$old" "$b" "$out/old-$b"
    once "$new" "$b" "$out/new-$b"
  done
  i=$((i + 1))
done

printf '%-5s %-8s %10s %8s %8s %8s\n' binary budget candidates median least most
for which in old new; do
  [ "$which" = new ] || [ -n "$old" ] || continue
  for b in $budgets; do
    sort -k2 -n "$out/$which-$b" | awk -v w="$which" -v b="$b" '
      { n[NR] = $1; s[NR] = $2 }
      END { printf "%-5s %-8s %10d %8.3f %8.3f %8.3f\n", w, b, n[1], s[int((NR + 1) / 2)], s[1], s[NR] }'
  done
done
