#!/bin/sh
# bench/run-attention-ab.sh [REV] [THREADS] [ROUNDS]: the CPU attention kernels of this tree
# against those of REV (default 5eab6bb, the row-at-a-time kernels), interleaved iteration by
# iteration in one binary (bench/attention.c built with -DATTN_AB), on BERT-base's, bert-small's
# and gpt-small's attention shapes. Run from the built tree (after `make bench/attention`).
set -e
rev=${1:-5eab6bb} threads=${2:-2} rounds=${3:-2}
work=${TMPDIR:-/tmp}/attention-ab
mkdir -p "$work/src/backend/cpu"
for f in attention.c attention.inc; do
  git show "$rev:src/backend/cpu/$f" >"$work/src/backend/cpu/$f"
done
# make's own flags and libraries, as it would compile and link bench/attention
rm -f bench/attention.o bench/attention
steps=$(make -n bench/attention)
cflags=$(printf '%s\n' "$steps" | sed -n 's/^.*gcc \(.*\) -MT bench\/attention\.o .*/\1/p' | head -1)
libs=$(printf '%s\n' "$steps" | sed -n 's/^.*-o bench\/attention bench\/attention\.o libtrainrun\.a \(.*\)$/\1/p' | head -1)
make -s bench/attention
[ -n "$cflags" ] && [ -n "$libs" ] || { echo "run-attention-ab: cannot read make's flags" >&2; exit 1; }
eval gcc -I"$work/src" "$cflags" -Dtr_cpu_attention=old_attention -Dtr_cpu_attention_bwd=old_attention_bwd \
  -Dtr_cpu_attention_workspace=old_attention_workspace -c "$work/src/backend/cpu/attention.c" -o "$work/old.o"
eval gcc "$cflags" -DATTN_AB -c bench/attention.c -o "$work/ab.o"
# shellcheck disable=SC2086
gcc -fopenmp -o "$work/ab" "$work/ab.o" "$work/old.o" libtrainrun.a $libs
r=0
while [ $r -lt "$rounds" ]; do
  for shape in "2 12 512 64 0 3" "32 4 64 64 0 7" "8 4 128 64 1 7"; do
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=$threads "$work/ab" $shape
  done
  r=$((r + 1))
done
