#!/bin/sh
# recipes/bert-small.yaml's model (or gpt-small's) one training step, forward + backward:
# trainrun's engine (bench/transformer) against PyTorch 1.13 (bench/transformer.py), same
# threads, interleaved round by round; time per step and each process's peak resident memory.
#   bench/run-transformer.sh [THREADS] [ROUNDS] [bert|gpt] [B] [S] [fp32|bf16|fp16]   (from the
#   build folder, after `make bench/transformer`); PyTorch runs bf16 under CPU autocast, and
#   fp16 (which its CPU autocast lacks) in fp32
set -eu
threads=${1:-$(nproc)}
rounds=${2:-3}
arch=${3:-bert}
batch=${4:-32}
seq=${5:-64}
amp=${6:-fp32}
iters=3
here=$(dirname "$0")
median() { printf '%s\n' "$@" | sort -n | sed -n "$(( ($# + 1) / 2 ))p"; }
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
# The BLAS kernels trainrun picks for this CPU (src/backend/cpu/blas.c), for PyTorch's BLAS too.
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-$(./trainrun --version | sed -n 's/^CPU backend: OpenBLAS \(.*\) kernels.*/\1/p')}"
echo "threads=$threads blas=$OPENBLAS_CORETYPE rounds=$rounds $arch $amp B=$batch S=$seq $(date -u +%Y-%m-%dT%H:%MZ)"
ours= theirs= ours_rss= theirs_rss=
for r in $(seq "$rounds"); do
  line=$(./bench/transformer "$arch" "$batch" "$seq" $iters "$amp")
  arena=$(echo "$line" | sed 's/.*arena_mib=\([0-9.]*\).*/\1/')
  ours="$ours $(echo "$line" | sed 's/.* ms=\([0-9.]*\).*/\1/')"
  ours_rss=$(echo "$line" | sed 's/.*peak_rss_mib=\([0-9.]*\).*/\1/')
  line=$(/usr/bin/python3 "$here/transformer.py" "$arch" "$batch" "$seq" $iters "$threads" \
    "$([ "$amp" = bf16 ] && echo bf16 || echo fp32)")
  theirs="$theirs $(echo "$line" | sed 's/.* ms=\([0-9.]*\).*/\1/')"
  theirs_rss=$(echo "$line" | sed 's/.*peak_rss_mib=\([0-9.]*\).*/\1/')
done
echo "$arch: trainrun ms [$ours ] pytorch ms [$theirs ]"
a=$(median $ours) b=$(median $theirs)
echo "$arch: trainrun $a ms, pytorch $b ms, ratio $(echo "$a $b" | awk '{printf "%.2f", $1 / $2}');" \
  "peak RSS trainrun $ours_rss MiB, pytorch $theirs_rss MiB; trainrun's arena $arena MiB"
